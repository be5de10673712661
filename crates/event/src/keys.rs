//! BIP-340 signatures through libsecp256k1, with one global context.

use secp256k1::{schnorr, Keypair, SecretKey, XOnlyPublicKey, SECP256K1};

use crate::error::{Error, ErrorKind};
use crate::types::{EventId, PublicKey, Signature};

/// Verifies a BIP-340 signature of `id` by `pubkey`.
///
/// "Bare" verification is parsing the x-only key (a square root on the
/// curve) and the Schnorr check; the key of a recent author is taken
/// parsed from a cache of this thread instead (`parsed_key`).
pub fn verify_signature(id: &EventId, pubkey: &PublicKey, sig: &Signature) -> Result<(), Error> {
    let key = parsed_key(pubkey)?;
    let sig = schnorr::Signature::from_byte_array(*sig.as_bytes());
    SECP256K1
        .verify_schnorr(&sig, id.as_bytes(), &key)
        .map_err(|_| Error::new(ErrorKind::InvalidSignature).with_field("sig"))
}

/// Slots of each thread's cache of parsed keys: about 100 KiB.
const KEY_CACHE_SLOTS: usize = 1024;

type KeySlot = Option<([u8; 32], XOnlyPublicKey)>;

thread_local! {
    static KEY_CACHE: std::cell::RefCell<Box<[KeySlot]>> =
        std::cell::RefCell::new(vec![None; KEY_CACHE_SLOTS].into_boxed_slice());
}

/// `pubkey` as libsecp256k1's x-only key. Parsing one takes a square root
/// on the curve, a tenth of a verification, and the same authors sign
/// event after event, so each thread keeps the keys it parsed last in a
/// direct-mapped cache: a key's slot comes from its first bytes (uniform
/// for real keys; keys made to share a slot only miss). Keys that do not
/// parse are not kept.
fn parsed_key(pubkey: &PublicKey) -> Result<XOnlyPublicKey, Error> {
    let bytes = pubkey.as_bytes();
    let slot = usize::from(u16::from_le_bytes([bytes[0], bytes[1]])) % KEY_CACHE_SLOTS;
    KEY_CACHE.with(|cache| {
        let mut cache = cache.borrow_mut();
        if let Some((cached, key)) = &cache[slot] {
            if cached == bytes {
                return Ok(*key);
            }
        }
        let key = XOnlyPublicKey::from_byte_array(bytes)
            .map_err(|_| Error::new(ErrorKind::InvalidPublicKey).with_field("pubkey"))?;
        cache[slot] = Some((*bytes, key));
        Ok(key)
    })
}

/// A signing key pair.
#[derive(Clone)]
pub struct Keys {
    keypair: Keypair,
    public: PublicKey,
}

impl std::fmt::Debug for Keys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print the secret.
        f.debug_struct("Keys")
            .field("public", &self.public)
            .finish()
    }
}

impl Keys {
    /// Keys from a 32-byte secret; `None` if it is zero or not below the curve order.
    pub fn from_secret_bytes(secret: [u8; 32]) -> Option<Keys> {
        let secret = SecretKey::from_byte_array(&secret).ok()?;
        let keypair = Keypair::from_secret_key(SECP256K1, &secret);
        let (xonly, _) = keypair.x_only_public_key();
        Some(Keys {
            keypair,
            public: PublicKey::from_bytes(xonly.serialize()),
        })
    }

    /// Deterministic keys derived from a seed and an index (for tests and load generation).
    pub fn derive(seed: u64, index: u64) -> Keys {
        use sha2::{Digest, Sha256};
        let mut counter = 0u64;
        loop {
            let mut h = Sha256::new();
            h.update(b"nostrwire-keys");
            h.update(seed.to_le_bytes());
            h.update(index.to_le_bytes());
            h.update(counter.to_le_bytes());
            if let Some(keys) = Keys::from_secret_bytes(h.finalize().into()) {
                return keys;
            }
            counter += 1;
        }
    }

    /// The x-only public key.
    pub fn public_key(&self) -> PublicKey {
        self.public
    }

    /// Signs an id. The auxiliary randomness is derived from the secret and
    /// the id, so signatures are deterministic and reproducible in tests.
    pub fn sign_id(&self, id: &EventId) -> Signature {
        use sha2::{Digest, Sha256};
        let mut h = Sha256::new();
        h.update(self.keypair.secret_bytes());
        h.update(id.as_bytes());
        let aux: [u8; 32] = h.finalize().into();
        let sig = SECP256K1.sign_schnorr_with_aux_rand(id.as_bytes(), &self.keypair, &aux);
        Signature::from_bytes(sig.to_byte_array())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sign_then_verify() {
        let keys = Keys::derive(1, 2);
        let id = EventId::from_bytes([7; 32]);
        let sig = keys.sign_id(&id);
        assert_eq!(sig, keys.sign_id(&id), "deterministic");
        verify_signature(&id, &keys.public_key(), &sig).unwrap();
        let other = EventId::from_bytes([8; 32]);
        assert_eq!(
            verify_signature(&other, &keys.public_key(), &sig)
                .unwrap_err()
                .kind(),
            ErrorKind::InvalidSignature
        );
        // 2^256 - 1 is above the field prime, so it is no x coordinate.
        let not_a_key = PublicKey::from_bytes([0xff; 32]);
        assert_eq!(
            verify_signature(&id, &not_a_key, &sig).unwrap_err().kind(),
            ErrorKind::InvalidPublicKey
        );
    }

    #[test]
    fn keys_sharing_a_cache_slot_verify_as_their_own() {
        let slot = |k: &Keys| {
            let b = k.public_key().as_bytes()[..2].to_vec();
            usize::from(u16::from_le_bytes([b[0], b[1]])) % KEY_CACHE_SLOTS
        };
        let a = Keys::derive(3, 0);
        let b = (1..100_000)
            .map(|i| Keys::derive(3, i))
            .find(|k| slot(k) == slot(&a))
            .expect("two keys in one slot");
        let id = EventId::from_bytes([9; 32]);
        let (sig_a, sig_b) = (a.sign_id(&id), b.sign_id(&id));
        // Each key evicts the other; hits and misses give the same answers.
        for _ in 0..3 {
            for (keys, sig, other) in [(&a, &sig_a, &sig_b), (&b, &sig_b, &sig_a)] {
                verify_signature(&id, &keys.public_key(), sig).unwrap();
                verify_signature(&id, &keys.public_key(), sig).unwrap();
                let forged = verify_signature(&id, &keys.public_key(), other);
                assert_eq!(forged.unwrap_err().kind(), ErrorKind::InvalidSignature);
            }
        }
        // A key that does not parse is refused every time, never kept.
        let not_a_key = PublicKey::from_bytes([0xff; 32]);
        for _ in 0..2 {
            let refused = verify_signature(&id, &not_a_key, &sig_a).unwrap_err();
            assert_eq!(refused.kind(), ErrorKind::InvalidPublicKey);
        }
    }
}
