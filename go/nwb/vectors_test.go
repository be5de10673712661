package nwb

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/nbd-wtf/go-nostr"
)

// vectorDir is the language-neutral vectors of the repository.
var vectorDir = filepath.Join("..", "..", "vectors")

func readJSON(t testing.TB, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(vectorDir, path))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatal(err)
	}
}

func unhex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

type wireFile struct {
	Cases []struct {
		Name   string
		JSON   string
		Input  string
		Hex    string
		Error  string
		Record string
	}
}

func parseEvent(t testing.TB, s string) *nostr.Event {
	t.Helper()
	// A plain struct, not go-nostr's parser: the vectors hold unknown
	// fields go-nostr's parser refuses.
	var v struct {
		ID        string     `json:"id"`
		PubKey    string     `json:"pubkey"`
		CreatedAt int64      `json:"created_at"`
		Kind      int        `json:"kind"`
		Tags      [][]string `json:"tags"`
		Content   string     `json:"content"`
		Sig       string     `json:"sig"`
	}
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("%s: %v", s, err)
	}
	ev := &nostr.Event{ID: v.ID, PubKey: v.PubKey, CreatedAt: nostr.Timestamp(v.CreatedAt),
		Kind: v.Kind, Content: v.Content, Sig: v.Sig, Tags: make(nostr.Tags, len(v.Tags))}
	for i, tag := range v.Tags {
		ev.Tags[i] = tag
	}
	return ev
}

// TestValidVectors: encode(parse(json)) == hex, encode(parse(input)) == hex,
// to_json(decode(hex)) == json, and the id and signature verify.
func TestValidVectors(t *testing.T) {
	var f wireFile
	readJSON(t, "wire/valid.json", &f)
	if len(f.Cases) == 0 {
		t.Fatal("no cases")
	}
	for _, c := range f.Cases {
		t.Run(c.Name, func(t *testing.T) {
			want := unhex(t, c.Hex)
			for _, src := range []string{c.JSON, c.Input} {
				if src == "" {
					continue
				}
				got, err := Encode(parseEvent(t, src), DefaultLimits)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, want) {
					t.Fatalf("encode:\n got %x\nwant %x", got, want)
				}
			}
			ev, err := Decode(want, DefaultLimits)
			if err != nil {
				t.Fatal(err)
			}
			if got := canonicalJSON(t, ev); got != c.JSON {
				t.Fatalf("to_json:\n got %s\nwant %s", got, c.JSON)
			}
			if err := Verify(ev); err != nil {
				t.Fatal(err)
			}
			again, err := Encode(ev, DefaultLimits)
			if err != nil || !bytes.Equal(again, want) {
				t.Fatalf("re-encode: %v", err)
			}
			if err := Check(want, DefaultLimits); err != nil {
				t.Fatal(err)
			}
			// Every proper prefix of a valid record is invalid.
			for n := range want {
				if _, err := Decode(want[:n], DefaultLimits); err == nil {
					t.Fatalf("prefix of %d bytes accepted", n)
				}
			}
		})
	}
}

// canonicalJSON writes ev as compact NIP-01 JSON with the canonical escaping.
func canonicalJSON(t testing.TB, ev *nostr.Event) string {
	t.Helper()
	b := []byte(`{"id":"` + ev.ID + `","pubkey":"` + ev.PubKey + `","created_at":`)
	ser := AppendCanonical(nil, ev)
	// The canonical serialization holds created_at, kind, tags and content
	// in NIP-01 order: [0,"pubkey",created_at,kind,tags,content].
	var arr []json.RawMessage
	if err := json.Unmarshal(ser, &arr); err != nil || len(arr) != 6 {
		t.Fatalf("serialization %s: %v", ser, err)
	}
	b = append(b, arr[2]...)
	b = append(b, `,"kind":`...)
	b = append(b, arr[3]...)
	b = append(b, `,"tags":`...)
	b = append(b, arr[4]...)
	b = append(b, `,"content":`...)
	b = append(b, arr[5]...)
	b = append(b, `,"sig":"`+ev.Sig+`"}`...)
	return string(b)
}

func TestInvalidVectors(t *testing.T) {
	var f wireFile
	readJSON(t, "wire/invalid.json", &f)
	if len(f.Cases) == 0 {
		t.Fatal("no cases")
	}
	for _, c := range f.Cases {
		t.Run(c.Name, func(t *testing.T) {
			_, err := Decode(unhex(t, c.Hex), DefaultLimits)
			if got := KindOf(err); got.String() != c.Error {
				t.Fatalf("got %v, want %s", err, c.Error)
			}
			if err := Check(unhex(t, c.Hex), DefaultLimits); KindOf(err).String() != c.Error {
				t.Fatalf("Check: got %v, want %s", err, c.Error)
			}
		})
	}
}

func TestCompressedVectors(t *testing.T) {
	var f wireFile
	readJSON(t, "wire/compressed.json", &f)
	if len(f.Cases) == 0 {
		t.Fatal("no cases")
	}
	d, err := NewDecompressor(DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	for _, c := range f.Cases {
		t.Run(c.Name, func(t *testing.T) {
			rec, err := d.Record(unhex(t, c.Hex), nil)
			if c.Error != "" {
				if got := KindOf(err); got.String() != c.Error {
					t.Fatalf("got %v, want %s", err, c.Error)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(rec, unhex(t, c.Record)) {
				t.Fatalf("got %x", rec)
			}
			if _, err := Decode(rec, DefaultLimits); err != nil {
				t.Fatal(err)
			}
		})
	}
}

type eventCase struct {
	Name      string
	JSON      string
	Canonical string
	ID        string
	Error     string
}

// TestEventVectors: the event vectors' valid events encode, decode to their
// canonical JSON and verify; the invalid ones that parse as go-nostr events
// and fail only the id or signature check are refused with their kind.
func TestEventVectors(t *testing.T) {
	var valid []eventCase
	readJSON(t, "event/valid.json", &valid)
	if len(valid) == 0 {
		t.Fatal("no cases")
	}
	for _, c := range valid {
		t.Run(c.Name, func(t *testing.T) {
			ev := parseEvent(t, c.JSON)
			if err := Verify(ev); err != nil {
				t.Fatal(err)
			}
			rec, err := Encode(ev, DefaultLimits)
			if err != nil {
				t.Fatal(err)
			}
			back, err := Decode(rec, DefaultLimits)
			if err != nil {
				t.Fatal(err)
			}
			if got := canonicalJSON(t, back); got != c.Canonical {
				t.Fatalf("got  %s\nwant %s", got, c.Canonical)
			}
			if back.ID != c.ID {
				t.Fatalf("id %s", back.ID)
			}
		})
	}
	var invalid []eventCase
	readJSON(t, "event/invalid.json", &invalid)
	checked := 0
	for _, c := range invalid {
		switch c.Error {
		case "id_mismatch", "invalid_signature", "invalid_public_key":
		default:
			continue
		}
		checked++
		t.Run(c.Name, func(t *testing.T) {
			err := Verify(parseEvent(t, c.JSON))
			if got := KindOf(err); got.String() != c.Error {
				t.Fatalf("got %v, want %s", err, c.Error)
			}
		})
	}
	if checked == 0 {
		t.Fatal("no id or signature cases")
	}
}
