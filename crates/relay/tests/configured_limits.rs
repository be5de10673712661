//! A relay whose `[limits]` are above the defaults serves what it admitted
//! under them: stored, answered over JSON and `nostrwire.v2`, delivered
//! live, and exported, never answered `error: internal error`.

mod support;

use nostrwire_event::{Event, Keys};
use nostrwire_store::EventStore;
use support::{event, filter, Client, Got, TestRelay};

/// More tags than the JSON parser's default limit admits.
const TAGS: usize = 25_000;

/// A signed note with `TAGS` tags, half of them hex (`p`), half text (`t`).
fn many_tags(keys: &Keys) -> Event {
    let values: Vec<[String; 2]> = (0..TAGS)
        .map(|i| match i % 2 {
            0 => ["p".into(), format!("{i:064x}")],
            _ => ["t".into(), format!("topic{i}")],
        })
        .collect();
    let tags: Vec<[&str; 2]> = values
        .iter()
        .map(|[a, b]| [a.as_str(), b.as_str()])
        .collect();
    let tags: Vec<&[&str]> = tags.iter().map(|t| t.as_slice()).collect();
    event(keys, support::now(), 1, &tags, "a note with many tags")
}

/// A client that reads what a relay with `limits` may send.
fn reading(mut client: Client, limits: nostrwire_event::Limits) -> Client {
    client.limits = limits;
    client
}

#[tokio::test(flavor = "multi_thread")]
async fn an_event_admitted_under_raised_limits_is_served_everywhere() {
    let relay = TestRelay::start_with(|c| {
        c.limits.max_event_tags = 30_000;
        c.limits.max_message_bytes = 4 << 20;
    });
    let limits = relay.config.event_limits();
    let keys = Keys::derive(43, 1);
    let note = many_tags(&keys);
    let default_tags = nostrwire_event::Limits::DEFAULT.max_tags;
    assert!(note.tags.len() > default_tags, "not above the default");
    let by_author = filter(&format!(
        r#"{{"authors":["{}"]}}"#,
        keys.public_key().to_hex()
    ));

    // Live subscribers on both transports, waiting before it is published.
    let mut live_json = reading(Client::connect(&relay.url).await, limits);
    let mut live_v2 = reading(Client::connect_v2(&relay.url).await, limits);
    for c in [&mut live_json, &mut live_v2] {
        c.req("live", std::slice::from_ref(&by_author)).await;
        assert_eq!(c.recv().await, Got::Eose("live".into()));
    }

    let mut publisher = reading(Client::connect(&relay.url).await, limits);
    let (ok, message) = publisher.publish(&note).await;
    assert!(ok, "{message}");

    for c in [&mut live_json, &mut live_v2] {
        match c.recv().await {
            Got::Event(sub, got) => {
                assert_eq!(sub, "live");
                assert_eq!(got, note);
            }
            other => panic!("expected the live event, got {other:?}"),
        }
    }

    // Stored queries, over JSON and over nostrwire.v2.
    let mut json = reading(Client::connect(&relay.url).await, limits);
    assert_eq!(
        json.query("q", std::slice::from_ref(&by_author)).await,
        std::slice::from_ref(&note)
    );
    let mut v2 = reading(Client::connect_v2(&relay.url).await, limits);
    assert_eq!(
        v2.query("q", std::slice::from_ref(&by_author)).await,
        std::slice::from_ref(&note)
    );
    let by_tag = filter(r##"{"#t":["topic24999"]}"##);
    assert_eq!(
        json.query("t", &[by_tag]).await,
        std::slice::from_ref(&note)
    );

    // Exported from the database, as `nostrwire export` reads it.
    let mut relay = relay;
    relay.relay.take().unwrap().shutdown();
    let store = nostrwire_relay::open_store(&relay.config, false).unwrap();
    let mut exported = Vec::new();
    store
        .export(&nostrwire_event::Filter::default(), &mut |found| {
            exported.push(Event::from_json_with(&found.json, &limits).unwrap());
            true
        })
        .unwrap();
    assert_eq!(exported, [note]);
}
