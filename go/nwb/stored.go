package nwb

import (
	"encoding/binary"
	"sync"

	"github.com/klauspost/compress/zstd"
)

// zstd frame header bits (RFC 8878 §3.1.1.1.1).
const (
	zstdMagic        = 0xFD2FB528
	fhdDictIDMask    = 0x03
	fhdChecksum      = 0x04
	fhdReserved      = 0x08
	fhdSingleSegment = 0x20
	fhdFCSMask       = 0xC0
	// maxZstdWindow caps the window a compressed record's frame may
	// declare (records are at most a few MiB; libzstd's writers size the
	// window to the record).
	maxZstdWindow = 16 << 20
)

// Decompressor turns stored records (raw or compressed, nwb.md §11) back
// into event records. It is safe for concurrent use.
type Decompressor struct {
	lim   Limits
	dec   *zstd.Decoder
	known map[uint32]bool
}

// NewDecompressor returns a decompressor for records compressed without a
// dictionary and with the dictionaries of sets. Dictionary ids are distinct
// among the sets of one relay (transport.md §6.2); when two sets share an
// id, the first set's dictionary is used. Decompressed sizes are checked
// against lim.MaxRecordBytes before allocating.
func NewDecompressor(lim Limits, sets ...*DictSet) (*Decompressor, error) {
	opts := []zstd.DOption{
		zstd.WithDecoderConcurrency(0),
		zstd.WithDecoderMaxMemory(maxZstdWindow),
		zstd.WithDecoderMaxWindow(maxZstdWindow),
		zstd.WithDecodeAllCapLimit(true),
		zstd.WithDecoderLowmem(false),
	}
	known := map[uint32]bool{}
	for _, s := range sets {
		if s == nil {
			continue
		}
		for _, d := range s.Dictionaries {
			if known[d.ID] {
				continue
			}
			known[d.ID] = true
			if d.zstd != nil {
				opts = append(opts, zstd.WithDecoderDicts(d.zstd))
			} else {
				opts = append(opts, zstd.WithDecoderDictRaw(d.ID, d.Data))
			}
		}
	}
	dec, err := zstd.NewReader(nil, opts...)
	if err != nil {
		return nil, &Error{Kind: BadDictionarySet, Detail: err.Error()}
	}
	return &Decompressor{lim: lim, dec: dec, known: known}, nil
}

// Close releases the decoder's resources.
func (d *Decompressor) Close() { d.dec.Close() }

// CompressedHeader reads the header of a compressed record: its dictionary
// id, the length of the event record inside (checked against
// lim.MaxRecordBytes: RecordTooLarge) and where the zstd payload starts.
func CompressedHeader(stored []byte, lim Limits) (dict uint64, size int, payload int, err error) {
	if len(stored) == 0 {
		return 0, 0, 0, Err(Truncated)
	}
	if stored[0] != FormCompressed {
		return 0, 0, 0, Err(BadVersion)
	}
	pos := 1
	id, err := ReadUvarint(stored, &pos)
	if err != nil {
		return 0, 0, 0, err
	}
	n, err := ReadUvarint(stored, &pos)
	if err != nil {
		return 0, 0, 0, err
	}
	if n > uint64(lim.MaxRecordBytes) {
		return 0, 0, 0, Err(RecordTooLarge)
	}
	return id, int(n), pos, nil
}

var framePool = sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}

// Record returns the event record held by stored: stored itself when it is
// a raw record (not checked here: decode it), else the decompressed record,
// written to buf when it fits in cap(buf) and to a new slice otherwise. The
// record still has to be decoded.
func (d *Decompressor) Record(stored []byte, buf []byte) ([]byte, error) {
	if len(stored) == 0 || stored[0] != FormCompressed {
		return stored, nil
	}
	id, size, pos, err := CompressedHeader(stored, d.lim)
	if err != nil {
		return nil, err
	}
	if id != 0 && (id > 1<<32-1 || !d.known[uint32(id)]) {
		return nil, Err(UnknownDictionary)
	}
	payload := stored[pos:]
	if len(payload) == 0 {
		return nil, Err(Decompress)
	}
	fhd := payload[0]
	// nwb.md §11: no checksum and no dictionary id in the frame; refusing
	// them keeps every reader accepting the same bytes.
	if fhd&(fhdChecksum|fhdDictIDMask|fhdReserved) != 0 {
		return nil, Err(Decompress)
	}
	fp := framePool.Get().(*[]byte)
	defer framePool.Put(fp)
	frame := binary.LittleEndian.AppendUint32((*fp)[:0], zstdMagic)
	if id == 0 {
		frame = append(frame, payload...)
	} else {
		// The frame names the dictionary by its set id, under which the
		// decoder holds it.
		frame = append(frame, fhd|0x03)
		rest := payload[1:]
		if fhd&fhdSingleSegment == 0 {
			if len(rest) == 0 {
				return nil, Err(Decompress)
			}
			frame = append(frame, rest[0])
			rest = rest[1:]
		}
		frame = binary.LittleEndian.AppendUint32(frame, uint32(id))
		frame = append(frame, rest...)
	}
	*fp = frame
	var out []byte
	if cap(buf) >= size && size > 0 {
		out = buf[:0:size]
	} else {
		out = make([]byte, 0, size)
	}
	out, err = d.dec.DecodeAll(frame, out)
	if err != nil || len(out) != size {
		return nil, Err(Decompress)
	}
	if out[0] != FormEvent {
		return nil, Err(BadVersion)
	}
	return out, nil
}

// Compressor writes the stored form of event records (nwb.md §11) with the
// dictionaries of a set. It is safe for concurrent use.
type Compressor struct {
	set   *DictSet
	level zstd.EncoderLevel
	mu    sync.Mutex
	encs  map[uint32]*zstd.Encoder // by set id; 0 is no dictionary
}

// NewCompressor returns a compressor for set; with a nil set, records are
// compressed without a dictionary at zstd level 3.
func NewCompressor(set *DictSet) *Compressor {
	level := 3
	if set != nil {
		level = set.Level
	}
	return &Compressor{set: set, level: zstd.EncoderLevelFromZstd(level), encs: map[uint32]*zstd.Encoder{}}
}

// Set returns the compressor's set (nil for none).
func (c *Compressor) Set() *DictSet { return c.set }

func (c *Compressor) encoder(d *Dictionary) (*zstd.Encoder, error) {
	var id uint32
	if d != nil {
		id = d.ID
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e := c.encs[id]; e != nil {
		return e, nil
	}
	opts := []zstd.EOption{
		zstd.WithEncoderLevel(c.level),
		zstd.WithEncoderCRC(false),
		zstd.WithSingleSegment(false),
		zstd.WithWindowSize(1 << 20),
		zstd.WithEncoderConcurrency(4),
		zstd.WithZeroFrames(true),
		// Records are small: without this, the faster levels store most
		// literals raw and compress little.
		zstd.WithAllLitEntropyCompression(true),
	}
	switch {
	case d == nil:
	case d.zstd != nil:
		opts = append(opts, zstd.WithEncoderDict(d.zstd))
	default:
		opts = append(opts, zstd.WithEncoderDictRaw(d.ID, d.Data))
	}
	e, err := zstd.NewWriter(nil, opts...)
	if err != nil {
		return nil, &Error{Kind: BadDictionarySet, Detail: err.Error()}
	}
	c.encs[id] = e
	return e, nil
}

// AppendStored appends the stored form of record to dst: a compressed
// record with the dictionary of the record's kind (else the fallback, else
// none) when that is smaller, else the record itself. record must be an
// event record (its form byte and prefix are checked).
func (c *Compressor) AppendStored(dst, record []byte) ([]byte, error) {
	kind, err := PeekKind(record)
	if err != nil {
		return dst, err
	}
	var d *Dictionary
	if c.set != nil {
		d = c.set.ForKind(kind)
	}
	enc, err := c.encoder(d)
	if err != nil {
		return dst, err
	}
	var id uint32
	if d != nil {
		id = d.ID
	}
	start := len(dst)
	dst = append(dst, FormCompressed)
	dst = AppendUvarint(dst, uint64(id))
	dst = AppendUvarint(dst, uint64(len(record)))

	fp := framePool.Get().(*[]byte)
	defer framePool.Put(fp)
	frame := enc.EncodeAll(record, (*fp)[:0])
	*fp = frame
	dst, ok := appendMagicless(dst, frame)
	if !ok || len(dst)-start >= len(record) {
		return append(dst[:start], record...), nil
	}
	return dst, nil
}

// appendMagicless appends a zstd frame without its magic number, dictionary
// id, content size and checksum (nwb.md §11).
func appendMagicless(dst, frame []byte) ([]byte, bool) {
	if len(frame) < 6 || binary.LittleEndian.Uint32(frame) != zstdMagic {
		return dst, false
	}
	fhd := frame[4]
	if fhd&fhdChecksum != 0 {
		return dst, false
	}
	pos := 5
	var window []byte
	if fhd&fhdSingleSegment == 0 {
		window = frame[pos : pos+1]
		pos++
	}
	pos += [4]int{0, 1, 2, 4}[fhd&fhdDictIDMask]
	fcsLen := [4]int{0, 2, 4, 8}[fhd>>6]
	if fhd>>6 == 0 && fhd&fhdSingleSegment != 0 {
		fcsLen = 1
	}
	if pos+fcsLen > len(frame) {
		return dst, false
	}
	if window == nil {
		// A single-segment frame's window is its content size; without the
		// size, declare a window that covers it.
		var size uint64
		switch fcsLen {
		case 1:
			size = uint64(frame[pos])
		case 2:
			size = uint64(binary.LittleEndian.Uint16(frame[pos:])) + 256
		case 4:
			size = uint64(binary.LittleEndian.Uint32(frame[pos:]))
		case 8:
			size = binary.LittleEndian.Uint64(frame[pos:])
		}
		exp := 0
		for uint64(1)<<(10+exp) < size {
			exp++
		}
		window = []byte{byte(exp << 3)}
	}
	pos += fcsLen
	dst = append(dst, 0)
	dst = append(dst, window...)
	return append(dst, frame[pos:]...), true
}
