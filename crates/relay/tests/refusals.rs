//! Issue 27, item 1: an EVENT the parser refuses (a limit, a bad field) is
//! answered `OK false "invalid: ..."` under its id whenever the id can be
//! read, on JSON and binary connections alike; a NOTICE only when it cannot.

mod support;

use nostrwire_event::{Event, Keys, SignedFields};
use nostrwire_wire::{transport, try_encode_event, Limits};
use support::{event, now, Client, Got, TestRelay};

/// A signed kind-1 event with one tag of `elements` elements.
fn wide_tag_event(keys: &Keys, elements: usize) -> Event {
    let tag: Vec<String> = std::iter::once("t".to_string())
        .chain((1..elements).map(|i| i.to_string()))
        .collect();
    let tag: Vec<&str> = tag.iter().map(String::as_str).collect();
    event(keys, now(), 1, &[&tag], "wide")
}

/// The event's JSON with the `id` member moved to the end.
fn id_last(e: &Event) -> String {
    let json = e.to_json();
    let id = format!(r#""id":"{}","#, e.id.to_hex());
    let rest = json.replacen(&id, "", 1);
    format!(r#"{},"id":"{}"}}"#, &rest[..rest.len() - 1], e.id.to_hex())
}

async fn expect_refused(c: &mut Client, e: &Event, kind: &str) {
    match c.recv().await {
        Got::Ok(id, false, msg) => {
            assert_eq!(id, e.id.to_hex());
            assert!(msg.starts_with("invalid:"), "{msg}");
            assert!(msg.contains(kind), "{msg}");
        }
        other => panic!("expected OK false ({kind}), got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_over_a_limit_get_ok_false_under_their_id() {
    let relay = TestRelay::start_with(|c| c.limits.max_event_tags = 100);
    let keys = Keys::derive(27, 1);
    for binary in [false, true] {
        let mut c = if binary {
            Client::connect_binary(&relay.url).await
        } else {
            Client::connect(&relay.url).await
        };
        // 1,001 elements, one over the limit: the id comes first.
        let wide = wide_tag_event(&keys, 1_001);
        c.send_json(format!(r#"["EVENT",{}]"#, wide.to_json()).into_bytes())
            .await;
        expect_refused(&mut c, &wide, "too_many_tag_elements").await;
        // The same with the id after the tags, far beyond the first 4 KiB.
        c.send_json(format!(r#"["EVENT",{}]"#, id_last(&wide)).into_bytes())
            .await;
        expect_refused(&mut c, &wide, "too_many_tag_elements").await;
        // Too many tags.
        let tags: Vec<[String; 2]> = (0..101).map(|i| ["t".into(), i.to_string()]).collect();
        let tags: Vec<[&str; 2]> = tags.iter().map(|[a, b]| [a.as_str(), b.as_str()]).collect();
        let tags: Vec<&[&str]> = tags.iter().map(|t| &t[..]).collect();
        let many = event(&keys, now(), 1, &tags, "many");
        c.send_json(format!(r#"["EVENT",{}]"#, id_last(&many)).into_bytes())
            .await;
        expect_refused(&mut c, &many, "too_many_tags").await;
        // A bad field after the id.
        let json = many.to_json().replace("\"kind\":1", "\"kind\":1.5");
        c.send_json(format!(r#"["EVENT",{json}]"#).into_bytes())
            .await;
        expect_refused(&mut c, &many, "invalid_number").await;
        // No id to answer under: a NOTICE.
        c.send_json(br#"["EVENT",{"kind":1,"tags":[[]]}]"#.to_vec())
            .await;
        assert!(
            matches!(c.recv().await, Got::Notice(m) if m.starts_with("invalid:")),
            "binary: {binary}"
        );
        // The connection keeps working.
        let fine = wide_tag_event(&keys, 1_000 - usize::from(binary));
        assert_eq!(c.publish(&fine).await, (true, String::new()));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn binary_event_frames_over_a_limit_get_ok_false_under_their_id() {
    let relay = TestRelay::start();
    let mut c = Client::connect_binary(&relay.url).await;
    let keys = Keys::derive(27, 2);
    let wide = wide_tag_event(&keys, 1_001);
    // Only an encoder told to ignore the limits writes this record.
    let unlimited = Limits {
        max_tag_elements: usize::MAX,
        ..Limits::DEFAULT
    };
    let mut frame = Vec::new();
    transport::write_event(&mut frame, &try_encode_event(&wide, &unlimited).unwrap());
    c.send_binary(frame).await;
    expect_refused(&mut c, &wide, "element").await;
    // A record cut short before the end of its id: a NOTICE.
    c.send_binary(vec![transport::EVENT, 1, 0, 0]).await;
    assert!(matches!(c.recv().await, Got::Notice(m) if m.starts_with("invalid:")));
}
