//! rust-nostr's `nostr-sdk` client publishes, queries and receives live
//! events through a nostrwire relay on a loopback port.

use std::time::Duration;

use nostr_sdk::prelude::*;
use nostrwire_relay::Config;

struct Relay {
    relay: Option<nostrwire_relay::Relay>,
    _dir: tempfile::TempDir,
    url: String,
}

impl Relay {
    fn start() -> Relay {
        let dir = tempfile::tempdir().unwrap();
        let mut config = Config::default();
        config.relay.listen = "127.0.0.1:0".into();
        config.relay.data = dir.path().to_path_buf();
        config.storage.map_size_gib = 1;
        let relay = nostrwire_relay::start(config).unwrap();
        let url = format!("ws://{}", relay.local_addr());
        Relay {
            relay: Some(relay),
            _dir: dir,
            url,
        }
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        if let Some(relay) = self.relay.take() {
            relay.shutdown();
        }
    }
}

const WAIT: Duration = Duration::from_secs(10);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nostr_sdk_publishes_queries_and_receives_live_events() {
    let relay = Relay::start();

    let alice = Keys::generate();
    let writer = Client::new(alice.clone());
    writer.add_relay(&relay.url).await.unwrap();
    writer.connect().await;

    let reader = Client::default();
    reader.add_relay(&relay.url).await.unwrap();
    reader.connect().await;

    // Publish: the relay acknowledges with OK true.
    let first = writer
        .send_event_builder(
            EventBuilder::text_note("hello from nostr-sdk").tags([Tag::hashtag("nostrwire")]),
        )
        .await
        .unwrap();
    assert_eq!(first.success.len(), 1, "relay refused: {:?}", first.failed);

    // Query by author and by tag.
    let by_author = reader
        .fetch_events(
            Filter::new()
                .author(alice.public_key())
                .kind(Kind::TextNote),
            WAIT,
        )
        .await
        .unwrap();
    assert_eq!(by_author.len(), 1);
    let stored = by_author.first().unwrap();
    assert_eq!(stored.id, *first.id());
    assert_eq!(stored.content, "hello from nostr-sdk");
    stored.verify().expect("the relay served a valid event");
    let by_tag = reader
        .fetch_events(Filter::new().hashtag("nostrwire"), WAIT)
        .await
        .unwrap();
    assert_eq!(by_tag.len(), 1);

    // Live: subscribe, then publish; the event arrives on the subscription.
    let mut notifications = reader.notifications();
    let live_filter = Filter::new()
        .author(alice.public_key())
        .kind(Kind::TextNote)
        .since(Timestamp::now());
    let sub = reader.subscribe(live_filter, None).await.unwrap();
    // Wait for EOSE so the publish below is a live event, not a stored one.
    tokio::time::timeout(WAIT, async {
        loop {
            if let Ok(RelayPoolNotification::Message {
                message: RelayMessage::EndOfStoredEvents(id),
                ..
            }) = notifications.recv().await
            {
                if *id == sub.val {
                    break;
                }
            }
        }
    })
    .await
    .expect("EOSE");
    let second = writer
        .send_event_builder(EventBuilder::text_note("live"))
        .await
        .unwrap();
    assert_eq!(
        second.success.len(),
        1,
        "relay refused: {:?}",
        second.failed
    );
    let got = tokio::time::timeout(WAIT, async {
        loop {
            if let Ok(RelayPoolNotification::Event {
                subscription_id,
                event,
                ..
            }) = notifications.recv().await
            {
                if subscription_id == sub.val {
                    return event;
                }
            }
        }
    })
    .await
    .expect("live event");
    assert_eq!(got.id, *second.id());

    // A forged event is refused with an `invalid:` OK.
    let mut forged = EventBuilder::text_note("original")
        .sign_with_keys(&alice)
        .unwrap();
    forged.content = "tampered".into();
    let refused = reader.send_event(&forged).await;
    match refused {
        Ok(output) => {
            assert!(output.success.is_empty());
            let reason = output.failed.values().next().unwrap();
            assert!(reason.starts_with("invalid:"), "{reason}");
        }
        Err(e) => panic!("send_event: {e}"),
    }

    writer.disconnect().await;
    reader.disconnect().await;
}
