//! Issue 27, item 3: without a terminal (a log, CI), `nostrwire import`
//! prints its progress as plain lines, one per phase, never carriage returns.

use std::process::Command;

#[test]
fn import_progress_in_a_log_is_plain_lines() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("db");
    // A new database: import, then compaction, each with its progress.
    let out = Command::new(env!("CARGO_BIN_EXE_nostrwire"))
        .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
        .args(["import", "--data"])
        .arg(&data)
        .arg("testdata/real-events.jsonl")
        .output()
        .unwrap();
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(out.status.success(), "{stderr}");
    assert!(!stderr.contains('\r'), "{stderr:?}");
    let lines: Vec<&str> = stderr.lines().collect();
    assert!(lines.contains(&"importing"), "{stderr}");
    assert!(lines.contains(&"compacting: events"), "{stderr}");
    assert!(
        lines
            .last()
            .unwrap()
            .starts_with("compacted the new database from"),
        "{stderr}"
    );
    // One line per phase, not one per update.
    let mut phases = lines.clone();
    phases.sort_unstable();
    phases.dedup();
    assert_eq!(phases.len(), lines.len(), "{stderr}");
}
