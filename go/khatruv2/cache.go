package khatruv2

import "sync"

// recordCache keeps the records built from events, by event id, so that
// an event sent again (another REQ, another subscriber) is encoded and
// compressed once. It holds at most limit bytes; when full it drops
// entries in map order.
type recordCache struct {
	mu    sync.Mutex
	limit int
	bytes int
	m     map[string]*cacheEntry
}

// cacheEntry is an event's record and its stored form (compressed with the
// handler's set when that is smaller, else the record).
type cacheEntry struct {
	raw    []byte
	stored []byte
}

func (e *cacheEntry) size() int { return len(e.raw) + len(e.stored) + 64 }

// forConn is what a connection is sent: the stored form when the client
// holds the set, else the record.
func (e *cacheEntry) forConn(c *conn) []byte {
	if c.holdsSet.Load() {
		return e.stored
	}
	return e.raw
}

func newRecordCache(limit int) *recordCache {
	return &recordCache{limit: limit, m: map[string]*cacheEntry{}}
}

func (c *recordCache) get(id string) *cacheEntry {
	if c.limit <= 0 {
		return nil
	}
	c.mu.Lock()
	e := c.m[id]
	c.mu.Unlock()
	return e
}

func (c *recordCache) put(id string, e *cacheEntry) {
	if c.limit <= 0 || e.size() > c.limit {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.m[id]; ok {
		c.bytes -= old.size()
	}
	for k, old := range c.m {
		if c.bytes+e.size() <= c.limit {
			break
		}
		c.bytes -= old.size()
		delete(c.m, k)
	}
	c.m[id] = e
	c.bytes += e.size()
}
