// Package transport encodes and decodes the frames of the nostrwire.v2
// WebSocket subprotocol (spec/transport.md §2 and §6–§8), in both
// directions. Errors are *nwb.Error with the kinds of spec/nwb.md §12.
package transport

import (
	"unicode/utf8"

	"github.com/nbd-wtf/go-nostr"
	"github.com/nostrwire/nostrwire/go/nwb"
)

// Protocol is the subprotocol name a client offers in
// Sec-WebSocket-Protocol and a relay echoes.
const Protocol = "nostrwire.v2"

// Frame type bytes (transport.md §2, §6).
const (
	TypeJSON          byte = 0x00 // both: a NIP-01 message as JSON text
	TypeEvent         byte = 0x01 // client → relay: EVENT, one event record
	TypeAuth          byte = 0x02 // client → relay: AUTH, one event record
	TypeRelayEventV1  byte = 0x03 // relay → client, version 1 only
	TypeOK            byte = 0x04 // relay → client: OK
	TypeEOSE          byte = 0x05 // relay → client: EOSE
	TypeBatch         byte = 0x06 // relay → client: the events of one subscription
	TypeDictionarySet byte = 0x07 // relay → client: the relay's dictionary set
	TypeHold          byte = 0x08 // client → relay: the sets the client holds
)

// Sizes and limits of transport.md §6–§8.
const (
	// MaxSubscriptionIDBytes is the longest subscription id of a frame.
	MaxSubscriptionIDBytes = 64
	// BatchRecordBytes is how many bytes of records a relay puts in one
	// batch of stored results (a larger record goes alone).
	BatchRecordBytes = 64 << 10
	// MaxHeldSets is the most set hashes a 0x08 frame names.
	MaxHeldSets = 8
	// minBatchEntry is the smallest batch entry: a length and a compressed
	// record header with a one-byte payload.
	minBatchEntry = 5
)

// Limits are the decoder's limits; start from DefaultLimits.
type Limits struct {
	// Record limits apply to records, decompressed sizes and JSON bodies.
	Record nwb.Limits
	// MaxBatchRecords caps the records of one batch.
	MaxBatchRecords int
	// MaxBatchFrameBytes caps the bytes of one batch frame.
	MaxBatchFrameBytes int
}

// DefaultLimits are transport.md §8's defaults (those of
// vectors/wire/transport.json).
var DefaultLimits = Limits{
	Record:             nwb.DefaultLimits,
	MaxBatchRecords:    4096,
	MaxBatchFrameBytes: 2 << 20,
}

// RelayFrame is a decoded relay → client frame. Which fields are set
// depends on Type. Byte slices point into the decoded frame.
type RelayFrame struct {
	Type byte
	// JSON is the NIP-01 message of a TypeJSON frame (valid UTF-8).
	JSON []byte
	// SubscriptionID of a TypeEOSE or TypeBatch frame.
	SubscriptionID string
	// EventID, Accepted and Message of a TypeOK frame.
	EventID  [32]byte
	Accepted bool
	Message  string
	// Records of a TypeBatch frame, as stored: event records (already
	// checked as nwb.Check does) or compressed records (header checked;
	// nwb.Decompressor reads them).
	Records [][]byte
	// Set of a TypeDictionarySet frame: the SHA-256 of the relay's set,
	// when HasSet (an empty frame: the relay compresses with no set).
	Set    [32]byte
	HasSet bool
}

// DecodeRelayFrame decodes a relay → client frame of a nostrwire.v2
// connection. It never panics and checks every count and length before it
// allocates or loops.
func DecodeRelayFrame(frame []byte, lim Limits) (RelayFrame, error) {
	var f RelayFrame
	if len(frame) == 0 {
		return f, nwb.Err(nwb.Truncated)
	}
	f.Type = frame[0]
	body := frame[1:]
	var err error
	switch f.Type {
	case TypeJSON:
		f.JSON, err = jsonBody(body, lim)
	case TypeOK:
		if len(body) < 33 {
			return f, nwb.Err(nwb.Truncated)
		}
		copy(f.EventID[:], body)
		switch body[32] {
		case 0:
		case 1:
			f.Accepted = true
		default:
			return f, nwb.Err(nwb.NonCanonicalFlag)
		}
		msg := body[33:]
		if len(msg) > lim.Record.MaxStringBytes {
			return f, nwb.Err(nwb.StringTooLarge)
		}
		if !utf8.Valid(msg) {
			return f, nwb.Err(nwb.InvalidUTF8)
		}
		f.Message = string(msg)
	case TypeEOSE:
		f.SubscriptionID, err = subscriptionID(body)
	case TypeBatch:
		if len(frame) > lim.MaxBatchFrameBytes {
			return f, nwb.Err(nwb.BatchTooLarge)
		}
		if len(body) == 0 {
			return f, nwb.Err(nwb.Truncated)
		}
		n := int(body[0])
		if len(body)-1 < n {
			return f, nwb.Err(nwb.Truncated)
		}
		if f.SubscriptionID, err = subscriptionID(body[1 : 1+n]); err != nil {
			return f, err
		}
		f.Records, err = batchRecords(body[1+n:], lim)
	case TypeDictionarySet:
		switch len(body) {
		case 0:
		case 32:
			copy(f.Set[:], body)
			f.HasSet = true
		default:
			return f, nwb.Err(nwb.BadDictionaryHash)
		}
	default:
		return f, nwb.Err(nwb.UnknownMessage)
	}
	return f, err
}

func jsonBody(body []byte, lim Limits) ([]byte, error) {
	if len(body) > lim.Record.MaxRecordBytes {
		return nil, nwb.Err(nwb.RecordTooLarge)
	}
	if !utf8.Valid(body) {
		return nil, nwb.Err(nwb.InvalidUTF8)
	}
	return body, nil
}

func subscriptionID(b []byte) (string, error) {
	if len(b) == 0 || len(b) > MaxSubscriptionIDBytes {
		return "", nwb.Err(nwb.BadSubscriptionID)
	}
	if !utf8.Valid(b) {
		return "", nwb.Err(nwb.InvalidUTF8)
	}
	return string(b), nil
}

// batchRecords checks a batch body after the subscription id: the count
// against the limit and the bytes left, then every entry.
func batchRecords(body []byte, lim Limits) ([][]byte, error) {
	pos := 0
	n, err := nwb.ReadUvarint(body, &pos)
	if err != nil {
		return nil, err
	}
	if n == 0 {
		return nil, nwb.Err(nwb.Truncated)
	}
	if n > uint64(lim.MaxBatchRecords) || n > uint64((len(body)-pos)/minBatchEntry) {
		return nil, nwb.Err(nwb.TooManyRecords)
	}
	records := make([][]byte, n)
	for i := range records {
		l, err := nwb.ReadUvarint(body, &pos)
		if err != nil {
			return nil, err
		}
		if l > uint64(lim.Record.MaxRecordBytes) {
			return nil, nwb.Err(nwb.RecordTooLarge)
		}
		if l > uint64(len(body)-pos) {
			return nil, nwb.Err(nwb.Truncated)
		}
		rec := body[pos : pos+int(l)]
		pos += int(l)
		if len(rec) == 0 {
			return nil, nwb.Err(nwb.Truncated)
		}
		switch rec[0] {
		case nwb.FormEvent:
			if err := nwb.Check(rec, lim.Record); err != nil {
				return nil, err
			}
		case nwb.FormCompressed:
			_, _, payload, err := nwb.CompressedHeader(rec, lim.Record)
			if err != nil {
				return nil, err
			}
			if payload >= len(rec) {
				return nil, nwb.Err(nwb.Truncated)
			}
		default:
			return nil, nwb.Err(nwb.BadVersion)
		}
		records[i] = rec
	}
	if pos != len(body) {
		return nil, nwb.Err(nwb.TrailingBytes)
	}
	return records, nil
}

// ClientFrame is a decoded client → relay frame.
type ClientFrame struct {
	Type byte
	// JSON is the NIP-01 message of a TypeJSON frame (valid UTF-8).
	JSON []byte
	// Record and Event of a TypeEvent or TypeAuth frame: the event record
	// and the event it holds (id and signature not yet checked: see
	// nwb.Verify).
	Record []byte
	Event  *nostr.Event
	// Hold lists the sets of a TypeHold frame (empty: none).
	Hold [][32]byte
}

// DecodeClientFrame decodes a client → relay frame of a nostrwire.v2
// connection. It never panics.
func DecodeClientFrame(frame []byte, lim Limits) (ClientFrame, error) {
	var f ClientFrame
	if len(frame) == 0 {
		return f, nwb.Err(nwb.Truncated)
	}
	f.Type = frame[0]
	body := frame[1:]
	var err error
	switch f.Type {
	case TypeJSON:
		f.JSON, err = jsonBody(body, lim)
	case TypeEvent, TypeAuth:
		f.Record = body
		f.Event, err = nwb.Decode(body, lim.Record)
	case TypeHold:
		if len(body)%32 != 0 || len(body)/32 > MaxHeldSets {
			return f, nwb.Err(nwb.BadDictionaryHash)
		}
		f.Hold = make([][32]byte, len(body)/32)
		for i := range f.Hold {
			copy(f.Hold[i][:], body[32*i:])
		}
	default:
		return f, nwb.Err(nwb.UnknownMessage)
	}
	return f, err
}

// AppendJSON appends a TypeJSON frame carrying a NIP-01 message.
func AppendJSON(dst []byte, message []byte) []byte {
	return append(append(dst, TypeJSON), message...)
}

// AppendEvent appends a client's EVENT frame of an event record.
func AppendEvent(dst []byte, record []byte) []byte {
	return append(append(dst, TypeEvent), record...)
}

// AppendAuth appends a client's AUTH frame of an event record (kind 22242).
func AppendAuth(dst []byte, record []byte) []byte {
	return append(append(dst, TypeAuth), record...)
}

// AppendOK appends a relay's OK frame.
func AppendOK(dst []byte, id [32]byte, accepted bool, message string) []byte {
	dst = append(dst, TypeOK)
	dst = append(dst, id[:]...)
	flag := byte(0)
	if accepted {
		flag = 1
	}
	return append(append(dst, flag), message...)
}

// AppendEOSE appends a relay's EOSE frame; the id must be 1–64 bytes
// (BadSubscriptionID).
func AppendEOSE(dst []byte, subscriptionID string) ([]byte, error) {
	if len(subscriptionID) == 0 || len(subscriptionID) > MaxSubscriptionIDBytes {
		return dst, nwb.Err(nwb.BadSubscriptionID)
	}
	return append(append(dst, TypeEOSE), subscriptionID...), nil
}

// AppendBatch appends a relay's batch frame of stored records (at least
// one) for a subscription. A relay puts up to BatchRecordBytes of records in
// a batch of stored results.
func AppendBatch(dst []byte, subscriptionID string, records [][]byte) ([]byte, error) {
	if len(subscriptionID) == 0 || len(subscriptionID) > MaxSubscriptionIDBytes {
		return dst, nwb.Err(nwb.BadSubscriptionID)
	}
	if len(records) == 0 {
		return dst, nwb.Err(nwb.Truncated)
	}
	dst = append(dst, TypeBatch, byte(len(subscriptionID)))
	dst = append(dst, subscriptionID...)
	dst = nwb.AppendUvarint(dst, uint64(len(records)))
	for _, r := range records {
		dst = nwb.AppendUvarint(dst, uint64(len(r)))
		dst = append(dst, r...)
	}
	return dst, nil
}

// AppendDictionarySet appends a relay's dictionary set frame; nil: the
// relay compresses with no set.
func AppendDictionarySet(dst []byte, set *[32]byte) []byte {
	dst = append(dst, TypeDictionarySet)
	if set != nil {
		dst = append(dst, set[:]...)
	}
	return dst
}

// AppendHold appends a client's frame naming the sets it holds (at most
// MaxHeldSets; none withdraws what it said before).
func AppendHold(dst []byte, sets [][32]byte) ([]byte, error) {
	if len(sets) > MaxHeldSets {
		return dst, nwb.Err(nwb.BadDictionaryHash)
	}
	dst = append(dst, TypeHold)
	for _, s := range sets {
		dst = append(dst, s[:]...)
	}
	return dst, nil
}
