//! Running the `nostrwire` binary from tests.

use std::process::Command;

/// Runs `nostrwire ARGS` from the workspace root (where the default
/// `testdata/` paths resolve) and returns its standard output; fails the
/// test, with standard error, when it exits unsuccessfully.
pub fn nostrwire(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_nostrwire"))
        .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}
