package client

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/nbd-wtf/go-nostr"
	"github.com/nostrwire/nostrwire/go/nwb"
	"github.com/nostrwire/nostrwire/go/transport"
)

// A relay that sends a batch with a good record, a record whose content was
// changed after signing and a compressed copy of the good one with a
// spoiled signature: only the good event reaches the subscriber.
func TestEventsAreVerified(t *testing.T) {
	events := corpusEvents(t, 600, 2)
	good, err := nwb.Encode(&events[0], nwb.DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	tampered := events[1]
	tampered.Content += "!"
	bad, err := nwb.Encode(&tampered, nwb.DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	spoiled := events[0]
	spoiled.Sig = strings.Repeat("0", 128)
	rec, _ := nwb.Encode(&spoiled, nwb.DefaultLimits)
	badSig, err := nwb.NewCompressor(nil).AppendStored(nil, rec)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := websocket.Accept(w, r, &websocket.AcceptOptions{Subprotocols: []string{transport.Protocol}})
		if err != nil {
			return
		}
		defer c.CloseNow()
		ctx := r.Context()
		c.Write(ctx, websocket.MessageBinary, transport.AppendDictionarySet(nil, nil))
		for {
			_, b, err := c.Read(ctx)
			if err != nil {
				return
			}
			f, err := transport.DecodeClientFrame(b, transport.DefaultLimits)
			if err != nil || f.Type != transport.TypeJSON {
				continue
			}
			var req []json.RawMessage
			var label, id string
			if json.Unmarshal(f.JSON, &req) != nil || len(req) < 2 || json.Unmarshal(req[0], &label) != nil ||
				label != "REQ" || json.Unmarshal(req[1], &id) != nil {
				continue
			}
			batch, _ := transport.AppendBatch(nil, id, [][]byte{good, bad, badSig})
			c.Write(ctx, websocket.MessageBinary, batch)
			eose, _ := transport.AppendEOSE(nil, id)
			c.Write(ctx, websocket.MessageBinary, eose)
		}
	}))
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r, err := RelayConnect(ctx, "ws"+strings.TrimPrefix(srv.URL, "http"))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	got, err := r.QuerySync(ctx, nostr.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].ID != events[0].ID {
		t.Fatalf("got %d events", len(got))
	}
	if r.Invalid() != 2 || r.compressed.Load() != 1 {
		t.Fatalf("invalid %d, compressed %d", r.Invalid(), r.compressed.Load())
	}
}
