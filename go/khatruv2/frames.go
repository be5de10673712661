package khatruv2

import (
	"encoding/hex"

	"github.com/nostrwire/nostrwire/go/transport"
)

// Subprotocol is the WebSocket subprotocol this package speaks.
const Subprotocol = transport.Protocol

func okFrame(id string, accepted bool, msg string) []byte {
	var raw [32]byte
	hex.Decode(raw[:], []byte(id))
	return transport.AppendOK(nil, raw, accepted, msg)
}

func dictSetFrame(set *DictSet) []byte {
	if set == nil {
		return transport.AppendDictionarySet(nil, nil)
	}
	h := set.Hash()
	return transport.AppendDictionarySet(nil, &h)
}

// batch gathers the records of one subscription into batch frames of up
// to 64 KiB of records (a larger record goes alone).
type batch struct {
	subID   string
	records [][]byte
	bytes   int
}

// full reports whether a record of n bytes no longer fits the batch.
func (b *batch) full(n int) bool {
	return len(b.records) > 0 && b.bytes+n > transport.BatchRecordBytes
}

func (b *batch) add(record []byte) {
	b.records = append(b.records, record)
	b.bytes += len(record)
}

// frame returns the batch frame and empties the batch.
func (b *batch) frame() []byte {
	f, _ := transport.AppendBatch(nil, b.subID, b.records)
	b.records, b.bytes = b.records[:0], 0
	return f
}
