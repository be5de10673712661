//! `nostrwire bench relays`, `load` and `generate` from outside the
//! repository: the `testdata/` defaults are relative to the current
//! directory, so a missing one is named with the flag that sets it.

use std::path::Path;
use std::process::{Command, Output};

mod support;

fn root() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
}

/// `nostrwire ARGS` run in `dir`, without the machine-wide benchmark lock.
fn run_in(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_nostrwire"))
        .current_dir(dir)
        .env("NOSTRWIRE_BENCH_LOCKED", "1")
        .env("TMPDIR", dir)
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn missing_testdata_names_the_flag_that_sets_it() {
    let dir = tempfile::tempdir().unwrap();
    let port = support::free_port();
    let url = format!("ws://127.0.0.1:{port}");
    for args in [
        vec!["load", "--relay", url.as_str(), "--count", "1"],
        vec!["bench", "relays", "--peers", "", "--no-nostr-bench"],
        vec!["generate", "--count", "1"],
    ] {
        let out = run_in(dir.path(), &args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(
            err.contains("testdata/kind-mix.tsv: no such file in the current directory")
                && err.contains("give --kind-mix FILE"),
            "{args:?}: {err}"
        );
    }
    let mix = root().join("testdata/kind-mix.tsv");
    let out = run_in(
        dir.path(),
        &[
            "load",
            "--relay",
            &url,
            "--count",
            "1",
            "--kind-mix",
            mix.to_str().unwrap(),
        ],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("give --corpus FILE"), "{err}");
    // Nothing was started or written there.
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}
