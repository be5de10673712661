//! `nostrwire verify` end to end: output format, exit codes, and output order
//! independent of the thread count.

use std::io::Write;
use std::process::{Command, Stdio};

const CORPUS: &str = include_str!("../../../testdata/real-events.jsonl");

fn run(args: &[&str], stdin: &str) -> (i32, String, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_nostrwire"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut input = child.stdin.take().unwrap();
    let data = stdin.to_string();
    let writer = std::thread::spawn(move || input.write_all(data.as_bytes()));
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap().unwrap();
    (
        out.status.code().unwrap(),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

/// The corpus with every 50th event broken in a different way.
fn mixed_input() -> (String, usize) {
    let mut out = String::new();
    let mut broken = 0;
    for (i, line) in CORPUS.lines().enumerate() {
        let line = match i % 150 {
            0 => {
                broken += 1;
                line.replacen("\"kind\":", "\"kind\":-", 1)
            }
            50 => {
                broken += 1;
                line.replacen("\"content\":\"", "\"content\":\"x", 1)
            }
            100 => {
                broken += 1;
                format!("{line} trailing")
            }
            _ => line.to_string(),
        };
        out.push_str(&line);
        out.push('\n');
        if i == 10 {
            out.push('\n'); // blank lines are skipped, but still counted
        }
    }
    (out, broken)
}

#[test]
fn all_valid_corpus() {
    let (code, out, _) = run(&["verify", "-"], CORPUS);
    assert_eq!(code, 0);
    assert_eq!(out, "1001 valid, 0 invalid\n");
}

#[test]
fn invalid_lines_are_reported_in_order_for_any_thread_count() {
    let (input, broken) = mixed_input();
    let (code, one, _) = run(&["verify", "--threads", "1"], &input);
    assert_eq!(code, 1);
    let lines: Vec<&str> = one.lines().collect();
    assert_eq!(lines.len(), broken + 1);
    assert_eq!(
        *lines.last().unwrap(),
        format!("{} valid, {broken} invalid", 1001 - broken)
    );
    assert!(lines[0].starts_with("line 1: "), "{}", lines[0]);
    assert!(lines[0].contains(": negative_number: "), "{}", lines[0]);
    assert!(lines[1].starts_with("line 52: "), "{}", lines[1]);
    assert!(lines[1].contains(": id_mismatch: "), "{}", lines[1]);
    assert!(lines[2].contains(": trailing_data: "), "{}", lines[2]);
    for threads in ["2", "3", "8"] {
        let (code, many, _) = run(&["verify", "--threads", threads], &input);
        assert_eq!(code, 1);
        assert_eq!(many, one, "threads={threads}");
    }
}

#[test]
fn usage_and_io_errors_exit_2() {
    let (code, _, err) = run(&["verify", "/definitely/not/here.jsonl"], "");
    assert_eq!(code, 2);
    assert!(err.contains("cannot open"), "{err}");
    let (code, _, _) = run(&["verify", "--threads", "lots"], "");
    assert_eq!(code, 2);
}

#[test]
fn oversized_lines_are_rejected_not_buffered() {
    let input = format!("{}\n{}\n", "x".repeat(5000), CORPUS.lines().next().unwrap());
    let (code, out, _) = run(&["verify", "--max-line-bytes", "4096"], &input);
    assert_eq!(code, 1);
    assert!(out.starts_with("line 1: -: too_large: "), "{out}");
    assert!(out.ends_with("1 valid, 1 invalid\n"), "{out}");
}
