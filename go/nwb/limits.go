package nwb

// Limits are the policy limits of nwb.md §9, checked before a length is used
// to slice or allocate. The zero value is not useful: start from
// DefaultLimits.
type Limits struct {
	// MaxRecordBytes caps a record, a stream frame and a decompressed record.
	MaxRecordBytes int
	// MaxTags caps the number of tags of an event.
	MaxTags int
	// MaxTagElements caps the elements of one tag, its name included.
	MaxTagElements int
	// MaxStringBytes caps a text element, a hex element's text length
	// (2 × its bytes) and the content.
	MaxStringBytes int
}

// DefaultLimits are the defaults of nwb.md §9; they agree with the Rust codec.
var DefaultLimits = Limits{
	MaxRecordBytes: 1 << 20,
	MaxTags:        20_000,
	MaxTagElements: 1_000,
	MaxStringBytes: 1 << 20,
}
