package nwb

import (
	"testing"

	"github.com/btcsuite/btcd/btcec/v2/schnorr"
)

// btcecVerify is BIP-340 verification as go-nostr does it.
func btcecVerify(id, pk [32]byte, sig [64]byte) bool {
	key, err := schnorr.ParsePubKey(pk[:])
	if err != nil {
		return false
	}
	s, err := schnorr.ParseSignature(sig[:])
	return err == nil && s.Verify(id[:], key)
}

// FuzzVerifySignature: the verifier agrees with btcec's schnorr.Verify on
// every message, key and signature, real or mutated.
func FuzzVerifySignature(f *testing.F) {
	for _, line := range corpusLines(f, 601, 610) {
		ev := parseEvent(f, line)
		rec, err := Encode(ev, DefaultLimits)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(rec[offID:offID+32], rec[offPubKey:offPubKey+32], rec[offSig:offSig+64])
	}
	v := NewVerifier(16)
	f.Fuzz(func(t *testing.T, id, pk, sig []byte) {
		var i, p [32]byte
		var s [64]byte
		copy(i[:], id)
		copy(p[:], pk)
		copy(s[:], sig)
		want := btcecVerify(i, p, s)
		if got := v.VerifySignature(i, p, s) == nil; got != want {
			t.Fatalf("verifier %v, btcec %v", got, want)
		}
	})
}

func TestVerifierAgreesWithBtcec(t *testing.T) {
	v := NewVerifier(4)
	n := 0
	for _, line := range corpusLines(t, 601, 610) {
		ev := parseEvent(t, line)
		rec, _ := Encode(ev, DefaultLimits)
		id, pk, sig := signed(rec)
		if v.VerifySignature(id, pk, sig) != nil || !btcecVerify(id, pk, sig) {
			t.Fatal("valid signature refused")
		}
		back, _ := Decode(rec, DefaultLimits)
		if err := v.VerifyRecord(rec, back); err != nil {
			t.Fatal(err)
		}
		// Every single-bit change of the message, key or signature.
		for bit := 0; bit < 8*128; bit += 29 {
			i, p, s := id, pk, sig
			switch {
			case bit < 256:
				i[bit/8] ^= 1 << (bit % 8)
			case bit < 512:
				p[bit/8-32] ^= 1 << (bit % 8)
			default:
				s[bit/8-64] ^= 1 << (bit % 8)
			}
			if (v.VerifySignature(i, p, s) == nil) != btcecVerify(i, p, s) {
				t.Fatalf("disagree at bit %d", bit)
			}
			n++
		}
	}
	t.Logf("%d mutations agree", n)
}

// signed returns the id, pubkey and signature of an event record.
func signed(rec []byte) (id, pk [32]byte, sig [64]byte) {
	copy(id[:], rec[offID:])
	copy(pk[:], rec[offPubKey:])
	copy(sig[:], rec[offSig:])
	return id, pk, sig
}

func benchEvent(b *testing.B) ([32]byte, [32]byte, [64]byte) {
	ev := parseEvent(b, corpusLines(b, 601, 601)[0])
	rec, _ := Encode(ev, DefaultLimits)
	return signed(rec)
}

func BenchmarkVerifierKnownKey(b *testing.B) {
	id, pk, sig := benchEvent(b)
	v := NewVerifier(16)
	for b.Loop() {
		if v.VerifySignature(id, pk, sig) != nil {
			b.Fatal("bad")
		}
	}
}

func BenchmarkBtcecSchnorrVerify(b *testing.B) {
	id, pk, sig := benchEvent(b)
	for b.Loop() {
		if !btcecVerify(id, pk, sig) {
			b.Fatal("bad")
		}
	}
}
