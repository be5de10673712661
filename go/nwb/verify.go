package nwb

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/btcsuite/btcd/btcec/v2"
	"github.com/btcsuite/btcd/chaincfg/chainhash"
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
func Verify(ev *nostr.Event) error { return defaultVerifier.Verify(ev) }

// VerifySignature checks a BIP-340 signature of the 32-byte message id by
// the x-only public key pk.
func VerifySignature(id, pk [32]byte, sig [64]byte) error {
	return defaultVerifier.VerifySignature(id, pk, sig)
}

var defaultVerifier = NewVerifier(4096)

// Verifier checks ids and BIP-340 signatures like Verify, keeping the
// curve points of up to a fixed number of recent public keys, so that an
// author's key is lifted onto the curve once rather than twice per event
// (as btcec's schnorr.Verify does), and a table of multiples of the keys
// that sign many events (see keytable.go). It is safe for concurrent use.
type Verifier struct {
	keys   sync.Map // [32]byte -> *key
	n      atomic.Int64
	tables atomic.Int64
	max    int64
}

// NewVerifier returns a verifier that keeps up to maxKeys public keys.
func NewVerifier(maxKeys int) *Verifier { return &Verifier{max: int64(maxKeys)} }

// Verify is the package's Verify with this verifier's key cache.
func (v *Verifier) Verify(ev *nostr.Event) error {
	var id, pk [32]byte
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
	return v.VerifySignature(id, pk, sig)
}

// VerifyRecord checks the event decoded from record (by Decode) against
// the id, pubkey and signature bytes of the record itself.
func (v *Verifier) VerifyRecord(record []byte, ev *nostr.Event) error {
	if len(record) < PrefixLen {
		return Err(Truncated)
	}
	var id, pk [32]byte
	var sig [64]byte
	copy(id[:], record[offID:])
	copy(pk[:], record[offPubKey:])
	copy(sig[:], record[offSig:])
	if ComputeID(ev) != id {
		return Err(IDMismatch)
	}
	return v.VerifySignature(id, pk, sig)
}

// key returns the cached key pk, lifting it onto the curve (BIP-340
// lift_x) the first time.
func (v *Verifier) key(pk [32]byte) (*key, bool) {
	if k, ok := v.keys.Load(pk); ok {
		return k.(*key), true
	}
	var x, y btcec.FieldVal
	if x.SetByteSlice(pk[:]) || !btcec.DecompressY(&x, false, &y) {
		return nil, false
	}
	y.Normalize()
	var one btcec.FieldVal
	one.SetInt(1)
	k := &key{point: btcec.MakeJacobianPoint(&x, &y, &one)}
	if v.n.Add(1) > v.max {
		v.keys.Clear()
		v.n.Store(1)
		v.tables.Store(0)
	}
	v.keys.Store(pk, k)
	return k, true
}

// mulKey sets r = e·P for the cached key k, through its table when it has
// one (and building it once the key has been used often enough).
func (v *Verifier) mulKey(k *key, e *btcec.ModNScalar, r *btcec.JacobianPoint) {
	if t := k.table.Load(); t != nil {
		t.mul(e, r)
		return
	}
	if k.uses.Add(1) >= tableAfter && v.tables.Load() < maxTables && k.building.CompareAndSwap(false, true) {
		v.tables.Add(1)
		t := newKeyTable(&k.point)
		k.table.Store(t)
		t.mul(e, r)
		return
	}
	btcec.ScalarMultNonConst(e, &k.point, r)
}

// VerifySignature checks a BIP-340 signature of the 32-byte message id by
// the x-only public key pk: R = s·G − e·P with e = H(r || pk || id), R not
// infinite, R.y even and R.x = r.
func (v *Verifier) VerifySignature(id, pk [32]byte, sig [64]byte) error {
	k, ok := v.key(pk)
	if !ok {
		return Err(InvalidPublicKey)
	}
	var r btcec.FieldVal
	var s btcec.ModNScalar
	if r.SetByteSlice(sig[:32]) || s.SetByteSlice(sig[32:]) {
		return Err(InvalidSignature)
	}
	var e btcec.ModNScalar
	e.SetBytes((*[32]byte)(chainhash.TaggedHash(chainhash.TagBIP0340Challenge, sig[:32], pk[:], id[:])))
	e.Negate()
	var sG, eP, R btcec.JacobianPoint
	btcec.ScalarBaseMultNonConst(&s, &sG)
	v.mulKey(k, &e, &eP)
	btcec.AddNonConst(&sG, &eP, &R)
	if (R.X.IsZero() && R.Y.IsZero()) || R.Z.IsZero() {
		return Err(InvalidSignature)
	}
	R.ToAffine()
	if R.Y.IsOdd() || !r.Equals(&R.X) {
		return Err(InvalidSignature)
	}
	return nil
}
