package nwb

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

func readStream(t testing.TB, b []byte) [][]byte {
	t.Helper()
	var out [][]byte
	for pos := 0; pos < len(b); {
		n, err := readLen(b, &pos, DefaultLimits.MaxRecordBytes, RecordTooLarge)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b[pos:pos+n])
		pos += n
	}
	return out
}

func corpusLines(t testing.TB, from, to int) []string {
	t.Helper()
	f, err := os.Open(filepath.Join("..", "..", "testdata", "real-events.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	s.Buffer(nil, 4<<20)
	var lines []string
	for i := 1; s.Scan(); i++ {
		if i >= from && i <= to {
			lines = append(lines, s.Text())
		}
	}
	return lines
}

func loadSet(t testing.TB) *DictSet {
	t.Helper()
	b, err := os.ReadFile("testdata/set.nwbd")
	if err != nil {
		t.Fatal(err)
	}
	set, err := ParseDictSet(b)
	if err != nil {
		t.Fatal(err)
	}
	return set
}

// Records compressed by libzstd with a trained per-kind set decompress to
// the records of the same events, which verify.
func TestRustStoredRecords(t *testing.T) {
	set := loadSet(t)
	if len(set.Dictionaries) < 2 || set.Level != 3 {
		t.Fatalf("set: %d dictionaries, level %d", len(set.Dictionaries), set.Level)
	}
	stream, err := os.ReadFile("testdata/rust-stored.nwb")
	if err != nil {
		t.Fatal(err)
	}
	stored := readStream(t, stream)
	lines := corpusLines(t, 601, 650)
	if len(stored) != len(lines) {
		t.Fatalf("%d records, %d events", len(stored), len(lines))
	}
	d, err := NewDecompressor(DefaultLimits, set)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	withDict := 0
	for i, s := range stored {
		rec, err := d.Record(s, nil)
		if err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
		if s[0] == FormCompressed && s[1] != 0 {
			withDict++
		}
		want, err := Encode(parseEvent(t, lines[i]), DefaultLimits)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(rec, want) {
			t.Fatalf("record %d differs", i)
		}
		ev, err := Decode(rec, DefaultLimits)
		if err != nil {
			t.Fatal(err)
		}
		if err := Verify(ev); err != nil {
			t.Fatal(err)
		}
	}
	if withDict == 0 {
		t.Fatal("no record used a dictionary")
	}
	// Without the set, a record naming a dictionary is unknown_dictionary.
	plain, _ := NewDecompressor(DefaultLimits)
	defer plain.Close()
	for _, s := range stored {
		if s[0] == FormCompressed && s[1] != 0 {
			if _, err := plain.Record(s, nil); KindOf(err) != UnknownDictionary {
				t.Fatalf("got %v", err)
			}
			break
		}
	}
}

// The Go compressor's records decompress with the Go decompressor, and
// (when NOSTRWIRE_BIN names the Rust CLI) with libzstd.
func TestCompressorRoundTrip(t *testing.T) {
	set := loadSet(t)
	c := NewCompressor(set)
	d, err := NewDecompressor(DefaultLimits, set)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	lines := corpusLines(t, 601, 650)
	var stream []byte
	var raw, storedBytes, compressed int
	for _, line := range lines {
		rec, err := Encode(parseEvent(t, line), DefaultLimits)
		if err != nil {
			t.Fatal(err)
		}
		s, err := c.AppendStored(nil, rec)
		if err != nil {
			t.Fatal(err)
		}
		if s[0] == FormCompressed {
			compressed++
		}
		raw += len(rec)
		storedBytes += len(s)
		back, err := d.Record(s, nil)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(back, rec) {
			t.Fatal("round trip differs")
		}
		stream = AppendUvarint(stream, uint64(len(s)))
		stream = append(stream, s...)
	}
	if compressed == 0 || storedBytes >= raw {
		t.Fatalf("%d compressed, %d of %d bytes", compressed, storedBytes, raw)
	}
	t.Logf("%d of %d records compressed, %d of %d bytes", compressed, len(lines), storedBytes, raw)
	bin := os.Getenv("NOSTRWIRE_BIN")
	if bin == "" {
		t.Log("NOSTRWIRE_BIN unset: libzstd's reading of these records not checked")
		return
	}
	dir := t.TempDir()
	in := filepath.Join(dir, "go.nwb")
	if err := os.WriteFile(in, stream, 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bin, "convert", "--to", "json", "--dict", "testdata/set.nwbd", in).Output()
	if err != nil {
		t.Fatalf("%s convert: %v", bin, err)
	}
	got := bytes.Split(bytes.TrimSpace(out), []byte("\n"))
	if len(got) != len(lines) {
		t.Fatalf("libzstd read %d of %d records", len(got), len(lines))
	}
}

func TestDictSetErrors(t *testing.T) {
	b, _ := os.ReadFile("testdata/set.nwbd")
	for name, bad := range map[string][]byte{
		"empty":      nil,
		"magic":      append([]byte("NWBX"), b[4:]...),
		"version":    append(append([]byte{}, b[:4]...), append([]byte{2}, b[5:]...)...),
		"truncated":  b[:len(b)-1],
		"trailing":   append(append([]byte{}, b...), 0),
		"level_zero": append(append([]byte{}, b[:5]...), append([]byte{0}, b[6:]...)...),
	} {
		if _, err := ParseDictSet(bad); KindOf(err) != BadDictionarySet {
			t.Errorf("%s: got %v", name, err)
		}
	}
	set := loadSet(t)
	again, err := ParseDictSet(MarshalDictSet(set.Level, set.Dictionaries))
	if err != nil || again.Hash != set.Hash {
		t.Fatalf("marshal: %v", err)
	}
}
