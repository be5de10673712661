package transport

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/nostrwire/nostrwire/go/nwb"
)

type vectorFile struct {
	Limits struct {
		MaxBatchFrameBytes int `json:"max_batch_frame_bytes"`
		MaxBatchRecords    int `json:"max_batch_records"`
		MaxRecordBytes     int `json:"max_record_bytes"`
	}
	Valid   []vectorCase
	Invalid []vectorCase
}

type vectorCase struct {
	Name      string
	Direction string
	Hex       string
	Error     string
	Expect    struct {
		Type           string
		Set            *string
		Sets           []string
		SubscriptionID string `json:"subscription_id"`
		Count          int
		Records        []struct{ Stored, Record string }
	}
}

func loadVectors(t testing.TB) vectorFile {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "vectors", "wire", "transport.json"))
	if err != nil {
		t.Fatal(err)
	}
	var f vectorFile
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	if len(f.Valid) == 0 || len(f.Invalid) == 0 {
		t.Fatal("no cases")
	}
	return f
}

func unhex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestVectorLimits(t *testing.T) {
	f := loadVectors(t)
	if f.Limits.MaxBatchFrameBytes != DefaultLimits.MaxBatchFrameBytes ||
		f.Limits.MaxBatchRecords != DefaultLimits.MaxBatchRecords ||
		f.Limits.MaxRecordBytes != DefaultLimits.Record.MaxRecordBytes {
		t.Fatalf("vector limits %+v differ from DefaultLimits", f.Limits)
	}
}

// decodeAll decodes a frame of the case's direction, then (for a batch)
// every record as a client does, and returns the first error.
func decodeAll(frame []byte, direction string, d *nwb.Decompressor) (any, error) {
	if direction == "client" {
		return DecodeClientFrame(frame, DefaultLimits)
	}
	f, err := DecodeRelayFrame(frame, DefaultLimits)
	if err != nil {
		return f, err
	}
	for _, r := range f.Records {
		rec, err := d.Record(r, nil)
		if err != nil {
			return f, err
		}
		if _, err := nwb.Decode(rec, DefaultLimits.Record); err != nil {
			return f, err
		}
	}
	return f, nil
}

func TestValidFrames(t *testing.T) {
	d, err := nwb.NewDecompressor(nwb.DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	for _, c := range loadVectors(t).Valid {
		t.Run(c.Name, func(t *testing.T) {
			frame := unhex(t, c.Hex)
			got, err := decodeAll(frame, c.Direction, d)
			if err != nil {
				t.Fatal(err)
			}
			var again []byte
			switch c.Expect.Type {
			case "dictionary_set":
				f := got.(RelayFrame)
				if f.Type != TypeDictionarySet || f.HasSet != (c.Expect.Set != nil) {
					t.Fatalf("%+v", f)
				}
				var set *[32]byte
				if f.HasSet {
					if hex.EncodeToString(f.Set[:]) != *c.Expect.Set {
						t.Fatal("set hash")
					}
					set = &f.Set
				}
				again = AppendDictionarySet(nil, set)
			case "hold":
				f := got.(ClientFrame)
				if f.Type != TypeHold || len(f.Hold) != len(c.Expect.Sets) {
					t.Fatalf("%+v", f)
				}
				for i, h := range f.Hold {
					if hex.EncodeToString(h[:]) != c.Expect.Sets[i] {
						t.Fatal("hash")
					}
				}
				again, _ = AppendHold(nil, f.Hold)
			case "eose":
				f := got.(RelayFrame)
				if f.Type != TypeEOSE || f.SubscriptionID != c.Expect.SubscriptionID {
					t.Fatalf("%+v", f)
				}
				again, _ = AppendEOSE(nil, f.SubscriptionID)
			case "batch":
				f := got.(RelayFrame)
				if f.Type != TypeBatch || f.SubscriptionID != c.Expect.SubscriptionID || len(f.Records) != c.Expect.Count {
					t.Fatalf("%s %d records", f.SubscriptionID, len(f.Records))
				}
				// Records are listed once when they repeat.
				for i, r := range f.Records {
					want := c.Expect.Records[min(i, len(c.Expect.Records)-1)]
					if want.Stored != "" && !bytes.Equal(r, unhex(t, want.Stored)) {
						t.Fatalf("record %d: %x", i, r)
					}
					if want.Record != "" {
						rec, err := d.Record(r, nil)
						if err != nil || !bytes.Equal(rec, unhex(t, want.Record)) {
							t.Fatalf("record %d: %v", i, err)
						}
					}
				}
				again, _ = AppendBatch(nil, f.SubscriptionID, f.Records)
			default:
				t.Fatalf("unknown expectation %q", c.Expect.Type)
			}
			if !bytes.Equal(again, frame) {
				t.Fatalf("re-encoded %x", again)
			}
		})
	}
}

func TestInvalidFrames(t *testing.T) {
	d, err := nwb.NewDecompressor(nwb.DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	for _, c := range loadVectors(t).Invalid {
		t.Run(c.Name, func(t *testing.T) {
			_, err := decodeAll(unhex(t, c.Hex), c.Direction, d)
			if got := nwb.KindOf(err); got.String() != c.Error {
				t.Fatalf("got %v, want %s", err, c.Error)
			}
		})
	}
}

func TestOKAndEventFrames(t *testing.T) {
	var id [32]byte
	id[0] = 0x7f
	for _, accepted := range []bool{true, false} {
		f, err := DecodeRelayFrame(AppendOK(nil, id, accepted, "blocked: no"), DefaultLimits)
		if err != nil || f.Type != TypeOK || f.EventID != id || f.Accepted != accepted || f.Message != "blocked: no" {
			t.Fatalf("%+v %v", f, err)
		}
	}
	bad := AppendOK(nil, id, true, "")
	bad[33] = 2
	if _, err := DecodeRelayFrame(bad, DefaultLimits); nwb.KindOf(err) != nwb.NonCanonicalFlag {
		t.Fatalf("got %v", err)
	}
	if _, err := DecodeRelayFrame([]byte{0x03, 1, 's'}, DefaultLimits); nwb.KindOf(err) != nwb.UnknownMessage {
		t.Fatalf("got %v", err)
	}
	if _, err := DecodeClientFrame([]byte{TypeEvent, 2}, DefaultLimits); nwb.KindOf(err) != nwb.BadVersion {
		t.Fatalf("got %v", err)
	}
	f, err := DecodeClientFrame(AppendJSON(nil, []byte(`["REQ","s",{}]`)), DefaultLimits)
	if err != nil || string(f.JSON) != `["REQ","s",{}]` {
		t.Fatalf("%+v %v", f, err)
	}
	if _, err := DecodeClientFrame(nil, DefaultLimits); nwb.KindOf(err) != nwb.Truncated {
		t.Fatalf("got %v", err)
	}
}
