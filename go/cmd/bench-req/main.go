// Command bench-req times one REQ of many stored events, from sending the
// REQ to the last event decoded and verified, for the client package over
// nostrwire.v2 (with GOMAXPROCS verifying goroutines, and with one) and over
// JSON, and for go-nostr's Relay over JSON, against the same relay in
// interleaved rounds. It prints one JSON object per run
// on stdout and a summary of medians on stderr.
//
//	bench-req --relay ws://127.0.0.1:PORT --limit 10000 --rounds 7 [--filter JSON]
//
// scripts/bench-go-client.sh fills a relay and runs it.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"syscall"
	"time"

	"github.com/nbd-wtf/go-nostr"
	"github.com/nostrwire/nostrwire/go/client"
	"github.com/nostrwire/nostrwire/go/nwb"
)

type run struct {
	Client  string  `json:"client"`
	Round   int     `json:"round"`
	Events  int     `json:"events"`
	FirstMS float64 `json:"first_ms"`
	LastMS  float64 `json:"last_ms"`
	EOSEMS  float64 `json:"eose_ms"`
	// CPUMS is the CPU time of this process (all its threads) from the
	// REQ to EOSE: the client's work, whatever else the machine runs.
	CPUMS   float64 `json:"cpu_ms"`
	Invalid uint64  `json:"invalid,omitempty"`
}

func main() {
	relay := flag.String("relay", "", "relay URL")
	limit := flag.Int("limit", 10000, "REQ limit")
	rounds := flag.Int("rounds", 7, "interleaved rounds")
	filterJSON := flag.String("filter", `{"kinds":[1,6,7]}`, "filter (JSON), the limit added")
	version := flag.Bool("version", false, "print the Go toolchain and GOMAXPROCS and exit")
	only := flag.String("only", "", "run only this client")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of the whole run here")
	flag.Parse()
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			fail(err)
		}
		pprof.StartCPUProfile(f)
		defer pprof.StopCPUProfile()
	}
	if *version {
		fmt.Printf("%s %s/%s, GOMAXPROCS %d\n", runtime.Version(), runtime.GOOS, runtime.GOARCH, runtime.GOMAXPROCS(0))
		return
	}
	var filter nostr.Filter
	if err := json.Unmarshal([]byte(*filterJSON), &filter); err != nil {
		fail(err)
	}
	filter.Limit = *limit
	clients := []string{"go-nostr-json", "nostrwire-v2", "nostrwire-v2-1", "nostrwire-json"}
	if *only != "" {
		clients = []string{*only}
	}
	var runs []run
	out := json.NewEncoder(os.Stdout)
	// Round 0 warms up (the dictionary set is fetched into the cache, the
	// relay's pages are read); it is printed but not counted.
	for round := 0; round <= *rounds; round++ {
		for i := range clients {
			// Rotate the order so that no client always runs first.
			name := clients[(i+round)%len(clients)]
			r, err := measure(name, *relay, filter)
			if err != nil {
				fail(fmt.Errorf("%s round %d: %w", name, round, err))
			}
			r.Round = round
			out.Encode(r)
			if round > 0 {
				runs = append(runs, r)
			}
			runtime.GC()
		}
	}
	summarize(clients, runs)
}

func measure(name, url string, filter nostr.Filter) (run, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	res := run{Client: name}
	var events <-chan *nostr.Event
	var eose <-chan struct{}
	var start time.Time
	var finish func()
	switch name {
	case "go-nostr-json":
		r, err := nostr.RelayConnect(ctx, url)
		if err != nil {
			return res, err
		}
		defer r.Close()
		start = time.Now()
		sub, err := r.Subscribe(ctx, nostr.Filters{filter})
		if err != nil {
			return res, err
		}
		events, eose, finish = sub.Events, sub.EndOfStoredEvents, sub.Unsub
	default:
		// A verifier of its own for every REQ: no author's key is known
		// beforehand (the cost of the key tables is part of the time).
		opts := []client.Option{client.WithVerifier(nwb.NewVerifier(4096))}
		switch name {
		case "nostrwire-json":
			opts = append(opts, client.WithJSONOnly())
		case "nostrwire-v2-1":
			// One goroutine decodes and verifies, as go-nostr verifies.
			opts = append(opts, client.WithVerifiers(1))
		}
		r, err := client.RelayConnect(ctx, url, opts...)
		if err != nil {
			return res, err
		}
		defer r.Close()
		if want := map[string]string{"nostrwire-v2": "nostrwire.v2", "nostrwire-v2-1": "nostrwire.v2", "nostrwire-json": "json"}[name]; r.Negotiated() != want {
			return res, fmt.Errorf("negotiated %s", r.Negotiated())
		}
		defer func() { res.Invalid = r.Invalid() }()
		start = time.Now()
		sub, err := r.Subscribe(ctx, nostr.Filters{filter})
		if err != nil {
			return res, err
		}
		events, eose, finish = sub.Events, sub.EndOfStoredEvents, sub.Unsub
	}
	defer finish()
	ms := func() float64 { return float64(time.Since(start).Microseconds()) / 1000 }
	cpu0 := cpuMS()
	for {
		select {
		case ev := <-events:
			if ev == nil {
				return res, fmt.Errorf("subscription ended after %d events", res.Events)
			}
			res.Events++
			if res.Events == 1 {
				res.FirstMS = ms()
			}
			res.LastMS = ms()
		case <-eose:
			res.EOSEMS = ms()
			res.CPUMS = cpuMS() - cpu0
			// go-nostr delivers stored events before EOSE; so does the
			// client package. Anything later is not part of the REQ.
			return res, nil
		case <-ctx.Done():
			return res, ctx.Err()
		}
	}
}

// cpuMS is the user and system CPU time of the process so far.
func cpuMS() float64 {
	var u syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &u)
	return float64(u.Utime.Nano()+u.Stime.Nano()) / 1e6
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func summarize(clients []string, runs []run) {
	var base, baseCPU float64
	fmt.Fprintf(os.Stderr, "%-15s %7s %9s %9s %13s %8s %9s %8s\n", "client", "events", "first ms", "last ms", "last min-max", "vs", "cpu ms", "vs")
	for _, c := range clients {
		var first, last, cpu []float64
		n := 0
		for _, r := range runs {
			if r.Client == c {
				first = append(first, r.FirstMS)
				last = append(last, r.LastMS)
				cpu = append(cpu, r.CPUMS)
				n = r.Events
			}
		}
		if len(last) == 0 {
			continue
		}
		m, mc := median(last), median(cpu)
		if c == "go-nostr-json" {
			base, baseCPU = m, mc
		}
		ratio := func(b, x float64) string {
			if b == 0 {
				return "-"
			}
			return fmt.Sprintf("%.2fx", b/x)
		}
		fmt.Fprintf(os.Stderr, "%-15s %7d %9.1f %9.1f %6.0f-%-6.0f %8s %9.1f %8s\n", c, n, median(first), m,
			slices.Min(last), slices.Max(last), ratio(base, m), mc, ratio(baseCPU, mc))
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "bench-req:", err)
	os.Exit(1)
}
