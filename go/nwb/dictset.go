package nwb

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
)

// Dictionary set files (nwb.md §11.2).
const (
	setMagic   = "NWBD"
	setVersion = 1
	// MaxDictionaryBytes caps one dictionary of a set file.
	MaxDictionaryBytes = 16 << 20
	// MaxSetDictionaries caps the dictionaries of one set: one per kind
	// plus the fallback.
	MaxSetDictionaries = 1<<16 + 1
	zstdDictMagic      = 0xEC30A437
)

// Dictionary is one zstd dictionary of a set.
type Dictionary struct {
	// ID names the dictionary in compressed records (1 .. 2^32 − 1).
	ID uint32
	// Kind is the event kind the dictionary is for; Fallback marks the
	// dictionary for every other kind.
	Kind     uint16
	Fallback bool
	// Data is the zstd dictionary (zstd's trained format).
	Data []byte
	// zstd is Data with the dictionary's set id written into its zstd
	// header (nil for a raw-content dictionary); frames handed to the zstd
	// library name that id.
	zstd []byte
}

// DictSet is a parsed dictionary set file. It is immutable and named by the
// SHA-256 of its exact bytes.
type DictSet struct {
	// Hash is the SHA-256 of the set file.
	Hash [32]byte
	// Level is the zstd level the writer of the set uses (1 to 19).
	Level int
	// Dictionaries in file order.
	Dictionaries []Dictionary

	byID     map[uint32]int
	byKind   map[uint16]int
	fallback int
}

// ParseDictSet checks and parses a dictionary set file. Every violation of
// nwb.md §11.2 is BadDictionarySet, as is a dictionary that is not a zstd
// dictionary. The set keeps slices of file.
func ParseDictSet(file []byte) (*DictSet, error) {
	bad := func(detail string) (*DictSet, error) {
		return nil, &Error{Kind: BadDictionarySet, Detail: detail}
	}
	if len(file) < 6 || string(file[:4]) != setMagic {
		return bad("no NWBD magic")
	}
	if file[4] != setVersion {
		return bad("unknown set file version")
	}
	level := int(int8(file[5]))
	if level < 1 || level > 19 {
		return bad("level outside 1..19")
	}
	pos := 6
	count, err := ReadUvarint(file, &pos)
	if err != nil {
		return bad("count: " + err.Error())
	}
	// An entry takes at least three bytes (id, kind, length).
	if count > MaxSetDictionaries || count > uint64(len(file)-pos)/3 {
		return bad("count larger than the file can hold")
	}
	set := &DictSet{
		Hash:         sha256.Sum256(file),
		Level:        level,
		Dictionaries: make([]Dictionary, 0, count),
		byID:         make(map[uint32]int, count),
		byKind:       make(map[uint16]int, count),
		fallback:     -1,
	}
	for range count {
		id, err := ReadUvarint(file, &pos)
		if err != nil || id == 0 || id > 1<<32-1 {
			return bad("dictionary id")
		}
		kind, err := ReadUvarint(file, &pos)
		if err != nil || kind > 1<<16 {
			return bad("dictionary kind")
		}
		n, err := readLen(file, &pos, MaxDictionaryBytes, BadDictionarySet)
		if err != nil {
			return bad("dictionary length")
		}
		data := file[pos : pos+n]
		pos += n
		if _, dup := set.byID[uint32(id)]; dup {
			return bad("duplicate dictionary id")
		}
		if len(data) == 0 {
			return bad("empty dictionary")
		}
		d := Dictionary{ID: uint32(id), Data: data}
		if len(data) >= 8 && binary.LittleEndian.Uint32(data) == zstdDictMagic {
			d.zstd = bytes.Clone(data)
			binary.LittleEndian.PutUint32(d.zstd[4:], d.ID)
		}
		idx := len(set.Dictionaries)
		if kind == 0 {
			if set.fallback >= 0 {
				return bad("two fallback dictionaries")
			}
			d.Fallback = true
			set.fallback = idx
		} else {
			d.Kind = uint16(kind - 1)
			if _, dup := set.byKind[d.Kind]; dup {
				return bad("two dictionaries for one kind")
			}
			set.byKind[d.Kind] = idx
		}
		set.byID[d.ID] = idx
		set.Dictionaries = append(set.Dictionaries, d)
	}
	if pos != len(file) {
		return bad("bytes after the last dictionary")
	}
	return set, nil
}

// ForKind returns the dictionary a writer uses for kind: the kind's own, else
// the fallback, else nil.
func (s *DictSet) ForKind(kind uint16) *Dictionary {
	if i, ok := s.byKind[kind]; ok {
		return &s.Dictionaries[i]
	}
	if s.fallback >= 0 {
		return &s.Dictionaries[s.fallback]
	}
	return nil
}

// ByID returns the dictionary with set id id, or nil.
func (s *DictSet) ByID(id uint32) *Dictionary {
	if i, ok := s.byID[id]; ok {
		return &s.Dictionaries[i]
	}
	return nil
}

// MarshalDictSet writes a set file (nwb.md §11.2) of dicts at level; the
// inverse of ParseDictSet, for tests and tools.
func MarshalDictSet(level int, dicts []Dictionary) []byte {
	var b bytes.Buffer
	b.WriteString(setMagic)
	b.WriteByte(setVersion)
	b.WriteByte(byte(int8(level)))
	out := AppendUvarint(b.Bytes(), uint64(len(dicts)))
	for _, d := range dicts {
		out = AppendUvarint(out, uint64(d.ID))
		k := uint64(0)
		if !d.Fallback {
			k = uint64(d.Kind) + 1
		}
		out = AppendUvarint(out, k)
		out = AppendUvarint(out, uint64(len(d.Data)))
		out = append(out, d.Data...)
	}
	return out
}
