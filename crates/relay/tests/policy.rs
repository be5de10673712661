//! Write policy (kind and author lists, `write_requires_auth`, the strfry
//! compatible plugin) and rate limits, over a real socket.

mod support;

use std::time::Duration;

use nostrwire_event::Keys;
use support::{event, filter, now, Client, Got, TestRelay};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kind_and_author_lists_refuse_with_blocked() {
    let member = Keys::derive(50, 1);
    let stranger = Keys::derive(50, 2);
    let member_hex = member.public_key().to_hex();
    let relay = TestRelay::start_with(|c| {
        c.policy.kinds_allow = vec![0, 1, 7];
        c.policy.kinds_deny = vec![7];
        c.policy.pubkeys_allow = vec![member_hex.clone()];
    });
    let base = now();
    let mut c = Client::connect(&relay.url).await;
    assert!(c.publish(&event(&member, base, 1, &[], "hi")).await.0);
    for (keys, kind, what) in [
        (&member, 7, "denied kind"),
        (&member, 30023, "kind not in the allow list"),
        (&stranger, 1, "author not in the allow list"),
    ] {
        let (ok, msg) = c.publish(&event(keys, base - 1, kind, &[], what)).await;
        assert!(!ok && msg.starts_with("blocked:"), "{what}: {msg}");
    }
    assert_eq!(c.query("q", &[filter("{}")]).await.len(), 1);

    let doc = support_nip11(&relay).await;
    assert_eq!(doc["limitation"]["restricted_writes"], true);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_changes_lists_rates_and_info_and_names_what_needs_a_restart() {
    let keys = Keys::derive(50, 3);
    let relay = TestRelay::start();
    let reloader = relay.relay.as_ref().unwrap().reloader();
    let base = now();
    let mut c = Client::connect(&relay.url).await;
    assert!(c.publish(&event(&keys, base, 7, &[], "+")).await.0);
    assert_eq!(support_nip11(&relay).await["name"], "nostrwire");

    let mut new = relay.config.clone();
    new.policy.kinds_deny = vec![7];
    new.info.name = "renamed".into();
    new.rate.events_per_second = 0.01;
    new.rate.events_burst = 2.0;
    new.limits.max_subscriptions = 3;
    new.search.enabled = false;
    let need_restart = reloader.reload(&new).unwrap();
    assert_eq!(need_restart, ["limits.max_subscriptions", "search.enabled"]);
    // The open connection meets the new rules on its next message.
    let (ok, msg) = c.publish(&event(&keys, base - 1, 7, &[], "+")).await;
    assert!(!ok && msg.starts_with("blocked:"), "{msg}");
    assert!(
        c.publish(&event(&keys, base - 2, 1, &[], "alpha note"))
            .await
            .0
    );
    let (ok, msg) = c.publish(&event(&keys, base - 3, 1, &[], "b")).await;
    assert!(!ok && msg.starts_with("rate-limited:"), "{msg}");
    let doc = support_nip11(&relay).await;
    assert_eq!(doc["name"], "renamed");
    assert_eq!(doc["limitation"]["restricted_writes"], true);
    // Settings that take a restart kept their values: search still runs.
    let found = c.query("s", &[filter(r#"{"search":"alpha"}"#)]).await;
    assert_eq!(found.len(), 1);
    let (ok, _) = c.publish(&event(&keys, base - 4, 1, &[], "c")).await;
    assert!(!ok);

    // A configuration that does not check out changes nothing: the
    // address's bucket stays empty, the name stays.
    let mut bad = new.clone();
    bad.rate.events_per_second = 0.0;
    bad.info.name = "bad".into();
    bad.policy.pubkeys_allow = vec!["not a key".into()];
    assert!(reloader.reload(&bad).is_err());
    let (ok, msg) = c.publish(&event(&keys, base - 5, 1, &[], "d")).await;
    assert!(!ok && msg.starts_with("rate-limited:"), "{msg}");
    assert_eq!(support_nip11(&relay).await["name"], "renamed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_with_too_little_proof_of_work_are_refused_with_pow() {
    use nostrwire_relay::policy::difficulty;
    let keys = Keys::derive(50, 4);
    let relay = TestRelay::start_with(|c| c.policy.min_pow_difficulty = 8);
    let base = now();
    // Mined as NIP-13 says: the nonce tag (committing to `target`, if
    // given) changes until the id has the bits.
    let mined = |target: Option<&str>, want: &dyn Fn(u32) -> bool| {
        (0u64..)
            .map(|nonce| {
                let n = nonce.to_string();
                let mut tag = vec!["nonce", n.as_str()];
                tag.extend(target);
                event(&keys, base, 1, &[&tag], "mined")
            })
            .find(|e| want(difficulty(&e.id)))
            .unwrap()
    };
    let easy = mined(Some("8"), &|d| d < 8);
    let hard = mined(Some("8"), &|d| d >= 8);
    let lucky = mined(Some("4"), &|d| d >= 8);
    let uncommitted = mined(None, &|d| d >= 8);
    let mut c = Client::connect(&relay.url).await;
    let (ok, msg) = c.publish(&easy).await;
    assert!(!ok, "{msg}");
    assert_eq!(
        msg,
        format!("pow: difficulty {} is less than 8", difficulty(&easy.id))
    );
    let (ok, msg) = c.publish(&lucky).await;
    assert!(!ok, "{msg}");
    assert_eq!(msg, "pow: committed target difficulty 4 is less than 8");
    for enough in [&hard, &uncommitted] {
        let (ok, msg) = c.publish(enough).await;
        assert!(ok, "{msg}");
    }
    let doc = support_nip11(&relay).await;
    assert_eq!(doc["limitation"]["min_pow_difficulty"], 8);
    assert!(doc["supported_nips"]
        .as_array()
        .unwrap()
        .contains(&serde_json::json!(13)));
    // Turned off by a reload: the easy one goes in.
    let mut off = relay.config.clone();
    off.policy.min_pow_difficulty = 0;
    relay
        .relay
        .as_ref()
        .unwrap()
        .reloader()
        .reload(&off)
        .unwrap();
    assert!(c.publish(&easy).await.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn write_requires_auth_refuses_anonymous_events() {
    let relay = TestRelay::start_with(|c| c.auth.write_requires_auth = true);
    let keys = Keys::derive(51, 1);
    let mut c = Client::connect(&relay.url).await;
    let (ok, msg) = c.publish(&event(&keys, now(), 1, &[], "anon")).await;
    assert!(!ok && msg.starts_with("auth-required:"), "{msg}");
    assert!(c.auth(&keys, &relay.url).await.0);
    let (ok, msg) = c
        .publish(&event(&keys, now() - 1, 1, &[], "signed in"))
        .await;
    assert!(ok, "{msg}");
    let doc = support_nip11(&relay).await;
    assert_eq!(doc["limitation"]["auth_required"], true);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn event_rate_is_limited_per_address_and_per_pubkey() {
    let relay = TestRelay::start_with(|c| {
        c.rate.events_per_second = 0.5;
        c.rate.events_burst = 3.0;
        c.rate.pubkey_events_per_second = 0.5;
    });
    let keys = Keys::derive(52, 1);
    let base = now();
    let mut n = 0;
    let mut next = || {
        n += 1;
        event(&keys, base - n, 1, &[], &format!("note {n}"))
    };
    let mut a = Client::connect_from(&relay.url, relay.addr(), "127.0.0.1").await;
    let mut results = Vec::new();
    for _ in 0..6 {
        results.push(a.publish(&next()).await);
    }
    let accepted = results.iter().filter(|r| r.0).count();
    assert_eq!(accepted, 3, "{results:?}");
    assert!(results[3..]
        .iter()
        .all(|(ok, m)| !ok && m.starts_with("rate-limited:")));
    // A second connection from the same address shares the bucket...
    let mut same = Client::connect_from(&relay.url, relay.addr(), "127.0.0.1").await;
    let (ok, msg) = same.publish(&next()).await;
    assert!(!ok && msg.starts_with("rate-limited:"), "{msg}");
    // ...another address has its own...
    let mut b = Client::connect_from(&relay.url, relay.addr(), "127.0.0.2").await;
    assert!(b.publish(&next()).await.0);
    // ...and so does an authenticated pubkey, wherever it connects from.
    assert!(same.auth(&keys, &relay.url).await.0);
    let (ok, msg) = same.publish(&next()).await;
    assert!(ok, "{msg}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn req_rate_and_connections_per_address_are_limited() {
    let relay = TestRelay::start_with(|c| {
        c.rate.reqs_per_second = 0.5;
        c.rate.reqs_burst = 2.0;
        c.rate.connections_per_ip = 2;
    });
    let mut a = Client::connect(&relay.url).await;
    for sub in ["a", "b"] {
        a.req(sub, &[filter("{}")]).await;
        assert!(matches!(a.recv().await, Got::Eose(s) if s == sub));
    }
    a.req("c", &[filter("{}")]).await;
    assert!(
        matches!(a.recv().await, Got::Closed(s, m) if s == "c" && m.starts_with("rate-limited:"))
    );
    a.send_text(r#"["COUNT","d",{}]"#).await;
    assert!(
        matches!(a.recv().await, Got::Closed(s, m) if s == "d" && m.starts_with("rate-limited:"))
    );

    let second = Client::connect(&relay.url).await;
    let third = tokio_tungstenite::connect_async(relay.url.as_str()).await;
    let err = third.expect_err("a third connection from one address is refused");
    assert!(err.to_string().contains("429"), "{err}");
    drop(second);
    // The slot comes back when a connection ends.
    let mut again = None;
    for _ in 0..50 {
        if let Ok(c) = tokio_tungstenite::connect_async(relay.url.as_str()).await {
            again = Some(c);
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(again.is_some(), "slot not returned after disconnect");
}

/// A strfry-protocol plugin in POSIX sh: rejects "spam", shadow-rejects
/// "shadow", exits on "crash-now", stalls on "slow-down", accepts the rest.
const PLUGIN: &str = r#"#!/bin/sh
while IFS= read -r line; do
  id=$(printf '%s\n' "$line" | grep -o '"id":"[0-9a-f]*"' | head -n 1 | cut -d'"' -f4)
  case "$line" in
    *'"type":"new"'*) ;;
    *) echo "unexpected request: $line" >&2; exit 2 ;;
  esac
  case "$line" in
    *crash-now*) exit 1 ;;
    *slow-down*) sleep 5 ;;
  esac
  case "$line" in
    *spam*) printf '{"id":"%s","action":"reject","msg":"no spam here"}\n' "$id" ;;
    *shadow*) printf '{"id":"%s","action":"shadowReject"}\n' "$id" ;;
    *) printf '{"id":"%s","action":"accept"}\n' "$id" ;;
  esac
done
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plugin_decides_and_is_restarted_when_it_dies_or_stalls() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("policy.sh");
    std::fs::write(&path, PLUGIN).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    let relay = TestRelay::start_with(|c| {
        c.policy.plugin = path.clone();
        c.policy.plugin_timeout_ms = 500;
    });
    let keys = Keys::derive(53, 1);
    let base = now();
    let note = |i: u64, text: &str| event(&keys, base - i, 1, &[], text);
    let mut c = Client::connect(&relay.url).await;

    let (ok, msg) = c.publish(&note(1, "hello")).await;
    assert!(ok, "{msg}");
    let (ok, msg) = c.publish(&note(2, "buy spam")).await;
    assert!(!ok && msg == "blocked: no spam here", "{msg}");
    let shadow = note(3, "a shadow of a note");
    let (ok, msg) = c.publish(&shadow).await;
    assert!(ok, "shadowReject looks accepted: {msg}");

    // Dies before answering: refused, never stored; the next event restarts it.
    let (ok, msg) = c.publish(&note(4, "crash-now")).await;
    assert!(!ok && msg.starts_with("error:"), "{msg}");
    tokio::time::sleep(Duration::from_millis(1_100)).await;
    let (ok, msg) = c.publish(&note(5, "after the crash")).await;
    assert!(ok, "{msg}");

    // Stalls: refused after the timeout, killed, restarted.
    let (ok, msg) = c.publish(&note(6, "slow-down")).await;
    assert!(!ok && msg.contains("timed out"), "{msg}");
    tokio::time::sleep(Duration::from_millis(1_100)).await;
    let (ok, msg) = c.publish(&note(7, "after the stall")).await;
    assert!(ok, "{msg}");

    let stored: Vec<String> = c
        .query("q", &[filter("{}")])
        .await
        .into_iter()
        .map(|e| e.content)
        .collect();
    assert_eq!(stored, vec!["hello", "after the crash", "after the stall"]);
}

async fn support_nip11(relay: &TestRelay) -> serde_json::Value {
    let body = support::http_get(relay.addr(), "/", "application/nostr+json").await;
    serde_json::from_str(&body).unwrap()
}

/// A plugin that stops reading its input cannot hold an ingest worker past
/// `plugin_timeout_ms`: the line is written by a thread of its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plugin_that_does_not_read_times_out_like_one_that_does_not_answer() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("deaf.sh");
    std::fs::write(&path, "#!/bin/sh\nsleep 30\n").unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    let relay = TestRelay::start_with(|c| {
        c.policy.plugin = path.clone();
        c.policy.plugin_timeout_ms = 300;
        c.performance.ingest_threads = 1;
    });
    let keys = Keys::derive(54, 1);
    let mut c = Client::connect(&relay.url).await;
    // Larger than a pipe's buffer: the write itself would block.
    let big = "x".repeat(200_000);
    let started = std::time::Instant::now();
    let (ok, msg) = c.publish(&event(&keys, now(), 1, &[], &big)).await;
    assert!(!ok && msg.starts_with("error:"), "{msg}");
    // The same worker answers the next client (`recv` fails after 10 s).
    let mut other = Client::connect(&relay.url).await;
    let (ok, msg) = other
        .publish(&event(&keys, now() - 1, 1, &[], "small"))
        .await;
    assert!(!ok && msg.starts_with("error:"), "{msg}");
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "the worker waited on the plugin's input"
    );
}
