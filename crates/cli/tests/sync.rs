//! `nostrwire sync` against a second nostrwire relay over a real socket:
//! two databases that differ by a few percent converge in both directions
//! (checked by ids), and a sync killed midway resumes with only what is left.

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};

mod support;
use support::{free_port, nostrwire, wait_listening};

/// The ids of a database's events.
fn ids(db: &Path) -> BTreeSet<String> {
    nostrwire(&["export", "--data", db.to_str().unwrap()])
        .lines()
        .map(|line| {
            let event: serde_json::Value = serde_json::from_str(line).unwrap();
            event["id"].as_str().unwrap().to_string()
        })
        .collect()
}

/// Imports the lines of the test corpus that `keep` selects (by line
/// number). Gift wraps (kind 1059) are left out: a relay serves them only to
/// their recipient after AUTH, so they are not in its side of a sync.
fn import(dir: &Path, name: &str, keep: impl Fn(usize) -> bool) -> std::path::PathBuf {
    let corpus = support::corpus();
    let lines: Vec<&str> = corpus
        .lines()
        .enumerate()
        .filter(|(i, l)| keep(*i) && !l.contains("\"kind\":1059,"))
        .map(|(_, l)| l)
        .collect();
    let file = dir.join(format!("{name}.jsonl"));
    std::fs::write(&file, lines.join("\n")).unwrap();
    let db = dir.join(name);
    nostrwire(&[
        "import",
        "--data",
        db.to_str().unwrap(),
        file.to_str().unwrap(),
    ]);
    db
}

/// How many reactions (kind 7) a database holds.
fn reactions(db: &Path) -> usize {
    nostrwire(&[
        "export",
        "--data",
        db.to_str().unwrap(),
        "--filter",
        r#"{"kinds":[7]}"#,
    ])
    .lines()
    .count()
}

struct Relay(Child);

impl Drop for Relay {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Relay {
    fn start(db: &Path, port: u16) -> Relay {
        let child = Command::new(env!("CARGO_BIN_EXE_nostrwire"))
            .args(["relay", "--listen", &format!("127.0.0.1:{port}"), "--data"])
            .arg(db)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        wait_listening(port);
        Relay(child)
    }

    /// Stops the relay cleanly (SIGTERM: queued writes are committed).
    fn stop(mut self) {
        let status = Command::new("kill")
            .args(["-TERM", &self.0.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
        self.0.wait().unwrap();
    }
}

/// The `N` of the summary line starting with `prefix` (`down: N events: ...`).
fn moved(summary: &str, prefix: &str) -> (usize, String) {
    let line = summary
        .lines()
        .find(|l| l.starts_with(prefix))
        .unwrap_or_else(|| panic!("no {prefix:?} in {summary}"));
    let n = line[prefix.len()..]
        .split_whitespace()
        .next()
        .unwrap()
        .parse()
        .unwrap();
    (n, line.to_string())
}

#[test]
fn two_databases_converge_in_both_directions() {
    let dir = tempfile::tempdir().unwrap();
    let local = import(dir.path(), "local", |i| i % 29 != 0);
    let remote = import(dir.path(), "remote", |i| i % 31 != 5);
    let (local_ids, remote_ids) = (ids(&local), ids(&remote));
    let only_remote = remote_ids.difference(&local_ids).count();
    let only_local = local_ids.difference(&remote_ids).count();
    assert!(only_remote > 10 && only_local > 10);
    let union: BTreeSet<String> = local_ids.union(&remote_ids).cloned().collect();

    let port = free_port();
    let relay = Relay::start(&remote, port);
    let url = format!("ws://127.0.0.1:{port}");
    let summary = nostrwire(&[
        "sync",
        &url,
        "--dir",
        "both",
        "--batch",
        "7",
        "--data",
        local.to_str().unwrap(),
    ]);
    let (down, line) = moved(&summary, "down: ");
    assert_eq!(down, only_remote, "{summary}");
    assert!(!line.contains("refused"), "{line}");
    let (up, line) = moved(&summary, "up: ");
    assert_eq!(up, only_local, "{summary}");
    assert!(!line.contains("refused"), "{line}");
    // Offered by default, and the relay takes it.
    assert!(summary.contains(", permessage-deflate"), "{summary}");

    // Run again: nothing is left to move (and nothing is compressed when
    // told so).
    let again = nostrwire(&[
        "sync",
        &url,
        "--dir",
        "both",
        "--no-deflate",
        "--data",
        local.to_str().unwrap(),
    ]);
    assert!(!again.contains("permessage-deflate"), "{again}");
    assert!(again.contains(" in 1 slices,"), "{again}");
    assert!(again.contains("down: 0 events: nothing"), "{again}");
    assert!(again.contains("up: 0 events: nothing"), "{again}");
    relay.stop();
    // Equal sets, each event from one side or the other (a replaceable event
    // whose newer version arrived is replaced on both).
    let (local_ids, remote_ids) = (ids(&local), ids(&remote));
    assert_eq!(local_ids, remote_ids);
    assert!(local_ids.is_subset(&union));
    assert!(local_ids.len() > union.len() * 98 / 100);
}

#[test]
fn a_filter_limits_what_is_synced() {
    let dir = tempfile::tempdir().unwrap();
    let local = import(dir.path(), "local", |i| i < 500);
    let remote = import(dir.path(), "remote", |_| true);
    let port = free_port();
    let relay = Relay::start(&remote, port);
    let url = format!("ws://127.0.0.1:{port}");
    let summary = nostrwire(&[
        "sync",
        &url,
        "--filter",
        r#"{"kinds":[1]}"#,
        "--data",
        local.to_str().unwrap(),
    ]);
    relay.stop();
    let kind1 = |db: &Path| -> BTreeSet<String> {
        nostrwire(&[
            "export",
            "--data",
            db.to_str().unwrap(),
            "--filter",
            r#"{"kinds":[1]}"#,
        ])
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["id"].to_string())
        .collect()
    };
    assert_eq!(kind1(&local), kind1(&remote), "{summary}");
    // Other kinds stayed where they were.
    assert!(ids(&local).len() < ids(&remote).len());
    assert!(!summary.contains("up:"), "down is the default: {summary}");
}

#[test]
fn a_sync_killed_midway_resumes_with_what_is_left() {
    let dir = tempfile::tempdir().unwrap();
    let local = import(dir.path(), "local", |i| i % 10 != 0);
    let remote = import(dir.path(), "remote", |_| true);
    let remote_ids = ids(&remote);
    let missing = remote_ids.difference(&ids(&local)).count();
    let port = free_port();
    let relay = Relay::start(&remote, port);
    let url = format!("ws://127.0.0.1:{port}");

    // One event per batch; killed (-9) once the first batch is committed.
    let mut first = Command::new(env!("CARGO_BIN_EXE_nostrwire"))
        .args(["sync", &url, "--batch", "1", "--data"])
        .arg(&local)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = BufReader::new(first.stderr.take().unwrap());
    let mut line = String::new();
    loop {
        line.clear();
        assert!(
            stderr.read_line(&mut line).unwrap() > 0,
            "no progress shown"
        );
        if line.starts_with("downloading") {
            break;
        }
    }
    first.kill().unwrap();
    first.wait().unwrap();
    let left = remote_ids.difference(&ids(&local)).count();
    assert!(left < missing, "the first batch was committed");

    // The second run moves exactly what the first left.
    let summary = nostrwire(&["sync", &url, "--data", local.to_str().unwrap()]);
    relay.stop();
    let (down, _) = moved(&summary, "down: ");
    assert_eq!(down, left, "{summary}");
    assert_eq!(ids(&local), remote_ids);
}

#[test]
fn refusals_are_summed_up_by_reason() {
    let dir = tempfile::tempdir().unwrap();
    let local = import(dir.path(), "local", |_| true);
    let remote = import(dir.path(), "remote", |i| i % 2 == 0);
    let refused = reactions(&local) - reactions(&remote);
    assert!(refused > 10);
    // The relay refuses reactions (kind 7) by policy.
    let port = free_port();
    let (relay, _) = relay_with(dir.path(), &remote, port, "[policy]\nkinds_deny = [7]\n");
    let url = format!("ws://127.0.0.1:{port}");
    let summary = nostrwire(&[
        "sync",
        &url,
        "--dir",
        "up",
        "--data",
        local.to_str().unwrap(),
    ]);
    relay.stop();
    let (_, line) = moved(&summary, "up: ");
    assert!(
        line.contains(&format!("{refused} refused (blocked)")),
        "{line}"
    );
}

/// `nostrwire relay --config` on `db`, with these extra config lines.
fn relay_with(dir: &Path, db: &Path, port: u16, extra: &str) -> (Relay, std::path::PathBuf) {
    let config = dir.join(format!("relay-{port}.toml"));
    std::fs::write(
        &config,
        format!(
            "[relay]\nlisten = \"127.0.0.1:{port}\"\ndata = \"{}\"\n{extra}",
            db.display()
        ),
    )
    .unwrap();
    let child = Command::new(env!("CARGO_BIN_EXE_nostrwire"))
        .args(["relay", "--config"])
        .arg(&config)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_listening(port);
    (Relay(child), config)
}

#[test]
fn through_a_running_local_relay_both_sides_converge() {
    let dir = tempfile::tempdir().unwrap();
    let local = import(dir.path(), "local", |i| i % 23 != 0);
    let remote = import(dir.path(), "remote", |i| i % 37 != 3);
    let (local_ids, remote_ids) = (ids(&local), ids(&remote));
    let only_remote = remote_ids.difference(&local_ids).count();
    let only_local = local_ids.difference(&remote_ids).count();
    assert!(only_remote > 10 && only_local > 10);

    // Both relays run: the sync only reads the local database, and the
    // local relay's writer stores what comes down.
    let (local_port, remote_port) = (free_port(), free_port());
    let local_relay = Relay::start(&local, local_port);
    let remote_relay = Relay::start(&remote, remote_port);
    let url = format!("ws://127.0.0.1:{remote_port}");
    let through = format!("ws://127.0.0.1:{local_port}");
    let args = [
        "sync",
        &url,
        "--local",
        &through,
        "--dir",
        "both",
        "--batch",
        "9",
        "--data",
        local.to_str().unwrap(),
    ];
    let summary = nostrwire(&args);
    let (down, line) = moved(&summary, "down: ");
    assert_eq!(down, only_remote, "{summary}");
    assert!(!line.contains("refused"), "{line}");
    let (up, line) = moved(&summary, "up: ");
    assert_eq!(up, only_local, "{summary}");
    assert!(!line.contains("refused"), "{line}");
    assert!(
        summary.contains(&format!("local relay {through}")),
        "{summary}"
    );

    // Run again, relays still running: nothing is left to move.
    let again = nostrwire(&args);
    assert!(again.contains("down: 0 events: nothing"), "{again}");
    assert!(again.contains("up: 0 events: nothing"), "{again}");
    local_relay.stop();
    remote_relay.stop();
    assert_eq!(ids(&local), ids(&remote));
}

#[test]
fn a_running_relay_is_found_and_its_refusals_are_counted_by_reason() {
    let dir = tempfile::tempdir().unwrap();
    let local = import(dir.path(), "local", |i| i % 2 == 0);
    let remote = import(dir.path(), "remote", |_| true);
    let refused = reactions(&remote) - reactions(&local);
    assert!(refused > 10);
    let missing = ids(&remote).difference(&ids(&local)).count();

    // The local relay refuses reactions by policy; the sync is given only
    // its config, finds the database held and publishes to `relay.listen`.
    let (local_port, remote_port) = (free_port(), free_port());
    let (local_relay, config) = relay_with(
        dir.path(),
        &local,
        local_port,
        "[policy]\nkinds_deny = [7]\n",
    );
    let remote_relay = Relay::start(&remote, remote_port);
    let url = format!("ws://127.0.0.1:{remote_port}");
    let summary = nostrwire(&["sync", &url, "--config", config.to_str().unwrap()]);
    let (down, line) = moved(&summary, "down: ");
    assert_eq!(down, missing, "{summary}");
    assert!(
        line.contains(&format!("{refused} refused (blocked)")),
        "{line}"
    );
    assert!(
        line.contains(&format!("{} accepted", missing - refused)),
        "{line}"
    );
    // Resumable: the second run finds only the refused ones still missing.
    let again = nostrwire(&["sync", &url, "--config", config.to_str().unwrap()]);
    let (down, _) = moved(&again, "down: ");
    assert_eq!(down, refused, "{again}");
    local_relay.stop();
    remote_relay.stop();
    assert_eq!(reactions(&local), reactions(&remote) - refused);
}

/// The number of slices a sync summary reports.
fn slices(summary: &str) -> usize {
    summary
        .split(" slices,")
        .next()
        .and_then(|head| head.rsplit(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no slice count in {summary}"))
}

#[test]
fn time_slices_converge_as_one_session_does() {
    // Two identical pairs of databases: one synced in slices of about 61
    // local events (each its own NIP-77 session over a time range), the
    // other in one session. Both pairs end with the same ids.
    let dir = tempfile::tempdir().unwrap();
    let mut finals = Vec::new();
    for (name, slice) in [("sliced", "61"), ("whole", "100000")] {
        let local = import(dir.path(), &format!("{name}-local"), |i| i % 13 != 0);
        let remote = import(dir.path(), &format!("{name}-remote"), |i| i % 17 != 4);
        let local_count = ids(&local).len();
        let port = free_port();
        let relay = Relay::start(&remote, port);
        let url = format!("ws://127.0.0.1:{port}");
        let summary = nostrwire(&[
            "sync",
            &url,
            "--dir",
            "both",
            "--slice",
            slice,
            "--data",
            local.to_str().unwrap(),
        ]);
        match name {
            "sliced" => assert!(slices(&summary) >= local_count / 61, "{summary}"),
            _ => assert_eq!(slices(&summary), 1, "{summary}"),
        }
        relay.stop();
        let (local_ids, remote_ids) = (ids(&local), ids(&remote));
        assert_eq!(local_ids, remote_ids, "{name}: {summary}");
        finals.push(local_ids);
    }
    assert_eq!(finals[0], finals[1]);
}

#[test]
fn events_over_the_relays_message_limit_are_left_out_of_an_upload() {
    // A relay that takes no message over 20,000 bytes (its NIP-11
    // `max_message_length`) would drop the connection on a larger one: the
    // upload leaves those out, counts them, and moves everything else.
    const LIMIT: usize = 20_000;
    let dir = tempfile::tempdir().unwrap();
    let local = import(dir.path(), "local", |_| true);
    let remote = import(dir.path(), "remote", |i| i % 3 == 0);
    let port = free_port();
    let (relay, _) = relay_with(
        dir.path(),
        &remote,
        port,
        &format!("[limits]\nmax_message_bytes = {LIMIT}\n"),
    );
    let url = format!("ws://127.0.0.1:{port}");
    let summary = nostrwire(&[
        "sync",
        &url,
        "--dir",
        "up",
        "--data",
        local.to_str().unwrap(),
    ]);
    relay.stop();
    let (_, line) = moved(&summary, "up: ");
    let missing: Vec<String> = ids(&local).difference(&ids(&remote)).cloned().collect();
    assert!(!missing.is_empty(), "{line}");
    assert!(
        line.contains(&format!("{} too large for the relay", missing.len())),
        "{line}"
    );
    // Each one left out is one the relay could not have taken.
    let exported = nostrwire(&["export", "--data", local.to_str().unwrap()]);
    for id in &missing {
        let json = exported.lines().find(|l| l.contains(id.as_str())).unwrap();
        assert!(json.len() + r#"["EVENT",]"#.len() > LIMIT, "{id}");
    }
}
