// A plain khatru relay with NIP-77 (negentropy) on, in memory, for
// scripts/sync-interop.sh: another implementation's sync partner. go-nostr
// is v0.51.12, not the v0.51.8 khatru v0.19.0 asks for: v0.51.8 reads the
// label of every NEG- message wrongly (`["NEG-OPEN"` for `NEG-OPEN`) and
// answers each with a NOTICE.
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
	relay.Info.Name = "khatru (sync interop)"
	relay.Negentropy = true
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
