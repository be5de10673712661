package nwb

import (
	"encoding/binary"
	"encoding/hex"
	"unicode/utf8"

	"github.com/nbd-wtf/go-nostr"
)

// Form bytes of nwb.md §2.
const (
	// FormEvent is the first byte of an event record, format version 1.
	FormEvent byte = 0x01
	// FormCompressed is the first byte of a compressed record, envelope
	// version 1 (nwb.md §11).
	FormCompressed byte = 0x81
)

// Fixed layout of an event record (nwb.md §3).
const (
	offKind      = 1
	offCreatedAt = 3
	offPubKey    = 11
	offID        = 43
	offSig       = 75
	// PrefixLen is the length of the fixed prefix of an event record.
	PrefixLen = 139
	// MinRecordLen is the length of the smallest event record (no tags,
	// empty content).
	MinRecordLen = PrefixLen + 3
	// MaxCreatedAt is the largest created_at a record holds, 2^53 − 1.
	MaxCreatedAt = 1<<53 - 1
)

// Decode checks that record is the one canonical nwb event record of an
// event (nwb.md §3–§9) under lim and returns the event. The id and signature
// are copied as claimed; Verify checks them.
func Decode(record []byte, lim Limits) (*nostr.Event, error) {
	ev := new(nostr.Event)
	if err := DecodeInto(ev, record, lim); err != nil {
		return nil, err
	}
	return ev, nil
}

// DecodeInto is Decode into an existing event, whose fields it overwrites.
func DecodeInto(ev *nostr.Event, record []byte, lim Limits) error {
	return decode(ev, record, lim)
}

// Check is Decode without building the event: it accepts exactly the
// records Decode accepts, with the same error kinds, and allocates nothing.
func Check(record []byte, lim Limits) error {
	return decode(nil, record, lim)
}

// decode checks record and, when ev is not nil, fills it.
func decode(ev *nostr.Event, record []byte, lim Limits) error {
	if len(record) > lim.MaxRecordBytes {
		return Err(RecordTooLarge)
	}
	if len(record) == 0 {
		return Err(Truncated)
	}
	if record[0] != FormEvent {
		return Err(BadVersion)
	}
	if len(record) < PrefixLen {
		return Err(Truncated)
	}
	createdAt := binary.LittleEndian.Uint64(record[offCreatedAt:])
	if createdAt > MaxCreatedAt {
		return Err(TimestampOutOfRange)
	}
	pos := PrefixLen
	blockLen, err := ReadUvarint(record, &pos)
	if err != nil {
		return err
	}
	if blockLen > uint64(len(record)-pos) {
		return Err(Truncated)
	}
	block := record[:pos+int(blockLen)]
	tags, err := decodeTags(block, &pos, lim, ev != nil)
	if err != nil {
		// Inside the block, running out of bytes means the block length
		// was wrong.
		if KindOf(err) == Truncated {
			return Err(TagBlockMismatch)
		}
		return err
	}
	contentLen, err := ReadUvarint(record, &pos)
	if err != nil {
		return err
	}
	if contentLen > uint64(lim.MaxStringBytes) {
		return Err(StringTooLarge)
	}
	switch rest := uint64(len(record) - pos); {
	case contentLen > rest:
		return Err(Truncated)
	case contentLen < rest:
		return Err(TrailingBytes)
	}
	content := record[pos:]
	if !utf8.Valid(content) {
		return Err(InvalidUTF8)
	}
	if ev == nil {
		return nil
	}
	ev.ID = hex.EncodeToString(record[offID : offID+32])
	ev.PubKey = hex.EncodeToString(record[offPubKey : offPubKey+32])
	ev.Sig = hex.EncodeToString(record[offSig : offSig+64])
	ev.CreatedAt = nostr.Timestamp(createdAt)
	ev.Kind = int(binary.LittleEndian.Uint16(record[offKind:]))
	ev.Tags = tags
	ev.Content = string(content)
	return nil
}

// decodeTags reads the tag count and the tags of block from *pos, which
// must end exactly at the end of block; it builds them only when build.
func decodeTags(block []byte, pos *int, lim Limits, build bool) (nostr.Tags, error) {
	count, err := ReadUvarint(block, pos)
	if err != nil {
		return nil, err
	}
	if count > uint64(lim.MaxTags) {
		return nil, Err(TooManyTags)
	}
	// A tag takes at least two bytes: its header and one element.
	if count > uint64((len(block)-*pos)/2) {
		return nil, Err(TagBlockMismatch)
	}
	var tags nostr.Tags
	if build {
		tags = make(nostr.Tags, count)
	}
	for i := range int(count) {
		header, err := ReadUvarint(block, pos)
		if err != nil {
			return nil, err
		}
		n := header >> 1
		if n == 0 {
			return nil, Err(EmptyTag)
		}
		if n > uint64(lim.MaxTagElements) {
			return nil, Err(TooManyTagElements)
		}
		// An element takes at least one byte.
		if n > uint64(len(block)-*pos) {
			return nil, Err(Truncated)
		}
		var tag nostr.Tag
		if build {
			tag = make(nostr.Tag, n)
		}
		first := 0
		if header&1 == 1 {
			name := block[*pos]
			if name >= 0x80 {
				return nil, Err(InvalidUTF8)
			}
			if build {
				tag[0] = asciiByte[name]
			}
			*pos++
			first = 1
		}
		for j := first; j < int(n); j++ {
			s, textLen, err := decodeElement(block, pos, lim, build)
			if err != nil {
				return nil, err
			}
			if j == 0 && textLen == 1 {
				return nil, Err(NonCanonicalName)
			}
			if build {
				tag[j] = s
			}
		}
		if build {
			tags[i] = tag
		}
	}
	if *pos != len(block) {
		return nil, Err(TagBlockMismatch)
	}
	return tags, nil
}

// asciiByte holds the one-byte strings, so short names allocate nothing.
var asciiByte = func() (t [128]string) {
	for i := range t {
		t[i] = string(rune(i))
	}
	return
}()

// decodeElement reads one tag element (nwb.md §6) and returns it (when
// build) with its text length, -1 for a hex element.
func decodeElement(block []byte, pos *int, lim Limits, build bool) (s string, textLen int, err error) {
	header, err := ReadUvarint(block, pos)
	if err != nil {
		return "", 0, err
	}
	n := header >> 1
	left := uint64(len(block) - *pos)
	if header&1 == 1 {
		switch n {
		case 0:
			n = 32
		case 32:
			return "", 0, Err(NonCanonicalHex)
		}
		if n > uint64(lim.MaxStringBytes/2) {
			return "", 0, Err(StringTooLarge)
		}
		if n > left {
			return "", 0, Err(Truncated)
		}
		if build {
			s = hex.EncodeToString(block[*pos : *pos+int(n)])
		}
		*pos += int(n)
		return s, -1, nil
	}
	if n > uint64(lim.MaxStringBytes) {
		return "", 0, Err(StringTooLarge)
	}
	if n > left {
		return "", 0, Err(Truncated)
	}
	b := block[*pos : *pos+int(n)]
	if !utf8.Valid(b) {
		return "", 0, Err(InvalidUTF8)
	}
	if compactable(b) {
		return "", 0, Err(NonCanonicalHex)
	}
	*pos += int(n)
	if !build {
		return "", len(b), nil
	}
	if len(b) == 1 && b[0] < 0x80 {
		return asciiByte[b[0]], 1, nil
	}
	return string(b), len(b), nil
}

// compactable is the rule of nwb.md §6: a non-empty, even-length value of
// only 0-9a-f is stored as hex bytes.
func compactable[S ~string | ~[]byte](v S) bool {
	if len(v) == 0 || len(v)%2 != 0 {
		return false
	}
	for i := 0; i < len(v); i++ {
		c := v[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// AppendEvent appends the nwb event record of ev to dst (nwb.md §3). It
// refuses an event a decoder under lim would refuse (with the decoder's
// kind), ids, pubkeys and signatures that are not lowercase hex of 32, 32
// and 64 bytes (InvalidHex), kinds outside 0..65535 (KindOutOfRange),
// created_at outside 0..2^53 − 1 (TimestampOutOfRange), empty tags
// (EmptyTag) and strings that are not UTF-8 (InvalidUTF8). On error dst is
// returned unchanged in length.
func AppendEvent(dst []byte, ev *nostr.Event, lim Limits) ([]byte, error) {
	start := len(dst)
	out, err := appendEvent(dst, ev, lim)
	if err != nil {
		return dst[:start], err
	}
	if len(out)-start > lim.MaxRecordBytes {
		return dst[:start], Err(RecordTooLarge)
	}
	return out, nil
}

func appendEvent(dst []byte, ev *nostr.Event, lim Limits) ([]byte, error) {
	if ev.Kind < 0 || ev.Kind > 0xffff {
		return dst, Err(KindOutOfRange)
	}
	if ev.CreatedAt < 0 || ev.CreatedAt > MaxCreatedAt {
		return dst, Err(TimestampOutOfRange)
	}
	if len(ev.Tags) > lim.MaxTags {
		return dst, Err(TooManyTags)
	}
	if len(ev.Content) > lim.MaxStringBytes {
		return dst, Err(StringTooLarge)
	}
	if !utf8.ValidString(ev.Content) {
		return dst, Err(InvalidUTF8)
	}
	dst = append(dst, FormEvent, byte(ev.Kind), byte(ev.Kind>>8))
	dst = binary.LittleEndian.AppendUint64(dst, uint64(ev.CreatedAt))
	var err error
	for _, f := range [...]struct {
		s string
		n int
	}{{ev.PubKey, 32}, {ev.ID, 32}, {ev.Sig, 64}} {
		if dst, err = appendFixedHex(dst, f.s, f.n); err != nil {
			return dst, err
		}
	}
	// The tag block goes after its length, which is known only once it is
	// written: write it after a one-byte placeholder and move it when the
	// length takes more bytes.
	lenAt := len(dst)
	dst = append(dst, 0)
	blockStart := len(dst)
	dst = AppendUvarint(dst, uint64(len(ev.Tags)))
	for _, tag := range ev.Tags {
		if dst, err = appendTag(dst, tag, lim); err != nil {
			return dst, err
		}
	}
	blockLen := len(dst) - blockStart
	if extra := UvarintLen(uint64(blockLen)) - 1; extra > 0 {
		dst = append(dst, make([]byte, extra)...)
		copy(dst[blockStart+extra:], dst[blockStart:blockStart+blockLen])
	}
	AppendUvarint(dst[lenAt:lenAt], uint64(blockLen))
	dst = AppendUvarint(dst, uint64(len(ev.Content)))
	return append(dst, ev.Content...), nil
}

func appendFixedHex(dst []byte, s string, n int) ([]byte, error) {
	if len(s) != 2*n || !compactable(s) {
		return dst, Err(InvalidHex)
	}
	start := len(dst)
	dst = append(dst, make([]byte, n)...)
	if _, err := hex.Decode(dst[start:], []byte(s)); err != nil {
		return dst, Err(InvalidHex)
	}
	return dst, nil
}

func appendTag(dst []byte, tag nostr.Tag, lim Limits) ([]byte, error) {
	if len(tag) == 0 {
		return dst, Err(EmptyTag)
	}
	if len(tag) > lim.MaxTagElements {
		return dst, Err(TooManyTagElements)
	}
	short := len(tag[0]) == 1 && tag[0][0] < 0x80
	h := uint64(len(tag)) << 1
	if short {
		h |= 1
	}
	dst = AppendUvarint(dst, h)
	rest := tag
	if short {
		dst = append(dst, tag[0][0])
		rest = tag[1:]
	}
	for _, v := range rest {
		if len(v) > lim.MaxStringBytes {
			return dst, Err(StringTooLarge)
		}
		if compactable(v) {
			n := len(v) / 2
			if n == 32 {
				dst = append(dst, 0x01)
			} else {
				dst = AppendUvarint(dst, uint64(n)<<1|1)
			}
			start := len(dst)
			dst = append(dst, make([]byte, n)...)
			hex.Decode(dst[start:], []byte(v))
			continue
		}
		if !utf8.ValidString(v) {
			return dst, Err(InvalidUTF8)
		}
		dst = AppendUvarint(dst, uint64(len(v))<<1)
		dst = append(dst, v...)
	}
	return dst, nil
}

// Encode returns the nwb event record of ev; see AppendEvent.
func Encode(ev *nostr.Event, lim Limits) ([]byte, error) {
	return AppendEvent(make([]byte, 0, PrefixLen+16+len(ev.Content)+64*len(ev.Tags)), ev, lim)
}

// PeekKind returns the kind of an event record after checking its form byte
// and prefix length, without decoding the rest.
func PeekKind(record []byte) (uint16, error) {
	if len(record) == 0 {
		return 0, Err(Truncated)
	}
	if record[0] != FormEvent {
		return 0, Err(BadVersion)
	}
	if len(record) < PrefixLen {
		return 0, Err(Truncated)
	}
	return binary.LittleEndian.Uint16(record[offKind:]), nil
}

// RecordID returns the claimed id of an event record (unchecked) after
// checking its form byte and prefix length.
func RecordID(record []byte) (id [32]byte, err error) {
	if _, err = PeekKind(record); err != nil {
		return id, err
	}
	copy(id[:], record[offID:offID+32])
	return id, nil
}
