//! The relay against hostile clients (docs/security.md), over real sockets:
//! each test is one attack, and checks both that it is refused and that the
//! relay keeps serving.

mod support;

use nostrwire_event::Keys;
use support::{event, filter, now, Client};

/// NIP-09: a deletion by anyone but the author never weakens the author's
/// tombstone, whether the deleted event is stored or not.
#[tokio::test]
async fn deletions_by_others_never_undo_a_deletion() {
    let relay = support::TestRelay::start();
    let mut c = Client::connect(&relay.url).await;
    let victim = Keys::derive(40, 1);
    let attacker = Keys::derive(40, 2);
    let t = now() - 100;

    // The event is stored, then deleted by its author, then "deleted" again
    // by someone else.
    let note = event(&victim, t, 1, &[], "deleted for good");
    assert!(c.publish(&note).await.0);
    let own = event(&victim, t + 1, 5, &[&["e", &note.id.to_hex()]], "");
    assert!(c.publish(&own).await.0);
    let other = event(&attacker, t + 2, 5, &[&["e", &note.id.to_hex()]], "");
    assert!(c.publish(&other).await.0);
    let (ok, msg) = c.publish(&note).await;
    assert!(
        !ok,
        "a deleted event came back after another author's deletion: {msg}"
    );
    assert!(msg.starts_with("blocked:"), "{msg}");
    assert!(c.query("q", &[filter(r#"{"kinds":[1]}"#)]).await.is_empty());

    // Deletions of an event the relay has not seen yet, in either order.
    for (n, attacker_first) in [(0, true), (1, false)] {
        let later = event(&victim, t + 10 + n, 1, &[], &format!("arrives later {n}"));
        let own = event(&victim, t + 20, 5, &[&["e", &later.id.to_hex()]], "");
        let other = event(&attacker, t + 21, 5, &[&["e", &later.id.to_hex()]], "");
        let order = if attacker_first {
            [&other, &own]
        } else {
            [&own, &other]
        };
        for deletion in order {
            assert!(c.publish(deletion).await.0);
        }
        let (ok, msg) = c.publish(&later).await;
        assert!(!ok, "attacker first: {attacker_first}: {msg}");
        assert!(msg.starts_with("blocked:"), "{msg}");
    }
    // Another author's deletion alone binds nothing.
    let kept = event(&victim, t + 30, 1, &[], "not deleted");
    let other = event(&attacker, t + 31, 5, &[&["e", &kept.id.to_hex()]], "");
    assert!(c.publish(&other).await.0);
    assert!(c.publish(&kept).await.0);
    assert_eq!(
        c.query("q", &[filter(r#"{"kinds":[1]}"#)]).await,
        vec![kept]
    );
}
