package nwb

import (
	"sync/atomic"

	"github.com/btcsuite/btcd/btcec/v2"
)

// A public key that signs many of the events a verifier sees gets a table
// of its multiples, d·16^i·P for every 4-bit digit d and window i, in affine
// coordinates: e·P is then at most 64 mixed additions instead of a full
// scalar multiplication (about 128 doublings and 40 additions), which is
// most of the cost of a BIP-340 verification.
const (
	tableWindows = 64
	// tableAfter is how many signatures a key has before it gets a table
	// (building one costs about as much as seven verifications).
	tableAfter = 8
	// maxTables caps the tables of one verifier (115 KiB each).
	maxTables = 256
)

type keyTable [tableWindows][15]btcec.JacobianPoint

// key is a cached public key: its point and, once it is used enough, its table.
type key struct {
	point    btcec.JacobianPoint
	uses     atomic.Int32
	building atomic.Bool
	table    atomic.Pointer[keyTable]
}

// newKeyTable computes the table of p (normalized, affine).
func newKeyTable(p *btcec.JacobianPoint) *keyTable {
	t := new(keyTable)
	var q btcec.JacobianPoint
	q.Set(p)
	for i := range tableWindows {
		t[i][0].Set(&q)
		for d := 1; d < 15; d++ {
			btcec.AddNonConst(&t[i][d-1], &q, &t[i][d])
		}
		for range 4 {
			btcec.DoubleNonConst(&q, &q)
		}
	}
	toAffine(t)
	return t
}

// toAffine converts every point of t to Z = 1 with one field inversion
// (Montgomery's trick). No point of a table is infinity: d·16^i < n.
func toAffine(t *keyTable) {
	const n = tableWindows * 15
	var prefix [n]btcec.FieldVal
	var acc btcec.FieldVal
	acc.SetInt(1)
	for k := range n {
		p := &t[k/15][k%15]
		p.X.Normalize()
		p.Y.Normalize()
		p.Z.Normalize()
		prefix[k].Set(&acc)
		acc.Mul(&p.Z).Normalize()
	}
	inv := acc
	inv.Inverse().Normalize()
	for k := n - 1; k >= 0; k-- {
		p := &t[k/15][k%15]
		var zInv, zInv2, zInv3 btcec.FieldVal
		zInv.Mul2(&inv, &prefix[k]).Normalize()
		inv.Mul(&p.Z).Normalize()
		zInv2.SquareVal(&zInv).Normalize()
		zInv3.Mul2(&zInv2, &zInv).Normalize()
		p.X.Mul(&zInv2).Normalize()
		p.Y.Mul(&zInv3).Normalize()
		p.Z.SetInt(1)
	}
}

// mul sets r = e·P from the table of P.
func (t *keyTable) mul(e *btcec.ModNScalar, r *btcec.JacobianPoint) {
	b := e.Bytes()
	r.X.Zero()
	r.Y.Zero()
	r.Z.Zero()
	for i := range tableWindows {
		digit := b[31-i/2]
		if i%2 == 1 {
			digit >>= 4
		}
		digit &= 0x0f
		if digit != 0 {
			btcec.AddNonConst(r, &t[i][digit-1], r)
		}
	}
}
