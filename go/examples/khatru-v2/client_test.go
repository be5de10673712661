package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/fasthttp/websocket"
	"github.com/fiatjaf/khatru"
	"github.com/nbd-wtf/go-nostr"
	"github.com/nostrwire/nostrwire/go/khatruv2"
	"github.com/nostrwire/nostrwire/go/nwb"
)

// testRelay is the example relay on a real socket, with hooks added by
// the test before it starts.
type testRelay struct {
	url     string
	httpURL string
	relay   *khatru.Relay
	handler *khatruv2.Handler
}

func startRelay(t *testing.T, setup func(*khatru.Relay)) *testRelay {
	t.Helper()
	relay, handler, closeStore, err := newRelay(filepath.Join(t.TempDir(), "db"), "", 10_000, 64)
	if err != nil {
		t.Fatal(err)
	}
	if setup != nil {
		setup(relay)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: handler}
	go srv.Serve(ln)
	t.Cleanup(func() {
		srv.Close()
		closeStore()
	})
	return &testRelay{url: "ws://" + ln.Addr().String(), httpURL: "http://" + ln.Addr().String(), relay: relay, handler: handler}
}

// v2Client is a minimal nostrwire.v2 client that verifies every event it
// is sent (id and signature).
type v2Client struct {
	t         *testing.T
	ws        *websocket.Conn
	dec       *nwb.Decompressor
	frames    chan []byte
	challenge string
	// compressed counts records that arrived compressed.
	compressed int
	records    int
	live       map[string][]*nostr.Event
}

// dialV2 connects offering nostrwire.v2; with hold, it fetches the relay's
// set from /dictionaries/, checks its hash and names it with 0x08.
func dialV2(t *testing.T, r *testRelay, hold bool) *v2Client {
	t.Helper()
	d := websocket.Dialer{Subprotocols: []string{"nostrwire.v2", "nostrwire.v1"}}
	ws, resp, err := d.Dial(r.url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.Header.Get("Sec-WebSocket-Protocol"); got != "nostrwire.v2" {
		t.Fatalf("negotiated %q", got)
	}
	c := &v2Client{t: t, ws: ws, frames: make(chan []byte, 1024), live: map[string][]*nostr.Event{}}
	t.Cleanup(func() { ws.Close() })
	go func() {
		defer close(c.frames)
		for {
			typ, msg, err := ws.ReadMessage()
			if err != nil {
				return
			}
			if typ != websocket.BinaryMessage {
				msg = append([]byte{0xff}, msg...)
			}
			c.frames <- msg
		}
	}()
	first := c.next()
	if first[0] != 0x07 || len(first) != 33 {
		t.Fatalf("first frame %x, want 0x07 with a hash", first)
	}
	var set *khatruv2.DictSet
	if hold {
		name := hex.EncodeToString(first[1:])
		res, err := http.Get(r.httpURL + "/dictionaries/" + name)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if set, err = khatruv2.ParseSet(body); err != nil {
			t.Fatal(err)
		}
		if set.HashHex() != name {
			t.Fatalf("set hash %s, want %s", set.HashHex(), name)
		}
		c.send(append([]byte{0x08}, first[1:]...))
	}
	var sets []*nwb.DictSet
	if set != nil {
		sets = append(sets, set.Parsed())
	}
	if c.dec, err = nwb.NewDecompressor(nwb.DefaultLimits, sets...); err != nil {
		t.Fatal(err)
	}
	return c
}

func (c *v2Client) send(frame []byte) {
	if err := c.ws.WriteMessage(websocket.BinaryMessage, frame); err != nil {
		c.t.Fatal(err)
	}
}

func (c *v2Client) sendJSON(v any) {
	b, err := json.Marshal(v)
	if err != nil {
		c.t.Fatal(err)
	}
	c.send(append([]byte{0x00}, b...))
}

// next returns the next frame; JSON AUTH challenges are remembered.
func (c *v2Client) next() []byte {
	c.t.Helper()
	select {
	case f, ok := <-c.frames:
		if !ok {
			c.t.Fatal("connection closed")
		}
		if len(f) == 0 {
			c.t.Fatal("empty frame")
		}
		if f[0] == 0x00 && bytes.HasPrefix(f[1:], []byte(`["AUTH"`)) {
			var msg []string
			json.Unmarshal(f[1:], &msg)
			if len(msg) == 2 {
				c.challenge = msg[1]
			}
		}
		return f
	case <-time.After(5 * time.Second):
		c.t.Fatal("no frame within 5 s")
	}
	return nil
}

// batch decodes a batch frame: its subscription and verified events.
func (c *v2Client) batch(f []byte) (string, []*nostr.Event) {
	c.t.Helper()
	n := int(f[1])
	sub := string(f[2 : 2+n])
	pos := 2 + n
	count, k := binary.Uvarint(f[pos:])
	pos += k
	var events []*nostr.Event
	for i := uint64(0); i < count; i++ {
		l, k := binary.Uvarint(f[pos:])
		pos += k
		stored := f[pos : pos+int(l)]
		pos += int(l)
		c.records++
		if stored[0] == 0x81 {
			c.compressed++
		}
		rec, err := c.dec.Record(stored, nil)
		if err != nil {
			c.t.Fatal(err)
		}
		evt, err := nwb.Decode(rec, nwb.DefaultLimits)
		if err != nil {
			c.t.Fatal(err)
		}
		if ok, err := evt.CheckSignature(); !evt.CheckID() || !ok || err != nil {
			c.t.Fatalf("event %s does not verify", evt.ID)
		}
		events = append(events, evt)
	}
	if pos != len(f) {
		c.t.Fatalf("batch frame: %d trailing bytes", len(f)-pos)
	}
	return sub, events
}

// publish sends evt as a record and returns the relay's OK.
func (c *v2Client) publish(evt *nostr.Event) (bool, string) {
	c.t.Helper()
	rec, err := nwb.AppendEvent([]byte{0x01}, evt, nwb.DefaultLimits)
	if err != nil {
		c.t.Fatal(err)
	}
	c.send(rec)
	return c.waitOK(evt.ID)
}

func (c *v2Client) waitOK(id string) (bool, string) {
	c.t.Helper()
	for {
		f := c.next()
		switch f[0] {
		case 0x04:
			if hex.EncodeToString(f[1:33]) == id {
				return f[33] == 1, string(f[34:])
			}
		case 0x06:
			sub, events := c.batch(f)
			c.live[sub] = append(c.live[sub], events...)
		}
	}
}

// query sends a REQ and returns the stored events up to EOSE, or the
// CLOSED reason.
func (c *v2Client) query(sub string, filters ...nostr.Filter) ([]*nostr.Event, string) {
	c.t.Helper()
	c.sendJSON(append([]any{"REQ", sub}, anySlice(filters)...))
	var events []*nostr.Event
	for {
		f := c.next()
		switch f[0] {
		case 0x05:
			if string(f[1:]) == sub {
				return events, ""
			}
		case 0x06:
			s, evs := c.batch(f)
			if s == sub {
				events = append(events, evs...)
			} else {
				c.live[s] = append(c.live[s], evs...)
			}
		case 0x00:
			var msg []any
			json.Unmarshal(f[1:], &msg)
			if len(msg) == 3 && msg[0] == "CLOSED" && msg[1] == sub {
				return events, msg[2].(string)
			}
		}
	}
}

// waitLive waits for n live events on sub.
func (c *v2Client) waitLive(sub string, n int) []*nostr.Event {
	c.t.Helper()
	for len(c.live[sub]) < n {
		f := c.next()
		if f[0] == 0x06 {
			s, evs := c.batch(f)
			c.live[s] = append(c.live[s], evs...)
		}
	}
	return c.live[sub]
}

// auth answers the last challenge with a NIP-42 event as a 0x02 record.
func (c *v2Client) auth(r *testRelay, sk string) (bool, string) {
	c.t.Helper()
	evt := authEvent(c.t, r, c.challenge, sk)
	rec, err := nwb.AppendEvent([]byte{0x02}, evt, nwb.DefaultLimits)
	if err != nil {
		c.t.Fatal(err)
	}
	c.send(rec)
	return c.waitOK(evt.ID)
}

func authEvent(t *testing.T, r *testRelay, challenge, sk string) *nostr.Event {
	t.Helper()
	if challenge == "" {
		t.Fatal("no AUTH challenge was sent")
	}
	evt := &nostr.Event{Kind: 22242, CreatedAt: nostr.Now(), Tags: nostr.Tags{{"relay", r.url}, {"challenge", challenge}}}
	if err := evt.Sign(sk); err != nil {
		t.Fatal(err)
	}
	return evt
}

func anySlice(filters []nostr.Filter) []any {
	out := make([]any, len(filters))
	for i, f := range filters {
		out[i] = f
	}
	return out
}

// jsonClient is go-nostr's relay connection (plain NIP-01 JSON).
func jsonClient(t *testing.T, r *testRelay) *nostr.Relay {
	t.Helper()
	rl, err := nostr.RelayConnect(context.Background(), r.url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rl.Close() })
	return rl
}

// jsonPublish returns the OK verdict go-nostr reports.
func jsonPublish(t *testing.T, rl *nostr.Relay, evt *nostr.Event) (bool, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := rl.Publish(ctx, *evt)
	if err == nil {
		return true, ""
	}
	msg, ok := strings.CutPrefix(err.Error(), "msg: ")
	if !ok {
		t.Fatalf("publish: %v", err)
	}
	return false, msg
}

// jsonQuery returns the stored events up to EOSE, or the CLOSED reason.
func jsonQuery(t *testing.T, rl *nostr.Relay, filters ...nostr.Filter) ([]*nostr.Event, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	sub, err := rl.Subscribe(ctx, filters)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsub()
	var events []*nostr.Event
	for {
		select {
		case evt, ok := <-sub.Events:
			if !ok {
				// Closed by the relay: the reason follows.
				select {
				case reason := <-sub.ClosedReason:
					return events, reason
				case <-ctx.Done():
					t.Fatal("events closed without a reason")
				}
			}
			events = append(events, evt)
		case <-sub.EndOfStoredEvents:
			// Events already queued before EOSE.
			for {
				select {
				case evt, ok := <-sub.Events:
					if !ok {
						return events, ""
					}
					events = append(events, evt)
				default:
					return events, ""
				}
			}
		case reason := <-sub.ClosedReason:
			return events, reason
		case <-ctx.Done():
			t.Fatal("no EOSE within 5 s")
		}
	}
}

func ids(events []*nostr.Event) []string {
	out := make([]string, len(events))
	for i, e := range events {
		out[i] = e.ID
	}
	sort.Strings(out)
	return out
}

// corpus is the repository's real signed events.
func corpus(t *testing.T) []*nostr.Event {
	t.Helper()
	b, err := os.ReadFile("../../../testdata/real-events.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	var out []*nostr.Event
	for _, line := range bytes.Split(b, []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		var e nostr.Event
		if err := json.Unmarshal(line, &e); err != nil {
			t.Fatal(err)
		}
		out = append(out, &e)
	}
	return out
}

func signed(t *testing.T, sk string, kind int, content string, tags ...nostr.Tag) *nostr.Event {
	t.Helper()
	evt := &nostr.Event{Kind: kind, CreatedAt: nostr.Now(), Content: content, Tags: tags}
	if err := evt.Sign(sk); err != nil {
		t.Fatal(err)
	}
	return evt
}

func expectSame[T comparable](t *testing.T, what string, json, v2 T) {
	t.Helper()
	if json != v2 {
		t.Errorf("%s: JSON %v, v2 %v", what, json, v2)
	}
}

var _ = fmt.Sprint
