//! `nostrwire compact` end to end: the copy holds the same events, is not
//! larger than the database, opens as a relay database, and an existing copy
//! is never overwritten.

mod support;

use std::process::Command;

use support::nostrwire;

#[test]
fn compacted_copy_holds_the_same_events() {
    let dir = tempfile::tempdir().unwrap();
    let path = |name: &str| dir.path().join(name).to_string_lossy().into_owned();
    nostrwire(&[
        "import",
        "--data",
        &path("db"),
        "--batch",
        "50",
        "testdata/real-events.jsonl",
    ]);
    nostrwire(&["compact", "--data", &path("db"), "--output", &path("copy")]);
    let size = |p: &str| std::fs::metadata(p).unwrap().len();
    let (original, copy) = (size(&path("db/data.mdb")), size(&path("copy/data.mdb")));
    assert!(copy <= original, "copy {copy} > original {original}");
    // The search index, in its own environment, is copied beside it.
    let (original, copy) = (
        size(&path("db/search/data.mdb")),
        size(&path("copy/search/data.mdb")),
    );
    assert!(copy <= original, "search copy {copy} > original {original}");

    let original = nostrwire(&["export", "--data", &path("db")]);
    let copied = nostrwire(&["export", "--data", &path("copy")]);
    assert!(original.lines().count() > 500);
    assert_eq!(original, copied);
    // The copy opens as a relay database (export checks the schema and
    // brings the indexes up to date first) and answers filters alike.
    let filter = r##"{"kinds":[1],"#t":["nostr"]}"##;
    let selected = nostrwire(&["export", "--data", &path("copy"), "--filter", filter]);
    assert!(!selected.is_empty());
    assert_eq!(
        selected,
        nostrwire(&["export", "--data", &path("db"), "--filter", filter]),
    );

    let again = Command::new(env!("CARGO_BIN_EXE_nostrwire"))
        .args(["compact", "--data", &path("db"), "--output", &path("copy")])
        .output()
        .unwrap();
    assert!(!again.status.success());
    assert!(
        String::from_utf8_lossy(&again.stderr).contains("already exists"),
        "{}",
        String::from_utf8_lossy(&again.stderr)
    );
    assert_eq!(nostrwire(&["export", "--data", &path("copy")]), copied);
}
