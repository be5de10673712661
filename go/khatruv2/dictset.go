package khatruv2

import (
	_ "embed"
	"encoding/hex"
	"os"

	"github.com/nostrwire/nostrwire/go/nwb"
)

//go:embed default.nwbd
var defaultSetFile []byte

// DictSet is a dictionary set file (spec/nwb.md §11.2) as the handler
// serves it and compresses records with it. It is safe for concurrent use.
type DictSet struct {
	file []byte
	set  *nwb.DictSet
	comp *recordCompressor
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

// ParseSet parses a set file; a malformed one is an *nwb.Error of kind
// bad_dictionary_set.
func ParseSet(file []byte) (*DictSet, error) {
	set, err := nwb.ParseDictSet(file)
	if err != nil {
		return nil, err
	}
	comp, err := newRecordCompressor(set)
	if err != nil {
		return nil, err
	}
	return &DictSet{file: file, set: set, comp: comp}, nil
}

// Hash is the SHA-256 of the set file: its name on the wire.
func (s *DictSet) Hash() [32]byte { return s.set.Hash }

// HashHex is Hash as lowercase hex, the name under /dictionaries/.
func (s *DictSet) HashHex() string { return hex.EncodeToString(s.set.Hash[:]) }

// File is the set file's bytes, as served at /dictionaries/<hash>.
func (s *DictSet) File() []byte { return s.file }

// Parsed is the parsed set, for nwb.NewDecompressor and the like.
func (s *DictSet) Parsed() *nwb.DictSet { return s.set }
