package client

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"
	"github.com/nostrwire/nostrwire/go/internal/relaytest"
	"github.com/nostrwire/nostrwire/go/transport"
)

// startRelay runs a nostrwire relay with the test dictionary set (when
// withSet) and returns its ws:// URL.
func startRelay(t testing.TB, withSet bool) string {
	set := ""
	if withSet {
		set, _ = filepath.Abs(filepath.Join("..", "nwb", "testdata", "set.nwbd"))
	}
	return relaytest.StartT(t, filepath.Join("..", ".."), set).URL
}

// corpusEvents reads servable events from the repository's corpus.
func corpusEvents(t testing.TB, from, n int) []nostr.Event {
	evs, err := relaytest.Events(filepath.Join("..", "..", "testdata", "real-events.jsonl"), from, n, relaytest.Servable)
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

func ids(evs []*nostr.Event) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = e.ID
	}
	slices.Sort(out)
	return out
}

func TestRelayV2AndJSON(t *testing.T) {
	url := startRelay(t, true)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	events := corpusEvents(t, 600, 200)

	v2, err := RelayConnect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer v2.Close()
	if v2.Negotiated() != transport.Protocol {
		t.Fatalf("negotiated %q", v2.Negotiated())
	}
	if len(v2.held) != 1 {
		t.Fatalf("holds %d sets", len(v2.held))
	}
	for i := range events {
		if err := v2.Publish(ctx, events[i]); err != nil {
			t.Fatalf("publish %d: %v", i, err)
		}
	}
	ok, reason, err := v2.PublishOK(ctx, events[0])
	if err != nil || !ok || !strings.HasPrefix(reason, "duplicate:") {
		t.Fatalf("duplicate: %v %q %v", ok, reason, err)
	}
	bad := events[1]
	bad.Content += "!"
	if ok, reason, err := v2.PublishOK(ctx, bad); err != nil || ok || !strings.HasPrefix(reason, "invalid:") {
		t.Fatalf("tampered: %v %q %v", ok, reason, err)
	}

	js, err := RelayConnect(ctx, url, WithJSONOnly())
	if err != nil {
		t.Fatal(err)
	}
	defer js.Close()
	if js.Negotiated() != NegotiatedJSON {
		t.Fatalf("negotiated %q", js.Negotiated())
	}
	plain, err := nostr.RelayConnect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()

	want := make([]string, len(events))
	for i, e := range events {
		want[i] = e.ID
	}
	slices.Sort(want)
	filter := nostr.Filter{Limit: 1000}
	for name, q := range map[string]func() ([]*nostr.Event, error){
		"v2":       func() ([]*nostr.Event, error) { return v2.QuerySync(ctx, filter) },
		"json":     func() ([]*nostr.Event, error) { return js.QuerySync(ctx, filter) },
		"go-nostr": func() ([]*nostr.Event, error) { return plain.QuerySync(ctx, filter) },
	} {
		got, err := q()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !slices.Equal(ids(got), want) {
			t.Fatalf("%s: %d events, want %d (invalid: v2 %d, json %d)", name, len(got), len(want), v2.Invalid(), js.Invalid())
		}
	}
	// The relay sent its stored records compressed with the set held.
	if v2.compressed.Load() == 0 {
		t.Fatal("no compressed record received")
	}
	if v2.Invalid() != 0 || js.Invalid() != 0 {
		t.Fatalf("invalid events: %d %d", v2.Invalid(), js.Invalid())
	}

	// A kind filter is answered the same way over both transports.
	kinds := nostr.Filter{Kinds: []int{1, 7}, Limit: 50}
	a, err := v2.QuerySync(ctx, kinds)
	if err != nil {
		t.Fatal(err)
	}
	b, err := js.QuerySync(ctx, kinds)
	if err != nil || !slices.Equal(ids(a), ids(b)) || len(a) == 0 {
		t.Fatalf("kinds: %d vs %d (%v)", len(a), len(b), err)
	}
	for _, e := range a {
		if e.Kind != 1 && e.Kind != 7 {
			t.Fatalf("kind %d", e.Kind)
		}
	}
}

func TestLiveEvents(t *testing.T) {
	url := startRelay(t, true)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	events := corpusEvents(t, 800, 20)
	for _, opts := range [][]Option{nil, {WithJSONOnly()}} {
		sub1, err := RelayConnect(ctx, url, opts...)
		if err != nil {
			t.Fatal(err)
		}
		pub, err := RelayConnect(ctx, url, opts...)
		if err != nil {
			t.Fatal(err)
		}
		sub, err := sub1.Subscribe(ctx, nostr.Filters{{Kinds: []int{events[0].Kind}}})
		if err != nil {
			t.Fatal(err)
		}
	stored:
		for {
			select {
			case e := <-sub.Events:
				t.Logf("stored event %s kind %d", e.ID, e.Kind)
			case <-sub.EndOfStoredEvents:
				break stored
			}
		}
		var want []string
		for _, e := range events {
			if e.Kind == events[0].Kind {
				want = append(want, e.ID)
			}
			if err := pub.Publish(ctx, e); err != nil && !strings.Contains(err.Error(), "duplicate") {
				t.Fatal(err)
			}
		}
		// The second round publishes duplicates, which are not broadcast.
		if opts != nil {
			sub.Unsub()
			sub1.Close()
			pub.Close()
			continue
		}
		var got []string
		timeout := time.After(5 * time.Second)
		for len(got) < len(want) {
			select {
			case e := <-sub.Events:
				got = append(got, e.ID)
			case <-timeout:
				t.Fatalf("%d of %d live events", len(got), len(want))
			}
		}
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Fatal("live events differ")
		}
		sub.Unsub()
		if _, open := <-sub.Events; open {
			t.Fatal("Events open after Unsub")
		}
		sub1.Close()
		pub.Close()
	}
}
