//! Encode → decode: an event built from the input is refused by the encoder
//! exactly when the decoder would refuse its record, and otherwise survives
//! the round trip unchanged, with the same id, from both encoders. The
//! property lives in `tests/support/roundtrip.rs`; inputs that once failed
//! are kept in `fuzz/regressions/roundtrip/` and replayed by `cargo test`.
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../../tests/support/roundtrip.rs"]
mod roundtrip;

fuzz_target!(|data: &[u8]| roundtrip::check(data));
