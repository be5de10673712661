//! One module per subcommand. Each exposes `Args` (clap) and `run`.

pub mod bench_codec;
pub mod bench_formats;
pub mod bench_headline;
pub mod bench_relays;
pub mod bench_wire;
pub mod cluster;
pub mod compact;
pub mod convert;
pub mod delete;
pub mod dict;
pub mod export;
pub mod generate;
pub mod import;
pub mod inspect;
pub mod load;
pub mod migrate;
pub mod relay;
pub mod scan;
pub mod stream;
pub mod sync;
pub mod verify;
