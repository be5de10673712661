//! SIGHUP: the relay reads its configuration file again and applies the
//! reloadable settings, names the changed ones that take a restart, and
//! keeps everything as it was when the file does not read.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

mod support;
use support::{free_port, http_get, wait_listening};

/// The relay's NIP-11 document.
fn nip11(port: u16) -> serde_json::Value {
    serde_json::from_str(&http_get(port, "/", "Accept: application/nostr+json\r\n")).unwrap()
}

fn signal(pid: u32, name: &str) {
    let status = Command::new("kill")
        .args([format!("-{name}"), pid.to_string()])
        .status()
        .unwrap();
    assert!(status.success());
}

/// Waits until the log holds `text` (or fails after 20 s).
fn wait_for_log(log: &std::path::Path, text: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let logged = std::fs::read_to_string(log).unwrap_or_default();
        if logged.contains(text) {
            return logged;
        }
        assert!(
            Instant::now() < deadline,
            "no {text:?} in the log:\n{logged}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn sighup_reloads_the_configuration_file() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let file = dir.path().join("relay.toml");
    let log = dir.path().join("relay.log");
    let config = |name: &str, max_subscriptions: usize| {
        format!(
            "[relay]\nlisten = \"127.0.0.1:{port}\"\ndata = \"{}\"\n\
             [info]\nname = \"{name}\"\n\
             [limits]\nmax_subscriptions = {max_subscriptions}\n",
            dir.path().join("db").display()
        )
    };
    std::fs::write(&file, config("first", 100)).unwrap();
    let mut relay = Command::new(env!("CARGO_BIN_EXE_nostrwire"))
        .args(["relay", "--config"])
        .arg(&file)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    wait_listening(port);
    assert_eq!(nip11(port)["name"], "first");

    // A reloadable change applies; a change that takes a restart is named.
    std::fs::write(&file, config("second", 5)).unwrap();
    signal(relay.id(), "HUP");
    let logged = wait_for_log(&log, "configuration reloaded");
    assert_eq!(nip11(port)["name"], "second");
    assert!(logged.contains("limits.max_subscriptions"), "{logged}");
    assert_eq!(nip11(port)["limitation"]["max_subscriptions"], 100);

    // A file that does not parse changes nothing.
    std::fs::write(&file, "[info\nname = ").unwrap();
    signal(relay.id(), "HUP");
    wait_for_log(&log, "configuration not reloaded");
    assert_eq!(nip11(port)["name"], "second");

    signal(relay.id(), "TERM");
    let code = relay.wait().unwrap();
    assert!(code.success(), "relay exit status {code:?}");
}

#[test]
fn check_config_names_changed_settings_and_fails_on_a_bad_file() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("relay.toml");
    std::fs::write(
        &file,
        "[info]\nname = \"mine\"\n[limits]\nmax_filters = 3\n",
    )
    .unwrap();
    let out = support::nostrwire(&[
        "relay",
        "--check-config",
        "--config",
        file.to_str().unwrap(),
    ]);
    assert_eq!(
        out,
        "configuration ok\n  info.name (not the default)\n  limits.max_filters (not the default)\n"
    );
    std::fs::write(&file, "[info]\npubkey = \"not hex\"\n").unwrap();
    let failed = Command::new(env!("CARGO_BIN_EXE_nostrwire"))
        .args(["relay", "--check-config", "--config"])
        .arg(&file)
        .output()
        .unwrap();
    assert!(!failed.status.success());
    assert!(String::from_utf8_lossy(&failed.stderr).contains("info.pubkey"));
}
