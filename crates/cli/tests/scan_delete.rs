//! `nostrwire scan` and `nostrwire delete` on a data directory: the scan
//! finds what `export` finds, a dry run changes nothing, and `--yes`
//! removes exactly the events the filter matches.

mod support;

use std::collections::BTreeSet;

use support::nostrwire;

fn ids(jsonl: &str) -> BTreeSet<String> {
    jsonl
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            v["id"].as_str().unwrap().to_string()
        })
        .collect()
}

#[test]
fn delete_removes_exactly_what_the_scan_matched() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("db").to_string_lossy().into_owned();
    nostrwire(&["import", "--data", &data, "testdata/real-events.jsonl"]);
    let scan = |filter: &str| ids(&nostrwire(&["scan", "--data", &data, "--filter", filter]));
    let all = scan("{}");
    assert_eq!(
        all,
        ids(&nostrwire(&["export", "--data", &data])),
        "scan of everything"
    );
    let filter = r#"{"kinds":[7,9735]}"#;
    let doomed = scan(filter);
    assert_eq!(
        doomed,
        ids(&nostrwire(&["export", "--data", &data, "--filter", filter]))
    );
    assert!(!doomed.is_empty() && doomed.len() < all.len());
    // A limit caps the scan to the newest matches.
    assert_eq!(scan(r#"{"kinds":[7,9735],"limit":5}"#).len(), 5);

    let dry = nostrwire(&["delete", "--data", &data, "--filter", filter]);
    assert_eq!(ids(&dry), doomed, "the dry run prints what would go");
    assert_eq!(scan("{}"), all, "and removes nothing");

    nostrwire(&["delete", "--data", &data, "--filter", filter, "--yes"]);
    let left = scan("{}");
    let expected: BTreeSet<String> = all.difference(&doomed).cloned().collect();
    assert_eq!(left, expected);
    assert!(scan(filter).is_empty());
    assert_eq!(left, ids(&nostrwire(&["export", "--data", &data])));
}
