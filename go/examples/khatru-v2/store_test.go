package main

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/fiatjaf/eventstore/lmdb"
	"github.com/nbd-wtf/go-nostr"
)

// A query whose results nobody takes holds no LMDB transaction: Close
// returns, and calls after it fail instead of touching a closed store.
func TestGuardedStoreCloses(t *testing.T) {
	backend := &lmdb.LMDBBackend{Path: filepath.Join(t.TempDir(), "db")}
	if err := backend.Init(); err != nil {
		t.Fatal(err)
	}
	g := &guardedStore{db: backend}
	sk := nostr.GeneratePrivateKey()
	ctx := context.Background()
	for i := 0; i < 20; i++ {
		if err := g.SaveEvent(ctx, signed(t, sk, 1, string(rune('a'+i)))); err != nil {
			t.Fatal(err)
		}
	}
	ch, err := g.QueryEvents(ctx, nostr.Filter{Kinds: []int{1}})
	if err != nil {
		t.Fatal(err)
	}
	<-ch // take one, as khatru's deleted-event check does, and stop
	done := make(chan struct{})
	go func() { g.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Close waits for a query nobody reads")
	}
	if _, err := g.QueryEvents(ctx, nostr.Filter{}); err != errStoreClosed {
		t.Fatalf("query after Close: %v", err)
	}
	if err := g.SaveEvent(ctx, signed(t, sk, 1, "late")); err != errStoreClosed {
		t.Fatalf("save after Close: %v", err)
	}
}
