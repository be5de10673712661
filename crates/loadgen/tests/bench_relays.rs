//! `nostrwire bench relays`'s checks against our relay over a socket: the
//! equal-work check before nostr-bench's `req`, and the greeting check.

mod common;

use std::time::Duration;

use nostrwire_loadgen::nostr_bench::write_seed;
use nostrwire_loadgen::relays::{bench, procs};

/// Publishes JSON Lines events to `url`, one at a time, each acknowledged.
async fn publish(url: &str, lines: &str) {
    use nostrwire_loadgen::ws::{self, WsUrl};
    let url = WsUrl::parse(url).unwrap();
    let mut rng = nostrwire_loadgen::rng::Rng::new(7);
    let (mut rd, mut wr) = ws::connect(&url, Default::default(), &mut rng, 1 << 20)
        .await
        .unwrap();
    for line in lines.lines() {
        wr.send_text(format!("[\"EVENT\",{line}]").as_bytes())
            .await
            .unwrap();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        loop {
            let msg = rd.next_text_before(deadline).await.unwrap().expect("an OK");
            if msg.starts_with(b"[\"OK\"") {
                assert!(
                    msg.windows(6).any(|w| w == b",true,"),
                    "{}",
                    String::from_utf8_lossy(msg)
                );
                break;
            }
        }
    }
}

#[test]
fn the_check_counts_what_the_relay_returns_for_nostr_bench_hashtags() {
    let (relay, _dir) = common::start_relay();
    let url = format!("ws://{}", relay.local_addr());
    // Nothing stored: every REQ is answered, with no events.
    let empty = bench::req_check(&url, 10);
    assert_eq!(
        (empty.reqs, empty.events, empty.bytes),
        (100, 0, 0),
        "{empty:?}"
    );

    // Two notes per hashtag; the check asks 100 of the 1,000 hashtags.
    let mut seed = Vec::new();
    write_seed(&mut seed, 2, 10, 1, 1_700_000_000).unwrap();
    let seed = String::from_utf8(seed).unwrap();
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(publish(&url, &seed));
    let full = bench::req_check(&url, 10);
    assert_eq!((full.reqs, full.events), (100, 200), "{full:?}");
    assert!(
        full.bytes > 200 * 300 && full.unescaped <= full.bytes,
        "{full:?}"
    );
    assert_eq!(full.error, None);
    // The limit is the relay's to honour: one event per REQ.
    let one = bench::req_check(&url, 1);
    assert_eq!((one.reqs, one.events), (100, 100), "{one:?}");

    // Our relay's default sends an AUTH challenge on connect.
    assert_eq!(procs::greeting(relay.local_addr().port()), "AUTH");
}

#[test]
fn an_unreachable_relay_fails_the_check_with_a_reason() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let check = bench::req_check(&format!("ws://127.0.0.1:{port}"), 10);
    assert_eq!(check.reqs, 0);
    assert!(check.error.unwrap().starts_with("check failed"));
    assert_eq!(procs::greeting(port), "unknown");
}
