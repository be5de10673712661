// Command khatru-v2 is a khatru relay on LMDB that also speaks the
// nostrwire.v2 binary transport: JSON clients see plain khatru, clients
// that offer nostrwire.v2 get batches of compressed records.
//
//	go run ./examples/khatru-v2 -listen 127.0.0.1:3334 -data ./data [-dictionaries set.nwbd]
//
// It prints "listening on ws://ADDR" on stderr once it accepts connections.
package main

import (
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"

	"github.com/fiatjaf/eventstore/lmdb"
	"github.com/fiatjaf/khatru"
	"github.com/nostrwire/nostrwire/go/khatruv2"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:3334", "address to listen on")
	data := flag.String("data", "./khatru-data", "LMDB directory")
	dicts := flag.String("dictionaries", "", "dictionary set file (from `nostrwire dict train`); default: the package's set")
	maxLimit := flag.Int("max-limit", 10_000, "most events one filter returns")
	cacheMiB := flag.Int("record-cache", 64, "MiB of records built for v2 clients as events are saved (0: none, each REQ builds its records)")
	flag.Parse()

	relay, handler, closeStore, err := newRelay(*data, *dicts, *maxLimit, *cacheMiB)
	if err != nil {
		fmt.Fprintln(os.Stderr, "khatru-v2:", err)
		os.Exit(1)
	}
	defer closeStore()
	_ = relay

	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		fmt.Fprintln(os.Stderr, "khatru-v2:", err)
		os.Exit(1)
	}
	fmt.Fprintf(os.Stderr, "listening on ws://%s\n", ln.Addr())
	srv := &http.Server{Handler: handler}
	go func() {
		stop := make(chan os.Signal, 1)
		signal.Notify(stop, os.Interrupt, syscall.SIGTERM)
		<-stop
		srv.Close()
	}()
	if err := srv.Serve(ln); err != http.ErrServerClosed {
		fmt.Fprintln(os.Stderr, "khatru-v2:", err)
	}
}

// newRelay is the whole setup: a khatru relay on LMDB and the v2 handler
// around it. The khatruv2 lines are the handler's; the rest is plain khatru
// (with LMDB behind guardedStore, so that it closes safely).
func newRelay(data, dicts string, maxLimit, cacheMiB int) (*khatru.Relay, *khatruv2.Handler, func(), error) {
	backend := &lmdb.LMDBBackend{Path: data, MaxLimit: maxLimit}
	if err := backend.Init(); err != nil {
		return nil, nil, nil, err
	}
	db := &guardedStore{db: backend}
	relay := khatru.NewRelay()
	relay.Info.Name = "khatru with nostrwire.v2"
	relay.StoreEvent = append(relay.StoreEvent, db.SaveEvent)
	relay.QueryEvents = append(relay.QueryEvents, db.QueryEvents)
	relay.CountEvents = append(relay.CountEvents, db.CountEvents)
	relay.DeleteEvent = append(relay.DeleteEvent, db.DeleteEvent)
	relay.ReplaceEvent = append(relay.ReplaceEvent, db.ReplaceEvent)

	opts := khatruv2.Options{CacheBytes: cacheMiB << 20}
	if cacheMiB <= 0 {
		opts.CacheBytes = -1
	}
	if dicts != "" {
		set, err := khatruv2.LoadSet(dicts)
		if err != nil {
			db.Close()
			return nil, nil, nil, err
		}
		opts.Set = set
	}
	handler, err := khatruv2.New(relay, opts)
	if err != nil {
		db.Close()
		return nil, nil, nil, err
	}
	return relay, handler, db.Close, nil
}
