//! Benchmark harness for nostrwire.
//!
//! Every figure is measured in the same run as the competitor it is compared
//! with, with samples interleaved across implementations so that drift on a
//! noisy machine affects all of them alike. Results carry the host, the
//! toolchain and a fingerprint of the corpus.

pub mod codec;
pub mod host;
pub mod stats;
pub mod wire;
