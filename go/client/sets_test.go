package client

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/nbd-wtf/go-nostr"
	"github.com/nostrwire/nostrwire/go/dictionaries"
	"github.com/nostrwire/nostrwire/go/nwb"
	"github.com/nostrwire/nostrwire/go/transport"
)

// A relay that starts without a set and announces one while the client is
// connected: the client fetches it, says it holds it, and reads the records
// compressed with its dictionaries that follow.
func TestSetAnnouncedLater(t *testing.T) {
	file, err := os.ReadFile(filepath.Join("..", "nwb", "testdata", "set.nwbd"))
	if err != nil {
		t.Fatal(err)
	}
	set, err := nwb.ParseDictSet(file)
	if err != nil {
		t.Fatal(err)
	}
	hash := sha256.Sum256(file)
	events := corpusEvents(t, 600, 20)
	comp := nwb.NewCompressor(set)
	var stored [][]byte
	withDict := 0
	for i := range events {
		rec, _ := nwb.Encode(&events[i], nwb.DefaultLimits)
		s, err := comp.AppendStored(nil, rec)
		if err != nil {
			t.Fatal(err)
		}
		if s[0] == nwb.FormCompressed && s[1] != 0 {
			withDict++
		}
		stored = append(stored, s)
	}
	if withDict == 0 {
		t.Fatal("no record compressed with a dictionary")
	}
	held := make(chan [][32]byte, 4)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/dictionaries/"+hex.EncodeToString(hash[:]) {
			w.Write(file)
			return
		}
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
			if err != nil {
				continue
			}
			if f.Type == transport.TypeHold {
				held <- f.Hold
				continue
			}
			var req []json.RawMessage
			var label, id string
			if f.Type != transport.TypeJSON || json.Unmarshal(f.JSON, &req) != nil || len(req) < 2 ||
				json.Unmarshal(req[0], &label) != nil || label != "REQ" || json.Unmarshal(req[1], &id) != nil {
				continue
			}
			c.Write(ctx, websocket.MessageBinary, transport.AppendDictionarySet(nil, &hash))
			// Records compressed with the set only once the client holds it.
			for {
				_, b, err := c.Read(ctx)
				if err != nil {
					return
				}
				if f, err := transport.DecodeClientFrame(b, transport.DefaultLimits); err == nil && f.Type == transport.TypeHold {
					held <- f.Hold
					break
				}
			}
			batch, _ := transport.AppendBatch(nil, id, stored)
			c.Write(ctx, websocket.MessageBinary, batch)
			eose, _ := transport.AppendEOSE(nil, id)
			c.Write(ctx, websocket.MessageBinary, eose)
		}
	}))
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r, err := RelayConnect(ctx, "ws"+strings.TrimPrefix(srv.URL, "http"), WithDictionaries(&dictionaries.Cache{}))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	got, err := r.QuerySync(ctx, nostr.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(events) || r.Invalid() != 0 {
		t.Fatalf("%d of %d events, %d invalid", len(got), len(events), r.Invalid())
	}
	if h := <-held; len(h) != 1 || h[0] != hash {
		t.Fatalf("held %x", h)
	}
	for i, e := range got {
		if e.ID != events[i].ID {
			t.Fatalf("event %d out of order", i)
		}
	}
}
