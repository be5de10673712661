package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/coder/websocket"
	"github.com/nbd-wtf/go-nostr"
	"github.com/nostrwire/nostrwire/go/internal/relaytest"
)

const repoRoot = "../../.."

// writeCase builds a case file from corpus events and hostile records from
// the vectors, as the matrix harness does.
func writeCase(t *testing.T) (string, map[string]string) {
	evs, err := relaytest.Events(filepath.Join(repoRoot, "testdata", "real-events.jsonl"), 300, 40, relaytest.Servable)
	if err != nil {
		t.Fatal(err)
	}
	spoiledSig, spoiledID := evs[30], evs[31]
	spoiledSig.Sig = strings.Repeat("1", 128)
	spoiledID.ID = strings.Repeat("2", 64)
	c := map[string]any{
		"publish": evs[:30],
		"invalid": []nostr.Event{spoiledSig, spoiledID},
		"queries": []map[string]any{
			{"name": "all", "filter": nostr.Filter{Limit: 100}},
			{"name": "kind1", "filter": nostr.Filter{Kinds: []int{1}}},
			{"name": "author", "filter": nostr.Filter{Authors: []string{evs[0].PubKey}}},
		},
		"live": map[string]any{"filter": nostr.Filter{Kinds: []int{evs[32].Kind, evs[33].Kind}}, "events": evs[32:36]},
	}
	var vec struct {
		Cases []struct{ Name, Hex, Error string }
	}
	b, err := os.ReadFile(filepath.Join(repoRoot, "vectors", "wire", "invalid.json"))
	if err != nil {
		t.Fatal(err)
	}
	json.Unmarshal(b, &vec)
	want := map[string]string{}
	var hostile []map[string]string
	for _, v := range vec.Cases {
		hostile = append(hostile, map[string]string{"name": v.Name, "hex": v.Hex})
		want[v.Name] = v.Error
	}
	c["hostile_records"] = hostile
	path := filepath.Join(t.TempDir(), "case.json")
	b, _ = json.Marshal(c)
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path, want
}

func runCase(t *testing.T, url, tr, path string) result {
	var out bytes.Buffer
	code, err := run(url, tr, path, &out)
	if err != nil || code != 0 {
		t.Fatalf("%s: exit %d: %v", tr, code, err)
	}
	var res result
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		t.Fatal(err)
	}
	return res
}

func TestAdapterAgainstNostrwire(t *testing.T) {
	set, _ := filepath.Abs("../../nwb/testdata/set.nwbd")
	path, wantKinds := writeCase(t)
	var results []result
	for _, tr := range []string{"v2", "json"} {
		// A fresh relay per transport, as the harness runs them.
		r := relaytest.StartT(t, repoRoot, set)
		res := runCase(t, r.URL, tr, path)
		want := map[string]string{"v2": "nostrwire.v2", "json": "json"}[tr]
		if res.Client != "go" || res.Negotiated != want {
			t.Fatalf("%s: client %q negotiated %q", tr, res.Client, res.Negotiated)
		}
		if len(res.OK) != 32 || !res.OK[0].Accepted || res.OK[30].Accepted || res.OK[30].Prefix != "invalid" ||
			res.OK[31].Accepted || res.OK[31].Prefix != "invalid" {
			t.Fatalf("%s: ok %+v", tr, res.OK)
		}
		if len(res.Queries["all"]) != 30 || len(res.Queries["author"]) == 0 {
			t.Fatalf("%s: queries %d %d", tr, len(res.Queries["all"]), len(res.Queries["author"]))
		}
		if len(res.Live) == 0 {
			t.Fatalf("%s: no live events", tr)
		}
		for _, ref := range res.Refused {
			if !ref.Refused || ref.Kind != wantKinds[ref.Case] {
				t.Fatalf("%s: %+v, want %s", tr, ref, wantKinds[ref.Case])
			}
		}
		if len(res.Refused) != len(wantKinds) {
			t.Fatalf("%d refusals", len(res.Refused))
		}
		results = append(results, res)
	}
	a, b := results[0], results[1]
	if a.Records == nil || a.Records.Batched == 0 || a.Records.Compressed == 0 || b.Records != nil {
		t.Fatalf("records: v2 %+v, json %+v", a.Records, b.Records)
	}
	a.Negotiated, b.Negotiated = "", ""
	a.Records = nil
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("v2 and json differ:\n%+v\n%+v", a, b)
	}
}

// --transport v2 against a relay that does not negotiate it exits 2.
func TestAdapterRefusesFallback(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		defer c.CloseNow()
		c.Read(r.Context())
	}))
	defer srv.Close()
	path, _ := writeCase(t)
	var out bytes.Buffer
	code, err := run("ws"+strings.TrimPrefix(srv.URL, "http"), "v2", path, &out)
	if code != 2 || err == nil || out.Len() != 0 {
		t.Fatalf("exit %d, %v, %q", code, err, out.String())
	}
}
