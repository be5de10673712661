// Package khatruv2 adds the nostrwire.v2 binary transport
// (spec/transport.md) to a khatru relay without changing khatru.
//
// A Handler wraps a *khatru.Relay: a WebSocket upgrade that offers
// nostrwire.v2 is served by the Handler, everything else (NIP-01 JSON
// clients, NIP-11, NIP-86, the relay's own routes) goes to khatru
// unchanged. Stored results are sent in batch frames of nwb records built
// from khatru's events, compressed with a dictionary set; live events are
// sent as they are saved, whichever transport published them. khatru's
// hooks stay in force for v2 clients: RejectConnection, OnConnect,
// OnDisconnect, RejectEvent (through khatru's AddEvent), the deletion and
// NIP-70 rules, OverwriteDeletionOutcome, StoreEvent, ReplaceEvent,
// DeleteEvent, OnEventSaved, OnEphemeralEvent, OverwriteFilter,
// RejectFilter, QueryEvents, OverwriteResponseEvent, PreventBroadcast,
// RejectCountFilter and CountEvents, and NIP-42 AUTH. See go/README.md for
// what differs from khatru's own handling.
package khatruv2

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"

	"github.com/fasthttp/websocket"
	"github.com/fiatjaf/khatru"
	"github.com/nbd-wtf/go-nostr"
	"github.com/nostrwire/nostrwire/go/nwb"
	"github.com/nostrwire/nostrwire/go/transport"
)

// Options configure a Handler.
type Options struct {
	// Set is the dictionary set records are compressed with; nil uses
	// DefaultSet. Use NoDictionaries to compress without one.
	Set *DictSet
	// NoDictionaries sends records compressed without a dictionary.
	NoDictionaries bool
	// CacheBytes bounds the cache of records built from events (by id),
	// filled as khatru saves events (OnEventSaved) and as REQs send events
	// saved before the handler ran; 0 means 64 MiB, negative disables it.
	CacheBytes int
}

// Handler serves a khatru relay to JSON and nostrwire.v2 clients.
type Handler struct {
	relay    *khatru.Relay
	set      *DictSet
	limits   transport.Limits
	upgrader websocket.Upgrader
	cache    *recordCache

	mu    sync.RWMutex
	conns map[*conn]struct{}
}

// New wraps rl. It adds two hooks to rl (OnEventSaved and
// OnEphemeralEvent) that deliver live events to v2 subscribers; call it
// after setting rl's own hooks or before, either works.
func New(rl *khatru.Relay, opts Options) (*Handler, error) {
	set := opts.Set
	if set == nil && !opts.NoDictionaries {
		var err error
		if set, err = DefaultSet(); err != nil {
			return nil, err
		}
	}
	if opts.NoDictionaries {
		set = nil
	}
	// A client's record is bounded like khatru's messages: by MaxMessageSize.
	limits := transport.DefaultLimits
	if rl.MaxMessageSize > 0 && rl.MaxMessageSize < int64(limits.Record.MaxRecordBytes) {
		limits.Record.MaxRecordBytes = int(rl.MaxMessageSize)
		limits.Record.MaxStringBytes = int(rl.MaxMessageSize)
	}
	cacheBytes := opts.CacheBytes
	if cacheBytes == 0 {
		cacheBytes = 64 << 20
	}
	h := &Handler{
		relay:  rl,
		set:    set,
		limits: limits,
		upgrader: websocket.Upgrader{
			ReadBufferSize:  1024,
			WriteBufferSize: 16 << 10,
			Subprotocols:    []string{Subprotocol},
			CheckOrigin:     func(*http.Request) bool { return true },
		},
		cache: newRecordCache(cacheBytes),
		conns: map[*conn]struct{}{},
	}
	rl.OnEventSaved = append(rl.OnEventSaved, h.prepare, h.deliverLive)
	rl.OnEphemeralEvent = append(rl.OnEphemeralEvent, h.deliverLive)
	return h, nil
}

// Relay is the wrapped khatru relay.
func (h *Handler) Relay() *khatru.Relay { return h.relay }

// Set is the dictionary set records are compressed with (nil: none).
func (h *Handler) Set() *DictSet { return h.set }

// ServeHTTP routes a request: a WebSocket upgrade offering nostrwire.v2 to
// the v2 transport, GET /dictionaries/<sha256> to the set file, NIP-11 to
// khatru's document with the transport added, and all else to khatru.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.Header.Get("Upgrade") == "websocket" && offersV2(r):
		h.serveV2(w, r)
	case strings.HasPrefix(r.URL.Path, "/dictionaries/") && (r.Method == http.MethodGet || r.Method == http.MethodHead):
		h.serveDictionary(w, r)
	case r.Header.Get("Upgrade") != "websocket" && r.Header.Get("Accept") == "application/nostr+json":
		h.serveNIP11(w, r)
	default:
		h.relay.ServeHTTP(w, r)
	}
}

func offersV2(r *http.Request) bool {
	for _, v := range r.Header.Values("Sec-WebSocket-Protocol") {
		for _, p := range strings.Split(v, ",") {
			if strings.TrimSpace(p) == Subprotocol {
				return true
			}
		}
	}
	return false
}

func (h *Handler) serveDictionary(w http.ResponseWriter, r *http.Request) {
	name := strings.TrimPrefix(r.URL.Path, "/dictionaries/")
	w.Header().Set("Access-Control-Allow-Origin", "*")
	if h.set == nil || name != h.set.HashHex() {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Cache-Control", "public, max-age=31536000, immutable")
	w.Write(h.set.File())
}

// serveNIP11 is khatru's NIP-11 document with
// "nostrwire": {"transports": [...], "dictionaries": [...]} added.
func (h *Handler) serveNIP11(w http.ResponseWriter, r *http.Request) {
	rec := httptest.NewRecorder()
	h.relay.ServeHTTP(rec, r)
	var doc map[string]any
	if rec.Code != http.StatusOK || json.Unmarshal(rec.Body.Bytes(), &doc) != nil {
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.Code)
		w.Write(rec.Body.Bytes())
		return
	}
	dicts := []string{}
	if h.set != nil {
		dicts = append(dicts, h.set.HashHex())
	}
	doc["nostrwire"] = map[string]any{"transports": []string{Subprotocol}, "dictionaries": dicts}
	body, _ := json.Marshal(doc)
	for k, v := range rec.Header() {
		w.Header()[k] = v
	}
	w.Header().Del("Content-Length")
	w.WriteHeader(http.StatusOK)
	w.Write(body)
}

// deliverLive sends an event saved (or an ephemeral event accepted) by
// khatru, from any transport, to the v2 subscriptions it matches.
func (h *Handler) deliverLive(ctx context.Context, evt *nostr.Event) {
	h.notify(ctx, evt)
}

// notify sends evt to every matching v2 subscription and returns how many.
func (h *Handler) notify(ctx context.Context, evt *nostr.Event) int {
	type target struct {
		c     *conn
		subID string
	}
	var targets []target
	h.mu.RLock()
	for c := range h.conns {
		for _, s := range c.matching(evt) {
			targets = append(targets, target{c, s})
		}
	}
	h.mu.RUnlock()
	if len(targets) == 0 {
		return 0
	}
	// Listeners see the event as khatru's JSON listeners do: after
	// OverwriteResponseEvent, run here on a copy with the publisher's context.
	if len(h.relay.OverwriteResponseEvent) > 0 {
		cp := *evt
		cp.Tags = append(nostr.Tags(nil), evt.Tags...)
		for _, ovw := range h.relay.OverwriteResponseEvent {
			ovw(ctx, &cp)
		}
		evt = &cp
	}
	entry, err := h.records(evt, false)
	if err != nil {
		h.relay.Log.Printf("nostrwire.v2: event %s has no record: %v", evt.ID, err)
		return 0
	}
	n := 0
	for _, t := range targets {
		if h.prevented(t.c, evt) {
			continue
		}
		b := batch{subID: t.subID}
		b.add(entry.forConn(t.c))
		t.c.write(b.frame())
		n++
	}
	return n
}

func (h *Handler) prevented(c *conn, evt *nostr.Event) bool {
	for _, pb := range h.relay.PreventBroadcast {
		if pb(c.kws, evt) {
			return true
		}
	}
	return false
}

// prepare builds a saved event's records into the cache, so that a REQ
// sends records built when the event was written (as the nostrwire relay
// stores its records) rather than encoding and compressing while it
// answers. Events whose records a hook may change per REQ are not built.
func (h *Handler) prepare(_ context.Context, evt *nostr.Event) {
	if h.cache.limit <= 0 || len(h.relay.OverwriteResponseEvent) > 0 {
		return
	}
	// An event nwb cannot encode fails again, and is reported, at REQ time.
	_, _ = h.records(evt, false)
}

// records returns the raw and stored records of evt, from the cache when
// it holds them. modified is set for events a hook may have changed.
func (h *Handler) records(evt *nostr.Event, modified bool) (*cacheEntry, error) {
	useCache := !modified && len(h.relay.OverwriteResponseEvent) == 0
	if useCache {
		if e := h.cache.get(evt.ID); e != nil {
			return e, nil
		}
	}
	// Records sent are bounded by nwb's limits, not the client's.
	raw, err := nwb.Encode(evt, nwb.DefaultLimits)
	if err != nil {
		return nil, err
	}
	e := &cacheEntry{raw: raw, stored: raw}
	if h.set != nil {
		if e.stored, err = h.set.comp.appendStored(nil, raw); err != nil {
			return nil, err
		}
	}
	if useCache {
		h.cache.put(evt.ID, e)
	}
	return e, nil
}

func (h *Handler) add(c *conn) {
	h.mu.Lock()
	h.conns[c] = struct{}{}
	h.mu.Unlock()
}

func (h *Handler) remove(c *conn) {
	h.mu.Lock()
	delete(h.conns, c)
	h.mu.Unlock()
}
