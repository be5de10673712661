// Package client is a relay connection with go-nostr's shapes that speaks
// nostrwire.v2 (spec/transport.md) and falls back to NIP-01 JSON.
//
// A go-nostr user changes one constructor: client.RelayConnect(ctx, url)
// instead of nostr.RelayConnect(ctx, url). Subscribe, QueryEvents,
// QuerySync, Publish and Auth keep go-nostr's arguments and results, with
// nostr.Event, nostr.Filter(s) and nostr.SubscriptionOption.
//
// Every event is checked before it is handed on: its id against its
// serialization and its BIP-340 signature, on as many goroutines as
// GOMAXPROCS, in the order the relay sent the events.
package client

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
	"github.com/nbd-wtf/go-nostr"
	"github.com/nostrwire/nostrwire/go/dictionaries"
	"github.com/nostrwire/nostrwire/go/nwb"
	"github.com/nostrwire/nostrwire/go/transport"
)

// NegotiatedJSON is what Negotiated reports on a NIP-01 JSON connection.
const NegotiatedJSON = "json"

// DefaultDictionaries is the cache of dictionary sets of every Relay not
// given its own with WithDictionaries (memory only).
var DefaultDictionaries = &dictionaries.Cache{}

// Option configures a Relay.
type Option func(*Relay)

// WithDictionaries sets the cache dictionary sets are fetched into.
func WithDictionaries(c *dictionaries.Cache) Option { return func(r *Relay) { r.dicts = c } }

// WithJSONOnly makes the relay connection offer no binary subprotocol.
func WithJSONOnly() Option { return func(r *Relay) { r.jsonOnly = true } }

// WithRequestHeader adds headers to the WebSocket upgrade request.
func WithRequestHeader(h http.Header) Option { return func(r *Relay) { r.header = h } }

// WithNoticeHandler is called with every NOTICE.
func WithNoticeHandler(f func(notice string)) Option { return func(r *Relay) { r.onNotice = f } }

// WithVerifiers sets how many goroutines decode and verify events
// (default GOMAXPROCS).
func WithVerifiers(n int) Option { return func(r *Relay) { r.verifiers = n } }

// WithVerifier sets the verifier of ids and signatures; by default every
// Relay shares DefaultVerifier, whose cache of authors' keys then serves
// them all.
func WithVerifier(v *nwb.Verifier) Option { return func(r *Relay) { r.check = v } }

// DefaultVerifier is the verifier of every Relay not given its own.
var DefaultVerifier = nwb.NewVerifier(4096)

// WithLimits sets the decoder's limits (default transport.DefaultLimits).
func WithLimits(l transport.Limits) Option { return func(r *Relay) { r.lim = l } }

// Relay is a connection to one relay.
type Relay struct {
	URL string
	// ConnectionError is why the connection ended, once it has.
	ConnectionError error

	dicts     *dictionaries.Cache
	jsonOnly  bool
	header    http.Header
	onNotice  func(string)
	verifiers int
	lim       transport.Limits

	conn       *websocket.Conn
	negotiated string
	ctx        context.Context
	cancel     context.CancelCauseFunc

	subsMu    sync.Mutex
	subs      map[string]*Subscription
	okMu      sync.Mutex
	okWaiters map[string]func(bool, string)
	challenge atomic.Pointer[string]

	setMu sync.Mutex
	held  []*nwb.DictSet
	dec   atomic.Pointer[nwb.Decompressor]

	parser  nostr.MessageParser
	items   chan *item
	jobs    chan job
	invalid atomic.Uint64
	check   *nwb.Verifier
	// batched and compressed count the records received in batches and
	// those of them that were compressed.
	batched    atomic.Uint64
	compressed atomic.Uint64
}

var subCounter atomic.Int64

// NewRelay returns an unconnected Relay; see Connect.
func NewRelay(ctx context.Context, url string, opts ...Option) *Relay {
	r := &Relay{
		URL:       nostr.NormalizeURL(url),
		dicts:     DefaultDictionaries,
		verifiers: runtime.GOMAXPROCS(0),
		lim:       transport.DefaultLimits,
		subs:      map[string]*Subscription{},
		okWaiters: map[string]func(bool, string){},
		check:     DefaultVerifier,
	}
	for _, o := range opts {
		o(r)
	}
	r.ctx, r.cancel = context.WithCancelCause(ctx)
	return r
}

// RelayConnect returns a connected Relay, as nostr.RelayConnect does.
func RelayConnect(ctx context.Context, url string, opts ...Option) (*Relay, error) {
	r := NewRelay(context.Background(), url, opts...)
	if err := r.Connect(ctx); err != nil {
		return nil, err
	}
	return r, nil
}

// String returns the relay's URL.
func (r *Relay) String() string { return r.URL }

// Context is done when the connection ends.
func (r *Relay) Context() context.Context { return r.ctx }

// IsConnected reports whether the connection is open.
func (r *Relay) IsConnected() bool { return r.conn != nil && r.ctx.Err() == nil }

// Negotiated returns transport.Protocol ("nostrwire.v2") or NegotiatedJSON.
func (r *Relay) Negotiated() string { return r.negotiated }

// Invalid counts the events dropped because their record did not decode
// or their id or signature did not verify.
func (r *Relay) Invalid() uint64 { return r.invalid.Load() }

// Records returns how many records arrived in nostrwire.v2 batches and how
// many of them were compressed (with or without a dictionary).
func (r *Relay) Records() (batched, compressed uint64) {
	return r.batched.Load(), r.compressed.Load()
}

// Challenge returns the relay's last NIP-42 challenge.
func (r *Relay) Challenge() string {
	if c := r.challenge.Load(); c != nil {
		return *c
	}
	return ""
}

// Connect opens the WebSocket, offering nostrwire.v2. On a v2 connection
// it waits for the relay's dictionary set (transport.md §6.2), fetches it
// (or takes it from the cache) and says it holds it before returning, so
// that stored results arrive compressed; a set it cannot get only costs
// uncompressed records. Without a deadline on ctx, Connect gives up after
// 7 seconds, like go-nostr.
func (r *Relay) Connect(ctx context.Context) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 7*time.Second)
		defer cancel()
	}
	opts := &websocket.DialOptions{HTTPHeader: r.header, CompressionMode: websocket.CompressionDisabled}
	if !r.jsonOnly {
		opts.Subprotocols = []string{transport.Protocol}
	}
	conn, _, err := websocket.Dial(ctx, r.URL, opts)
	if err != nil {
		return fmt.Errorf("error opening websocket to '%s': %w", r.URL, err)
	}
	// A batch frame or a JSON message with a record at the limit (its JSON
	// can be larger than the record).
	conn.SetReadLimit(int64(max(r.lim.MaxBatchFrameBytes, 4*r.lim.Record.MaxRecordBytes)) + 1024)
	r.conn = conn
	r.negotiated = NegotiatedJSON
	if conn.Subprotocol() == transport.Protocol {
		r.negotiated = transport.Protocol
	}
	dec, err := nwb.NewDecompressor(r.lim.Record)
	if err != nil {
		conn.CloseNow()
		return err
	}
	r.dec.Store(dec)
	r.parser = nostr.NewMessageParser()
	r.items = make(chan *item, 1024)
	r.jobs = make(chan job, 4096)
	for range max(r.verifiers, 1) {
		go r.verifier()
	}
	var first []byte
	if r.negotiated == transport.Protocol {
		typ, b, err := conn.Read(ctx)
		if err != nil {
			conn.CloseNow()
			return fmt.Errorf("reading the first frame from '%s': %w", r.URL, err)
		}
		if f, err := transport.DecodeRelayFrame(b, r.lim); typ == websocket.MessageBinary && err == nil && f.Type == transport.TypeDictionarySet {
			if f.HasSet {
				r.holdSet(ctx, f.Set)
			}
		} else {
			first = b
		}
	}
	go r.dispatcher()
	go r.reader(first)
	go func() {
		<-r.ctx.Done()
		conn.Close(websocket.StatusNormalClosure, "")
		r.subsMu.Lock()
		subs := make([]*Subscription, 0, len(r.subs))
		for _, s := range r.subs {
			subs = append(subs, s)
		}
		r.subsMu.Unlock()
		for _, s := range subs {
			s.unsub(false)
		}
	}()
	return nil
}

// holdSet gets set hash and tells the relay the connection holds it (with
// the sets held before, at most transport.MaxHeldSets).
func (r *Relay) holdSet(ctx context.Context, hash [32]byte) {
	set, err := r.dicts.Get(ctx, r.URL, hash)
	if err != nil {
		return
	}
	r.setMu.Lock()
	defer r.setMu.Unlock()
	for _, s := range r.held {
		if s.Hash == hash {
			return
		}
	}
	held := append([]*nwb.DictSet{set}, r.held...)
	if len(held) > transport.MaxHeldSets {
		held = held[:transport.MaxHeldSets]
	}
	dec, err := nwb.NewDecompressor(r.lim.Record, held...)
	if err != nil {
		return
	}
	hashes := make([][32]byte, len(held))
	for i, s := range held {
		hashes[i] = s.Hash
	}
	frame, _ := transport.AppendHold(nil, hashes)
	// Records compressed with the new set can follow the hold at once: the
	// decompressor that reads them is in place first.
	r.dec.Store(dec)
	r.held = held
	if err := r.conn.Write(ctx, websocket.MessageBinary, frame); err != nil {
		r.close(err)
	}
}

// Close ends the connection and every subscription.
func (r *Relay) Close() error {
	r.close(errors.New("Close() called"))
	return nil
}

func (r *Relay) close(err error) {
	if r.ConnectionError == nil && r.ctx.Err() == nil {
		r.ConnectionError = err
	}
	r.cancel(err)
}

// write sends a NIP-01 message (as a 0x00 frame on v2).
func (r *Relay) write(ctx context.Context, message []byte) error {
	if !r.IsConnected() {
		return fmt.Errorf("not connected to %s", r.URL)
	}
	if r.negotiated == transport.Protocol {
		return r.conn.Write(ctx, websocket.MessageBinary, transport.AppendJSON(nil, message))
	}
	return r.conn.Write(ctx, websocket.MessageText, message)
}

// item is one relay message in arrival order: the dispatcher acts on items
// one after another, once the events of each are verified.
type item struct {
	sub     *Subscription
	events  []*nostr.Event
	pending sync.WaitGroup
	// then runs after the events are handed on (EOSE, CLOSED, OK, ...).
	then func()
}

// job is one event to decode (record != nil) or verify.
type job struct {
	it     *item
	i      int
	record []byte
}

func (r *Relay) verifier() {
	var buf []byte
	for {
		select {
		case j := <-r.jobs:
			ev := j.it.events[j.i]
			if j.record != nil {
				if j.record[0] == nwb.FormCompressed {
					r.compressed.Add(1)
				}
				rec, err := r.dec.Load().Record(j.record, buf)
				if err == nil {
					if cap(rec) > cap(buf) && j.record[0] == nwb.FormCompressed {
						buf = rec
					}
					ev, err = nwb.Decode(rec, r.lim.Record)
				}
				if err == nil {
					err = r.check.VerifyRecord(rec, ev)
				}
				if err != nil {
					ev = nil
				}
			} else if ev != nil && r.check.Verify(ev) != nil {
				ev = nil
			}
			if ev == nil {
				r.invalid.Add(1)
			}
			j.it.events[j.i] = ev
			j.it.pending.Done()
		case <-r.ctx.Done():
			return
		}
	}
}

func (r *Relay) enqueue(it *item) {
	select {
	case r.items <- it:
	case <-r.ctx.Done():
	}
}

// submit queues the decoding and verification of it's events; the caller
// added them to it.pending before enqueueing it.
func (r *Relay) submit(it *item, records [][]byte) {
	for i := range it.events {
		var rec []byte
		if records != nil {
			rec = records[i]
		}
		select {
		case r.jobs <- job{it: it, i: i, record: rec}:
		case <-r.ctx.Done():
			for range len(it.events) - i {
				it.pending.Done()
			}
			return
		}
	}
}

func (r *Relay) reader(first []byte) {
	if first != nil {
		r.handleBinary(first)
	}
	for {
		typ, b, err := r.conn.Read(r.ctx)
		if err != nil {
			r.close(err)
			return
		}
		if r.negotiated == transport.Protocol {
			if typ != websocket.MessageBinary {
				continue // a relay sends only binary frames on v2
			}
			r.handleBinary(b)
		} else {
			r.handleJSON(b)
		}
	}
}

func (r *Relay) handleBinary(b []byte) {
	f, err := transport.DecodeRelayFrame(b, r.lim)
	if err != nil {
		// transport.md §8: a client drops a bad frame.
		if len(b) > 0 && b[0] == transport.TypeBatch {
			r.invalid.Add(1)
		}
		return
	}
	switch f.Type {
	case transport.TypeJSON:
		r.handleJSON(f.JSON)
	case transport.TypeBatch:
		sub := r.subscription(f.SubscriptionID)
		if sub == nil {
			return
		}
		r.batched.Add(uint64(len(f.Records)))
		it := &item{sub: sub, events: make([]*nostr.Event, len(f.Records))}
		it.pending.Add(len(it.events))
		r.enqueue(it)
		r.submit(it, f.Records)
	case transport.TypeEOSE:
		if sub := r.subscription(f.SubscriptionID); sub != nil {
			r.enqueue(&item{then: sub.dispatchEOSE})
		}
	case transport.TypeOK:
		id := hex.EncodeToString(f.EventID[:])
		r.enqueue(&item{then: func() { r.handleOK(id, f.Accepted, f.Message) }})
	case transport.TypeDictionarySet:
		if f.HasSet {
			go r.holdSet(r.ctx, f.Set)
		}
	}
}

func (r *Relay) handleJSON(b []byte) {
	env, _ := r.parser.ParseMessage(string(b))
	switch env := env.(type) {
	case *nostr.EventEnvelope:
		if env.SubscriptionID == nil {
			return
		}
		sub := r.subscription(*env.SubscriptionID)
		if sub == nil {
			return
		}
		ev := env.Event
		it := &item{sub: sub, events: []*nostr.Event{&ev}}
		it.pending.Add(1)
		r.enqueue(it)
		r.submit(it, nil)
	case *nostr.EOSEEnvelope:
		if sub := r.subscription(string(*env)); sub != nil {
			r.enqueue(&item{then: sub.dispatchEOSE})
		}
	case *nostr.ClosedEnvelope:
		if sub := r.subscription(env.SubscriptionID); sub != nil {
			reason := env.Reason
			r.enqueue(&item{then: func() { sub.handleClosed(reason) }})
		}
	case *nostr.OKEnvelope:
		id, ok, reason := env.EventID, env.OK, env.Reason
		r.enqueue(&item{then: func() { r.handleOK(id, ok, reason) }})
	case *nostr.NoticeEnvelope:
		if r.onNotice != nil {
			notice := string(*env)
			r.enqueue(&item{then: func() { r.onNotice(notice) }})
		}
	case *nostr.AuthEnvelope:
		if env.Challenge != nil {
			c := *env.Challenge
			r.challenge.Store(&c)
		}
	}
}

func (r *Relay) dispatcher() {
	for {
		select {
		case it := <-r.items:
			if it.events != nil {
				it.pending.Wait()
				for _, ev := range it.events {
					if ev != nil {
						it.sub.dispatch(ev)
					}
				}
			}
			if it.then != nil {
				it.then()
			}
		case <-r.ctx.Done():
			return
		}
	}
}

func (r *Relay) handleOK(id string, ok bool, reason string) {
	r.okMu.Lock()
	f := r.okWaiters[id]
	r.okMu.Unlock()
	if f != nil {
		f(ok, reason)
	}
}

func (r *Relay) subscription(id string) *Subscription {
	r.subsMu.Lock()
	defer r.subsMu.Unlock()
	return r.subs[id]
}

// Publish sends an event and waits for the relay's OK, as go-nostr's
// Publish does: a refusal is an error "msg: <reason>". Without a deadline
// on ctx it waits 7 seconds.
func (r *Relay) Publish(ctx context.Context, event nostr.Event) error {
	ok, reason, err := r.PublishOK(ctx, event)
	if err == nil && !ok {
		err = fmt.Errorf("msg: %s", reason)
	}
	return err
}

// PublishOK sends an event and returns the relay's OK verdict and message.
func (r *Relay) PublishOK(ctx context.Context, event nostr.Event) (accepted bool, reason string, err error) {
	return r.send(ctx, &event, false)
}

// Auth answers the relay's NIP-42 challenge with an event signed by sign
// and waits for the OK, as go-nostr's Auth does.
func (r *Relay) Auth(ctx context.Context, sign func(event *nostr.Event) error) error {
	ev := nostr.Event{
		CreatedAt: nostr.Now(),
		Kind:      nostr.KindClientAuthentication,
		Tags:      nostr.Tags{{"relay", r.URL}, {"challenge", r.Challenge()}},
	}
	if err := sign(&ev); err != nil {
		return fmt.Errorf("error signing auth event: %w", err)
	}
	ok, reason, err := r.send(ctx, &ev, true)
	if err == nil && !ok {
		err = fmt.Errorf("msg: %s", reason)
	}
	return err
}

func (r *Relay) send(ctx context.Context, ev *nostr.Event, auth bool) (bool, string, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, 7*time.Second, errors.New("given up waiting for an OK"))
		defer cancel()
	}
	var msg []byte
	typ := websocket.MessageText
	if r.negotiated == transport.Protocol {
		typ = websocket.MessageBinary
		// An event that has no record (its id, pubkey or sig is not hex of
		// the right length, say) goes as JSON in a 0x00 frame, so that the
		// relay's verdict still comes back.
		if rec, err := nwb.Encode(ev, r.lim.Record); err == nil {
			if auth {
				msg = transport.AppendAuth(nil, rec)
			} else {
				msg = transport.AppendEvent(nil, rec)
			}
		}
	}
	if msg == nil {
		var err error
		if auth {
			msg, err = (&nostr.AuthEnvelope{Event: *ev}).MarshalJSON()
		} else {
			msg, err = (&nostr.EventEnvelope{Event: *ev}).MarshalJSON()
		}
		if err != nil {
			return false, "", err
		}
		if typ == websocket.MessageBinary {
			msg = transport.AppendJSON(nil, msg)
		}
	}
	type verdict struct {
		ok     bool
		reason string
	}
	got := make(chan verdict, 1)
	r.okMu.Lock()
	r.okWaiters[ev.ID] = func(ok bool, reason string) {
		select {
		case got <- verdict{ok, reason}:
		default:
		}
	}
	r.okMu.Unlock()
	defer func() {
		r.okMu.Lock()
		delete(r.okWaiters, ev.ID)
		r.okMu.Unlock()
	}()
	if !r.IsConnected() {
		return false, "", fmt.Errorf("not connected to %s", r.URL)
	}
	if err := r.conn.Write(ctx, typ, msg); err != nil {
		return false, "", err
	}
	select {
	case v := <-got:
		return v.ok, v.reason, nil
	case <-ctx.Done():
		return false, "", context.Cause(ctx)
	case <-r.ctx.Done():
		return false, "", fmt.Errorf("connection closed: %w", context.Cause(r.ctx))
	}
}

// Subscription is one REQ, with go-nostr's fields.
type Subscription struct {
	Relay   *Relay
	Filters nostr.Filters
	// Events receives every verified event that matches the filters, in the
	// relay's order; it is closed when the subscription ends.
	Events chan *nostr.Event
	// EndOfStoredEvents receives one value after the stored events.
	EndOfStoredEvents chan struct{}
	// ClosedReason receives the reason of a CLOSED from the relay.
	ClosedReason chan string
	// Context is done when the subscription ends.
	Context context.Context

	id     string
	cancel context.CancelCauseFunc
	mu     sync.Mutex
	live   atomic.Bool
	eosed  atomic.Bool
	closed bool
}

// GetID returns the subscription id sent to the relay.
func (s *Subscription) GetID() string { return s.id }

// Subscribe sends a REQ, as go-nostr's Subscribe does. The subscription
// ends (CLOSE) when ctx is done or Unsub is called. nostr.WithLabel is
// honoured; the duplicate-check options are accepted and ignored.
func (r *Relay) Subscribe(ctx context.Context, filters nostr.Filters, opts ...nostr.SubscriptionOption) (*Subscription, error) {
	if !r.IsConnected() {
		return nil, fmt.Errorf("not connected to %s", r.URL)
	}
	label := ""
	for _, o := range opts {
		if l, ok := o.(nostr.WithLabel); ok {
			label = string(l)
		}
	}
	id := strconv.FormatInt(subCounter.Add(1), 10) + ":" + label
	if len(id) > transport.MaxSubscriptionIDBytes {
		id = id[:transport.MaxSubscriptionIDBytes]
	}
	sctx, cancel := context.WithCancelCause(ctx)
	s := &Subscription{
		Relay:             r,
		Filters:           filters,
		Events:            make(chan *nostr.Event),
		EndOfStoredEvents: make(chan struct{}, 1),
		ClosedReason:      make(chan string, 1),
		Context:           sctx,
		id:                id,
		cancel:            cancel,
	}
	s.live.Store(true)
	r.subsMu.Lock()
	r.subs[id] = s
	r.subsMu.Unlock()
	go func() {
		<-sctx.Done()
		s.unsub(true)
	}()
	req, err := nostr.ReqEnvelope{SubscriptionID: id, Filters: filters}.MarshalJSON()
	if err == nil {
		err = r.write(ctx, req)
	}
	if err != nil {
		s.unsub(false)
		return nil, fmt.Errorf("couldn't subscribe to %v at %s: %w", filters, r.URL, err)
	}
	return s, nil
}

func (s *Subscription) dispatch(ev *nostr.Event) {
	match := s.Filters.Match
	if s.eosed.Load() {
		match = s.Filters.MatchIgnoringTimestampConstraints
	}
	if !match(ev) {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	select {
	case s.Events <- ev:
	case <-s.Context.Done():
	}
}

func (s *Subscription) dispatchEOSE() {
	if s.eosed.CompareAndSwap(false, true) {
		select {
		case s.EndOfStoredEvents <- struct{}{}:
		default:
		}
	}
}

func (s *Subscription) handleClosed(reason string) {
	select {
	case s.ClosedReason <- reason:
	default:
	}
	s.live.Store(false) // no CLOSE for a subscription the relay closed
	s.Unsub()
}

// Unsub ends the subscription, sending CLOSE to the relay, and closes
// Events.
func (s *Subscription) Unsub() { s.cancel(errors.New("Unsub() called")) }

// Close sends CLOSE without ending the subscription locally; Unsub does both.
func (s *Subscription) Close() {
	if s.Relay.IsConnected() {
		msg, _ := nostr.CloseEnvelope(s.id).MarshalJSON()
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		s.Relay.write(ctx, msg)
	}
}

func (s *Subscription) unsub(sendClose bool) {
	s.cancel(errors.New("subscription ended"))
	if s.live.CompareAndSwap(true, false) && sendClose {
		s.Close()
	}
	s.Relay.subsMu.Lock()
	if s.Relay.subs[s.id] == s {
		delete(s.Relay.subs, s.id)
	}
	s.Relay.subsMu.Unlock()
	s.mu.Lock()
	if !s.closed {
		s.closed = true
		close(s.Events)
	}
	s.mu.Unlock()
}

// QueryEvents subscribes with one filter and returns the events until
// EOSE (or CLOSED, or ctx), as go-nostr's QueryEvents does.
func (r *Relay) QueryEvents(ctx context.Context, filter nostr.Filter) (chan *nostr.Event, error) {
	sub, err := r.Subscribe(ctx, nostr.Filters{filter})
	if err != nil {
		return nil, err
	}
	go func() {
		select {
		case <-sub.ClosedReason:
		case <-sub.EndOfStoredEvents:
		case <-ctx.Done():
		case <-r.ctx.Done():
		}
		sub.Unsub()
	}()
	return sub.Events, nil
}

// QuerySync returns the stored events of one filter; without a deadline on
// ctx it gives up after 7 seconds, as go-nostr's QuerySync does.
func (r *Relay) QuerySync(ctx context.Context, filter nostr.Filter) ([]*nostr.Event, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 7*time.Second)
		defer cancel()
	}
	ch, err := r.QueryEvents(ctx, filter)
	if err != nil {
		return nil, err
	}
	events := make([]*nostr.Event, 0, max(filter.Limit, 250))
	for ev := range ch {
		events = append(events, ev)
	}
	return events, nil
}
