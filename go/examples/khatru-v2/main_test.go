package main

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fasthttp/websocket"
	"github.com/fiatjaf/khatru"
	"github.com/nbd-wtf/go-nostr"
	"github.com/nostrwire/nostrwire/go/client"
	"github.com/nostrwire/nostrwire/go/khatruv2"
	"github.com/nostrwire/nostrwire/go/nwb"
)

// The corpus published over JSON comes back the same over both transports,
// for several filters; over v2 the records arrive compressed once the
// client holds the set, and uncompressed before.
func TestStoredResultsSameOverBothTransports(t *testing.T) {
	r := startRelay(t, nil)
	events := corpus(t)
	pub := jsonClient(t, r)
	for _, evt := range events {
		if ok, msg := jsonPublish(t, pub, evt); !ok {
			t.Fatalf("publish %s: %s", evt.ID, msg)
		}
	}
	jc := jsonClient(t, r)
	holder := dialV2(t, r, true)
	plain := dialV2(t, r, false)
	var pTag string
	for _, evt := range events {
		if tag := evt.Tags.GetFirst([]string{"p", ""}); tag != nil && evt.Kind == 7 {
			pTag = (*tag)[1]
			break
		}
	}
	filters := map[string]nostr.Filter{
		"kinds 1":   {Kinds: []int{1}, Limit: 5000},
		"kinds 6 7": {Kinds: []int{6, 7}, Limit: 5000},
		"author":    {Authors: []string{events[500].PubKey}, Limit: 5000},
		"limit 50":  {Limit: 50},
		"p tag":     {Tags: nostr.TagMap{"p": []string{pTag}}, Limit: 5000},
		"all":       {Limit: 5000},
	}
	for name, f := range filters {
		want, reason := jsonQuery(t, jc, f)
		if reason != "" || len(want) == 0 {
			t.Fatalf("%s over JSON: %d events, %q", name, len(want), reason)
		}
		for _, c := range []*v2Client{holder, plain} {
			got, reason := c.query("q", f)
			if reason != "" || !slices.Equal(ids(got), ids(want)) {
				t.Fatalf("%s: v2 gave %d events (%q), JSON %d", name, len(got), reason, len(want))
			}
		}
	}
	if holder.compressed*4 < holder.records*3 {
		t.Fatalf("holder: %d of %d records compressed", holder.compressed, holder.records)
	}
	if plain.compressed != 0 {
		t.Fatalf("a client without the set got %d compressed records", plain.compressed)
	}
}

// Events published over either transport reach live subscriptions on
// both, and a v2 publish is answered OK.
func TestLiveEventsCrossTransports(t *testing.T) {
	r := startRelay(t, nil)
	sk := nostr.GeneratePrivateKey()
	jc := jsonClient(t, r)
	sub, err := jc.Subscribe(context.Background(), nostr.Filters{{Kinds: []int{1}}})
	if err != nil {
		t.Fatal(err)
	}
	<-sub.EndOfStoredEvents
	listener := dialV2(t, r, true)
	if _, reason := listener.query("live", nostr.Filter{Kinds: []int{1}}); reason != "" {
		t.Fatal(reason)
	}
	publisher := dialV2(t, r, true)

	fromV2 := signed(t, sk, 1, "over v2")
	if ok, msg := publisher.publish(fromV2); !ok {
		t.Fatalf("v2 publish refused: %s", msg)
	}
	fromJSON := signed(t, sk, 1, "over JSON")
	if ok, msg := jsonPublish(t, jc, fromJSON); !ok {
		t.Fatalf("JSON publish refused: %s", msg)
	}
	got := listener.waitLive("live", 2)
	if !slices.Equal(ids(got), ids([]*nostr.Event{fromV2, fromJSON})) {
		t.Fatalf("v2 listener got %v", ids(got))
	}
	var seen []*nostr.Event
	for len(seen) < 2 {
		select {
		case evt := <-sub.Events:
			seen = append(seen, evt)
		case <-time.After(5 * time.Second):
			t.Fatalf("JSON listener got %d of 2", len(seen))
		}
	}
	if !slices.Equal(ids(seen), ids([]*nostr.Event{fromV2, fromJSON})) {
		t.Fatalf("JSON listener got %v", ids(seen))
	}
	// A duplicate is accepted without a second broadcast, as khatru does.
	if ok, msg := publisher.publish(fromV2); !ok {
		t.Fatalf("duplicate refused: %s", msg)
	}
	// A spoiled signature is refused with khatru's reason.
	bad := *signed(t, sk, 1, "spoiled")
	bad.Sig = strings.Repeat("0", 128)
	okJ, msgJ := jsonPublish(t, jc, &bad)
	okV, msgV := publisher.publish(&bad)
	expectSame(t, "bad signature accepted", okJ, okV)
	expectSame(t, "bad signature reason", msgJ, msgV)
}

// outcome is what a client saw for one step of a policy test.
type outcome struct {
	accepted bool
	reason   string
	events   []string
}

// Each of khatru's policies refuses the same things over v2 as over JSON:
// the same OK and CLOSED verdicts, with the same reasons, and the same
// events where a policy rewrites a filter.
func TestPoliciesSameOverBothTransports(t *testing.T) {
	owner := nostr.GeneratePrivateKey()
	ownerPub, _ := nostr.GetPublicKey(owner)
	stranger := nostr.GeneratePrivateKey()
	r := startRelay(t, func(rl *khatru.Relay) {
		rl.RejectEvent = append(rl.RejectEvent, func(ctx context.Context, evt *nostr.Event) (bool, string) {
			if strings.Contains(evt.Content, "spam") {
				return true, "blocked: no spam here"
			}
			if evt.Kind == 30000 {
				return true, "" // khatru's "blocked: no reason"
			}
			return false, ""
		})
		rl.RejectFilter = append(rl.RejectFilter, func(ctx context.Context, f nostr.Filter) (bool, string) {
			if slices.Contains(f.Kinds, 4) && khatru.GetAuthed(ctx) == "" {
				return true, "auth-required: DMs need authentication"
			}
			if slices.Contains(f.Kinds, 4) && !slices.Contains(f.Authors, khatru.GetAuthed(ctx)) {
				return true, "restricted: only your own DMs"
			}
			if slices.Contains(f.Kinds, 9999) {
				return true, "this kind is not served"
			}
			return false, ""
		})
		rl.OverwriteFilter = append(rl.OverwriteFilter, func(ctx context.Context, f *nostr.Filter) {
			if f.Limit == 0 || f.Limit > 3 {
				f.Limit = 3
			}
		})
	})
	seed := dialV2(t, r, true)
	for i := 0; i < 5; i++ {
		if ok, msg := seed.publish(signed(t, owner, 1, "note "+string(rune('a'+i)))); !ok {
			t.Fatal(msg)
		}
	}
	if ok, msg := seed.publish(signed(t, owner, 4, "dm")); !ok {
		t.Fatal(msg)
	}

	type step struct {
		name string
		json func(*nostr.Relay) outcome
		v2   func(*v2Client) outcome
	}
	var steps []step
	publishStep := func(name string, evt func() *nostr.Event) {
		e := evt()
		steps = append(steps, step{name, func(c *nostr.Relay) outcome {
			ok, msg := jsonPublish(t, c, e)
			return outcome{accepted: ok, reason: msg}
		}, func(c *v2Client) outcome {
			ok, msg := c.publish(e)
			return outcome{accepted: ok, reason: msg}
		}})
	}
	queryStep := func(name string, f nostr.Filter) {
		steps = append(steps, step{name, func(c *nostr.Relay) outcome {
			evs, reason := jsonQuery(t, c, f)
			return outcome{accepted: reason == "", reason: reason, events: ids(evs)}
		}, func(c *v2Client) outcome {
			evs, reason := c.query("s", f)
			return outcome{accepted: reason == "", reason: reason, events: ids(evs)}
		}})
	}
	// RejectEvent, with and without a reason; a refusal per event, the
	// same event accepted when the policy allows it.
	publishStep("RejectEvent with a reason", func() *nostr.Event { return signed(t, stranger, 1, "buy spam") })
	publishStep("RejectEvent without a reason", func() *nostr.Event { return signed(t, stranger, 30000, "list", nostr.Tag{"d", "x"}) })
	// NIP-70: a protected event needs its author authenticated.
	publishStep("NIP-70 before AUTH", func() *nostr.Event { return signed(t, owner, 1, "protected", nostr.Tag{"-"}) })
	// OverwriteFilter caps every limit at 3.
	queryStep("OverwriteFilter", nostr.Filter{Kinds: []int{1}, Limit: 100})
	// RejectFilter: a plain refusal, and auth-required before AUTH.
	queryStep("RejectFilter", nostr.Filter{Kinds: []int{9999}})
	queryStep("RejectFilter auth-required", nostr.Filter{Kinds: []int{4}, Authors: []string{ownerPub}})

	jc := jsonClient(t, r)
	vc := dialV2(t, r, true)
	// run runs every step over both transports, compares the outcomes and
	// returns what JSON saw.
	run := func() []outcome {
		var seen []outcome
		for _, s := range steps {
			j, v := s.json(jc), s.v2(vc)
			expectSame(t, s.name+": accepted", j.accepted, v.accepted)
			expectSame(t, s.name+": reason", j.reason, v.reason)
			expectSame(t, s.name+": events", strings.Join(j.events, ","), strings.Join(v.events, ","))
			seen = append(seen, j)
		}
		steps = steps[:0]
		return seen
	}
	for i, o := range run() {
		if i != 3 && o.accepted || i == 3 && len(o.events) != 3 {
			t.Errorf("step %d: the policy refused nothing: %+v", i, o)
		}
	}
	if vc.challenge == "" {
		t.Fatal("v2: auth-required sent no AUTH challenge")
	}

	// AUTH: after authenticating, the owner reads its DMs and publishes
	// protected events over both transports; another key is still refused.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := jc.Auth(ctx, func(evt *nostr.Event) error { return evt.Sign(owner) }); err != nil {
		t.Fatalf("JSON AUTH: %v", err)
	}
	if ok, msg := vc.auth(r, owner); !ok {
		t.Fatalf("v2 AUTH refused: %s", msg)
	}
	queryStep("after AUTH: own DMs", nostr.Filter{Kinds: []int{4}, Authors: []string{ownerPub}})
	queryStep("after AUTH: others' DMs", nostr.Filter{Kinds: []int{4}})
	publishStep("after AUTH: NIP-70 by the author", func() *nostr.Event { return signed(t, owner, 1, "protected 2", nostr.Tag{"-"}) })
	publishStep("after AUTH: NIP-70 by another key", func() *nostr.Event { return signed(t, stranger, 1, "protected 3", nostr.Tag{"-"}) })
	after := run()
	if len(after[0].events) != 1 || after[1].accepted || !after[2].accepted || after[3].accepted {
		t.Errorf("after AUTH: %+v", after)
	}
	// A bad AUTH (wrong challenge) is refused over v2 as over JSON.
	vc.challenge = "not-the-challenge"
	if ok, msg := vc.auth(r, stranger); ok || msg != "error: failed to authenticate" {
		t.Fatalf("bad AUTH: %v %q", ok, msg)
	}
}

// Hooks see a v2 connection as they see a JSON one: khatru.GetConnection,
// GetAuthed, GetIP and GetSubscriptionID work, and khatruv2.IsV2 tells the
// transports apart. This depends on khatru's context keys (see conn.go).
func TestHooksSeeV2Connection(t *testing.T) {
	type seen struct {
		conn bool
		ip   string
		sub  string
		v2   bool
	}
	var mu sync.Mutex
	var got []seen
	r := startRelay(t, func(rl *khatru.Relay) {
		rl.RejectFilter = append(rl.RejectFilter, func(ctx context.Context, f nostr.Filter) (bool, string) {
			mu.Lock()
			got = append(got, seen{khatru.GetConnection(ctx) != nil, khatru.GetIP(ctx), khatru.GetSubscriptionID(ctx), khatruv2.IsV2(ctx)})
			mu.Unlock()
			return false, ""
		})
	})
	vc := dialV2(t, r, false)
	vc.query("v2sub", nostr.Filter{Kinds: []int{1}})
	jc := jsonClient(t, r)
	jsonQuery(t, jc, nostr.Filter{Kinds: []int{1}})
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 2 {
		t.Fatalf("hook ran %d times", len(got))
	}
	want := seen{true, "127.0.0.1", "v2sub", true}
	if got[0] != want {
		t.Fatalf("v2 hook saw %+v, want %+v", got[0], want)
	}
	if !got[1].conn || got[1].v2 || got[1].ip != "127.0.0.1" {
		t.Fatalf("JSON hook saw %+v", got[1])
	}
}

// Hostile frames are answered (NOTICE or OK false) and the connection
// stays usable; a frame over khatru's MaxMessageSize closes it, as khatru
// closes a JSON connection.
func TestHostileFrames(t *testing.T) {
	r := startRelay(t, nil)
	vc := dialV2(t, r, true)
	sk := nostr.GeneratePrivateKey()
	good, _ := nwb.Encode(signed(t, sk, 1, "x"), nwb.DefaultLimits)
	cases := []struct {
		name  string
		frame []byte
		want  string
	}{
		{"empty", []byte{}, `["NOTICE","invalid: truncated"]`},
		{"unknown type", []byte{0x09}, `["NOTICE","invalid: unknown_message"]`},
		{"batch from a client", []byte{0x06, 1, 's', 0}, `["NOTICE","invalid: unknown_message"]`},
		{"short record", []byte{0x01, 0x01, 0x00}, `["NOTICE","invalid: truncated"]`},
		{"record with trailing bytes", append(append([]byte{0x01}, good...), 0), "ok false invalid: trailing_bytes"},
		{"compressed record from a client", append([]byte{0x01, 0x81}, good[1:]...), `["NOTICE","invalid: bad_version"]`},
		{"bad 0x08", append([]byte{0x08}, make([]byte, 31)...), `["NOTICE","invalid: bad_dictionary_hash"]`},
		{"bad JSON", []byte("\x00[\"REQ\""), `["NOTICE","failed to parse envelope"]`},
	}
	for _, c := range cases {
		vc.send(c.frame)
		f := vc.next()
		got := string(f[1:])
		if f[0] == 0x04 {
			got = "ok false " + string(f[34:])
			if f[33] != 0 {
				got = "ok true"
			}
		}
		if got != c.want {
			t.Errorf("%s: got %q, want %q", c.name, got, c.want)
		}
	}
	if _, reason := vc.query("after", nostr.Filter{Kinds: []int{1}}); reason != "" {
		t.Fatalf("REQ after hostile frames: %s", reason)
	}
	// Over the read limit: the relay closes the connection.
	big := make([]byte, r.relay.MaxMessageSize+1)
	big[0] = 0x01
	vc.ws.WriteMessage(websocket.BinaryMessage, big)
	deadline := time.After(5 * time.Second)
	for {
		select {
		case _, ok := <-vc.frames:
			if !ok {
				return
			}
		case <-deadline:
			t.Fatal("connection still open after a frame over MaxMessageSize")
		}
	}
}

// JSON clients and other subprotocols get plain khatru; NIP-11 lists the
// transport and the set; the set is served by its hash, 404 otherwise.
func TestJSONClientsAndHTTPUnchanged(t *testing.T) {
	r := startRelay(t, nil)
	d := websocket.Dialer{Subprotocols: []string{"nostrwire.v1"}}
	ws, resp, err := d.Dial(r.url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if p := resp.Header.Get("Sec-WebSocket-Protocol"); p != "" {
		t.Fatalf("a v1-only client negotiated %q", p)
	}
	ws.WriteMessage(websocket.TextMessage, []byte(`["REQ","x",{"kinds":[1]}]`))
	_, msg, err := ws.ReadMessage()
	if err != nil || strings.TrimSpace(string(msg)) != `["EOSE","x"]` {
		t.Fatalf("JSON REQ: %s %v", msg, err)
	}
	ws.Close()

	req, _ := http.NewRequest("GET", r.httpURL, nil)
	req.Header.Set("Accept", "application/nostr+json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Software  string `json:"software"`
		Nostrwire struct {
			Transports   []string `json:"transports"`
			Dictionaries []string `json:"dictionaries"`
		} `json:"nostrwire"`
	}
	json.NewDecoder(res.Body).Decode(&doc)
	res.Body.Close()
	hash := r.handler.Set().HashHex()
	if doc.Software == "" || !slices.Equal(doc.Nostrwire.Transports, []string{"nostrwire.v2"}) ||
		!slices.Equal(doc.Nostrwire.Dictionaries, []string{hash}) {
		t.Fatalf("NIP-11: %+v", doc)
	}
	res, err = http.Get(r.httpURL + "/dictionaries/" + hash)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 200 || res.Header.Get("Cache-Control") != "public, max-age=31536000, immutable" ||
		res.Header.Get("Access-Control-Allow-Origin") != "*" || string(body) != string(r.handler.Set().File()) {
		t.Fatalf("set: %d %v", res.StatusCode, res.Header)
	}
	res, err = http.Get(r.httpURL + "/dictionaries/" + strings.Repeat("0", 64))
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 404 {
		t.Fatalf("unknown set: %d", res.StatusCode)
	}
}

// A hook that writes to khatru's WebSocket (here khatru.RequestAuth) has
// no JSON socket to write to on a v2 connection: nothing is written (no
// challenge reaches the client), the REQ goes on, and so does the relay.
func TestHookWritingToSocketWritesNothing(t *testing.T) {
	r := startRelay(t, func(rl *khatru.Relay) {
		rl.RejectFilter = append(rl.RejectFilter, func(ctx context.Context, f nostr.Filter) (bool, string) {
			if slices.Contains(f.Kinds, 4) {
				khatru.RequestAuth(ctx)
			}
			return false, ""
		})
	})
	vc := dialV2(t, r, false)
	if _, reason := vc.query("dm", nostr.Filter{Kinds: []int{4}}); reason != "" {
		t.Fatalf("CLOSED %q", reason)
	}
	if vc.challenge != "" {
		t.Fatalf("a challenge reached the v2 client: %q", vc.challenge)
	}
	if _, reason := vc.query("notes", nostr.Filter{Kinds: []int{1}}); reason != "" {
		t.Fatalf("after the hook: %q", reason)
	}
}

// The module's go-nostr-shaped client negotiates nostrwire.v2 with the
// example relay, publishes over it, and reads the same events go-nostr
// reads over JSON.
func TestGoClientOverV2(t *testing.T) {
	r := startRelay(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	vc, err := client.RelayConnect(ctx, r.url)
	if err != nil {
		t.Fatal(err)
	}
	defer vc.Close()
	if vc.Negotiated() != "nostrwire.v2" {
		t.Fatalf("negotiated %q", vc.Negotiated())
	}
	events := corpus(t)[:300]
	for _, evt := range events {
		ok, reason, err := vc.PublishOK(ctx, *evt)
		if err != nil || !ok {
			t.Fatalf("publish %s: %v %q", evt.ID, err, reason)
		}
	}
	jc := jsonClient(t, r)
	for _, f := range []nostr.Filter{{Limit: 1000}, {Kinds: []int{1}, Limit: 1000}, {Authors: []string{events[10].PubKey}}} {
		got, err := vc.QuerySync(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		want, reason := jsonQuery(t, jc, f)
		if reason != "" || len(want) == 0 || !slices.Equal(ids(got), ids(want)) {
			t.Fatalf("filter %v: v2 %d events, JSON %d (%q)", f, len(got), len(want), reason)
		}
	}
}

// Without a dictionary set the relay announces none (an empty 0x07),
// serves no set, and sends records uncompressed.
func TestNoDictionaries(t *testing.T) {
	r := startRelay(t, nil)
	h, err := khatruv2.New(r.relay, khatruv2.Options{NoDictionaries: true})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h}
	go srv.Serve(ln)
	defer srv.Close()
	pub := dialV2(t, r, true)
	sk := nostr.GeneratePrivateKey()
	for i := 0; i < 3; i++ {
		if ok, msg := pub.publish(signed(t, sk, 1, strings.Repeat("compressible text ", 20+i))); !ok {
			t.Fatal(msg)
		}
	}
	d := websocket.Dialer{Subprotocols: []string{"nostrwire.v2"}}
	ws, _, err := d.Dial("ws://"+ln.Addr().String(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	if _, f, err := ws.ReadMessage(); err != nil || string(f) != "\x07" {
		t.Fatalf("first frame %x (%v), want an empty 0x07", f, err)
	}
	ws.WriteMessage(websocket.BinaryMessage, []byte("\x00[\"REQ\",\"s\",{\"kinds\":[1]}]"))
	_, f, err := ws.ReadMessage()
	if err != nil || f[0] != 0x06 || f[1] != 1 || f[3] != 3 || f[6] != nwb.FormEvent {
		t.Fatalf("batch %x (%v): want 3 uncompressed records", f[:min(len(f), 8)], err)
	}
	res, err := http.Get("http://" + ln.Addr().String() + "/dictionaries/" + r.handler.Set().HashHex())
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 404 {
		t.Fatalf("a relay without a set served one: %d", res.StatusCode)
	}
}
