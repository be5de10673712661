package khatruv2

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fasthttp/websocket"
	"github.com/fiatjaf/khatru"
	"github.com/nbd-wtf/go-nostr"
	"github.com/nbd-wtf/go-nostr/nip42"
	"github.com/nbd-wtf/go-nostr/nip70"
	"github.com/nostrwire/nostrwire/go/nwb"
	"github.com/nostrwire/nostrwire/go/transport"
)

// khatru v0.19 keeps a connection in a request's context under the key
// int(0) and a subscription id under int(1) (its utils.go). The handler
// puts its v2 connections there too, so that khatru.GetConnection,
// khatru.GetAuthed, khatru.GetIP and khatru.GetSubscriptionID work in hooks
// for v2 clients; TestHooksSeeV2Connection fails if khatru changes this.
const (
	khatruConnKey  = 0
	khatruSubIDKey = 1
)

type v2Key struct{}

// IsV2 reports whether ctx (as passed to a khatru hook) belongs to a
// nostrwire.v2 connection.
func IsV2(ctx context.Context) bool { return ctx.Value(v2Key{}) != nil }

// GetAuthed is the pubkey the client of ctx authenticated as with NIP-42,
// over either transport ("" if none); it is khatru.GetAuthed, which this
// handler keeps working for v2 connections.
func GetAuthed(ctx context.Context) string { return khatru.GetAuthed(ctx) }

// conn is one nostrwire.v2 connection.
type conn struct {
	h   *Handler
	ws  *websocket.Conn
	kws *khatru.WebSocket
	ctx context.Context

	writeMu  sync.Mutex
	holdsSet atomic.Bool

	subsMu sync.Mutex
	subs   map[string]*subscription

	authMu sync.Mutex
}

type subscription struct {
	filters nostr.Filters
	cancel  context.CancelCauseFunc
}

func (h *Handler) serveV2(w http.ResponseWriter, r *http.Request) {
	rl := h.relay
	for _, reject := range rl.RejectConnection {
		if reject(r) {
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
	}
	ws, err := h.upgrader.Upgrade(w, r, nil)
	if err != nil {
		rl.Log.Printf("nostrwire.v2: failed to upgrade websocket: %v", err)
		return
	}
	challenge := make([]byte, 8)
	rand.Read(challenge)
	kws := &khatru.WebSocket{Request: r, Challenge: hex.EncodeToString(challenge)}
	base, cancel := context.WithCancel(context.Background())
	kws.Context = base
	ctx := context.WithValue(context.WithValue(base, khatruConnKey, kws), v2Key{}, true)
	c := &conn{h: h, ws: ws, kws: kws, ctx: ctx, subs: map[string]*subscription{}}

	h.add(c)
	defer func() {
		h.remove(c)
		for _, ondisconnect := range rl.OnDisconnect {
			ondisconnect(ctx)
		}
		cancel()
		ws.Close()
	}()

	ws.SetReadLimit(rl.MaxMessageSize)
	ws.SetReadDeadline(time.Now().Add(rl.PongWait))
	ws.SetPongHandler(func(string) error {
		ws.SetReadDeadline(time.Now().Add(rl.PongWait))
		return nil
	})
	go c.ping(rl.PingPeriod)

	// §6.2: the set first, before anything else.
	c.write(dictSetFrame(h.set))
	for _, onconnect := range rl.OnConnect {
		onconnect(ctx)
	}

	for {
		typ, msg, err := ws.ReadMessage()
		if err != nil {
			return
		}
		if typ != websocket.BinaryMessage {
			c.notice("invalid: text frame on a nostrwire.v2 connection")
			continue
		}
		c.handleFrame(msg)
	}
}

func (c *conn) ping(period time.Duration) {
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-t.C:
			c.writeMu.Lock()
			c.ws.SetWriteDeadline(time.Now().Add(c.h.relay.WriteWait))
			err := c.ws.WriteMessage(websocket.PingMessage, nil)
			c.writeMu.Unlock()
			if err != nil {
				c.ws.Close()
				return
			}
		}
	}
}

// write sends one frame; a failed write closes the connection.
func (c *conn) write(frame []byte) {
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	c.ws.SetWriteDeadline(time.Now().Add(c.h.relay.WriteWait))
	if err := c.ws.WriteMessage(websocket.BinaryMessage, frame); err != nil {
		c.ws.Close()
	}
}

func (c *conn) writeJSON(v any) {
	text, err := json.Marshal(v)
	if err != nil {
		return
	}
	c.write(transport.AppendJSON(nil, text))
}

func (c *conn) notice(msg string) { c.writeJSON(nostr.NoticeEnvelope(msg)) }

func (c *conn) ok(id string, accepted bool, msg string) { c.write(okFrame(id, accepted, msg)) }

// requestAuth sends the NIP-42 challenge, as khatru.RequestAuth does on a
// JSON connection.
func (c *conn) requestAuth() {
	c.authMu.Lock()
	if c.kws.Authed == nil {
		c.kws.Authed = make(chan struct{})
	}
	c.authMu.Unlock()
	c.writeJSON(nostr.AuthEnvelope{Challenge: &c.kws.Challenge})
}

func (c *conn) handleFrame(msg []byte) {
	f, err := transport.DecodeClientFrame(msg, c.h.limits)
	if err != nil {
		reason := "invalid: " + nwb.KindOf(err).String()
		// §4: OK when the event id can be told (a complete record prefix),
		// else NOTICE.
		body := msg[min(len(msg), 1):]
		if (f.Type == transport.TypeEvent || f.Type == transport.TypeAuth) &&
			len(body) >= nwb.PrefixLen && body[0] == nwb.FormEvent {
			c.ok(hex.EncodeToString(body[43:75]), false, reason)
		} else {
			c.notice(reason)
		}
		return
	}
	switch f.Type {
	case transport.TypeJSON:
		c.handleJSON(f.JSON)
	case transport.TypeEvent:
		go c.handleEvent(f.Event)
	case transport.TypeAuth:
		go c.handleAuth(f.Event)
	case transport.TypeHold:
		holds := false
		if c.h.set != nil {
			for _, h := range f.Hold {
				holds = holds || h == c.h.set.Hash()
			}
		}
		c.holdsSet.Store(holds)
	}
}

func (c *conn) handleJSON(text []byte) {
	env := nostr.ParseMessage(string(text))
	if env == nil {
		c.notice("failed to parse envelope")
		return
	}
	switch env := env.(type) {
	case *nostr.EventEnvelope:
		go c.handleEvent(&env.Event)
	case *nostr.AuthEnvelope:
		go c.handleAuth(&env.Event)
	case *nostr.ReqEnvelope:
		go c.handleReq(env)
	case *nostr.CountEnvelope:
		go c.handleCount(env)
	case *nostr.CloseEnvelope:
		c.closeSub(string(*env))
	default:
		c.notice("unsupported: " + env.Label() + " over nostrwire.v2")
	}
}

// handleEvent runs khatru's EVENT pipeline for a v2 client: id and
// signature, NIP-70, deletion requests, then khatru's AddEvent (RejectEvent,
// the deleted check, storing or replacing, OnEventSaved), then
// OverwriteResponseEvent and the broadcast to both transports.
func (c *conn) handleEvent(evt *nostr.Event) {
	defer c.recoverHook(func(reason string) { c.ok(evt.ID, false, reason) })
	rl := c.h.relay
	ctx := c.ctx
	if !evt.CheckID() {
		c.ok(evt.ID, false, "invalid: id is computed incorrectly")
		return
	}
	if ok, err := evt.CheckSignature(); err != nil {
		c.ok(evt.ID, false, "error: failed to verify signature")
		return
	} else if !ok {
		c.ok(evt.ID, false, "invalid: signature is invalid")
		return
	}
	if nip70.IsProtected(*evt) {
		authed := khatru.GetAuthed(ctx)
		if authed == "" {
			c.requestAuth()
			c.ok(evt.ID, false, "auth-required: must be published by authenticated event author")
			return
		} else if authed != evt.PubKey {
			c.ok(evt.ID, false, "blocked: must be published by event author")
			return
		}
	} else if nip70.HasEmbeddedProtected(*evt) {
		c.ok(evt.ID, false, "blocked: can't repost nip70 protected")
		return
	}

	var err error
	skipBroadcast := false
	if evt.Kind == 5 {
		err = c.h.deleteRequested(ctx, evt)
	}
	if err == nil {
		skipBroadcast, err = rl.AddEvent(ctx, evt)
	}
	if err != nil {
		reason := err.Error()
		if strings.HasPrefix(reason, "auth-required:") {
			c.requestAuth()
		}
		c.ok(evt.ID, false, reason)
		return
	}
	for _, ovw := range rl.OverwriteResponseEvent {
		ovw(ctx, evt)
	}
	reason := ""
	accepted := true
	if !skipBroadcast {
		// v2 listeners were reached by the handler's OnEventSaved or
		// OnEphemeralEvent hook inside AddEvent; JSON ones are reached here.
		n := rl.BroadcastEvent(evt)
		if nostr.IsEphemeralKind(evt.Kind) {
			n += c.lastEphemeralCount(evt)
			if n == 0 && len(rl.OnEphemeralEvent) <= 1 {
				accepted, reason = false, "mute: no one was listening for this"
			} else {
				reason = "broadcasted to " + strconv.Itoa(n) + " listeners"
			}
		}
	}
	c.ok(evt.ID, accepted, reason)
}

// recoverHook turns a panic in a hook on a v2 connection into a refusal
// instead of ending the process.
func (c *conn) recoverHook(refuse func(reason string)) {
	if p := recover(); p != nil {
		c.h.relay.Log.Printf("nostrwire.v2: a hook failed: %v", p)
		refuse("error: the relay failed to handle this")
	}
}

// lastEphemeralCount counts the v2 subscriptions an ephemeral event
// matched (the handler's hook has already sent it to them).
func (c *conn) lastEphemeralCount(evt *nostr.Event) int {
	n := 0
	c.h.mu.RLock()
	for other := range c.h.conns {
		n += len(other.matching(evt))
	}
	c.h.mu.RUnlock()
	return n
}

// deleteRequested applies a kind-5 event's deletions as khatru does for
// JSON clients: each e or a tag names an event; the author of the target
// (or OverwriteDeletionOutcome) decides; DeleteEvent removes it.
func (h *Handler) deleteRequested(ctx context.Context, evt *nostr.Event) error {
	rl := h.relay
	for _, tag := range evt.Tags {
		if len(tag) < 2 {
			continue
		}
		var f nostr.Filter
		switch tag[0] {
		case "e":
			f = nostr.Filter{IDs: []string{tag[1]}}
		case "a":
			parts := strings.Split(tag[1], ":")
			if len(parts) != 3 {
				continue
			}
			kind, err := strconv.Atoi(parts[0])
			if err != nil {
				continue
			}
			f = nostr.Filter{Kinds: []int{kind}, Authors: []string{parts[1]},
				Tags: nostr.TagMap{"d": []string{parts[2]}}, Until: &evt.CreatedAt}
		default:
			continue
		}
		for _, query := range rl.QueryEvents {
			ch, err := query(ctx, f)
			if err != nil {
				continue
			}
			target := <-ch
			if target == nil {
				continue
			}
			go func() {
				for range ch {
				}
			}()
			accept := target.PubKey == evt.PubKey
			msg := ""
			if !accept {
				msg = "you are not the author of this event"
			}
			for _, odo := range rl.OverwriteDeletionOutcome {
				accept, msg = odo(ctx, target, evt)
			}
			if !accept {
				return fmt.Errorf("blocked: %s", msg)
			}
			for _, del := range rl.DeleteEvent {
				if err := del(ctx, target); err != nil {
					return err
				}
			}
			break
		}
	}
	return nil
}

// handleAuth checks a NIP-42 AUTH event against this connection's
// challenge and the relay's URL, as khatru does.
func (c *conn) handleAuth(evt *nostr.Event) {
	base := strings.Replace(baseURL(c.h.relay, c.kws.Request), "http", "ws", 1)
	pubkey, ok := nip42.ValidateAuthEvent(evt, c.kws.Challenge, base)
	if !ok {
		c.ok(evt.ID, false, "error: failed to authenticate")
		return
	}
	c.authMu.Lock()
	c.kws.AuthedPublicKey = pubkey
	if c.kws.Authed != nil {
		close(c.kws.Authed)
		c.kws.Authed = nil
	}
	c.authMu.Unlock()
	c.ok(evt.ID, true, "")
}

// baseURL is the relay's own URL as khatru computes it: ServiceURL, else
// the request's (forwarded) host.
func baseURL(rl *khatru.Relay, r *http.Request) string {
	if rl.ServiceURL != "" {
		return rl.ServiceURL
	}
	host := r.Header.Get("X-Forwarded-Host")
	if host == "" {
		host = r.Host
	}
	proto := r.Header.Get("X-Forwarded-Proto")
	if proto == "" {
		if host == "localhost" {
			proto = "http"
		} else if strings.Contains(host, ":") {
			proto = "http"
		} else if _, err := strconv.Atoi(strings.ReplaceAll(host, ".", "")); err == nil {
			proto = "http"
		} else {
			proto = "https"
		}
	}
	return proto + "://" + host
}

var errFilterRejected = errors.New("filter rejected")

// handleReq runs khatru's REQ pipeline for a v2 client: per filter
// OverwriteFilter, then RejectFilter (any refusal closes the whole REQ, as
// in khatru), then QueryEvents with OverwriteResponseEvent; the results go
// out in batches of up to 64 KiB of records, then EOSE. The subscription
// stays open for live events.
func (c *conn) handleReq(env *nostr.ReqEnvelope) {
	rl := c.h.relay
	id := env.SubscriptionID
	defer c.recoverHook(func(reason string) {
		c.closeSub(id)
		c.writeJSON(nostr.ClosedEnvelope{SubscriptionID: id, Reason: reason})
	})
	if id == "" || len(id) > transport.MaxSubscriptionIDBytes {
		c.writeJSON(nostr.ClosedEnvelope{SubscriptionID: id, Reason: "invalid: bad_subscription_id"})
		return
	}
	reqCtx, cancel := context.WithCancelCause(c.ctx)
	reqCtx = context.WithValue(reqCtx, khatruSubIDKey, id)

	filters := make(nostr.Filters, 0, len(env.Filters))
	for _, filter := range env.Filters {
		for _, ovw := range rl.OverwriteFilter {
			ovw(reqCtx, &filter)
		}
		if !filter.LimitZero {
			for _, reject := range rl.RejectFilter {
				if rejected, msg := reject(reqCtx, filter); rejected {
					reason := nostr.NormalizeOKMessage(msg, "blocked")
					if strings.HasPrefix(reason, "auth-required:") {
						c.requestAuth()
					}
					c.writeJSON(nostr.ClosedEnvelope{SubscriptionID: id, Reason: reason})
					cancel(errFilterRejected)
					return
				}
			}
		}
		filters = append(filters, filter)
	}
	c.openSub(id, filters, cancel)

	b := batch{subID: id}
	for _, filter := range filters {
		if filter.LimitZero {
			continue
		}
		for _, query := range rl.QueryEvents {
			ch, err := query(reqCtx, filter)
			if err != nil {
				c.notice(err.Error())
				continue
			} else if ch == nil {
				continue
			}
			for evt := range ch {
				if reqCtx.Err() != nil {
					continue // closed by the client or gone: drain only
				}
				modified := false
				if len(rl.OverwriteResponseEvent) > 0 {
					for _, ovw := range rl.OverwriteResponseEvent {
						ovw(reqCtx, evt)
					}
					modified = true
				}
				entry, err := c.h.records(evt, modified)
				if err != nil {
					continue
				}
				rec := entry.forConn(c)
				if b.full(len(rec)) {
					c.write(b.frame())
				}
				b.add(rec)
			}
		}
	}
	if len(b.records) > 0 {
		c.write(b.frame())
	}
	if reqCtx.Err() == nil {
		eose, _ := transport.AppendEOSE(nil, id)
		c.write(eose)
	}
}

// handleCount answers COUNT with khatru's RejectCountFilter and CountEvents.
func (c *conn) handleCount(env *nostr.CountEnvelope) {
	defer c.recoverHook(func(reason string) {
		c.writeJSON(nostr.ClosedEnvelope{SubscriptionID: env.SubscriptionID, Reason: reason})
	})
	rl := c.h.relay
	if len(rl.CountEvents) == 0 {
		c.writeJSON(nostr.ClosedEnvelope{SubscriptionID: env.SubscriptionID, Reason: "unsupported: this relay does not support NIP-45"})
		return
	}
	for _, reject := range rl.RejectCountFilter {
		if rejected, msg := reject(c.ctx, env.Filter); rejected {
			c.notice(msg)
			c.writeJSON(nostr.CountEnvelope{SubscriptionID: env.SubscriptionID, Count: new(int64)})
			return
		}
	}
	var total int64
	for _, count := range rl.CountEvents {
		n, err := count(c.ctx, env.Filter)
		if err != nil {
			c.notice(err.Error())
		}
		total += n
	}
	c.writeJSON(nostr.CountEnvelope{SubscriptionID: env.SubscriptionID, Count: &total})
}

func (c *conn) openSub(id string, filters nostr.Filters, cancel context.CancelCauseFunc) {
	c.subsMu.Lock()
	if old, ok := c.subs[id]; ok {
		old.cancel(khatru.ErrSubscriptionClosedByClient)
	}
	c.subs[id] = &subscription{filters: filters, cancel: cancel}
	c.subsMu.Unlock()
}

func (c *conn) closeSub(id string) {
	c.subsMu.Lock()
	if s, ok := c.subs[id]; ok {
		s.cancel(khatru.ErrSubscriptionClosedByClient)
		delete(c.subs, id)
	}
	c.subsMu.Unlock()
}

// matching lists the subscriptions of c that evt matches.
func (c *conn) matching(evt *nostr.Event) []string {
	var ids []string
	c.subsMu.Lock()
	for id, s := range c.subs {
		if s.filters.Match(evt) {
			ids = append(ids, id)
		}
	}
	c.subsMu.Unlock()
	return ids
}
