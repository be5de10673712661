package client

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"
	"github.com/nostrwire/nostrwire/go/transport"
)

// relayBinary is the nostrwire relay: $NOSTRWIRE_BIN, else the release
// build of the repository.
func relayBinary(t testing.TB) string {
	if b := os.Getenv("NOSTRWIRE_BIN"); b != "" {
		return b
	}
	b, _ := filepath.Abs(filepath.Join("..", "..", "target", "release", "nostrwire"))
	if _, err := os.Stat(b); err != nil {
		t.Skipf("no nostrwire relay binary: set NOSTRWIRE_BIN or build it (cargo build --release -p nostrwire-cli); looked at %s", b)
	}
	return b
}

// startRelay runs a nostrwire relay on a free port of 127.0.0.1 with the
// test dictionary set (when withSet) and returns its ws:// URL.
func startRelay(t testing.TB, withSet bool) string {
	bin := relayBinary(t)
	dir := t.TempDir()
	set := ""
	if withSet {
		set, _ = filepath.Abs(filepath.Join("..", "nwb", "testdata", "set.nwbd"))
	}
	cfg := filepath.Join(dir, "relay.toml")
	os.WriteFile(cfg, []byte(fmt.Sprintf("[storage]\ndurability = \"none\"\nmap_size_gib = 1\ndictionaries = %q\n", set)), 0o644)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	cmd := exec.Command(bin, "relay", "-c", cfg, "--listen", addr, "--data", filepath.Join(dir, "db"))
	logPath := filepath.Join(dir, "relay.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			cmd.Process.Kill()
		}
		logFile.Close()
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			t.Logf("relay log:\n%s", b)
		}
	})
	for i := 0; ; i++ {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
			break
		}
		if i > 200 {
			t.Fatalf("relay did not listen on %s", addr)
		}
		time.Sleep(25 * time.Millisecond)
	}
	return "ws://" + addr
}

// corpusEvents reads events from the repository's corpus.
func corpusEvents(t testing.TB, from, n int) []nostr.Event {
	f, err := os.Open(filepath.Join("..", "..", "testdata", "real-events.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	s.Buffer(nil, 4<<20)
	var out []nostr.Event
	for i := 0; s.Scan() && len(out) < n; i++ {
		if i < from {
			continue
		}
		var ev nostr.Event
		if err := json.Unmarshal(s.Bytes(), &ev); err != nil {
			t.Fatal(err)
		}
		// Only events every relay keeps and serves to anyone: regular
		// kinds but direct messages and gift wraps, no expiration.
		if !nostr.IsRegularKind(ev.Kind) || ev.Kind == 4 || ev.Kind == 1059 || ev.Tags.Find("expiration") != nil {
			continue
		}
		out = append(out, ev)
	}
	return out
}

func ids(evs []*nostr.Event) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = e.ID
	}
	slices.Sort(out)
	return out
}

func TestRelayV2AndJSON(t *testing.T) {
	url := startRelay(t, true)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	events := corpusEvents(t, 600, 200)

	v2, err := RelayConnect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer v2.Close()
	if v2.Negotiated() != transport.Protocol {
		t.Fatalf("negotiated %q", v2.Negotiated())
	}
	if len(v2.held) != 1 {
		t.Fatalf("holds %d sets", len(v2.held))
	}
	for i := range events {
		if err := v2.Publish(ctx, events[i]); err != nil {
			t.Fatalf("publish %d: %v", i, err)
		}
	}
	ok, reason, err := v2.PublishOK(ctx, events[0])
	if err != nil || !ok || !strings.HasPrefix(reason, "duplicate:") {
		t.Fatalf("duplicate: %v %q %v", ok, reason, err)
	}
	bad := events[1]
	bad.Content += "!"
	if ok, reason, err := v2.PublishOK(ctx, bad); err != nil || ok || !strings.HasPrefix(reason, "invalid:") {
		t.Fatalf("tampered: %v %q %v", ok, reason, err)
	}

	js, err := RelayConnect(ctx, url, WithJSONOnly())
	if err != nil {
		t.Fatal(err)
	}
	defer js.Close()
	if js.Negotiated() != NegotiatedJSON {
		t.Fatalf("negotiated %q", js.Negotiated())
	}
	plain, err := nostr.RelayConnect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()

	want := make([]string, len(events))
	for i, e := range events {
		want[i] = e.ID
	}
	slices.Sort(want)
	filter := nostr.Filter{Limit: 1000}
	for name, q := range map[string]func() ([]*nostr.Event, error){
		"v2":       func() ([]*nostr.Event, error) { return v2.QuerySync(ctx, filter) },
		"json":     func() ([]*nostr.Event, error) { return js.QuerySync(ctx, filter) },
		"go-nostr": func() ([]*nostr.Event, error) { return plain.QuerySync(ctx, filter) },
	} {
		got, err := q()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !slices.Equal(ids(got), want) {
			t.Fatalf("%s: %d events, want %d (invalid: v2 %d, json %d)", name, len(got), len(want), v2.Invalid(), js.Invalid())
		}
	}
	// The relay sent its stored records compressed with the set held.
	if v2.compressed.Load() == 0 {
		t.Fatal("no compressed record received")
	}
	if v2.Invalid() != 0 || js.Invalid() != 0 {
		t.Fatalf("invalid events: %d %d", v2.Invalid(), js.Invalid())
	}

	// A kind filter is answered the same way over both transports.
	kinds := nostr.Filter{Kinds: []int{1, 7}, Limit: 50}
	a, err := v2.QuerySync(ctx, kinds)
	if err != nil {
		t.Fatal(err)
	}
	b, err := js.QuerySync(ctx, kinds)
	if err != nil || !slices.Equal(ids(a), ids(b)) || len(a) == 0 {
		t.Fatalf("kinds: %d vs %d (%v)", len(a), len(b), err)
	}
	for _, e := range a {
		if e.Kind != 1 && e.Kind != 7 {
			t.Fatalf("kind %d", e.Kind)
		}
	}
}

func TestLiveEvents(t *testing.T) {
	url := startRelay(t, true)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	events := corpusEvents(t, 800, 20)
	for _, opts := range [][]Option{nil, {WithJSONOnly()}} {
		sub1, err := RelayConnect(ctx, url, opts...)
		if err != nil {
			t.Fatal(err)
		}
		pub, err := RelayConnect(ctx, url, opts...)
		if err != nil {
			t.Fatal(err)
		}
		sub, err := sub1.Subscribe(ctx, nostr.Filters{{Kinds: []int{events[0].Kind}}})
		if err != nil {
			t.Fatal(err)
		}
	stored:
		for {
			select {
			case e := <-sub.Events:
				t.Logf("stored event %s kind %d", e.ID, e.Kind)
			case <-sub.EndOfStoredEvents:
				break stored
			}
		}
		var want []string
		for _, e := range events {
			if e.Kind == events[0].Kind {
				want = append(want, e.ID)
			}
			if err := pub.Publish(ctx, e); err != nil && !strings.Contains(err.Error(), "duplicate") {
				t.Fatal(err)
			}
		}
		// The second round publishes duplicates, which are not broadcast.
		if opts != nil {
			sub.Unsub()
			sub1.Close()
			pub.Close()
			continue
		}
		var got []string
		timeout := time.After(5 * time.Second)
		for len(got) < len(want) {
			select {
			case e := <-sub.Events:
				got = append(got, e.ID)
			case <-timeout:
				t.Fatalf("%d of %d live events", len(got), len(want))
			}
		}
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Fatal("live events differ")
		}
		sub.Unsub()
		if _, open := <-sub.Events; open {
			t.Fatal("Events open after Unsub")
		}
		sub1.Close()
		pub.Close()
	}
}
