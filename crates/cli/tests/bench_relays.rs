//! `nostrwire bench relays`, `load`, `generate` and the benchmarks from
//! outside the repository: the `testdata/` defaults are relative to the current
//! directory, so a missing one is named with the flag that sets it. And
//! a comparison stopped by SIGINT leaves no relay and no scratch directory;
//! `scripts/compare-relays.sh` installs the peers `--peers` names, in
//! either spelling.

use std::net::TcpStream;
use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

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

#[test]
fn benchmarks_name_the_flag_of_a_missing_corpus() {
    let dir = tempfile::tempdir().unwrap();
    #[allow(unused_mut)]
    let mut commands = vec![vec!["bench", "codec"], vec!["bench", "wire"]];
    #[cfg(feature = "bench-formats")]
    commands.push(vec!["bench", "formats", "--no-allocs"]);
    for args in commands {
        let out = run_in(dir.path(), &args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(
            err.contains("testdata/real-events.jsonl: no such file in the current directory")
                && err.contains("give --corpus FILE"),
            "{args:?}: {err}"
        );
    }
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

#[test]
fn sigint_stops_the_relays_and_removes_the_scratch_directory() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let (mix, corpus) = (
        root().join("testdata/kind-mix.tsv"),
        root().join("testdata/real-events.jsonl"),
    );
    let stderr = std::fs::File::create(dir.path().join("stderr")).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_nostrwire"))
        .current_dir(dir.path())
        .env("NOSTRWIRE_BENCH_LOCKED", "1")
        .env("TMPDIR", dir.path())
        .args(["bench", "relays", "--peers", "", "--no-nostr-bench"])
        .args(["--scenarios", "publish", "--rounds", "1"])
        .args(["--count", "200000", "--duration", "120"])
        .arg("--kind-mix")
        .arg(&mix)
        .arg("--corpus")
        .arg(&corpus)
        .arg("--out")
        .arg(&out)
        .stdout(std::process::Stdio::null())
        .stderr(stderr)
        .spawn()
        .unwrap();
    let scratch = dir
        .path()
        .join(format!("nostrwire-bench-relays.{}", child.id()));
    // Our relay is up and the load tester started once names.tsv is written.
    let deadline = Instant::now() + Duration::from_secs(60);
    while !out.join("names.tsv").exists() {
        assert!(child.try_wait().unwrap().is_none(), "it ended early");
        assert!(Instant::now() < deadline, "our relay did not start");
        std::thread::sleep(Duration::from_millis(50));
    }
    // Let the load tester get going, so the signal finds children to stop
    // (the checks below hold whether or not it has).
    std::thread::sleep(Duration::from_millis(500));
    assert!(scratch.is_dir());
    assert_eq!(
        std::fs::read_to_string(out.join("writer.txt")).unwrap(),
        "nostrwire bench relays\n"
    );
    let names = std::fs::read_to_string(out.join("names.tsv")).unwrap();
    let port: u16 = names
        .split('\t')
        .next()
        .and_then(|url| url.rsplit(':').next())
        .and_then(|p| p.parse().ok())
        .unwrap();
    assert!(TcpStream::connect(("127.0.0.1", port)).is_ok());
    // The process alone, not its group: it has to stop its children itself.
    let killed = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        assert!(Instant::now() < deadline, "still running 30 s after SIGINT");
        std::thread::sleep(Duration::from_millis(50));
    };
    let err = std::fs::read_to_string(dir.path().join("stderr")).unwrap();
    assert_eq!(status.code(), Some(130), "{err}");
    assert!(err.contains("bench relays: interrupted"), "{err}");
    assert!(!scratch.exists(), "{} left behind", scratch.display());
    assert!(
        TcpStream::connect(("127.0.0.1", port)).is_err(),
        "our relay still listens on {port}"
    );
}

/// `scripts/compare-relays.sh --install-only ARGS` with every peer already
/// "installed" in a scratch PEERS_DIR (so nothing is built): its exit
/// status and standard error.
fn install_only(args: &[&str]) -> (Option<i32>, String) {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("bin")).unwrap();
    for name in ["khatru-bench", "nostr-rs-relay", "rnostr", "nostr-bench"] {
        let exe = dir.path().join("bin").join(name);
        std::fs::write(&exe, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let out = Command::new("bash")
        .arg(root().join("scripts/compare-relays.sh"))
        .arg("--install-only")
        .args(args)
        .env("PEERS_DIR", dir.path())
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn compare_relays_reads_peers_in_both_spellings() {
    for args in [["--peers", "nope"].as_slice(), &["--peers=nope"]] {
        let (code, err) = install_only(args);
        assert_eq!(code, Some(0), "{args:?}: {err}");
        // Only the peer named was looked at (the others are "installed").
        assert!(err.contains("unknown peer nope"), "{args:?}: {err}");
    }
    let (code, err) = install_only(&["--peers"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("--peers needs a value"), "{err}");
}

#[test]
fn rewrite_refuses_a_directory_that_is_not_a_comparison_run() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    let rewrite = |run: &Path| {
        let out = run_in(
            dir.path(),
            &[
                "bench",
                "relays",
                "--rewrite",
                "--out",
                run.to_str().unwrap(),
            ],
        );
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let listing = |run: &Path| {
        let mut names: Vec<String> = std::fs::read_dir(run)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    };
    let (code, err) = rewrite(&run);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("not a relay comparison run (no such directory)"),
        "{err}"
    );
    assert!(!run.exists());

    std::fs::create_dir(&run).unwrap();
    std::fs::write(run.join("names.tsv"), "ws://127.0.0.1:7790\tours\n").unwrap();
    let (code, err) = rewrite(&run);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("no relays.json or nostr-bench.jsonl"), "{err}");
    assert_eq!(listing(&run), ["names.tsv"]);

    std::fs::remove_file(run.join("names.tsv")).unwrap();
    std::fs::write(run.join("relays.json"), "{}").unwrap();
    let (code, err) = rewrite(&run);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("relays.json without names.tsv"), "{err}");
    assert_eq!(listing(&run), ["relays.json"]);

    // A run of nostr-bench alone (no names.tsv) is written again.
    std::fs::remove_file(run.join("relays.json")).unwrap();
    std::fs::write(run.join("nostr-bench.jsonl"), "").unwrap();
    let (code, err) = rewrite(&run);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(
        listing(&run),
        ["headline.md", "nostr-bench.jsonl", "nostr-bench.md"]
    );
}
