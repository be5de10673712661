//! The headline's rules, on made-up runs.
use super::*;

fn settings() -> Settings {
    Settings {
        per_tag: 10,
        connections: 8,
        bench_seconds: 15,
        bench_threads: 1,
        req_limit: 10,
    }
}

fn event(relay: &str, round: u64, tps: f64, complete: f64, errors: f64) -> BenchRun {
    BenchRun {
        relay: relay.into(),
        test: "event-c20".into(),
        tool: "event".into(),
        connections: 20,
        round,
        greeting: Some("nothing".into()),
        relay_up: true,
        complete: Some(complete),
        errors: Some(errors),
        tps: Some(tps),
        avg_ms: Some(3.0),
        relay_cpu_s: Some(complete * 1e-4),
        cpu_us_per_op: Some(100.0),
        ..BenchRun::default()
    }
}

fn req(relay: &str, round: u64, tps: f64, bytes: f64) -> BenchRun {
    BenchRun {
        test: "req-c1000".into(),
        tool: "req".into(),
        connections: 1000,
        bytes_per_req: Some(bytes),
        unescaped_per_req: Some(bytes),
        events_per_req: Some(10.0),
        ..event(relay, round, tps, 1000.0, 0.0)
    }
}

fn ratio_of(md: &str, figure: &str) -> String {
    let line = md
        .lines()
        .find(|l| l.starts_with(&format!("| {figure} |")))
        .unwrap_or_else(|| panic!("no row {figure} in\n{md}"));
    line.trim_end_matches(" |")
        .rsplit(" | ")
        .next()
        .unwrap()
        .to_string()
}

#[test]
fn numbers_are_written_as_the_report_writes_them() {
    assert_eq!(fmt(Some(1234567.4), 0), "1,234,567");
    assert_eq!(fmt(Some(999.96), 1), "1,000.0");
    assert_eq!(fmt(Some(12.0), 0), "12");
    assert_eq!(fmt(None, 0), "–");
    assert_eq!(pct(0.0021), "0.21 %");
    assert_eq!(pct(0.25), "25.0 %");
    assert_eq!(signed_pct(-0.139), "-13.9%");
    assert_eq!(signed_pct(0.015), "+1.5%");
}

#[test]
fn the_ratio_is_ours_over_the_best_peer_of_clean_rounds() {
    let inputs = Inputs {
        bench: vec![
            event(OURS, 1, 6000.0, 90_000.0, 0.0),
            event("a", 1, 3000.0, 45_000.0, 0.0),
            event("b", 1, 4000.0, 60_000.0, 0.0),
        ],
        ..Inputs::default()
    };
    let md = render(&inputs, &settings());
    assert_eq!(ratio_of(&md, "events/s (mean ms per answer)"), "1.50 vs b");
}

#[test]
fn a_round_with_timeouts_is_named_and_left_out_of_the_ratio() {
    let inputs = Inputs {
        bench: vec![
            event(OURS, 1, 6000.0, 90_000.0, 0.0),
            event("a", 1, 3000.0, 45_000.0, 0.0),
            event(OURS, 2, 6000.0, 90_000.0, 0.0),
            // 1 % failed: over the gate.
            event("a", 2, 9000.0, 45_000.0, 450.0),
        ],
        ..Inputs::default()
    };
    let md = render(&inputs, &settings());
    let ratio = ratio_of(&md, "events/s (mean ms per answer)");
    assert_eq!(
        ratio,
        "2.00 vs a (from 1 of 2 rounds; round 2: a 1.00 % failed)"
    );
    // The figure still covers both rounds and says what went wrong.
    assert!(md.contains("| 6,000 (3 ms) (r2: 1.00 % failed) |"), "{md}");
}

#[test]
fn no_ratio_when_every_round_timed_out() {
    let inputs = Inputs {
        bench: vec![
            event(OURS, 1, 6000.0, 90_000.0, 0.0),
            event("a", 1, 3000.0, 45_000.0, 900.0),
        ],
        ..Inputs::default()
    };
    let md = render(&inputs, &settings());
    assert_eq!(
        ratio_of(&md, "events/s (mean ms per answer)"),
        "— (round 1: a 2.00 % failed)"
    );
}

#[test]
fn unequal_work_refuses_the_ratio() {
    let equal = Inputs {
        bench: vec![
            req(OURS, 1, 20_000.0, 5928.0),
            req("a", 1, 10_000.0, 5938.0),
        ],
        ..Inputs::default()
    };
    let md = render(&equal, &settings());
    assert_eq!(ratio_of(&md, "REQs/s (mean ms per answer)"), "2.00 vs a");
    let unequal = Inputs {
        bench: vec![
            req(OURS, 1, 20_000.0, 5928.0),
            req("a", 1, 10_000.0, 5100.0),
        ],
        ..Inputs::default()
    };
    let md = render(&unequal, &settings());
    assert_eq!(
        ratio_of(&md, "REQs/s (mean ms per answer)"),
        "— (unequal work: a returns -14.0% bytes per REQ)"
    );
    assert_eq!(
        ratio_of(&md, "µs relay CPU per REQ"),
        "— (unequal work: a returns -14.0% bytes per REQ)"
    );
}

#[test]
fn a_relay_greeting_with_auth_is_left_out_of_event_ratios() {
    let mut auth = event("a", 1, 9000.0, 90_000.0, 0.0);
    auth.greeting = Some("AUTH".into());
    let inputs = Inputs {
        bench: vec![
            event(OURS, 1, 6000.0, 90_000.0, 0.0),
            auth,
            event("b", 1, 3000.0, 45_000.0, 0.0),
        ],
        ..Inputs::default()
    };
    let md = render(&inputs, &settings());
    assert_eq!(
        ratio_of(&md, "events/s (mean ms per answer)"),
        "2.00 vs b (a left out: greets with AUTH, which nostr-bench takes for the OK of its first EVENT)"
    );
    assert!(md.contains("9,000 (3 ms) (misread)"), "{md}");
}

fn load_round(
    relay: &str,
    round: u64,
    scenario: &str,
    ops: serde_json::Value,
) -> serde_json::Value {
    serde_json::json!({
        "scenario": scenario, "relay": relay, "round": round, "elapsed_s": 10.0,
        "ops": ops, "relay_cpu_measured_s": 1.0, "measured_ops": 1000
    })
}

#[test]
fn load_rounds_with_timeouts_or_unequal_queries_get_no_ratio() {
    let publish = |ok: u64, timeouts: u64| {
        serde_json::json!({"publish": {"successes": ok, "failures": timeouts,
            "failures_by_reason": {"timeout": timeouts}}})
    };
    let query = |bytes: f64| {
        serde_json::json!({"query:author": {"successes": 100, "failures": 0,
            "bytes_received": bytes, "bytes_unescaped": bytes, "events_received": 1000}})
    };
    let report = serde_json::json!({
        "rounds": [
            load_round("ws://a", 0, "publish", publish(50_000, 0)),
            load_round("ws://b", 0, "publish", publish(10_000, 20)),
            load_round("ws://a", 0, "query", query(100_000.0)),
            load_round("ws://b", 0, "query", query(80_000.0)),
        ],
        "totals": [{"relay": "ws://a"}, {"relay": "ws://b"}],
    });
    let inputs = Inputs {
        load: Some(serde_json::from_value(report).unwrap()),
        names: [("ws://a", OURS), ("ws://b", "peer")]
            .into_iter()
            .map(|(u, n)| (u.to_string(), n.to_string()))
            .collect(),
        ..Inputs::default()
    };
    let md = render(&inputs, &settings());
    // 20 of 10,020 timed out: 0.2 %, over the gate; the figure says so.
    assert_eq!(
        ratio_of(&md, "events/s"),
        "— (round 0: peer 0.20 % timed out)"
    );
    assert!(
        md.contains("| 5,000 | 1,000 (r0: 0.20 % timed out) |"),
        "{md}"
    );
    assert_eq!(
        ratio_of(&md, "REQs/s"),
        "— (unequal work: peer returns -20.0% bytes per REQ (query:author))"
    );
}

#[test]
fn ours_returning_nothing_where_a_peer_returns_events_is_not_equal_work() {
    let query = |bytes: f64| {
        serde_json::json!({"query:tag": {"successes": 100, "failures": 0,
            "bytes_received": bytes, "bytes_unescaped": bytes, "events_received": 10}})
    };
    let report = serde_json::json!({
        "rounds": [
            load_round("ws://a", 0, "query", query(0.0)),
            load_round("ws://b", 0, "query", query(5_000.0)),
        ],
        "totals": [{"relay": "ws://a"}, {"relay": "ws://b"}],
    });
    let inputs = Inputs {
        load: Some(serde_json::from_value(report).unwrap()),
        names: [("ws://a", OURS), ("ws://b", "peer")]
            .into_iter()
            .map(|(u, n)| (u.to_string(), n.to_string()))
            .collect(),
        ..Inputs::default()
    };
    let md = render(&inputs, &settings());
    assert_eq!(
        ratio_of(&md, "REQs/s"),
        "— (unequal work: peer returns events where nostrwire returns none (query:tag))"
    );
    // nostr-bench: a peer without its check gets no ratio.
    let mut unchecked = req("peer", 1, 900.0, 0.0);
    unchecked.bytes_per_req = None;
    unchecked.unescaped_per_req = None;
    let inputs = Inputs {
        bench: vec![req(OURS, 1, 1000.0, 6000.0), unchecked],
        ..Inputs::default()
    };
    let md = render(&inputs, &settings());
    assert_eq!(
        ratio_of(&md, "REQs/s (mean ms per answer)"),
        "— (unequal work: no equal-work check of peer)"
    );
}

#[test]
fn the_headline_names_what_wrote_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let inputs = Inputs::read(dir.path(), &dir.path().join("names.tsv")).unwrap();
    let md = render(&inputs, &settings());
    assert!(
        md.contains("\n\nWritten by scripts/compare-relays.sh. Each relay's"),
        "a run without writer.txt is an earlier script's: {md}"
    );
    std::fs::write(dir.path().join(WRITER_FILE), "nostrwire bench relays\n").unwrap();
    let inputs = Inputs::read(dir.path(), &dir.path().join("names.tsv")).unwrap();
    let md = render(&inputs, &settings());
    assert!(
        md.contains("\n\nWritten by nostrwire bench relays. Each relay's"),
        "{md}"
    );
}
