// Package dictionaries fetches nwb dictionary sets by the SHA-256 of their
// file from a relay's /dictionaries/<hex> (spec/transport.md §6.2), checks
// them against the hash and a size cap, and caches them in memory and,
// optionally, in a directory.
package dictionaries

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sync"

	"github.com/nostrwire/nostrwire/go/nwb"
)

// Kind is the stable kind of an Error.
type Kind uint8

const (
	// BadURL: the relay URL is not ws://, wss://, http:// or https://.
	BadURL Kind = iota + 1
	// Fetch: the HTTP request failed (network, context).
	Fetch
	// Status: the relay answered with a status other than 200.
	Status
	// TooLarge: the set file is larger than the cache's MaxBytes.
	TooLarge
	// HashMismatch: the file's SHA-256 is not the hash asked for.
	HashMismatch
	// BadSet: the file is not a valid dictionary set (nwb's
	// bad_dictionary_set); Err holds the *nwb.Error.
	BadSet
)

var kindNames = [...]string{
	BadURL:       "bad_url",
	Fetch:        "fetch",
	Status:       "status",
	TooLarge:     "too_large",
	HashMismatch: "hash_mismatch",
	BadSet:       "bad_dictionary_set",
}

// String returns the stable snake_case name of the kind.
func (k Kind) String() string {
	if int(k) < len(kindNames) && kindNames[k] != "" {
		return kindNames[k]
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// Error is the error of this package.
type Error struct {
	Kind Kind
	// URL is the address fetched, when there is one.
	URL string
	// Err is the underlying error, if any.
	Err error
}

func (e *Error) Error() string {
	s := "dictionaries: " + e.Kind.String()
	if e.URL != "" {
		s += " " + e.URL
	}
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

func (e *Error) Unwrap() error { return e.Err }

// DefaultMaxBytes caps a set file when Cache.MaxBytes is 0: room for a
// fallback and a few dozen per-kind dictionaries of the sizes nostrwire
// trains (64 KiB by default).
const DefaultMaxBytes = 32 << 20

// URL returns the HTTP(S) address of set hash on the relay at relayURL
// (ws:// becomes http://, wss:// https://; the path is /dictionaries/<hex>).
func URL(relayURL string, hash [32]byte) (string, error) {
	u, err := url.Parse(relayURL)
	if err != nil {
		return "", &Error{Kind: BadURL, URL: relayURL, Err: err}
	}
	switch u.Scheme {
	case "ws", "http":
		u.Scheme = "http"
	case "wss", "https":
		u.Scheme = "https"
	default:
		return "", &Error{Kind: BadURL, URL: relayURL}
	}
	u.Path = "/dictionaries/" + hex.EncodeToString(hash[:])
	u.RawPath, u.RawQuery, u.Fragment, u.User = "", "", "", nil
	return u.String(), nil
}

// Cache holds dictionary sets by hash. The zero value is ready to use: it
// fetches with http.DefaultClient, caps files at DefaultMaxBytes and caches
// in memory only. A Cache is safe for concurrent use; concurrent Gets of one
// hash fetch it once.
type Cache struct {
	// Client fetches sets; nil is http.DefaultClient.
	Client *http.Client
	// MaxBytes caps a set file; 0 is DefaultMaxBytes.
	MaxBytes int64
	// Dir, when set, keeps fetched sets as <hex>.nwbd files, checked
	// against their hash when read back.
	Dir string

	mu      sync.Mutex
	sets    map[[32]byte]*nwb.DictSet
	pending map[[32]byte]*call
}

type call struct {
	done chan struct{}
	set  *nwb.DictSet
	err  error
}

// Cached returns the set with hash if it is in memory.
func (c *Cache) Cached(hash [32]byte) *nwb.DictSet {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sets[hash]
}

// Add checks and parses a set file and keeps it under its hash.
func (c *Cache) Add(file []byte) (*nwb.DictSet, error) {
	set, err := nwb.ParseDictSet(file)
	if err != nil {
		return nil, &Error{Kind: BadSet, Err: err}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.sets == nil {
		c.sets = map[[32]byte]*nwb.DictSet{}
	}
	if old := c.sets[set.Hash]; old != nil {
		return old, nil
	}
	c.sets[set.Hash] = set
	return set, nil
}

// Get returns the set with hash: from memory, else from Dir, else fetched
// from the relay at relayURL. The file must hash to hash (HashMismatch) and
// fit in MaxBytes (TooLarge), checked while reading.
func (c *Cache) Get(ctx context.Context, relayURL string, hash [32]byte) (*nwb.DictSet, error) {
	c.mu.Lock()
	if s := c.sets[hash]; s != nil {
		c.mu.Unlock()
		return s, nil
	}
	if p := c.pending[hash]; p != nil {
		c.mu.Unlock()
		select {
		case <-p.done:
			return p.set, p.err
		case <-ctx.Done():
			return nil, &Error{Kind: Fetch, Err: ctx.Err()}
		}
	}
	if c.pending == nil {
		c.pending = map[[32]byte]*call{}
	}
	p := &call{done: make(chan struct{})}
	c.pending[hash] = p
	c.mu.Unlock()

	p.set, p.err = c.load(ctx, relayURL, hash)
	c.mu.Lock()
	delete(c.pending, hash)
	if p.err == nil {
		if c.sets == nil {
			c.sets = map[[32]byte]*nwb.DictSet{}
		}
		c.sets[hash] = p.set
	}
	c.mu.Unlock()
	close(p.done)
	return p.set, p.err
}

func (c *Cache) maxBytes() int64 {
	if c.MaxBytes > 0 {
		return c.MaxBytes
	}
	return DefaultMaxBytes
}

func (c *Cache) load(ctx context.Context, relayURL string, hash [32]byte) (*nwb.DictSet, error) {
	name := hex.EncodeToString(hash[:]) + ".nwbd"
	if c.Dir != "" {
		if f, err := os.Open(filepath.Join(c.Dir, name)); err == nil {
			file, err := readCapped(f, c.maxBytes())
			f.Close()
			if err == nil && sha256.Sum256(file) == hash {
				if set, err := nwb.ParseDictSet(file); err == nil {
					return set, nil
				}
			}
			// A damaged cache file is fetched again.
		}
	}
	u, err := URL(relayURL, hash)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, &Error{Kind: Fetch, URL: u, Err: err}
	}
	client := c.Client
	if client == nil {
		client = http.DefaultClient
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, &Error{Kind: Fetch, URL: u, Err: err}
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, &Error{Kind: Status, URL: u, Err: errors.New(resp.Status)}
	}
	if resp.ContentLength > c.maxBytes() {
		return nil, &Error{Kind: TooLarge, URL: u}
	}
	file, err := readCapped(resp.Body, c.maxBytes())
	if err != nil {
		if e, ok := err.(*Error); ok {
			e.URL = u
			return nil, e
		}
		return nil, &Error{Kind: Fetch, URL: u, Err: err}
	}
	if sha256.Sum256(file) != hash {
		return nil, &Error{Kind: HashMismatch, URL: u}
	}
	set, err := nwb.ParseDictSet(file)
	if err != nil {
		return nil, &Error{Kind: BadSet, URL: u, Err: err}
	}
	if c.Dir != "" {
		writeAtomic(filepath.Join(c.Dir, name), file)
	}
	return set, nil
}

// readCapped reads r to its end, refusing more than max bytes (TooLarge).
func readCapped(r io.Reader, max int64) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > max {
		return nil, &Error{Kind: TooLarge}
	}
	return b, nil
}

// writeAtomic writes a cache file through a temporary name; failures only
// cost a later fetch.
func writeAtomic(path string, b []byte) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".nwbd-*")
	if err != nil {
		return
	}
	_, werr := tmp.Write(b)
	cerr := tmp.Close()
	if werr != nil || cerr != nil || os.Rename(tmp.Name(), path) != nil {
		os.Remove(tmp.Name())
	}
}
