package nwb

import (
	"crypto/sha256"
	"encoding/hex"
	"testing"

	"github.com/btcsuite/btcd/btcec/v2"
)

// bip340Vectors are the verification cases of BIP-340's test-vectors.csv:
// public key, message, signature, whether it verifies.
var bip340Vectors = []struct {
	pk, msg, sig string
	ok           bool
}{
	{"f9308a019258c31049344f85f89d5229b531c845836f99b08601f113bce036f9",
		"0000000000000000000000000000000000000000000000000000000000000000",
		"04e7f9037658a92afeb4f25bae5339e3ddca81a353493827d26f16d92308e49e2a25e92208678a2df86970da91b03a8af8815a8a60498b358daf560b347aa557", true},
	{"f9308a019258c31049344f85f89d5229b531c845836f99b08601f113bce036f9",
		"0000000000000000000000000000000000000000000000000000000000000000",
		"e907831f80848d1069a5371b402410364bdf1c5f8307b0084c55f1ce2dca821525f66a4a85ea8b71e482a74f382d2ce5ebeee8fdb2172f477df4900d310536c0", true},
	{"dff1d77f2a671c5f36183726db2341be58feae1da2deced843240f7b502ba659",
		"243f6a8885a308d313198a2e03707344a4093822299f31d0082efa98ec4e6c89",
		"6896bd60eeae296db48a229ff71dfe071bde413e6d43f917dc8dcf8c78de33418906d11ac976abccb20b091292bff4ea897efcb639ea871cfa95f6de339e4b0a", true},
	{"dd308afec5777e13121fa72b9cc1b7cc0139715309b086c960e18fd969774eb8",
		"7e2d58d8b3bcdf1abadec7829054f90dda9805aab56c77333024b9d0a508b75c",
		"5831aaeed7b44bb74e5eab94ba9d4294c49bcf2a60728d8b4c200f50dd313c1bab745879a5ad954a72c45a91c3a51d3c7adea98d82f8481e0e1e03674a6f3fb7", true},
	{"25d1dff95105f5253c4022f628a996ad3a0d95fbf21d468a1b33f8c160d8f517",
		"ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff",
		"7eb0509757e246f19449885651611cb965ecc1a187dd51b64fda1edc9637d5ec97582b9cb13db3933705b32ba982af5af25fd78881ebb32771fc5922efc66ea3", true},
	{"d69c3509bb99e412e68b0fe8544e72837dfa30746d8be2aa65975f29d22dc7b9",
		"4df3c3f68fcc83b27e9d42c90431a72499f17875c81a599b566c9889b9696703",
		"00000000000000000000003b78ce563f89a0ed9414f5aa28ad0d96d6795f9c6376afb1548af603b3eb45c9f8207dee1060cb71c04e80f593060b07d28308d7f4", true},
	{"eefdea4cdb677750a420fee807eacf21eb9898ae79b9768766e4faa04a2d4a34",
		"243f6a8885a308d313198a2e03707344a4093822299f31d0082efa98ec4e6c89",
		"6cff5c3ba86c69ea4b7376f31a9bcb4f74c1976089b2d9963da2e5543e17776969e89b4c5564d00349106b8497785dd7d1d713a8ae82b32fa79d5f7fc407d39b", false},
	{"dff1d77f2a671c5f36183726db2341be58feae1da2deced843240f7b502ba659",
		"243f6a8885a308d313198a2e03707344a4093822299f31d0082efa98ec4e6c89",
		"fff97bd5755eeea420453a14355235d382f6472f8568a18b2f057a14602975563cc27944640ac607cd107ae10923d9ef7a73c643e166be5ebeafa34b1ac553e2", false},
	{"dff1d77f2a671c5f36183726db2341be58feae1da2deced843240f7b502ba659",
		"243f6a8885a308d313198a2e03707344a4093822299f31d0082efa98ec4e6c89",
		"1fa62e331edbc21c394792d2ab1100a7b432b013df3f6ff4f99fcb33e0e1515f28890b3edb6e7189b630448b515ce4f8622a954cfe545735aaea5134fccdb2bd", false},
	{"dff1d77f2a671c5f36183726db2341be58feae1da2deced843240f7b502ba659",
		"243f6a8885a308d313198a2e03707344a4093822299f31d0082efa98ec4e6c89",
		"6cff5c3ba86c69ea4b7376f31a9bcb4f74c1976089b2d9963da2e5543e177769961764b3aa9b2ffcb6ef947b6887a226e8d7c93e00c5ed0c1834ff0d0c2e6da6", false},
	{"dff1d77f2a671c5f36183726db2341be58feae1da2deced843240f7b502ba659",
		"243f6a8885a308d313198a2e03707344a4093822299f31d0082efa98ec4e6c89",
		"0000000000000000000000000000000000000000000000000000000000000000123dda8328af9c23a94c1feecfd123ba4fb73476f0d594dcb65c6425bd186051", false},
	{"dff1d77f2a671c5f36183726db2341be58feae1da2deced843240f7b502ba659",
		"243f6a8885a308d313198a2e03707344a4093822299f31d0082efa98ec4e6c89",
		"00000000000000000000000000000000000000000000000000000000000000017615fbaf5ae28864013c099742deadb4dba87f11ac6754f93780d5a1837cf197", false},
	{"dff1d77f2a671c5f36183726db2341be58feae1da2deced843240f7b502ba659",
		"243f6a8885a308d313198a2e03707344a4093822299f31d0082efa98ec4e6c89",
		"4a298dacae57395a15d0795ddbfd1dcb564da82b0f269bc70a74f8220429ba1d69e89b4c5564d00349106b8497785dd7d1d713a8ae82b32fa79d5f7fc407d39b", false},
	{"fffffffffffffffffffffffffffffffffffffffffffffffffffffffefffffc30",
		"243f6a8885a308d313198a2e03707344a4093822299f31d0082efa98ec4e6c89",
		"6cff5c3ba86c69ea4b7376f31a9bcb4f74c1976089b2d9963da2e5543e17776969e89b4c5564d00349106b8497785dd7d1d713a8ae82b32fa79d5f7fc407d39b", false},
}

func TestBIP340Vectors(t *testing.T) {
	if len(bip340Vectors) < 14 {
		t.Fatalf("%d vectors", len(bip340Vectors))
	}
	v := NewVerifier(4)
	for i, c := range bip340Vectors {
		var id, pk [32]byte
		var sig [64]byte
		hex.Decode(pk[:], []byte(c.pk))
		hex.Decode(id[:], []byte(c.msg))
		hex.Decode(sig[:], []byte(c.sig))
		// Again and again: from the cache, then through the key's table.
		for range 2 * tableAfter {
			if got := v.VerifySignature(id, pk, sig) == nil; got != c.ok {
				t.Fatalf("vector %d: verified %v, want %v", i, got, c.ok)
			}
		}
	}
	if v.tables.Load() == 0 {
		t.Fatal("no key table was built")
	}
}

// The table path agrees with the scalar multiplication it replaces, for
// random-looking scalars and the corpus's keys.
func TestKeyTable(t *testing.T) {
	v := NewVerifier(64)
	for _, line := range corpusLines(t, 601, 605) {
		ev := parseEvent(t, line)
		var pk [32]byte
		hex.Decode(pk[:], []byte(ev.PubKey))
		k, ok := v.key(pk)
		if !ok {
			t.Fatal("key")
		}
		table := newKeyTable(&k.point)
		for i := range 64 {
			var e btcec.ModNScalar
			h := sha256.Sum256([]byte{byte(i), pk[i%32]})
			e.SetBytes(&h)
			if i == 0 {
				e.SetInt(0)
			}
			var a, b btcec.JacobianPoint
			table.mul(&e, &a)
			btcec.ScalarMultNonConst(&e, &k.point, &b)
			a.ToAffine()
			b.ToAffine()
			if !a.X.Equals(&b.X) || !a.Y.Equals(&b.Y) {
				t.Fatalf("scalar %d differs", i)
			}
		}
	}
}
