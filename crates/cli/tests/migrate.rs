//! The path from strfry: `migrate strfry-config` turns a strfry.conf into a
//! relay.toml the relay accepts, `import` reads a `strfry export` file
//! (JSON Lines, one event object per line), and the relay then serves it.

use std::collections::BTreeSet;
use std::process::{Command, Stdio};

mod support;
use support::{free_port, http_get, nostrwire, wait_listening};

#[test]
fn a_strfry_config_and_export_become_a_running_relay() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let db = dir.path().join("db");
    // strfry.conf as strfry ships it, with this test's port and database.
    let conf = dir.path().join("strfry.conf");
    std::fs::write(
        &conf,
        format!(
            "##\n## strfry config\n##\n\ndb = \"{}/\"\n\ndbParams {{\n    maxreaders = 256\n    mapsize = 10995116277760\n}}\n\n\
             relay {{\n    bind = \"127.0.0.1\"\n    port = {port}\n    nofiles = 1000000\n    realIpHeader = \"x-real-ip\"\n\n\
             \x20   info {{\n        name = \"migrated relay\"\n        description = \"It ran strfry # once\"\n        pubkey = \"unset\"\n        contact = \"unset\"\n    }}\n\n\
             \x20   maxWebsocketPayloadSize = 131072\n    autoPingSeconds = 55\n    enableTcpKeepalive = false\n    maxFilterLimit = 500\n    maxSubsPerConnection = 20\n\n\
             \x20   writePolicy {{\n        plugin = \"\"\n    }}\n\n    compression {{\n        enabled = true\n        slidingWindow = true\n    }}\n\n\
             \x20   logging {{\n        dumpInAll = false\n        dbScanPerf = true\n    }}\n\n    numThreads {{\n        ingester = 3\n        reqWorker = 3\n    }}\n\n\
             \x20   negentropy {{\n        enabled = true\n        maxSyncEvents = 1000000\n    }}\n}}\n\n\
             events {{\n    maxEventSize = 65536\n    rejectEventsNewerThanSeconds = 900\n    rejectEventsOlderThanSeconds = 0\n    \
             rejectEphemeralEventsOlderThanSeconds = 60\n    ephemeralEventsLifetimeSeconds = 300\n    maxNumTags = 2000\n    maxTagValSize = 1024\n}}\n",
            db.display()
        ),
    )
    .unwrap();
    let toml = nostrwire(&["migrate", "strfry-config", conf.to_str().unwrap()]);
    // The database is new: strfry's is not read, but exported and imported.
    assert!(toml.contains("# db = "), "{toml}");
    let data = db.to_str().unwrap();
    assert!(
        toml.contains(&format!("listen = \"127.0.0.1:{port}\"")),
        "{toml}"
    );
    assert!(toml.contains("max_subscriptions = 20"), "{toml}");
    // What has no equivalent is listed, with its value.
    for unmapped in [
        "# dbParams.mapsize = ",
        "# relay.nofiles = 1000000",
        "# events.maxTagValSize = 1024",
    ] {
        assert!(toml.contains(unmapped), "{unmapped} in {toml}");
    }
    let config = dir.path().join("relay.toml");
    std::fs::write(&config, &toml).unwrap();
    let checked = nostrwire(&[
        "relay",
        "--check-config",
        "--config",
        config.to_str().unwrap(),
    ]);
    assert!(checked.starts_with("configuration ok"), "{checked}");

    // A `strfry export`: one event object per line (notes from the corpus).
    let corpus = support::corpus();
    let notes: Vec<&str> = corpus
        .lines()
        .filter(|l| l.contains("\"kind\":1,"))
        .take(60)
        .collect();
    assert_eq!(notes.len(), 60);
    let export = dir.path().join("strfry-export.jsonl");
    std::fs::write(&export, notes.join("\n") + "\n").unwrap();
    let imported = nostrwire(&[
        "import",
        "-c",
        config.to_str().unwrap(),
        "--data",
        data,
        export.to_str().unwrap(),
    ]);
    assert!(imported.contains("60 accepted"), "{imported}");

    let mut relay = Command::new(env!("CARGO_BIN_EXE_nostrwire"))
        .args(["relay", "--data", data, "--config"])
        .arg(&config)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_listening(port);
    let info = http_get(port, "/", "Accept: application/nostr+json\r\n");
    let _ = relay.kill();
    let _ = relay.wait();
    assert!(info.contains("\"name\":\"migrated relay\""), "{info}");
    assert!(info.contains("It ran strfry # once"), "{info}");
    let id = |l: &str| serde_json::from_str::<serde_json::Value>(l).unwrap()["id"].to_string();
    let stored: BTreeSet<String> =
        nostrwire(&["export", "-c", config.to_str().unwrap(), "--data", data])
            .lines()
            .map(id)
            .collect();
    let given: BTreeSet<String> = notes.iter().map(|l| id(l)).collect();
    assert_eq!(stored, given);
}
