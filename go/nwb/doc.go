// Package nwb reads and writes nwb, the nostrwire binary event format
// (spec/nwb.md): one canonical record per event, converted to and from
// go-nostr's nostr.Event without loss; the stored form, compressed with
// zstd dictionary sets (Compressor, Decompressor, DictSet); and the id and
// BIP-340 signature check (Verify).
//
// Decoders never panic on hostile bytes and check every count and length
// against Limits before they allocate or loop. Every error is an *Error
// whose Kind has the stable names of spec/nwb.md §12, the same as the Rust
// codec's and the golden vectors' in vectors/.
package nwb
