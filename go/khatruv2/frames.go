package khatruv2

import "encoding/hex"

// nostrwire.v2 frames (spec/transport.md §2 and §6).

const (
	frameJSON      = 0x00
	frameEvent     = 0x01
	frameAuth      = 0x02
	frameOK        = 0x04
	frameEOSE      = 0x05
	frameBatch     = 0x06
	frameDictSet   = 0x07
	frameHolds     = 0x08
	maxSubIDBytes  = 64
	maxHeldSets    = 8
	batchTarget    = 64 << 10
	maxBatchFrame  = 2 << 20
	maxBatchRecord = 4096
	// Subprotocol is the WebSocket subprotocol this package speaks.
	Subprotocol = "nostrwire.v2"
)

func jsonFrame(text []byte) []byte {
	f := make([]byte, 0, 1+len(text))
	f = append(f, frameJSON)
	return append(f, text...)
}

func okFrame(id string, accepted bool, msg string) []byte {
	f := make([]byte, 0, 34+len(msg))
	f = append(f, frameOK)
	raw, err := hex.DecodeString(id)
	if err != nil || len(raw) != 32 {
		raw = make([]byte, 32)
	}
	f = append(f, raw...)
	if accepted {
		f = append(f, 1)
	} else {
		f = append(f, 0)
	}
	return append(f, msg...)
}

func eoseFrame(subID string) []byte {
	return append([]byte{frameEOSE}, subID...)
}

func dictSetFrame(set *DictSet) []byte {
	if set == nil {
		return []byte{frameDictSet}
	}
	h := set.Hash()
	return append([]byte{frameDictSet}, h[:]...)
}

// batch builds the batch frames of one subscription.
type batch struct {
	subID string
	buf   []byte
	count int
	head  int
}

func newBatch(subID string) *batch {
	b := &batch{subID: subID}
	b.reset()
	return b
}

func (b *batch) reset() {
	b.buf = append(b.buf[:0], frameBatch, byte(len(b.subID)))
	b.buf = append(b.buf, b.subID...)
	b.head = len(b.buf)
	b.count = 0
}

// full reports whether adding a record of n bytes would take the batch
// past 64 KiB of records (a larger record goes alone).
func (b *batch) full(n int) bool {
	return b.count > 0 && (len(b.buf)-b.head+n > batchTarget || b.count == maxBatchRecord)
}

func (b *batch) add(record []byte) {
	b.buf = appendVarint(b.buf, uint64(len(record)))
	b.buf = append(b.buf, record...)
	b.count++
}

// frame returns the finished frame (with its record count) and resets.
func (b *batch) frame() []byte {
	n := appendVarint(nil, uint64(b.count))
	f := make([]byte, 0, len(b.buf)+len(n))
	f = append(f, b.buf[:b.head]...)
	f = append(f, n...)
	f = append(f, b.buf[b.head:]...)
	b.reset()
	return f
}
