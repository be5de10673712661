package nwb

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"

	"github.com/btcsuite/btcd/btcec/v2/schnorr"
	"github.com/nbd-wtf/go-nostr"
)

// AppendCanonical appends the serialization whose SHA-256 is the id of ev
// (NIP-01: [0,pubkey,created_at,kind,tags,content], with the escaping rule
// of spec/nwb.md §1: \" \\ \b \t \n \f \r, \u00xx for the other control
// characters, everything else verbatim).
func AppendCanonical(dst []byte, ev *nostr.Event) []byte {
	dst = append(dst, `[0,"`...)
	dst = append(dst, ev.PubKey...)
	dst = append(dst, `",`...)
	dst = strconv.AppendInt(dst, int64(ev.CreatedAt), 10)
	dst = append(dst, ',')
	dst = strconv.AppendInt(dst, int64(ev.Kind), 10)
	dst = append(dst, ",["...)
	for i, tag := range ev.Tags {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, '[')
		for j, v := range tag {
			if j > 0 {
				dst = append(dst, ',')
			}
			dst = appendQuoted(dst, v)
		}
		dst = append(dst, ']')
	}
	dst = append(dst, "],"...)
	dst = appendQuoted(dst, ev.Content)
	return append(dst, ']')
}

func appendQuoted(dst []byte, s string) []byte {
	const digits = "0123456789abcdef"
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		dst = append(dst, s[start:i]...)
		switch c {
		case '"', '\\':
			dst = append(dst, '\\', c)
		case '\b':
			dst = append(dst, '\\', 'b')
		case '\t':
			dst = append(dst, '\\', 't')
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\f':
			dst = append(dst, '\\', 'f')
		case '\r':
			dst = append(dst, '\\', 'r')
		default:
			dst = append(dst, '\\', 'u', '0', '0', digits[c>>4], digits[c&15])
		}
		start = i + 1
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// ComputeID returns the SHA-256 of the canonical serialization of ev.
func ComputeID(ev *nostr.Event) [32]byte {
	var buf [1024]byte
	return sha256.Sum256(AppendCanonical(buf[:0], ev))
}

// Verify checks the id of ev against its serialization (IDMismatch) and its
// BIP-340 signature (InvalidPublicKey, InvalidSignature). Ids, pubkeys and
// signatures that are not lowercase hex of the right length are InvalidHex.
func Verify(ev *nostr.Event) error {
	var id [32]byte
	var pk [32]byte
	var sig [64]byte
	if len(ev.ID) != 64 || !compactable(ev.ID) || len(ev.PubKey) != 64 ||
		!compactable(ev.PubKey) || len(ev.Sig) != 128 || !compactable(ev.Sig) {
		return Err(InvalidHex)
	}
	hex.Decode(id[:], []byte(ev.ID))
	hex.Decode(pk[:], []byte(ev.PubKey))
	hex.Decode(sig[:], []byte(ev.Sig))
	if ComputeID(ev) != id {
		return Err(IDMismatch)
	}
	return VerifySignature(id, pk, sig)
}

// VerifySignature checks a BIP-340 signature of the 32-byte message id by
// the x-only public key pk.
func VerifySignature(id, pk [32]byte, sig [64]byte) error {
	key, err := schnorr.ParsePubKey(pk[:])
	if err != nil {
		return Err(InvalidPublicKey)
	}
	s, err := schnorr.ParseSignature(sig[:])
	if err != nil || !s.Verify(id[:], key) {
		return Err(InvalidSignature)
	}
	return nil
}
