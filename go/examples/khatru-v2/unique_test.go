package main

import (
	"testing"

	"github.com/nbd-wtf/go-nostr"
)

// An event that carries two of the tag values a filter asks for comes back
// once, over JSON and over nostrwire.v2 (the interop matrix found it twice).
func TestEventMatchingTwoTagValuesComesOnce(t *testing.T) {
	r := startRelay(t, nil)
	sk := nostr.GeneratePrivateKey()
	a, b := nostr.GeneratePrivateKey(), nostr.GeneratePrivateKey()
	pa, _ := nostr.GetPublicKey(a)
	pb, _ := nostr.GetPublicKey(b)
	pub := jsonClient(t, r)
	for i, tags := range []nostr.Tags{
		{{"p", pa}, {"p", pb}},
		{{"p", pa}},
		{{"p", pb}, {"t", "x"}, {"p", pa}},
	} {
		evt := signed(t, sk, 1, "note "+string(rune('a'+i)), tags...)
		if ok, msg := jsonPublish(t, pub, evt); !ok {
			t.Fatalf("publish: %s", msg)
		}
	}
	f := nostr.Filter{Tags: nostr.TagMap{"p": []string{pa, pb}}}
	got, reason := jsonQuery(t, jsonClient(t, r), f)
	if reason != "" || len(got) != 3 {
		t.Fatalf("JSON: %d events (%q), want 3: %v", len(got), reason, ids(got))
	}
	for _, hold := range []bool{true, false} {
		got, reason := dialV2(t, r, hold).query("q", f)
		if reason != "" || len(got) != 3 {
			t.Fatalf("v2 (hold %v): %d events (%q), want 3: %v", hold, len(got), reason, ids(got))
		}
	}
}
