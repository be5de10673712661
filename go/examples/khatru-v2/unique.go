package main

import (
	"context"

	"github.com/nbd-wtf/go-nostr"
)

// uniqueEvents passes on each event of a query once. eventstore's LMDB
// backend runs one index scan per value of a filter's tag (or author, or
// kind) and merges them without removing repeats, so an event carrying two
// of the values asked for (`{"#p":[A,B]}` and an event tagging both) would
// otherwise reach the client twice, over JSON and over nostrwire.v2 alike.
func uniqueEvents(query func(context.Context, nostr.Filter) (chan *nostr.Event, error)) func(context.Context, nostr.Filter) (chan *nostr.Event, error) {
	return func(ctx context.Context, filter nostr.Filter) (chan *nostr.Event, error) {
		events, err := query(ctx, filter)
		if err != nil {
			return nil, err
		}
		out := make(chan *nostr.Event)
		go func() {
			defer close(out)
			seen := make(map[string]struct{})
			for evt := range events {
				if _, ok := seen[evt.ID]; ok {
					continue
				}
				seen[evt.ID] = struct{}{}
				select {
				case out <- evt:
				case <-ctx.Done():
					// Drain, so that the store's goroutine can finish.
					for range events {
					}
					return
				}
			}
		}()
		return out, nil
	}
}
