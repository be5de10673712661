package transport

import (
	"bytes"
	"testing"

	"github.com/nostrwire/nostrwire/go/nwb"
)

func seedFrames(f *testing.F, direction string) {
	v := loadVectors(f)
	for _, c := range append(v.Valid, v.Invalid...) {
		if c.Direction == direction {
			f.Add(unhex(f, c.Hex))
		}
	}
}

// FuzzRelayFrame: the relay → client decoder never panics, refuses with a
// kind, and every accepted frame re-encodes to itself.
func FuzzRelayFrame(f *testing.F) {
	seedFrames(f, "relay")
	var id [32]byte
	f.Add(AppendOK(nil, id, true, "duplicate: have it"))
	f.Add(AppendJSON(nil, []byte(`["NOTICE","x"]`)))
	f.Fuzz(func(t *testing.T, b []byte) {
		fr, err := DecodeRelayFrame(b, DefaultLimits)
		if err != nil {
			if nwb.KindOf(err) == 0 {
				t.Fatalf("error without a kind: %v", err)
			}
			return
		}
		var again []byte
		switch fr.Type {
		case TypeJSON:
			again = AppendJSON(nil, fr.JSON)
		case TypeOK:
			again = AppendOK(nil, fr.EventID, fr.Accepted, fr.Message)
		case TypeEOSE:
			again, err = AppendEOSE(nil, fr.SubscriptionID)
		case TypeBatch:
			again, err = AppendBatch(nil, fr.SubscriptionID, fr.Records)
		case TypeDictionarySet:
			var set *[32]byte
			if fr.HasSet {
				set = &fr.Set
			}
			again = AppendDictionarySet(nil, set)
		default:
			t.Fatalf("accepted type %x", fr.Type)
		}
		if err != nil || !bytes.Equal(again, b) {
			t.Fatalf("re-encoded %x (%v)", again, err)
		}
	})
}

// FuzzClientFrame: the client → relay decoder never panics, refuses with a
// kind, and every accepted frame re-encodes to itself.
func FuzzClientFrame(f *testing.F) {
	seedFrames(f, "client")
	v := loadVectors(f)
	for _, c := range v.Valid {
		if c.Name == "batch_one_raw" {
			fr, _ := DecodeRelayFrame(unhex(f, c.Hex), DefaultLimits)
			f.Add(AppendEvent(nil, fr.Records[0]))
			f.Add(AppendAuth(nil, fr.Records[0]))
		}
	}
	f.Add(AppendJSON(nil, []byte(`["REQ","s",{}]`)))
	f.Fuzz(func(t *testing.T, b []byte) {
		fr, err := DecodeClientFrame(b, DefaultLimits)
		if err != nil {
			if nwb.KindOf(err) == 0 {
				t.Fatalf("error without a kind: %v", err)
			}
			return
		}
		var again []byte
		switch fr.Type {
		case TypeJSON:
			again = AppendJSON(nil, fr.JSON)
		case TypeEvent, TypeAuth:
			rec, err := nwb.Encode(fr.Event, DefaultLimits.Record)
			if err != nil {
				t.Fatal(err)
			}
			again = append([]byte{fr.Type}, rec...)
		case TypeHold:
			again, err = AppendHold(nil, fr.Hold)
		default:
			t.Fatalf("accepted type %x", fr.Type)
		}
		if err != nil || !bytes.Equal(again, b) {
			t.Fatalf("re-encoded %x (%v)", again, err)
		}
	})
}
