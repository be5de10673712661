package khatruv2

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"testing"

	"github.com/nbd-wtf/go-nostr"
)

type vectorFile struct {
	Cases []struct {
		Name   string `json:"name"`
		Hex    string `json:"hex"`
		JSON   string `json:"json"`
		Error  string `json:"error"`
		Record string `json:"record"`
	} `json:"cases"`
}

func readVectors(t *testing.T, name string) vectorFile {
	t.Helper()
	b, err := os.ReadFile("../../vectors/wire/" + name)
	if err != nil {
		t.Fatal(err)
	}
	var v vectorFile
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	if len(v.Cases) == 0 {
		t.Fatalf("%s: no cases", name)
	}
	return v
}

func errKind(err error) string {
	var we *WireError
	if errors.As(err, &we) {
		return we.Kind
	}
	return ""
}

// Every valid vector decodes to its event and encodes back to its bytes.
func TestValidVectors(t *testing.T) {
	for _, c := range readVectors(t, "valid.json").Cases {
		b, _ := hex.DecodeString(c.Hex)
		evt, err := DecodeRecord(b, DefaultLimits)
		if err != nil {
			t.Fatalf("%s: %v", c.Name, err)
		}
		var want nostr.Event
		if err := json.Unmarshal([]byte(c.JSON), &want); err != nil {
			t.Fatal(err)
		}
		if evt.ID != want.ID || evt.Content != want.Content || len(evt.Tags) != len(want.Tags) || !evt.CheckID() {
			t.Fatalf("%s: decoded %v, want %v", c.Name, evt, want)
		}
		again, err := AppendRecord(nil, &want, DefaultLimits)
		if err != nil || hex.EncodeToString(again) != c.Hex {
			t.Fatalf("%s: encoded %x (%v), want %s", c.Name, again, err, c.Hex)
		}
	}
}

// Every invalid vector is refused with its kind, without panicking.
func TestInvalidVectors(t *testing.T) {
	for _, c := range readVectors(t, "invalid.json").Cases {
		b, _ := hex.DecodeString(c.Hex)
		_, err := DecodeRecord(b, DefaultLimits)
		if got := errKind(err); got != c.Error {
			t.Errorf("%s: got %q (%v), want %q", c.Name, got, err, c.Error)
		}
	}
}

// Compressed records without a dictionary decompress to their record, and
// a bad one is refused with its kind.
func TestCompressedVectors(t *testing.T) {
	d, err := NewDecompressor(nil, DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range readVectors(t, "compressed.json").Cases {
		b, _ := hex.DecodeString(c.Hex)
		rec, err := d.Record(b)
		if c.Error != "" {
			if errKind(err) != c.Error {
				t.Errorf("%s: got %v, want %s", c.Name, err, c.Error)
			}
			continue
		}
		if err != nil || hex.EncodeToString(rec) != c.Record {
			t.Errorf("%s: got %x (%v)", c.Name, rec, err)
		}
	}
}

// Records compressed with the default set read back as the same record,
// and the common kinds get smaller.
func TestDefaultSetRoundTrip(t *testing.T) {
	set, err := DefaultSet()
	if err != nil {
		t.Fatal(err)
	}
	d, err := NewDecompressor(set, DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	events := corpusEvents(t, 300)
	var raw, stored int
	for _, evt := range events {
		rec, err := AppendRecord(nil, evt, DefaultLimits)
		if err != nil {
			t.Fatal(err)
		}
		s := set.AppendCompressed(nil, rec, evt.Kind)
		back, err := d.Record(s)
		if err != nil || string(back) != string(rec) {
			t.Fatalf("event %s: %v", evt.ID, err)
		}
		raw += len(rec)
		stored += len(s)
	}
	if stored*10 > raw*8 {
		t.Fatalf("stored %d bytes of %d raw: the set does not compress", stored, raw)
	}
}

func corpusEvents(t *testing.T, n int) []*nostr.Event {
	t.Helper()
	b, err := os.ReadFile("../../testdata/real-events.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	var out []*nostr.Event
	for _, line := range splitLines(b) {
		var e nostr.Event
		if err := json.Unmarshal(line, &e); err != nil {
			t.Fatal(err)
		}
		out = append(out, &e)
	}
	// Spread over the kinds: the file is sorted by kind.
	step := max(1, len(out)/n)
	var picked []*nostr.Event
	for i := 0; i < len(out) && len(picked) < n; i += step {
		picked = append(picked, out[i])
	}
	return picked
}

func splitLines(b []byte) [][]byte {
	var lines [][]byte
	for len(b) > 0 {
		i := 0
		for i < len(b) && b[i] != '\n' {
			i++
		}
		if i > 0 {
			lines = append(lines, b[:i])
		}
		if i == len(b) {
			break
		}
		b = b[i+1:]
	}
	return lines
}
