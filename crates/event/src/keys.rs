//! BIP-340 signatures through libsecp256k1, with one global context.

use secp256k1::{schnorr, Keypair, SecretKey, XOnlyPublicKey, SECP256K1};

use crate::error::{Error, ErrorKind};
use crate::types::{EventId, PublicKey, Signature};

/// Verifies a BIP-340 signature of `id` by `pubkey`.
///
/// This is the whole cost of "bare" verification: parsing the x-only key
/// (a square root on the curve) and the Schnorr check.
pub fn verify_signature(id: &EventId, pubkey: &PublicKey, sig: &Signature) -> Result<(), Error> {
    let key = XOnlyPublicKey::from_byte_array(pubkey.as_bytes())
        .map_err(|_| Error::new(ErrorKind::InvalidPublicKey).with_field("pubkey"))?;
    let sig = schnorr::Signature::from_byte_array(*sig.as_bytes());
    SECP256K1
        .verify_schnorr(&sig, id.as_bytes(), &key)
        .map_err(|_| Error::new(ErrorKind::InvalidSignature).with_field("sig"))
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
}
