package nwb

import (
	"bytes"
	"encoding/hex"
	"os"
	"testing"
)

// seedRecords adds every record of the vectors (valid, invalid, compressed
// and the Rust-compressed stream) to a fuzz corpus.
func seedRecords(f *testing.F) {
	for _, file := range []string{"wire/valid.json", "wire/invalid.json", "wire/compressed.json"} {
		var w wireFile
		readJSON(f, file, &w)
		for _, c := range w.Cases {
			f.Add(unhex(f, c.Hex))
			if c.Record != "" {
				f.Add(unhex(f, c.Record))
			}
		}
	}
	if b, err := os.ReadFile("testdata/rust-stored.nwb"); err == nil {
		for _, r := range readStream(f, b)[:10] {
			f.Add(r)
		}
	}
}

// FuzzDecode: the record decoder never panics, Check agrees with Decode,
// and every accepted record re-encodes to itself (one encoding per event).
func FuzzDecode(f *testing.F) {
	seedRecords(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		ev, err := Decode(b, DefaultLimits)
		if cerr := Check(b, DefaultLimits); KindOf(cerr) != KindOf(err) {
			t.Fatalf("Check %v, Decode %v", cerr, err)
		}
		if err != nil {
			if KindOf(err) == 0 {
				t.Fatalf("error without a kind: %v", err)
			}
			return
		}
		again, err := Encode(ev, DefaultLimits)
		if err != nil {
			t.Fatalf("re-encode: %v", err)
		}
		if !bytes.Equal(again, b) {
			t.Fatalf("re-encoded\n%x\nfrom\n%x", again, b)
		}
	})
}

// FuzzStored: the stored-form reader (with a real per-kind set) never
// panics, never returns more than the limit, and returns event records only.
func FuzzStored(f *testing.F) {
	seedRecords(f)
	set := loadSet(f)
	d, err := NewDecompressor(DefaultLimits, set)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		rec, err := d.Record(b, nil)
		if err != nil {
			if KindOf(err) == 0 {
				t.Fatalf("error without a kind: %v", err)
			}
			return
		}
		if len(b) > 0 && b[0] == FormCompressed {
			if len(rec) > DefaultLimits.MaxRecordBytes || rec[0] != FormEvent {
				t.Fatalf("%d bytes, form %x", len(rec), rec[0])
			}
		}
		Check(rec, DefaultLimits)
	})
}

// FuzzDictSet: the set file parser never panics and accepts only files it
// writes back byte for byte.
func FuzzDictSet(f *testing.F) {
	b, err := os.ReadFile("testdata/set.nwbd")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	f.Add(b[:200])
	small, _ := hex.DecodeString("4e5744420103010101" + "08" + "37a430ec01000000")
	f.Add(small)
	f.Fuzz(func(t *testing.T, b []byte) {
		set, err := ParseDictSet(b)
		if err != nil {
			if KindOf(err) != BadDictionarySet {
				t.Fatalf("kind %v", err)
			}
			return
		}
		if !bytes.Equal(MarshalDictSet(set.Level, set.Dictionaries), b) {
			t.Fatal("set file does not write back")
		}
	})
}
