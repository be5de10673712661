package khatruv2

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/nbd-wtf/go-nostr"
	"github.com/nostrwire/nostrwire/go/nwb"
)

func corpus(t *testing.T) []*nostr.Event {
	t.Helper()
	f, err := os.Open("../../testdata/real-events.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []*nostr.Event
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 4<<20)
	for sc.Scan() {
		var e nostr.Event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatal(err)
		}
		out = append(out, &e)
	}
	return out
}

// storedCorpus is the corpus's records as the handler stores them with
// the package's set, and how many of them are compressed.
func storedCorpus(t *testing.T, set *DictSet, events []*nostr.Event) (stored [][]byte, compressed int) {
	t.Helper()
	for _, evt := range events {
		rec, err := nwb.Encode(evt, nwb.DefaultLimits)
		if err != nil {
			t.Fatal(err)
		}
		s, err := set.comp.appendStored(nil, rec)
		if err != nil {
			t.Fatal(err)
		}
		if s[0] == nwb.FormCompressed {
			compressed++
		}
		stored = append(stored, s)
	}
	return stored, compressed
}

// The package's set compresses the corpus (it was trained on generated
// events, not on these) and what it writes reads back.
func TestDefaultSet(t *testing.T) {
	set, err := DefaultSet()
	if err != nil {
		t.Fatal(err)
	}
	events := corpus(t)
	stored, compressed := storedCorpus(t, set, events)
	d, err := nwb.NewDecompressor(nwb.DefaultLimits, set.Parsed())
	if err != nil {
		t.Fatal(err)
	}
	var raw, sent int
	for i, s := range stored {
		rec, err := d.Record(s, nil)
		if err != nil {
			t.Fatal(err)
		}
		evt, err := nwb.Decode(rec, nwb.DefaultLimits)
		if err != nil || evt.ID != events[i].ID {
			t.Fatalf("event %d: %v", i, err)
		}
		raw += len(rec)
		sent += len(s)
	}
	if compressed < len(events)/2 || sent*10 > raw*8 {
		t.Fatalf("%d of %d records compressed, %d bytes of %d", compressed, len(events), sent, raw)
	}
}

// The Rust codec reads the records the handler sends: a stream of the
// corpus's stored records, read back by `nostrwire convert --to json
// --dict`, gives the same events. Runs when NOSTRWIRE_BIN names the
// nostrwire binary (for example target/release/nostrwire).
func TestRustReadsStoredRecords(t *testing.T) {
	bin := os.Getenv("NOSTRWIRE_BIN")
	if bin == "" {
		t.Skip("NOSTRWIRE_BIN not set")
	}
	set, err := DefaultSet()
	if err != nil {
		t.Fatal(err)
	}
	events := corpus(t)
	stored, _ := storedCorpus(t, set, events)
	var stream []byte
	for _, s := range stored {
		stream = nwb.AppendUvarint(stream, uint64(len(s)))
		stream = append(stream, s...)
	}
	dir := t.TempDir()
	in, setPath := filepath.Join(dir, "records.nwb"), filepath.Join(dir, "set.nwbd")
	os.WriteFile(in, stream, 0o644)
	os.WriteFile(setPath, set.File(), 0o644)
	out, err := exec.Command(bin, "convert", "--to", "json", "--dict", setPath, in).Output()
	if err != nil {
		t.Fatalf("nostrwire convert: %v", err)
	}
	lines := bytes.Split(bytes.TrimSpace(out), []byte("\n"))
	if len(lines) != len(events) {
		t.Fatalf("%d events back of %d", len(lines), len(events))
	}
	for i, line := range lines {
		var e nostr.Event
		if err := json.Unmarshal(line, &e); err != nil || e.ID != events[i].ID || e.Content != events[i].Content {
			t.Fatalf("event %d: %s", i, line)
		}
	}
}
