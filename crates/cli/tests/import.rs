//! `nostrwire import` end to end: rejected lines are counted by reason, the
//! rest stored, and the stored set does not depend on the batch size (the
//! next batch is verified while the previous one is written).

mod support;

use support::nostrwire;

const CORPUS: &str = include_str!("../../../testdata/real-events.jsonl");

fn sorted_lines(text: &str) -> Vec<String> {
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    lines.sort();
    lines
}

#[test]
fn stored_set_is_independent_of_batches_and_bad_lines() {
    let dir = tempfile::tempdir().unwrap();
    let path = |name: &str| dir.path().join(name).to_string_lossy().into_owned();
    // `dirty`: every 97th event with a bad signature, the next replaced by
    // garbage, the one after sent twice. `expected`: the same minus the bad.
    let (mut dirty, mut expected) = (String::new(), String::new());
    let (mut bad_sig, mut garbage, mut twice) = (0, 0, 0);
    for (i, line) in CORPUS.lines().enumerate() {
        let sig_at = line.find("\"sig\":\"").unwrap() + 7;
        match i % 97 {
            1 => {
                let flipped = if &line[sig_at..sig_at + 1] == "0" {
                    "1"
                } else {
                    "0"
                };
                dirty.push_str(&format!(
                    "{}{flipped}{}\n",
                    &line[..sig_at],
                    &line[sig_at + 1..]
                ));
                bad_sig += 1;
            }
            2 => {
                dirty.push_str("x\n");
                garbage += 1;
            }
            n => {
                dirty.push_str(&format!("{line}\n"));
                expected.push_str(&format!("{line}\n"));
                if n == 3 {
                    dirty.push_str(&format!("{line}\n"));
                    twice += 1;
                }
            }
        }
    }
    std::fs::write(path("dirty.jsonl"), dirty).unwrap();
    std::fs::write(path("expected.jsonl"), expected).unwrap();

    let summary = nostrwire(&[
        "import",
        "--data",
        &path("many"),
        "--batch",
        "7",
        &path("dirty.jsonl"),
    ]);
    assert!(
        summary.contains(&format!("{bad_sig} invalid_signature")),
        "{summary}"
    );
    assert!(summary.contains(&format!("{garbage} syntax")), "{summary}");
    // A second copy is a duplicate unless a newer version or a deletion
    // already replaced the first.
    assert!(twice > 0 && summary.contains(" duplicate"), "{summary}");
    nostrwire(&["import", "--data", &path("one"), &path("expected.jsonl")]);
    nostrwire(&[
        "import",
        "--no-compact",
        "--data",
        &path("loose"),
        &path("expected.jsonl"),
    ]);

    let from_one = sorted_lines(&nostrwire(&["export", "--data", &path("one")]));
    let from_many = sorted_lines(&nostrwire(&["export", "--data", &path("many")]));
    let from_loose = sorted_lines(&nostrwire(&["export", "--data", &path("loose")]));
    assert!(from_one.len() > 500, "{}", from_one.len());
    assert_eq!(from_one, from_many);
    assert_eq!(from_one, from_loose);
    // An import that creates the database leaves it compacted, and nothing
    // of the copy behind.
    let size = |name: &str| {
        std::fs::metadata(dir.path().join(name).join("data.mdb"))
            .unwrap()
            .len()
    };
    assert!(
        size("one") < size("loose"),
        "{} {}",
        size("one"),
        size("loose")
    );
    assert!(!dir.path().join("one").join("compacting").exists());
    // Importing into an existing database keeps it as it is (and works),
    // and removes what an interrupted compaction left.
    std::fs::create_dir(dir.path().join("one").join("compacting")).unwrap();
    nostrwire(&["import", "--data", &path("one"), &path("expected.jsonl")]);
    assert!(!dir.path().join("one").join("compacting").exists());
    assert_eq!(
        sorted_lines(&nostrwire(&["export", "--data", &path("one")])),
        from_one
    );
}

/// An import that creates its database syncs only at the end; a `kill -9`
/// before that must still leave a database that opens and holds whole
/// events (the committed batches), which a second import then completes.
#[test]
fn a_killed_import_leaves_a_database_that_opens() {
    use std::io::Write;
    use std::process::{Command, Stdio};

    let dir = tempfile::tempdir().unwrap();
    let path = |name: &str| dir.path().join(name).to_string_lossy().into_owned();
    nostrwire(&[
        "generate",
        "--count",
        "15000",
        "--newest",
        "1700000000",
        "-o",
        &path("events.jsonl"),
    ]);
    let events = std::fs::read_to_string(path("events.jsonl")).unwrap();
    let mut import = Command::new(env!("CARGO_BIN_EXE_nostrwire"))
        .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
        .args(["import", "--data", &path("db"), "--batch", "500", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Two batches, then the input stays open: the import commits them and
    // waits for more, until it is killed once they can be read.
    let mut stdin = import.stdin.take().unwrap();
    for line in events.lines().take(1_000) {
        writeln!(stdin, "{line}").unwrap();
    }
    stdin.flush().unwrap();
    let committed = || {
        // Until the import has created the database, nothing to read.
        if !dir.path().join("db").join("data.mdb").exists() {
            return 0;
        }
        let out = Command::new(env!("CARGO_BIN_EXE_nostrwire"))
            .args(["export", "--data", &path("db")])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).lines().count()
    };
    let started = std::time::Instant::now();
    while committed() == 0 {
        assert!(
            started.elapsed() < std::time::Duration::from_secs(120),
            "the first batches were not committed"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    import.kill().unwrap();
    let status = import.wait().unwrap();
    assert!(!status.success(), "the import ended before it was killed");

    let exported = nostrwire(&["export", "--data", &path("db")]);
    let kept = exported.lines().count();
    assert!((1..15_000).contains(&kept), "{kept} events after the kill");
    for line in exported.lines() {
        use nostrwire_event::SignedFields;
        nostrwire_event::Event::from_json(line)
            .unwrap()
            .verify()
            .unwrap();
    }
    // Importing the file again stores the rest.
    nostrwire(&["import", "--data", &path("db"), &path("events.jsonl")]);
    let complete = nostrwire(&["export", "--data", &path("db")]);
    assert!(complete.lines().count() > kept);
}
