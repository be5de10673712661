// A plain khatru relay (no nostrwire transport) with an in-memory store, for
// the js/ package's multi-relay tests and benchmarks: another
// implementation than nostrwire's, speaking NIP-01 JSON only.
//
//	khatru-relay 127.0.0.1:PORT
package main

import (
	"fmt"
	"net/http"
	"os"

	"github.com/fiatjaf/eventstore/slicestore"
	"github.com/fiatjaf/khatru"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: khatru-relay HOST:PORT")
		os.Exit(2)
	}
	relay := khatru.NewRelay()
	relay.Info.Name = "khatru (tests)"
	db := &slicestore.SliceStore{MaxLimit: 50000}
	if err := db.Init(); err != nil {
		panic(err)
	}
	relay.StoreEvent = append(relay.StoreEvent, db.SaveEvent)
	relay.QueryEvents = append(relay.QueryEvents, db.QueryEvents)
	relay.DeleteEvent = append(relay.DeleteEvent, db.DeleteEvent)
	relay.ReplaceEvent = append(relay.ReplaceEvent, db.ReplaceEvent)
	relay.CountEvents = append(relay.CountEvents, db.CountEvents)
	fmt.Println("listening on", os.Args[1])
	if err := http.ListenAndServe(os.Args[1], relay); err != nil {
		panic(err)
	}
}
