package dictionaries

import (
	"context"
	"crypto/sha256"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
)

func TestURL(t *testing.T) {
	var h [32]byte
	h[0] = 0xc0
	for in, want := range map[string]string{
		"ws://127.0.0.1:7777":        "http://127.0.0.1:7777/dictionaries/c0",
		"wss://relay.example/path?x": "https://relay.example/dictionaries/c0",
	} {
		got, err := URL(in, h)
		if err != nil || !strings.HasPrefix(got, want) || len(got) != len(want)+62 {
			t.Errorf("%s: %s %v", in, got, err)
		}
	}
	if _, err := URL("ftp://x", h); !isKind(err, BadURL) {
		t.Errorf("got %v", err)
	}
}

func isKind(err error, k Kind) bool {
	var e *Error
	return errors.As(err, &e) && e.Kind == k
}

func TestGet(t *testing.T) {
	file, err := os.ReadFile(filepath.Join("..", "nwb", "testdata", "set.nwbd"))
	if err != nil {
		t.Fatal(err)
	}
	hash := sha256.Sum256(file)
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		switch r.URL.Path {
		case "/dictionaries/" + hexOf(hash):
			w.Write(file)
		case "/dictionaries/" + hexOf(sha256.Sum256([]byte("other"))):
			w.Write(file) // the wrong bytes for that name
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	relay := "ws" + strings.TrimPrefix(srv.URL, "http")
	dir := t.TempDir()
	c := &Cache{Dir: dir}
	set, err := c.Get(context.Background(), relay, hash)
	if err != nil || set.Hash != hash {
		t.Fatalf("%v", err)
	}
	if _, err := c.Get(context.Background(), relay, hash); err != nil || hits.Load() != 1 {
		t.Fatalf("second get fetched again: %v %d", err, hits.Load())
	}
	// A new cache on the same directory reads the file back.
	c2 := &Cache{Dir: dir}
	if _, err := c2.Get(context.Background(), relay, hash); err != nil || hits.Load() != 1 {
		t.Fatalf("directory cache: %v %d", err, hits.Load())
	}
	if _, err := c2.Get(context.Background(), relay, sha256.Sum256([]byte("other"))); !isKind(err, HashMismatch) {
		t.Fatalf("got %v", err)
	}
	if _, err := c2.Get(context.Background(), relay, [32]byte{1}); !isKind(err, Status) {
		t.Fatalf("got %v", err)
	}
	small := &Cache{MaxBytes: int64(len(file) - 1)}
	if _, err := small.Get(context.Background(), relay, hash); !isKind(err, TooLarge) {
		t.Fatalf("got %v", err)
	}
	if _, err := (&Cache{}).Add([]byte("NWBD")); !isKind(err, BadSet) {
		t.Fatalf("got %v", err)
	}
}

func hexOf(h [32]byte) string {
	const d = "0123456789abcdef"
	var b strings.Builder
	for _, c := range h {
		b.WriteByte(d[c>>4])
		b.WriteByte(d[c&15])
	}
	return b.String()
}
