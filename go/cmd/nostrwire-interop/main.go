// Command nostrwire-interop is the Go client of the interop matrix
// (tests/interop/matrix/): it runs one case file against one relay over one
// transport with the client package and prints what it saw as one JSON
// object on stdout.
//
//	nostrwire-interop --relay ws://127.0.0.1:PORT --transport json|v2 --case CASE.json
//
// Exit status 0 when the case could be run (the harness compares the
// verdicts), 2 when --transport v2 was asked and the relay did not
// negotiate nostrwire.v2, 1 on any other failure.
package main

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/nbd-wtf/go-nostr"
	"github.com/nostrwire/nostrwire/go/client"
	"github.com/nostrwire/nostrwire/go/nwb"
	"github.com/nostrwire/nostrwire/go/transport"
)

type caseFile struct {
	Publish []nostr.Event `json:"publish"`
	Invalid []nostr.Event `json:"invalid"`
	Queries []struct {
		Name   string       `json:"name"`
		Filter nostr.Filter `json:"filter"`
	} `json:"queries"`
	Live struct {
		Filter nostr.Filter  `json:"filter"`
		Events []nostr.Event `json:"events"`
	} `json:"live"`
	HostileRecords []struct {
		Name string `json:"name"`
		Hex  string `json:"hex"`
	} `json:"hostile_records"`
}

type okResult struct {
	ID       string `json:"id"`
	Accepted bool   `json:"accepted"`
	Prefix   string `json:"prefix"`
}

type refusal struct {
	Case    string `json:"case"`
	Refused bool   `json:"refused"`
	Kind    string `json:"kind"`
}

type result struct {
	Client     string              `json:"client"`
	Negotiated string              `json:"negotiated"`
	OK         []okResult          `json:"ok"`
	Queries    map[string][]string `json:"queries"`
	Live       []string            `json:"live"`
	Refused    []refusal           `json:"refused"`
	// Records: how many records the main connection received in batches
	// and how many of them compressed (v2 only).
	Records *records `json:"records,omitempty"`
}

type records struct {
	Batched    uint64 `json:"batched"`
	Compressed uint64 `json:"compressed"`
}

func main() {
	relay := flag.String("relay", "", "relay URL (ws://...)")
	tr := flag.String("transport", "v2", "json or v2")
	casePath := flag.String("case", "", "case file (JSON)")
	flag.Parse()
	if *relay == "" || *casePath == "" || (*tr != "json" && *tr != "v2") {
		fmt.Fprintln(os.Stderr, "usage: nostrwire-interop --relay ws://HOST:PORT --transport json|v2 --case CASE.json")
		os.Exit(1)
	}
	code, err := run(*relay, *tr, *casePath, os.Stdout)
	if err != nil {
		fmt.Fprintln(os.Stderr, "nostrwire-interop:", err)
	}
	os.Exit(code)
}

func run(url, tr, casePath string, w io.Writer) (int, error) {
	b, err := os.ReadFile(casePath)
	if err != nil {
		return 1, err
	}
	var c caseFile
	if err := json.Unmarshal(b, &c); err != nil {
		return 1, fmt.Errorf("%s: %w", casePath, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var opts []client.Option
	if tr == "json" {
		opts = append(opts, client.WithJSONOnly())
	}
	connect := func() (*client.Relay, int, error) {
		r, err := client.RelayConnect(ctx, url, opts...)
		if err != nil {
			return nil, 1, err
		}
		if tr == "v2" && r.Negotiated() != transport.Protocol {
			r.Close()
			return nil, 2, fmt.Errorf("the relay at %s did not negotiate %s (got %s)", url, transport.Protocol, r.Negotiated())
		}
		return r, 0, nil
	}
	r, code, err := connect()
	if err != nil {
		return code, err
	}
	defer r.Close()
	out := result{Client: "go", Negotiated: r.Negotiated(), OK: []okResult{}, Queries: map[string][]string{},
		Live: []string{}, Refused: []refusal{}}

	for _, ev := range append(slices.Clone(c.Publish), c.Invalid...) {
		accepted, reason, err := r.PublishOK(ctx, ev)
		if err != nil {
			return 1, fmt.Errorf("publishing %s: %w", ev.ID, err)
		}
		out.OK = append(out.OK, okResult{ID: ev.ID, Accepted: accepted, Prefix: prefix(reason)})
	}

	for _, q := range c.Queries {
		qctx, qcancel := context.WithTimeout(ctx, 15*time.Second)
		evs, err := r.QuerySync(qctx, q.Filter)
		qcancel()
		if err != nil {
			return 1, fmt.Errorf("query %s: %w", q.Name, err)
		}
		ids := make([]string, 0, len(evs))
		for _, e := range evs {
			ids = append(ids, e.ID)
		}
		slices.Sort(ids)
		out.Queries[q.Name] = ids
	}

	if len(c.Live.Events) > 0 {
		live, err := liveEvents(ctx, r, connect, c)
		if err != nil {
			return 1, err
		}
		out.Live = live
	}

	for _, h := range c.HostileRecords {
		rec, err := hex.DecodeString(h.Hex)
		if err != nil {
			return 1, fmt.Errorf("hostile record %s: %w", h.Name, err)
		}
		_, err = nwb.Decode(rec, nwb.DefaultLimits)
		ref := refusal{Case: h.Name, Refused: err != nil}
		if err != nil {
			ref.Kind = nwb.KindOf(err).String()
		}
		out.Refused = append(out.Refused, ref)
	}

	if r.Negotiated() == transport.Protocol {
		b, c := r.Records()
		out.Records = &records{Batched: b, Compressed: c}
	}
	enc := json.NewEncoder(w)
	if err := enc.Encode(out); err != nil {
		return 1, err
	}
	return 0, nil
}

// liveEvents opens the live subscription, waits for its EOSE, publishes the
// live events on a second connection and collects them (5 s cap).
func liveEvents(ctx context.Context, r *client.Relay, connect func() (*client.Relay, int, error), c caseFile) ([]string, error) {
	sub, err := r.Subscribe(ctx, nostr.Filters{c.Live.Filter})
	if err != nil {
		return nil, err
	}
	defer sub.Unsub()
stored:
	for {
		select {
		case _, ok := <-sub.Events:
			if !ok {
				return nil, fmt.Errorf("live subscription ended before EOSE")
			}
		case <-sub.EndOfStoredEvents:
			break stored
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	pub, _, err := connect()
	if err != nil {
		return nil, err
	}
	defer pub.Close()
	for _, ev := range c.Live.Events {
		if _, _, err := pub.PublishOK(ctx, ev); err != nil {
			return nil, fmt.Errorf("publishing live %s: %w", ev.ID, err)
		}
	}
	seen := map[string]bool{}
	live := []string{}
	timeout := time.After(5 * time.Second)
	for len(live) < len(c.Live.Events) {
		select {
		case ev, ok := <-sub.Events:
			if !ok {
				return sorted(live), nil
			}
			if !seen[ev.ID] {
				seen[ev.ID] = true
				live = append(live, ev.ID)
			}
		case <-timeout:
			return sorted(live), nil
		}
	}
	return sorted(live), nil
}

func sorted(s []string) []string {
	slices.Sort(s)
	return s
}

// prefix is the machine-readable prefix of an OK message ("duplicate",
// "invalid", ...), or "" when there is none.
func prefix(reason string) string {
	if i := strings.Index(reason, ":"); i > 0 {
		return reason[:i]
	}
	return ""
}
