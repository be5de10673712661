package khatruv2

import (
	"bytes"
	"context"
	"testing"

	"github.com/fiatjaf/khatru"
	"github.com/nbd-wtf/go-nostr"
	"github.com/nostrwire/nostrwire/go/nwb"
)

// TestRecordsBuiltWhenSaved checks that an event khatru saves has its
// records built then, so that no REQ builds them while answering.
func TestRecordsBuiltWhenSaved(t *testing.T) {
	rl := khatru.NewRelay()
	rl.StoreEvent = append(rl.StoreEvent, func(context.Context, *nostr.Event) error { return nil })
	h, err := New(rl, Options{})
	if err != nil {
		t.Fatal(err)
	}
	events := corpus(t)[:50]
	for _, evt := range events {
		if _, err := rl.AddEvent(context.Background(), evt); err != nil {
			t.Fatal(err)
		}
	}
	for _, evt := range events {
		e := h.cache.get(evt.ID)
		if e == nil {
			t.Fatalf("event %s saved without its record built", evt.ID)
		}
		raw, err := nwb.Encode(evt, nwb.DefaultLimits)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(e.raw, raw) {
			t.Fatalf("event %s: built record differs from nwb's", evt.ID)
		}
	}
}

// TestRecordsNotBuiltWhenOverwritten checks that records are not built at
// save time when OverwriteResponseEvent may change what each REQ sends.
func TestRecordsNotBuiltWhenOverwritten(t *testing.T) {
	rl := khatru.NewRelay()
	rl.StoreEvent = append(rl.StoreEvent, func(context.Context, *nostr.Event) error { return nil })
	rl.OverwriteResponseEvent = append(rl.OverwriteResponseEvent, func(context.Context, *nostr.Event) {})
	h, err := New(rl, Options{})
	if err != nil {
		t.Fatal(err)
	}
	evt := corpus(t)[0]
	if _, err := rl.AddEvent(context.Background(), evt); err != nil {
		t.Fatal(err)
	}
	if h.cache.get(evt.ID) != nil {
		t.Fatal("record built for a relay that overwrites response events")
	}
}
