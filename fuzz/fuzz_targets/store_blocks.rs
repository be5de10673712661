#![no_main]
//! The store's block decoders on hostile bytes: a block of search postings,
//! a term's counts and a block of a time-ordered index. Each returns an error or entries,
//! never panics, and what it accepts re-encodes to exactly the same bytes
//! (the encodings are canonical).

use libfuzzer_sys::fuzz_target;
use nostrwire_store::schema;

fuzz_target!(|data: &[u8]| {
    let Some((&which, rest)) = data.split_first() else {
        return;
    };
    if rest.len() < schema::TIME_SUFFIX {
        return;
    }
    let (key, value) = rest.split_at(schema::TIME_SUFFIX);
    if which % 3 == 2 {
        // A term's counts: document frequency and perhaps its last serial.
        if let Ok(counts) = schema::decode_term_counts(value) {
            assert_eq!(schema::encode_term_counts(counts), value);
        }
        return;
    }
    if which & 1 == 0 {
        let serial = schema::serial_from(&key[..8]).expect("eight bytes");
        match schema::decode_postings(serial, value) {
            Ok(postings) => {
                assert_eq!(schema::encode_postings(serial, &postings), value);
                assert_eq!(
                    schema::last_posting_serial(serial, value).ok(),
                    postings.last().map(|p| p.serial)
                );
            }
            Err(_) => assert!(schema::last_posting_serial(serial, value).is_err()),
        }
    } else {
        let mut entries = Vec::new();
        if schema::decode_time_block(key, value, &mut entries).is_ok() {
            let blocks = schema::encode_time_blocks(&entries, usize::MAX);
            assert_eq!(blocks.len(), 1);
            assert_eq!(&blocks[0].0[..], key);
            assert_eq!(blocks[0].1, value);
        }
    }
});
