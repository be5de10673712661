//! `nostrwire scan` and `nostrwire delete` on a data directory: the scan
//! finds what `export` finds, a dry run changes nothing, and `--yes`
//! removes exactly the events the filter matches.

mod support;

use std::collections::BTreeSet;

use support::nostrwire;

fn ids(jsonl: &str) -> BTreeSet<String> {
    jsonl
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            v["id"].as_str().unwrap().to_string()
        })
        .collect()
}

#[test]
fn delete_removes_exactly_what_the_scan_matched() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("db").to_string_lossy().into_owned();
    nostrwire(&["import", "--data", &data, "testdata/real-events.jsonl"]);
    let scan = |filter: &str| ids(&nostrwire(&["scan", "--data", &data, "--filter", filter]));
    let all = scan("{}");
    assert_eq!(
        all,
        ids(&nostrwire(&["export", "--data", &data])),
        "scan of everything"
    );
    let filter = r#"{"kinds":[7,9735]}"#;
    let doomed = scan(filter);
    assert_eq!(
        doomed,
        ids(&nostrwire(&["export", "--data", &data, "--filter", filter]))
    );
    assert!(!doomed.is_empty() && doomed.len() < all.len());
    // A limit caps the scan to the newest matches.
    assert_eq!(scan(r#"{"kinds":[7,9735],"limit":5}"#).len(), 5);

    let dry = nostrwire(&["delete", "--data", &data, "--filter", filter]);
    assert_eq!(ids(&dry), doomed, "the dry run prints what would go");
    assert_eq!(scan("{}"), all, "and removes nothing");

    nostrwire(&["delete", "--data", &data, "--filter", filter, "--yes"]);
    let left = scan("{}");
    let expected: BTreeSet<String> = all.difference(&doomed).cloned().collect();
    assert_eq!(left, expected);
    assert!(scan(filter).is_empty());
    assert_eq!(left, ids(&nostrwire(&["export", "--data", &data])));
}

#[test]
fn beside_a_running_relay_scan_reads_and_delete_goes_through_its_writer() {
    use std::process::{Command, Stdio};
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("db");
    let data_arg = data.to_string_lossy().into_owned();
    nostrwire(&["import", "--data", &data_arg, "testdata/real-events.jsonl"]);
    let secret = [7u8; 32];
    let admin = nostrwire_event::Keys::from_secret_bytes(secret).unwrap();
    let key_file = dir.path().join("admin.key");
    std::fs::write(&key_file, nostrwire_event::hex::encode(&secret)).unwrap();
    let port = support::free_port();
    let config = dir.path().join("relay.toml");
    std::fs::write(
        &config,
        format!(
            "[relay]\nlisten = \"127.0.0.1:{port}\"\ndata = \"{}\"\n[admin]\npubkeys = [\"{}\"]\n",
            data.display(),
            admin.public_key().to_hex()
        ),
    )
    .unwrap();
    let config_arg = config.to_string_lossy().into_owned();
    let mut relay = Command::new(env!("CARGO_BIN_EXE_nostrwire"))
        .args(["relay", "--config", &config_arg])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    support::wait_listening(port);

    // Reading beside the relay's writer.
    let scan = |filter: &str| ids(&nostrwire(&["scan", "-c", &config_arg, "--filter", filter]));
    let all = scan("{}");
    let filter = r#"{"kinds":[1,6]}"#;
    let doomed = scan(filter);
    assert!(!doomed.is_empty() && doomed.len() < all.len());
    assert_eq!(
        ids(&nostrwire(&[
            "delete",
            "-c",
            &config_arg,
            "--filter",
            filter
        ])),
        doomed
    );

    // Never a second writer: without an admin key it is refused.
    let refused = Command::new(env!("CARGO_BIN_EXE_nostrwire"))
        .args(["delete", "-c", &config_arg, "--filter", filter, "--yes"])
        .output()
        .unwrap();
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("database in use"));
    assert_eq!(scan("{}"), all);

    let key_arg = key_file.to_string_lossy().into_owned();
    nostrwire(&[
        "delete",
        "-c",
        &config_arg,
        "--filter",
        filter,
        "--yes",
        "--admin-key",
        &key_arg,
    ]);
    let expected: BTreeSet<String> = all.difference(&doomed).cloned().collect();
    assert_eq!(scan("{}"), expected);
    // Still serving.
    let info = support::http_get(port, "/", "Accept: application/nostr+json\r\n");
    assert!(info.contains("supported_nips"), "{info}");
    let _ = relay.kill();
    let _ = relay.wait();
}
