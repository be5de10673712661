package khatruv2

import (
	"crypto/sha256"
	_ "embed"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math/bits"
	"os"

	"github.com/klauspost/compress/zstd"
)

// Dictionary sets (spec/nwb.md §11.2) and compressed records (§11).

const (
	zstdDictMagic = "\x37\xa4\x30\xec"
	maxDictBytes  = 16 << 20
	maxSetLevel   = 19
)

var zstdFrameMagic = []byte{0x28, 0xb5, 0x2f, 0xfd}

//go:embed default.nwbd
var defaultSetFile []byte

// DictSet is a parsed dictionary set file with the compressors for its
// dictionaries. It is safe for concurrent use.
type DictSet struct {
	file   []byte
	hash   [32]byte
	level  int
	byID   map[uint32]*dictionary
	byKind map[int]*dictionary
	// fallback is the set's dictionary for kinds without their own (nil: none).
	fallback *dictionary
	// plain compresses records with no dictionary (id 0).
	plain *zstd.Encoder
}

type dictionary struct {
	id     uint32
	raw    []byte
	zstdID uint32
	enc    *zstd.Encoder
}

// DefaultSet is the dictionary set shipped with the package: per-kind
// dictionaries for the common kinds, trained with `nostrwire dict train
// --per-kind` on generated events (see go/README.md). A relay whose events
// differ from that mix compresses better with a set trained on its own.
func DefaultSet() (*DictSet, error) { return ParseSet(defaultSetFile) }

// LoadSet reads and parses a set file, such as one written by
// `nostrwire dict train`.
func LoadSet(path string) (*DictSet, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return ParseSet(b)
}

// ParseSet parses a dictionary set file. A malformed file is a *WireError
// of kind bad_dictionary_set.
func ParseSet(file []byte) (*DictSet, error) {
	bad := wireErr("bad_dictionary_set")
	if len(file) < 6 || string(file[:4]) != "NWBD" || file[4] != 0x01 {
		return nil, bad
	}
	level := int(int8(file[5]))
	if level < 1 || level > maxSetLevel {
		return nil, bad
	}
	s := &DictSet{
		file:   file,
		hash:   sha256.Sum256(file),
		level:  level,
		byID:   map[uint32]*dictionary{},
		byKind: map[int]*dictionary{},
	}
	pos := 6
	count, err := readVarint(file, &pos)
	if err != nil || count > uint64(len(file)-pos)/3 {
		return nil, bad
	}
	encLevel := zstd.EncoderLevelFromZstd(level)
	for i := uint64(0); i < count; i++ {
		id, err1 := readVarint(file, &pos)
		sel, err2 := readVarint(file, &pos)
		length, err3 := readVarint(file, &pos)
		if err1 != nil || err2 != nil || err3 != nil || id == 0 || id > 1<<32-1 ||
			sel > 1<<16 || length > maxDictBytes || length > uint64(len(file)-pos) || length < 8 {
			return nil, bad
		}
		raw := file[pos : pos+int(length)]
		pos += int(length)
		if string(raw[:4]) != zstdDictMagic {
			return nil, bad
		}
		d := &dictionary{id: uint32(id), raw: raw, zstdID: binary.LittleEndian.Uint32(raw[4:8])}
		if _, dup := s.byID[d.id]; dup {
			return nil, bad
		}
		d.enc, err = zstd.NewWriter(nil, zstd.WithEncoderDict(raw), zstd.WithEncoderLevel(encLevel),
			zstd.WithEncoderCRC(false), zstd.WithEncoderConcurrency(1), zstd.WithLowerEncoderMem(true))
		if err != nil {
			return nil, bad
		}
		s.byID[d.id] = d
		if sel == 0 {
			if s.fallback != nil {
				return nil, bad
			}
			s.fallback = d
		} else {
			if _, dup := s.byKind[int(sel-1)]; dup {
				return nil, bad
			}
			s.byKind[int(sel-1)] = d
		}
	}
	if pos != len(file) {
		return nil, bad
	}
	s.plain, err = zstd.NewWriter(nil, zstd.WithEncoderLevel(encLevel), zstd.WithEncoderCRC(false),
		zstd.WithEncoderConcurrency(1), zstd.WithLowerEncoderMem(true))
	if err != nil {
		return nil, err
	}
	return s, nil
}

// Hash is the SHA-256 of the set file: its name on the wire.
func (s *DictSet) Hash() [32]byte { return s.hash }

// HashHex is Hash as lowercase hex, the name under /dictionaries/.
func (s *DictSet) HashHex() string { return hex.EncodeToString(s.hash[:]) }

// File is the set file's bytes, as served at /dictionaries/<hash>.
func (s *DictSet) File() []byte { return s.file }

func (s *DictSet) forKind(kind int) *dictionary {
	if d, ok := s.byKind[kind]; ok {
		return d
	}
	return s.fallback
}

// AppendCompressed appends the stored form of an event record: a
// compressed record (0x81) with the kind's dictionary when that is
// smaller, else the record itself. Safe for concurrent use.
func (s *DictSet) AppendCompressed(dst, record []byte, kind int) []byte {
	d := s.forKind(kind)
	enc, id := s.plain, uint32(0)
	if d != nil {
		enc, id = d.enc, d.id
	}
	start := len(dst)
	dst = append(dst, formCompressed)
	dst = appendVarint(dst, uint64(id))
	dst = appendVarint(dst, uint64(len(record)))
	frame := enc.EncodeAll(record, nil)
	dst, ok := appendMagicless(dst, frame, len(record))
	if !ok || len(dst)-start >= len(record) {
		return append(dst[:start], record...)
	}
	return dst
}

// appendMagicless rewrites a zstd frame from the encoder into nwb's form:
// no magic, no checksum, no dictionary id, no content size (spec/nwb.md §11).
func appendMagicless(dst, frame []byte, size int) ([]byte, bool) {
	if len(frame) < 6 || string(frame[:4]) != string(zstdFrameMagic) {
		return dst, false
	}
	fhd := frame[4]
	pos := 5
	single := fhd&0x20 != 0
	if fhd&0x04 != 0 {
		return dst, false
	}
	var wd byte
	if single {
		windowLog := bits.Len(uint(size - 1))
		if windowLog < 10 {
			windowLog = 10
		}
		wd = byte(windowLog-10) << 3
	} else {
		wd = frame[pos]
		pos++
	}
	pos += [4]int{0, 1, 2, 4}[fhd&0x03]
	fcs := [4]int{0, 2, 4, 8}[fhd>>6]
	if fhd>>6 == 0 && single {
		fcs = 1
	}
	pos += fcs
	if pos > len(frame) {
		return dst, false
	}
	dst = append(dst, 0x00, wd)
	return append(dst, frame[pos:]...), true
}

// Decompressor reads stored records (raw or compressed with a set) back
// into event records, with the announced size checked against the limit
// before anything is allocated.
type Decompressor struct {
	set   *DictSet
	plain *zstd.Decoder
	byID  map[uint32]*zstd.Decoder
	limit int
}

// NewDecompressor reads records compressed without a dictionary or with one of set's (set may be nil).
func NewDecompressor(set *DictSet, limits Limits) (*Decompressor, error) {
	opts := []zstd.DOption{zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(uint64(limits.MaxRecordBytes)),
		zstd.WithDecodeAllCapLimit(true), zstd.WithDecoderMaxWindow(8 << 20)}
	d := &Decompressor{set: set, byID: map[uint32]*zstd.Decoder{}, limit: limits.MaxRecordBytes}
	var err error
	if d.plain, err = zstd.NewReader(nil, opts...); err != nil {
		return nil, err
	}
	if set != nil {
		for id, dict := range set.byID {
			dec, err := zstd.NewReader(nil, append(opts, zstd.WithDecoderDicts(dict.raw))...)
			if err != nil {
				return nil, err
			}
			d.byID[id] = dec
		}
	}
	return d, nil
}

// Record returns the event record held by a stored record: stored itself
// when it is not compressed. Errors are *WireError (decompress,
// unknown_dictionary, record_too_large, bad_version, ...).
func (d *Decompressor) Record(stored []byte) ([]byte, error) {
	if len(stored) == 0 || stored[0] != formCompressed {
		return stored, nil
	}
	pos := 1
	id, err := readVarint(stored, &pos)
	if err != nil {
		return nil, err
	}
	size, err := readVarint(stored, &pos)
	if err != nil {
		return nil, err
	}
	if size > uint64(d.limit) {
		return nil, wireErr("record_too_large")
	}
	if pos >= len(stored) || stored[pos]&0x04 != 0 || stored[pos]&0x03 != 0 {
		return nil, wireErr("decompress")
	}
	dec, zstdID := d.plain, uint32(0)
	if id != 0 {
		dec = d.byID[uint32(min(id, 1<<32-1))]
		if dec == nil {
			return nil, wireErr("unknown_dictionary")
		}
		zstdID = d.set.byID[uint32(id)].zstdID
	}
	// Give the frame back its magic and the dictionary's zstd id.
	fhd := stored[pos]
	frame := append([]byte{}, zstdFrameMagic...)
	if zstdID != 0 {
		fhd |= 0x03
	}
	frame = append(frame, fhd)
	rest := stored[pos+1:]
	if fhd&0x20 == 0 {
		if len(rest) == 0 {
			return nil, wireErr("decompress")
		}
		frame = append(frame, rest[0])
		rest = rest[1:]
	}
	if zstdID != 0 {
		frame = binary.LittleEndian.AppendUint32(frame, zstdID)
	}
	frame = append(frame, rest...)
	out, err := dec.DecodeAll(frame, make([]byte, 0, size))
	if err != nil || uint64(len(out)) != size {
		return nil, wireErr("decompress")
	}
	if len(out) == 0 || out[0] != formEvent {
		return nil, wireErr("bad_version")
	}
	return out, nil
}

func (s *DictSet) String() string { return fmt.Sprintf("dictionary set %s", s.HashHex()) }
