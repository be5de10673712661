//! One module per subcommand. Each exposes `Args` (clap) and `run`.

pub mod bench_codec;
pub mod bench_wire;
pub mod verify;
