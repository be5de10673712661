//! `nostrwire export --filter` with a `search`: answered from the search
//! index, and refused with a clear error when there is none to read.

use std::process::Command;

mod support;
use support::nostrwire;

#[test]
fn a_search_export_needs_a_search_index() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let db = db.to_str().unwrap();
    nostrwire(&["import", "--data", db, "testdata/real-events.jsonl"]);
    let search = r#"{"search":"nostr"}"#;
    let found = nostrwire(&["export", "--data", db, "--filter", search]);
    assert!(found.lines().count() > 10, "{found}");

    // Without the index (removed while no relay ran), the export says so
    // instead of printing nothing.
    std::fs::remove_dir_all(dir.path().join("db").join("search")).unwrap();
    let refused = Command::new(env!("CARGO_BIN_EXE_nostrwire"))
        .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
        .args(["export", "--data", db, "--filter", search])
        .output()
        .unwrap();
    assert!(!refused.status.success());
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(stderr.contains("no search index"), "{stderr}");
    // Other filters are exported as before.
    let all = nostrwire(&["export", "--data", db]);
    assert!(all.lines().count() > 500);
}
