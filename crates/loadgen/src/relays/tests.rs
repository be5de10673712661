use super::abuse::{abuse_row, ms};
use super::bench::{classify, Answer};
use super::procs::{self, Kind};
use super::*;

#[test]
fn query_runs_first_and_abuse_runs_apart() {
    let p = Plan::new("publish,query,abuse-slow-readers,mixed");
    assert_eq!(p.normal, ["query", "publish", "mixed"]);
    assert_eq!(p.attacks, ["abuse-slow-readers"]);
    assert!(p.query_moved);
    let p = Plan::new("query,publish");
    assert!(!p.query_moved);
    let p = Plan::new("abuse");
    assert!(p.normal.is_empty());
    assert_eq!(p.attacks.len(), abuse::ATTACKS.len());
}

#[test]
fn nostr_bench_runs_two_rounds_unless_told() {
    assert_eq!(bench_rounds(None, 1), 2);
    assert_eq!(bench_rounds(None, 3), 3);
    assert_eq!(bench_rounds(Some(1), 3), 1);
}

#[test]
fn peers_are_named() {
    for name in ["khatru-lmdb", "khatru-badger", "nostr-rs-relay", "rnostr"] {
        assert_eq!(Kind::peer(name).unwrap().name(), name);
    }
    assert!(Kind::peer("strfry").is_err());
    assert_eq!(Kind::Ours.name(), crate::headline::OURS);
}

#[test]
fn ours_lifts_only_what_equal_work_needs_and_keeps_defaults_under_attack() {
    let (text, changed) = procs::ours_config(true, true);
    assert_eq!(text, "");
    assert!(changed.contains("challenge_on_connect"));
    let (text, _) = procs::ours_config(false, false);
    assert!(text.contains("connections_per_ip = 0") && text.contains("restricted_kinds = []"));
    assert!(!text.contains("challenge_on_connect"));
    let (text, changed) = procs::ours_config(false, true);
    assert!(text.ends_with("challenge_on_connect = false\n"));
    assert!(changed.contains("challenge_on_connect"));
}

#[test]
fn peer_configs_name_their_port_and_data() {
    let data = std::path::Path::new("/tmp/x");
    let c = procs::nostr_rs_relay_config(7791, data);
    assert!(c.contains("port = 7791") && c.contains("data_directory = \"/tmp/x\""));
    assert!(c.contains("nip42_auth = false") && c.contains("max_event_bytes = 1048576"));
    let c = procs::rnostr_config(7792, data);
    assert!(c.contains("port = 7792") && c.contains("path = \"/tmp/x/db\""));
    assert!(c.contains("[rate_limiter]\nenabled = false"));
}

#[test]
fn the_pins_are_the_ones_the_install_script_installs() {
    let script = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/compare-relays.sh"),
    )
    .unwrap();
    for (var, pin) in [
        ("KHATRU_VERSION", procs::KHATRU_VERSION),
        ("EVENTSTORE_VERSION", procs::EVENTSTORE_VERSION),
        ("GO_NOSTR_VERSION", procs::GO_NOSTR_VERSION),
        ("NOSTR_RS_RELAY_VERSION", procs::NOSTR_RS_RELAY_VERSION),
        ("RNOSTR_VERSION", procs::RNOSTR_VERSION),
        ("NOSTR_BENCH_VERSION", procs::NOSTR_BENCH_VERSION),
    ] {
        assert!(
            script.contains(&format!("\n{var}={pin}\n")),
            "{var} is not {pin} in compare-relays.sh"
        );
    }
}

#[test]
fn greetings_are_classified() {
    assert_eq!(procs::classify_greeting(b""), "nothing");
    assert_eq!(
        procs::classify_greeting(b"HTTP/1.1 101\r\n\r\n\x81\x10[\"AUTH\",\"abc\"]"),
        "AUTH"
    );
    assert_eq!(procs::classify_greeting(b"[ \"AUTH\",\"x\"]"), "AUTH");
    assert_eq!(procs::classify_greeting(b"[\"NOTICE\",\"hi\"]"), "other");
    assert_eq!(
        procs::classify_greeting(b"HTTP/1.1 101 Switching"),
        "nothing"
    );
}

#[test]
fn the_index_backlog_is_summed_from_metrics() {
    let m = "# HELP x\nnostrwire_db_index_backlog_events 3\nnostrwire_db_search_backlog_events 4\nnostrwire_db_index_backlog_events_total 9\n";
    assert_eq!(procs::backlog(m), 7);
    assert_eq!(procs::backlog(""), 0);
}

#[test]
fn check_answers_are_matched_by_subscription() {
    let mut seed = Vec::new();
    nostr_bench::write_seed(&mut seed, 1, 1, 1, 1_700_000_000).unwrap();
    let event = String::from_utf8(seed).unwrap();
    let event = event.lines().next().unwrap();
    let answer = |msg: String| classify(msg.as_bytes(), "check1");
    assert_eq!(
        answer(format!(r#"["EVENT","check1",{event}]"#)),
        Answer::Event
    );
    assert_eq!(
        answer(format!(r#"["EVENT","check10",{event}]"#)),
        Answer::Other
    );
    // Not an event: not counted as one.
    assert_eq!(answer(r#"["EVENT","check1",{}]"#.into()), Answer::Other);
    assert_eq!(answer(r#"["EOSE","check1"]"#.into()), Answer::Eose);
    assert_eq!(
        answer(r#"["CLOSED","check1","error: no"]"#.into()),
        Answer::Closed
    );
    assert_eq!(answer(r#"["NOTICE","check1"]"#.into()), Answer::Other);
    assert_eq!(answer("not json".into()), Answer::Other);
}

#[test]
fn abuse_rows_say_what_is_missing() {
    assert_eq!(ms(&serde_json::json!(null)), "–");
    assert_eq!(ms(&serde_json::json!(123.6)), "124");
    assert_eq!(ms(&serde_json::json!(1.234)), "1.23");
    let x = serde_json::json!({
        "attack": "slow-readers", "relay_state": "up", "peak_rss_mib": 80.4,
        "peak_rss_anon_mib": 40.6, "rss_anon_before_mib": 42.0,
        "probe_ok_p99_ms": 2.5, "probe_eose_p99_ms": null, "live_delivery_p99_ms": 250.2,
        "acked_lost": null, "acked": 10, "verdict": "held"
    });
    assert_eq!(
        abuse_row("khatru-lmdb", &x),
        "| slow-readers | khatru-lmdb | up | 80 / 41 (+0) | 2.5 | – | 250 | ? of 10 | held |\n"
    );
    let none = serde_json::json!({"attack": "a", "relay_state": "down", "acked_lost": 0, "acked": 0, "verdict": "v"});
    assert!(abuse_row("r", &none).contains("| down | – |"));
}

#[test]
fn times_are_utc() {
    assert_eq!(utc(0), "1970-01-01T00:00:00Z");
    assert_eq!(utc(1_795_000_000), "2026-11-18T11:06:40Z");
    assert_eq!(utc(951_782_400), "2000-02-29T00:00:00Z");
}

/// nostr-bench output with `complete` answers, `error` of them failed, at
/// `tps` in each of the 2-second intervals of an 8-second run.
fn bench_output(complete: u64, error: u64, tps: u64) -> String {
    let mut out = String::from("Cli { … }\n");
    for (i, elapsed) in [0u64, 2000, 4000, 6000, 8000].iter().enumerate() {
        let last = if i == 0 { 0 } else { 2000 };
        out.push_str(&format!(
            "{{\"elapsed\":{elapsed},\"last_elapsed\":{last},\"tps\":{tps},\"message_stats\":{{\"complete\":{complete},\"error\":{error},\"event\":0,\"size\":0,\"success_time\":{{\"avg\":3}}}},\"connect_stats\":{{\"error\":0,\"lost\":0}}}}\n"
        ));
    }
    out
}

fn bench_record(
    relay: &str,
    test: &str,
    round: u64,
    out: &str,
    check: Option<nostr_bench::Check>,
) -> nostr_bench::BenchRun {
    let ctx = nostr_bench::RunContext {
        relay: relay.into(),
        test: Test::parse(test).unwrap(),
        round,
        seconds: 8,
        threads: 1,
        greeting: "nothing".into(),
        seeded: Some(10_000),
        relay_up: true,
        relay_cpu_s: Some(1.0),
        check,
    };
    nostr_bench::record(&ctx, out)
}

fn headline_of(bench: Vec<nostr_bench::BenchRun>) -> String {
    let inputs = crate::headline::Inputs {
        bench,
        ..Default::default()
    };
    let settings = crate::headline::Settings {
        per_tag: 10,
        connections: 8,
        bench_seconds: 8,
        bench_threads: 1,
        req_limit: 10,
    };
    crate::headline::render(&inputs, &settings)
}

fn line<'a>(page: &'a str, start: &str) -> &'a str {
    page.lines()
        .find(|l| l.starts_with(start))
        .unwrap_or_else(|| panic!("no line {start:?} in\n{page}"))
}

#[test]
fn parsed_runs_with_failures_are_named_and_left_out_of_the_ratio() {
    let runs = vec![
        bench_record(
            "nostrwire",
            "event-c20",
            1,
            &bench_output(40_000, 0, 5000),
            None,
        ),
        bench_record(
            "khatru-lmdb",
            "event-c20",
            1,
            &bench_output(8_000, 0, 1000),
            None,
        ),
        bench_record(
            "nostrwire",
            "event-c20",
            2,
            &bench_output(40_000, 0, 5000),
            None,
        ),
        // 1 % failed: over the 0.1 % gate, so round 2 holds no ratio.
        bench_record(
            "khatru-lmdb",
            "event-c20",
            2,
            &bench_output(8_000, 80, 3000),
            None,
        ),
    ];
    let page = headline_of(runs);
    let rate = line(&page, "| events/s");
    // Every round in the figure (khatru: mean of 1,000 and 3,000), the
    // ratio only from round 1 (5,000 / 1,000), and why.
    assert!(rate.contains("| 2,000 ("), "{rate}");
    assert!(
        rate.contains("5.00 vs khatru-lmdb (from 1 of 2 rounds"),
        "{rate}"
    );
}

#[test]
fn parsed_req_runs_get_a_ratio_only_where_the_work_was_equal() {
    let check = |bytes: u64| nostr_bench::Check {
        reqs: 100,
        events: 1000,
        bytes,
        unescaped: bytes,
        error: None,
    };
    let out = bench_output(30_000, 0, 4000);
    let equal = headline_of(vec![
        bench_record("nostrwire", "req-c200", 1, &out, Some(check(592_790))),
        bench_record("khatru-lmdb", "req-c200", 1, &out, Some(check(593_790))),
    ]);
    assert!(
        line(&equal, "| REQs/s").contains("1.00 vs khatru-lmdb"),
        "{equal}"
    );
    let unequal = headline_of(vec![
        bench_record("nostrwire", "req-c200", 1, &out, Some(check(592_790))),
        bench_record("khatru-lmdb", "req-c200", 1, &out, Some(check(612_000))),
    ]);
    assert!(line(&unequal, "| REQs/s").contains("| — ("), "{unequal}");
    // A failed check is no evidence of equal work either.
    let unchecked = headline_of(vec![
        bench_record("nostrwire", "req-c200", 1, &out, Some(check(592_790))),
        bench_record("khatru-lmdb", "req-c200", 1, &out, None),
    ]);
    assert!(
        line(&unchecked, "| REQs/s").contains("| — ("),
        "{unchecked}"
    );
}

#[test]
fn a_bounded_command_is_stopped_at_its_limit() {
    use std::process::Command;
    use std::time::{Duration, Instant};
    let t = Instant::now();
    let ended =
        bench::run_bounded(Command::new("sleep").arg("30"), Duration::from_millis(300)).unwrap();
    assert_eq!(ended, bench::Ended::Stopped);
    assert!(t.elapsed() < Duration::from_secs(10));
    assert_eq!(
        bench::run_bounded(&mut Command::new("true"), Duration::from_secs(10)).unwrap(),
        bench::Ended::Ok
    );
    assert_eq!(
        bench::run_bounded(&mut Command::new("false"), Duration::from_secs(10)).unwrap(),
        bench::Ended::Failed
    );
}

#[test]
fn a_run_without_figures_is_named_and_holds_no_ratio() {
    let mut stopped = bench_record("khatru-lmdb", "event-c20", 1, "", None);
    assert_eq!(stopped.error.as_deref(), Some("no output"));
    stopped.error = Some("nostr-bench did not end within 68 s: stopped".into());
    let page = headline_of(vec![
        bench_record(
            "nostrwire",
            "event-c20",
            1,
            &bench_output(40_000, 0, 5000),
            None,
        ),
        stopped,
    ]);
    let rate = line(&page, "| events/s");
    assert!(
        rate.contains("round 1: khatru-lmdb nostr-bench did not end within 68 s: stopped"),
        "{rate}"
    );
}
