//! NIP-42 authentication, NIP-70 protected events and the read restriction
//! on direct messages, over a real socket.

mod support;

use nostrwire_event::Keys;
use support::{event, filter, now, Client, Got, TestRelay};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auth_checks_challenge_kind_time_relay_and_signature() {
    let relay = TestRelay::start_with(|c| c.relay.url = "wss://relay.example/".into());
    let keys = Keys::derive(40, 1);
    let mut c = Client::connect(&relay.url).await;
    let challenge = c.wait_challenge().await;
    assert_eq!(challenge.len(), 32, "128-bit hex challenge");
    let other = Client::connect(&relay.url).await.wait_challenge().await;
    assert_ne!(challenge, other, "every connection gets its own challenge");

    let relay_tag: &[&str] = &["relay", "wss://relay.example"];
    let ours: &[&str] = &["challenge", &challenge];
    let theirs: &[&str] = &["challenge", &other];
    let elsewhere: &[&str] = &["relay", "wss://elsewhere.example"];
    let cases: Vec<(u64, Vec<&[&str]>, &str)> = vec![
        (now(), vec![relay_tag], "no challenge"),
        (
            now(),
            vec![relay_tag, theirs],
            "another connection's challenge",
        ),
        (now() - 3600, vec![relay_tag, ours], "an hour old"),
        (now(), vec![elsewhere, ours], "another relay"),
        (now(), vec![ours], "no relay tag"),
    ];
    for (created_at, tags, what) in cases {
        let (ok, msg) = c.auth_with(&keys, created_at, &tags).await;
        assert!(!ok && msg.starts_with("invalid:"), "{what}: {msg}");
    }
    // A valid AUTH with a forged signature.
    let mut forged = event(
        &keys,
        now(),
        22242,
        &[relay_tag, &["challenge", &challenge]],
        "",
    );
    forged.sig = Keys::derive(40, 2).sign_id(&forged.id);
    let mut out = Vec::new();
    nostrwire_event::message::write::client_auth(&mut out, &forged);
    c.send_text(String::from_utf8(out).unwrap()).await;
    assert!(matches!(c.recv().await, Got::Ok(_, false, m) if m.starts_with("invalid:")));

    let (ok, msg) = c
        .auth_with(
            &keys,
            now(),
            &[
                &["relay", "WSS://Relay.Example/"],
                &["challenge", &challenge],
            ],
        )
        .await;
    assert!(ok, "{msg}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auth_events_are_never_stored_or_served() {
    let relay = TestRelay::start();
    let keys = Keys::derive(41, 1);
    let mut c = Client::connect(&relay.url).await;
    let challenge = c.wait_challenge().await;
    let as_event = event(&keys, now(), 22242, &[&["challenge", &challenge]], "");
    let (ok, msg) = c.publish(&as_event).await;
    assert!(!ok && msg.starts_with("invalid:"), "{msg}");
    assert!(c.auth(&keys, &relay.url).await.0);
    assert!(c
        .query("q", &[filter(r#"{"kinds":[22242]}"#)])
        .await
        .is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn protected_events_need_their_author_authenticated() {
    let relay = TestRelay::start();
    let author = Keys::derive(42, 1);
    let stranger = Keys::derive(42, 2);
    let base = now();
    let protected = |i: u64| event(&author, base - i, 1, &[&["-"]], "members only");

    let mut c = Client::connect(&relay.url).await;
    let (ok, msg) = c.publish(&protected(1)).await;
    assert!(!ok && msg.starts_with("auth-required:"), "{msg}");
    assert!(c.auth(&stranger, &relay.url).await.0);
    let (ok, msg) = c.publish(&protected(2)).await;
    assert!(!ok && msg.starts_with("restricted:"), "{msg}");

    let mut a = Client::connect(&relay.url).await;
    assert!(a.auth(&author, &relay.url).await.0);
    let (ok, msg) = a.publish(&protected(3)).await;
    assert!(ok, "{msg}");
    let stored = c
        .query(
            "q",
            &[filter(&format!(
                r#"{{"authors":["{}"]}}"#,
                author.public_key().to_hex()
            ))],
        )
        .await;
    assert_eq!(stored.len(), 1, "protected events are readable by anyone");

    // With AUTH turned off there is no way to publish them.
    let off = TestRelay::start_with(|c| c.auth.enabled = false);
    let mut c = Client::connect(&off.url).await;
    let (ok, msg) = c.publish(&protected(4)).await;
    assert!(!ok && msg.starts_with("restricted:"), "{msg}");
    let (ok, msg) = c.auth_with(&author, now(), &[&["challenge", "x"]]).await;
    assert!(!ok && msg.starts_with("restricted:"), "{msg}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn direct_messages_reach_only_their_participants() {
    let relay = TestRelay::start();
    let alice = Keys::derive(43, 1);
    let bob = Keys::derive(43, 2);
    let carol = Keys::derive(43, 3);
    let bob_hex = bob.public_key().to_hex();
    let base = now();
    let dm = event(&alice, base - 2, 4, &[&["p", &bob_hex]], "ciphertext?iv=x");
    let note = event(&alice, base - 1, 1, &[&["p", &bob_hex]], "hello bob");
    let mut writer = Client::connect(&relay.url).await;
    assert!(writer.publish(&dm).await.0);
    assert!(writer.publish(&note).await.0);
    let by_alice = filter(&format!(
        r#"{{"authors":["{}"]}}"#,
        alice.public_key().to_hex()
    ));
    let dms = filter(r#"{"kinds":[4]}"#);

    // Anonymous: asking for kind 4 is refused; a broad filter hides it.
    let mut anon = Client::connect(&relay.url).await;
    anon.req("dm", std::slice::from_ref(&dms)).await;
    assert!(
        matches!(anon.recv().await, Got::Closed(s, m) if s == "dm" && m.starts_with("auth-required:"))
    );
    let seen = anon.query("all", std::slice::from_ref(&by_alice)).await;
    assert_eq!(seen.iter().map(|e| e.id).collect::<Vec<_>>(), vec![note.id]);
    anon.send_text(r#"["COUNT","c",{}]"#).await;
    assert!(matches!(anon.recv().await, Got::Count(s, 1) if s == "c"));

    // The recipient and the author see it; someone else does not.
    for (keys, expect) in [(&bob, 2), (&alice, 2), (&carol, 1)] {
        let mut c = Client::connect(&relay.url).await;
        assert!(c.auth(keys, &relay.url).await.0);
        assert_eq!(
            c.query("all", std::slice::from_ref(&by_alice)).await.len(),
            expect
        );
    }

    // Live: bob gets the next message, carol (authenticated, asking for
    // everything) does not.
    let mut b = Client::connect(&relay.url).await;
    assert!(b.auth(&bob, &relay.url).await.0);
    b.req(
        "live",
        &[filter(&format!(r#"{{"kinds":[4],"since":{base}}}"#))],
    )
    .await;
    assert!(matches!(b.recv().await, Got::Eose(s) if s == "live"));
    let mut c = Client::connect(&relay.url).await;
    assert!(c.auth(&carol, &relay.url).await.0);
    c.req("live", &[filter("{}")]).await;
    while !matches!(c.recv().await, Got::Eose(_)) {}
    let dm2 = event(&alice, base, 4, &[&["p", &bob_hex]], "again?iv=y");
    assert!(writer.publish(&dm2).await.0);
    assert!(matches!(b.recv().await, Got::Event(s, e) if s == "live" && e.id == dm2.id));
    c.expect_silence().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_challenge_can_wait_for_the_first_auth_required_answer() {
    let relay = TestRelay::start_with(|c| c.auth.challenge_on_connect = false);
    let author = Keys::derive(47, 1);
    let mut c = Client::connect(&relay.url).await;
    // Frames arrive in order: a challenge sent on connect would come first.
    let (ok, msg) = c.publish(&event(&author, now(), 1, &[], "hello")).await;
    assert!(ok, "{msg}");
    assert!(c.query("q", &[filter(r#"{"kinds":[1]}"#)]).await.len() == 1);
    assert_eq!(c.challenge, None, "no challenge before it is needed");
    // A protected event needs it: the challenge comes before the answer.
    let (ok, msg) = c
        .publish(&event(&author, now(), 1, &[&["-"]], "mine"))
        .await;
    assert!(!ok && msg.starts_with("auth-required:"), "{msg}");
    let first = c
        .challenge
        .clone()
        .expect("the challenge before auth-required");
    // So does a read of a restricted kind, on another connection.
    let mut d = Client::connect(&relay.url).await;
    d.req("dm", &[filter(r#"{"kinds":[4]}"#)]).await;
    match d.recv().await {
        Got::Closed(id, m) => assert!(id == "dm" && m.starts_with("auth-required:"), "{m}"),
        other => panic!("expected CLOSED, got {other:?}"),
    }
    assert!(d.challenge.as_ref().is_some_and(|ch| ch != &first));
    // The challenge answers: authenticated, the protected event goes in.
    assert!(c.auth(&author, &relay.url).await.0);
    let (ok, msg) = c
        .publish(&event(&author, now(), 1, &[&["-"]], "mine"))
        .await;
    assert!(ok, "{msg}");
}
