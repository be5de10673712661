package nwb

import "fmt"

// Kind is the stable kind of an error. Its String form is the snake_case
// name used by spec/nwb.md §12, the golden vectors in vectors/ and the Rust
// codec; names are never changed and new kinds may be added.
type Kind uint8

// The error kinds. The first block is nwb.md §12 (records, compressed
// records, dictionary sets and transport frames); the second is the event
// layer (converting a go-nostr event, checking its id and signature).
const (
	// Truncated: the input ends inside a field, a length or the fixed prefix.
	Truncated Kind = iota + 1
	// OverlongVarint: a varint is not minimal.
	OverlongVarint
	// VarintOverflow: a varint does not fit in 64 bits.
	VarintOverflow
	// BadVersion: an unknown first byte (or an envelope inside an envelope).
	BadVersion
	// InvalidUTF8: a text element, a short name or the content is not UTF-8.
	InvalidUTF8
	// NonCanonicalHex: a compactable value stored as text, or 32 hex bytes
	// in the general form.
	NonCanonicalHex
	// NonCanonicalName: a one-byte tag name not in the short form.
	NonCanonicalName
	// EmptyTag: a tag with no elements.
	EmptyTag
	// TagBlockMismatch: the tags do not end exactly at the end of the tag block.
	TagBlockMismatch
	// TrailingBytes: bytes after the content (or after a frame's value).
	TrailingBytes
	// TimestampOutOfRange: created_at negative or above 2^53 − 1.
	TimestampOutOfRange
	// RecordTooLarge: a record, frame or decompressed record above the limit.
	RecordTooLarge
	// TooManyTags: more tags than the limit.
	TooManyTags
	// TooManyTagElements: a tag with more elements than the limit.
	TooManyTagElements
	// StringTooLarge: a string longer than the limit.
	StringTooLarge
	// UnknownDictionary: a compressed record names a dictionary the reader lacks.
	UnknownDictionary
	// Decompress: an invalid zstd payload or a wrong decompressed size.
	Decompress
	// BadDictionarySet: a malformed dictionary set file.
	BadDictionarySet
	// UnknownMessage: a transport frame that is empty or has an unknown type
	// byte (for its direction and version).
	UnknownMessage
	// BadSubscriptionID: a transport subscription id that is empty, over 64
	// bytes or not UTF-8.
	BadSubscriptionID
	// NonCanonicalFlag: a transport flag byte other than 0 or 1.
	NonCanonicalFlag
	// TooManyRecords: a transport batch claims more records than the limit,
	// or than its bytes can hold.
	TooManyRecords
	// BatchTooLarge: a transport batch frame larger than the limit.
	BatchTooLarge
	// BadDictionaryHash: a list of dictionary set hashes that is not whole
	// 32-byte hashes, or names too many.
	BadDictionaryHash

	// InvalidHex: an event's id, pubkey or sig is not lowercase hex of the
	// right length (encoding a go-nostr event).
	InvalidHex
	// KindOutOfRange: an event kind outside 0..65535.
	KindOutOfRange
	// IDMismatch: the id is not the SHA-256 of the event's canonical serialization.
	IDMismatch
	// InvalidSignature: the BIP-340 signature does not verify.
	InvalidSignature
	// InvalidPublicKey: the pubkey is not an x coordinate on secp256k1.
	InvalidPublicKey
)

var kindNames = [...]string{
	Truncated:           "truncated",
	OverlongVarint:      "overlong_varint",
	VarintOverflow:      "varint_overflow",
	BadVersion:          "bad_version",
	InvalidUTF8:         "invalid_utf8",
	NonCanonicalHex:     "non_canonical_hex",
	NonCanonicalName:    "non_canonical_name",
	EmptyTag:            "empty_tag",
	TagBlockMismatch:    "tag_block_mismatch",
	TrailingBytes:       "trailing_bytes",
	TimestampOutOfRange: "timestamp_out_of_range",
	RecordTooLarge:      "record_too_large",
	TooManyTags:         "too_many_tags",
	TooManyTagElements:  "too_many_tag_elements",
	StringTooLarge:      "string_too_large",
	UnknownDictionary:   "unknown_dictionary",
	Decompress:          "decompress",
	BadDictionarySet:    "bad_dictionary_set",
	UnknownMessage:      "unknown_message",
	BadSubscriptionID:   "bad_subscription_id",
	NonCanonicalFlag:    "non_canonical_flag",
	TooManyRecords:      "too_many_records",
	BatchTooLarge:       "batch_too_large",
	BadDictionaryHash:   "bad_dictionary_hash",
	InvalidHex:          "invalid_hex",
	KindOutOfRange:      "kind_out_of_range",
	IDMismatch:          "id_mismatch",
	InvalidSignature:    "invalid_signature",
	InvalidPublicKey:    "invalid_public_key",
}

// String returns the stable snake_case name of the kind.
func (k Kind) String() string {
	if int(k) < len(kindNames) && kindNames[k] != "" {
		return kindNames[k]
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// Error is the error of every function in this package and of the transport
// package. Compare kinds with errors.As and Kind, or with KindOf.
type Error struct {
	Kind Kind
	// Detail is an optional human-readable addition; it is not stable.
	Detail string
}

func (e *Error) Error() string {
	if e.Detail != "" {
		return "nwb: " + e.Kind.String() + ": " + e.Detail
	}
	return "nwb: " + e.Kind.String()
}

// Is reports whether target is an *Error of the same kind, so that
// errors.Is(err, &nwb.Error{Kind: nwb.Truncated}) works.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Kind == e.Kind
}

// KindOf returns the kind of err when it is (or wraps) an *Error, else 0.
func KindOf(err error) Kind {
	for err != nil {
		if e, ok := err.(*Error); ok {
			return e.Kind
		}
		u, ok := err.(interface{ Unwrap() error })
		if !ok {
			return 0
		}
		err = u.Unwrap()
	}
	return 0
}

// The errors without detail are preallocated: decoders return them without
// allocating.
var plain [len(kindNames)]*Error

func init() {
	for k := range plain {
		plain[k] = &Error{Kind: Kind(k)}
	}
}

// Err returns the error of kind k without detail.
func Err(k Kind) *Error {
	if int(k) < len(plain) {
		return plain[k]
	}
	return &Error{Kind: k}
}
