//! The model for every test: each signature checked alone by the
//! `secp256k1` crate (the relay's single check).

use super::*;
use secp256k1::{schnorr, Keypair, Scalar, SecretKey, XOnlyPublicKey, SECP256K1};

type Sig = ([u8; 32], [u8; 32], [u8; 64]);

fn unhex<const N: usize>(s: &str) -> [u8; N] {
    let bytes: Vec<u8> = (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect();
    bytes.try_into().unwrap()
}

/// (pubkey, id, sig) of the real signed events in `testdata/`.
fn corpus() -> Vec<Sig> {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../testdata/real-events.jsonl"
    ))
    .unwrap();
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let e: serde_json::Value = serde_json::from_str(l).unwrap();
            (
                unhex(e["pubkey"].as_str().unwrap()),
                unhex(e["id"].as_str().unwrap()),
                unhex(e["sig"].as_str().unwrap()),
            )
        })
        .collect()
}

fn alone((key, message, signature): &Sig) -> bool {
    let Ok(key) = XOnlyPublicKey::from_byte_array(key) else {
        return false;
    };
    SECP256K1
        .verify_schnorr(
            &schnorr::Signature::from_byte_array(*signature),
            message,
            &key,
        )
        .is_ok()
}

/// The batch check itself, without the one-by-one fallback.
fn batch_accepts(signatures: &[Sig]) -> bool {
    let mut batch = Batch::new();
    for (key, message, signature) in signatures {
        assert!(batch.push(key, message, signature));
    }
    batch.verify()
}

#[test]
fn batches_give_the_verdicts_of_single_checks() {
    // Spoiled signatures of many kinds sit at every position of batches of
    // every size, among keys that repeat.
    const P: &str = "fffffffffffffffffffffffffffffffffffffffffffffffffffffffefffffc2f";
    const N: &str = "fffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364141";
    type Spoiler = fn(&mut Sig);
    let spoilers: [Spoiler; 7] = [
        |s| s.2[63] ^= 1,                               // s off by a bit
        |s| s.2[31] ^= 1,                               // r off by a bit
        |s| s.2[..32].copy_from_slice(&unhex::<32>(P)), // r = p
        |s| s.2[32..].copy_from_slice(&unhex::<32>(N)), // s = n
        |s| s.1[0] ^= 0x80,                             // another message
        |s| s.2[..32].fill(0),                          // r = 0
        |s| s.0 = [0xff; 32],                           // a key off the curve
    ];
    let signatures: Vec<Sig> = corpus()
        .into_iter()
        .cycle()
        .take(3_000)
        .enumerate()
        .map(|(n, mut s)| {
            if n % 37 == 0 || n % 61 == 5 || n % 97 == 11 {
                spoilers[n % spoilers.len()](&mut s);
            }
            s
        })
        .collect();
    let expect: Vec<bool> = signatures.iter().map(alone).collect();
    assert!(expect.iter().filter(|v| !**v).count() > 100);
    let mut batch = Batch::new();
    for count in [0, 1, 2, 3, 31, 63, 64, 65, 127, 128, 1_000, 3_000] {
        assert_eq!(
            verify_all(&mut batch, &signatures[..count]),
            expect[..count],
            "{count} signatures"
        );
        assert!(batch.is_empty());
    }
}

#[test]
fn valid_batches_pass_the_batch_check_itself() {
    // Without this, a batch check that always failed would pass the test
    // above through the one-by-one fallback.
    let signatures = corpus();
    for n in [1, 2, 3, 17, 63, 64] {
        assert!(batch_accepts(&signatures[..n]), "{n} signatures");
        assert!(
            batch_accepts(&signatures[signatures.len() - n..]),
            "last {n}"
        );
    }
    assert!(batch_accepts(&vec![signatures[5]; 64]));
    let mut spoiled = signatures[..64].to_vec();
    spoiled[40].2[63] ^= 1;
    assert!(!batch_accepts(&spoiled));
}

#[test]
fn one_key_signing_a_whole_batch() {
    let keypair =
        Keypair::from_secret_key(SECP256K1, &SecretKey::from_byte_array(&[7; 32]).unwrap());
    let key = keypair.x_only_public_key().0.serialize();
    let signatures: Vec<Sig> = (0..64u8)
        .map(|i| {
            let message = [i; 32];
            let sig = SECP256K1.sign_schnorr_with_aux_rand(&message, &keypair, &[i; 32]);
            (key, message, sig.to_byte_array())
        })
        .collect();
    assert!(signatures.iter().all(alone));
    assert!(batch_accepts(&signatures));
    let mut forged = signatures.clone();
    forged[63].1[5] ^= 1;
    assert!(!batch_accepts(&forged));
    let mut expect = vec![true; 64];
    expect[63] = false;
    assert_eq!(verify_all(&mut Batch::new(), &forged), expect);
}

#[test]
fn invalid_signatures_that_cancel_out_are_caught() {
    // s_1 + d and s_2 − d: the sum of the two equations still holds, so a
    // batch without randomizers would accept both. With them, both fail.
    let signatures = corpus();
    let (mut a, mut b) = (signatures[0], signatures[1]);
    let d = SecretKey::from_byte_array(&[3; 32]).unwrap();
    let shift = |s: &mut Sig, by: SecretKey| {
        let value = SecretKey::from_byte_array(&s.2[32..].try_into().unwrap()).unwrap();
        let moved = value.add_tweak(&Scalar::from(by)).unwrap();
        s.2[32..].copy_from_slice(&moved.secret_bytes());
    };
    shift(&mut a, d);
    shift(&mut b, d.negate());
    assert!(!alone(&a) && !alone(&b));
    assert!(!batch_accepts(&[a, b]));
    assert!(!batch_accepts(&[a, b, signatures[2]]));
    assert_eq!(
        verify_all(&mut Batch::new(), &[a, b, signatures[2]]),
        [false, false, true]
    );
}

#[test]
fn a_key_off_the_curve_is_not_batched() {
    let mut batch = Batch::new();
    let (_, message, signature) = corpus()[0];
    assert!(!batch.push(&[0xff; 32], &message, &signature));
    assert!(batch.is_empty());
    for _ in 0..BATCH_MAX {
        assert!(batch.push(&corpus()[0].0, &message, &signature));
    }
    assert!(batch.is_full());
    assert!(!batch.push(&corpus()[0].0, &message, &signature));
    assert!(batch.verify());
    assert!(batch.is_empty());
}
