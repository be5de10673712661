package main

import (
	"context"
	"errors"
	"sync"

	"github.com/fiatjaf/eventstore/lmdb"
	"github.com/nbd-wtf/go-nostr"
)

var errStoreClosed = errors.New("error: the store is closed")

// guardedStore closes LMDB only once no call into it is running. khatru
// keeps answering connections that outlive the HTTP server (they are
// hijacked), and eventstore's LMDB backend holds a read transaction until
// a query's results are all taken; closing the environment under either
// crashes the process. Calls after Close fail.
type guardedStore struct {
	mu     sync.RWMutex
	closed bool
	db     *lmdb.LMDBBackend
}

// enter takes a read lock for one call; false when the store is closed.
func (g *guardedStore) enter() bool {
	g.mu.RLock()
	if g.closed {
		g.mu.RUnlock()
		return false
	}
	return true
}

func (g *guardedStore) call(ctx context.Context, evt *nostr.Event, f func(context.Context, *nostr.Event) error) error {
	if !g.enter() {
		return errStoreClosed
	}
	defer g.mu.RUnlock()
	return f(ctx, evt)
}

func (g *guardedStore) SaveEvent(ctx context.Context, evt *nostr.Event) error {
	return g.call(ctx, evt, g.db.SaveEvent)
}

func (g *guardedStore) DeleteEvent(ctx context.Context, evt *nostr.Event) error {
	return g.call(ctx, evt, g.db.DeleteEvent)
}

func (g *guardedStore) ReplaceEvent(ctx context.Context, evt *nostr.Event) error {
	return g.call(ctx, evt, g.db.ReplaceEvent)
}

func (g *guardedStore) CountEvents(ctx context.Context, filter nostr.Filter) (int64, error) {
	if !g.enter() {
		return 0, errStoreClosed
	}
	defer g.mu.RUnlock()
	return g.db.CountEvents(ctx, filter)
}

// QueryEvents takes every result from LMDB before it returns them: LMDB's
// read transaction is over by then (eventstore's backend holds it until
// its results are all taken, and khatru's deleted-event check takes one),
// and the results come in a buffered channel, with no goroutine between
// the store and the caller. eventstore's backend builds every result
// inside its transaction anyway, so nothing arrives later for it.
//
// Each event comes once: the backend runs one index scan per value of a
// filter's tag (or author, or kind) and merges them without removing
// repeats, so an event carrying two of the values asked for
// (`{"#p":[A,B]}` and an event tagging both) would otherwise reach the
// client twice, over JSON and over nostrwire.v2 alike.
func (g *guardedStore) QueryEvents(ctx context.Context, filter nostr.Filter) (chan *nostr.Event, error) {
	if !g.enter() {
		return nil, errStoreClosed
	}
	defer g.mu.RUnlock()
	results, err := g.db.QueryEvents(ctx, filter)
	if err != nil {
		return nil, err
	}
	var events []*nostr.Event
	seen := make(map[string]struct{})
	for evt := range results {
		if _, ok := seen[evt.ID]; !ok {
			seen[evt.ID] = struct{}{}
			events = append(events, evt)
		}
	}
	out := make(chan *nostr.Event, len(events))
	for _, evt := range events {
		out <- evt
	}
	close(out)
	return out, nil
}

// Close waits for the calls running, then closes LMDB.
func (g *guardedStore) Close() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.closed {
		g.closed = true
		g.db.Close()
	}
}
