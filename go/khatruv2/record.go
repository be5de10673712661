package khatruv2

import (
	"encoding/binary"
	"encoding/hex"
	"unicode/utf8"

	"github.com/nbd-wtf/go-nostr"
)

// nwb event records (spec/nwb.md §3–§9): what the handler needs to send
// khatru's events and to read the EVENT and AUTH records of v2 clients.

const (
	formEvent      = 0x01
	formCompressed = 0x81
	recordPrefix   = 139
	maxCreatedAt   = 1<<53 - 1
)

// Limits bound what a decoder accepts (spec/nwb.md §9).
type Limits struct {
	MaxRecordBytes int
	MaxTags        int
	MaxTagElements int
	MaxStringBytes int
}

// DefaultLimits are nwb's default policy limits.
var DefaultLimits = Limits{
	MaxRecordBytes: 1 << 20,
	MaxTags:        20_000,
	MaxTagElements: 1_000,
	MaxStringBytes: 1 << 20,
}

// WireError is a refused record or frame; Kind is one of nwb's stable
// error kinds (spec/nwb.md §12).
type WireError struct {
	Kind string
}

func (e *WireError) Error() string { return e.Kind }

func wireErr(kind string) error { return &WireError{Kind: kind} }

func appendVarint(dst []byte, v uint64) []byte {
	return binary.AppendUvarint(dst, v)
}

// readVarint reads a minimal LEB128 varint at *pos.
func readVarint(b []byte, pos *int) (uint64, error) {
	var v uint64
	for i := 0; i < 10; i++ {
		if *pos >= len(b) {
			return 0, wireErr("truncated")
		}
		c := b[*pos]
		*pos++
		if i == 9 && c > 1 {
			return 0, wireErr("varint_overflow")
		}
		v |= uint64(c&0x7f) << (7 * i)
		if c < 0x80 {
			if i > 0 && c == 0 {
				return 0, wireErr("overlong_varint")
			}
			return v, nil
		}
	}
	return 0, wireErr("varint_overflow")
}

// isCompactHex reports whether a tag value is stored as hex bytes (§6).
func isCompactHex(s string) bool {
	if len(s) == 0 || len(s)%2 != 0 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

func appendElement(dst []byte, s string) []byte {
	if isCompactHex(s) {
		n := len(s) / 2
		if n == 32 {
			dst = append(dst, 0x01)
		} else {
			dst = appendVarint(dst, uint64(n)<<1|1)
		}
		dst, _ = hex.AppendDecode(dst, []byte(s))
		return dst
	}
	dst = appendVarint(dst, uint64(len(s))<<1)
	return append(dst, s...)
}

func appendTag(dst []byte, tag nostr.Tag) []byte {
	e := uint64(len(tag))
	if len(tag[0]) == 1 {
		dst = appendVarint(dst, e<<1|1)
		dst = append(dst, tag[0][0])
	} else {
		dst = appendVarint(dst, e<<1)
		dst = appendElement(dst, tag[0])
	}
	for _, v := range tag[1:] {
		dst = appendElement(dst, v)
	}
	return dst
}

// AppendRecord appends the nwb record of evt to dst. The event's id,
// pubkey and sig must be lowercase hex of 32, 32 and 64 bytes, its tags
// non-empty, its strings UTF-8 and within limits.
func AppendRecord(dst []byte, evt *nostr.Event, limits Limits) ([]byte, error) {
	start := len(dst)
	if evt.Kind < 0 || evt.Kind > 0xffff {
		return dst, wireErr("kind_out_of_range")
	}
	if evt.CreatedAt > maxCreatedAt {
		return dst, wireErr("timestamp_out_of_range")
	}
	if len(evt.Tags) > limits.MaxTags {
		return dst, wireErr("too_many_tags")
	}
	if len(evt.Content) > limits.MaxStringBytes {
		return dst, wireErr("string_too_large")
	}
	dst = append(dst, formEvent)
	dst = binary.LittleEndian.AppendUint16(dst, uint16(evt.Kind))
	dst = binary.LittleEndian.AppendUint64(dst, uint64(evt.CreatedAt))
	var err error
	if dst, err = appendFixedHex(dst, evt.PubKey, 32); err != nil {
		return dst[:start], err
	}
	if dst, err = appendFixedHex(dst, evt.ID, 32); err != nil {
		return dst[:start], err
	}
	if dst, err = appendFixedHex(dst, evt.Sig, 64); err != nil {
		return dst[:start], err
	}
	// The tag block goes to a scratch area after dst, then behind its length.
	tags := appendVarint(nil, uint64(len(evt.Tags)))
	for _, tag := range evt.Tags {
		if len(tag) == 0 {
			return dst[:start], wireErr("empty_tag")
		}
		if len(tag) > limits.MaxTagElements {
			return dst[:start], wireErr("too_many_tag_elements")
		}
		for _, v := range tag {
			if len(v) > limits.MaxStringBytes {
				return dst[:start], wireErr("string_too_large")
			}
			if !utf8.ValidString(v) {
				return dst[:start], wireErr("invalid_utf8")
			}
		}
		if len(tag[0]) == 1 && tag[0][0] > 0x7f {
			return dst[:start], wireErr("invalid_utf8")
		}
		tags = appendTag(tags, tag)
	}
	if !utf8.ValidString(evt.Content) {
		return dst[:start], wireErr("invalid_utf8")
	}
	dst = appendVarint(dst, uint64(len(tags)))
	dst = append(dst, tags...)
	dst = appendVarint(dst, uint64(len(evt.Content)))
	dst = append(dst, evt.Content...)
	if len(dst)-start > limits.MaxRecordBytes {
		return dst[:start], wireErr("record_too_large")
	}
	return dst, nil
}

func appendFixedHex(dst []byte, s string, n int) ([]byte, error) {
	if len(s) != 2*n || !isCompactHex(s) {
		return dst, wireErr("bad_hex_field")
	}
	return hex.AppendDecode(dst, []byte(s))
}

// DecodeRecord decodes an uncompressed nwb record into an event, checking
// every count and length against limits before it is used. It never
// panics; a refused record is a *WireError. The id and signature are
// carried, not checked.
func DecodeRecord(b []byte, limits Limits) (*nostr.Event, error) {
	if len(b) == 0 {
		return nil, wireErr("truncated")
	}
	if b[0] != formEvent {
		return nil, wireErr("bad_version")
	}
	if len(b) > limits.MaxRecordBytes {
		return nil, wireErr("record_too_large")
	}
	if len(b) < recordPrefix {
		return nil, wireErr("truncated")
	}
	createdAt := binary.LittleEndian.Uint64(b[3:11])
	if createdAt > maxCreatedAt {
		return nil, wireErr("timestamp_out_of_range")
	}
	evt := &nostr.Event{
		Kind:      int(binary.LittleEndian.Uint16(b[1:3])),
		CreatedAt: nostr.Timestamp(createdAt),
		PubKey:    hex.EncodeToString(b[11:43]),
		ID:        hex.EncodeToString(b[43:75]),
		Sig:       hex.EncodeToString(b[75:139]),
	}
	pos := recordPrefix
	tagLen, err := readVarint(b, &pos)
	if err != nil {
		return nil, err
	}
	if tagLen > uint64(len(b)-pos) {
		return nil, wireErr("truncated")
	}
	block := b[pos : pos+int(tagLen)]
	pos += int(tagLen)
	if evt.Tags, err = decodeTags(block, limits); err != nil {
		return nil, err
	}
	contentLen, err := readVarint(b, &pos)
	if err != nil {
		return nil, err
	}
	if contentLen > uint64(limits.MaxStringBytes) {
		return nil, wireErr("string_too_large")
	}
	if contentLen > uint64(len(b)-pos) {
		return nil, wireErr("truncated")
	}
	if contentLen < uint64(len(b)-pos) {
		return nil, wireErr("trailing_bytes")
	}
	content := b[pos:]
	if !utf8.Valid(content) {
		return nil, wireErr("invalid_utf8")
	}
	evt.Content = string(content)
	return evt, nil
}

func decodeTags(block []byte, limits Limits) (nostr.Tags, error) {
	pos := 0
	n, err := readVarint(block, &pos)
	if err != nil {
		return nil, mismatchIfTruncated(err)
	}
	if n > uint64(limits.MaxTags) {
		return nil, wireErr("too_many_tags")
	}
	if n > uint64(len(block)-pos)/2 {
		return nil, wireErr("tag_block_mismatch")
	}
	tags := make(nostr.Tags, 0, n)
	for i := uint64(0); i < n; i++ {
		h, err := readVarint(block, &pos)
		if err != nil {
			return nil, mismatchIfTruncated(err)
		}
		e := h >> 1
		if e == 0 {
			return nil, wireErr("empty_tag")
		}
		if e > uint64(limits.MaxTagElements) {
			return nil, wireErr("too_many_tag_elements")
		}
		if e > uint64(len(block)-pos) {
			return nil, wireErr("tag_block_mismatch")
		}
		tag := make(nostr.Tag, 0, e)
		first := uint64(0)
		if h&1 == 1 {
			if pos >= len(block) {
				return nil, wireErr("tag_block_mismatch")
			}
			c := block[pos]
			pos++
			if c > 0x7f {
				return nil, wireErr("invalid_utf8")
			}
			tag = append(tag, string([]byte{c}))
			first = 1
		}
		for j := first; j < e; j++ {
			v, err := decodeElement(block, &pos, limits)
			if err != nil {
				return nil, err
			}
			if j == 0 && len(v) == 1 {
				return nil, wireErr("non_canonical_name")
			}
			tag = append(tag, v)
		}
		tags = append(tags, tag)
	}
	if pos != len(block) {
		return nil, wireErr("tag_block_mismatch")
	}
	return tags, nil
}

func mismatchIfTruncated(err error) error {
	if we, ok := err.(*WireError); ok && we.Kind == "truncated" {
		return wireErr("tag_block_mismatch")
	}
	return err
}

func decodeElement(block []byte, pos *int, limits Limits) (string, error) {
	h, err := readVarint(block, pos)
	if err != nil {
		return "", mismatchIfTruncated(err)
	}
	l := h >> 1
	if h&1 == 1 {
		switch {
		case l == 0:
			l = 32
		case l == 32:
			return "", wireErr("non_canonical_hex")
		}
		if l > uint64(limits.MaxStringBytes/2) {
			return "", wireErr("string_too_large")
		}
		if l > uint64(len(block)-*pos) {
			return "", wireErr("tag_block_mismatch")
		}
		s := hex.EncodeToString(block[*pos : *pos+int(l)])
		*pos += int(l)
		return s, nil
	}
	if l > uint64(limits.MaxStringBytes) {
		return "", wireErr("string_too_large")
	}
	if l > uint64(len(block)-*pos) {
		return "", wireErr("tag_block_mismatch")
	}
	v := block[*pos : *pos+int(l)]
	*pos += int(l)
	if !utf8.Valid(v) {
		return "", wireErr("invalid_utf8")
	}
	s := string(v)
	if isCompactHex(s) {
		return "", wireErr("non_canonical_hex")
	}
	return s, nil
}
