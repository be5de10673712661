//! The abuse scenarios, small and short, against our relay and a stub.
//!
//! These check the tester, not the relay: every attack yields a row with a
//! verdict, the probe measured during it, and the correctness attacks give
//! a definite answer. Whether the relay passes is for the run to say.

mod common;

use std::time::Duration;

use common::Behavior;
use nostrwire_loadgen::abuse::{AbuseParams, Attack};
use nostrwire_loadgen::scenario::{Scenario, Status};
use nostrwire_loadgen::{report, Settings};

fn small(relay: &str, scenarios: Vec<Scenario>) -> Settings {
    let mut s = Settings::new(relay);
    s.kind_mix = nostrwire_loadgen::testdata("kind-mix.tsv");
    s.corpus = nostrwire_loadgen::testdata("real-events.jsonl");
    s.scenarios = scenarios;
    s.seed_events = 40;
    s.connections = 2;
    s.timeout = Duration::from_secs(2);
    s.progress = false;
    s.abuse = AbuseParams {
        seconds: 1.5,
        probe_rate: 20.0,
        slow_readers: 3,
        slow_reader_reqs: 3,
        idle_flood: 60,
        half_open: 10,
        oversized_reqs: 6,
        oversized_filters: 4,
        oversized_values: 200,
        auths: 10,
        message_bytes: 40_000,
        deflate_messages: 30,
        quadratic_messages: 2,
        search_terms: 500,
        hostile_searches: 3,
        attack_addresses: 3,
        spread_connections: 12,
        spread_reqs: 2,
        settle_seconds: 0.0,
    };
    s
}

#[test]
fn every_attack_reports_a_row_with_a_verdict_and_probe_figures() {
    let (relay, _dir) = common::start_relay();
    let url = format!("ws://{}", relay.local_addr());
    let settings = small(&url, Scenario::expand("abuse").unwrap());
    let run = nostrwire_loadgen::run(&settings).unwrap();
    assert_eq!(run.totals.len(), Attack::ALL.len());
    let json = serde_json::to_value(report::json(&run)).unwrap();
    let table = report::table(&run);
    assert!(table.contains("peak RSS / anon"), "{table}");
    for (r, attack) in run.totals.iter().zip(Attack::ALL) {
        assert_eq!(r.scenario, Scenario::Abuse(attack));
        let row = report::abuse_json(r).unwrap();
        let verdict = &row.verdict;
        assert!(
            ["pass", "fail", "n/a"]
                .iter()
                .any(|v| verdict.starts_with(v)),
            "{attack}: {verdict}"
        );
        assert!(
            table.lines().any(|l| l.starts_with(attack.short_name())),
            "{attack} has no row:\n{table}"
        );
        // Our relay has NIP-50, NIP-42, NIP-09 and permessage-deflate: no n/a.
        assert_eq!(r.outcome.status, Status::Completed, "{attack}: {verdict}");
        if attack.is_correctness() {
            assert!(
                verdict.starts_with("pass") || verdict.starts_with("fail"),
                "{attack}: {verdict}"
            );
            let key = match attack {
                Attack::DeletionUndo => "deleted_event_served_again",
                _ => "auth_relayed_accepted",
            };
            assert!(r.outcome.metrics.contains_key(key), "{attack}: {verdict}");
        }
        // The probe published and read during the attack, and was read back.
        let ok = &r.outcome.ops["probe:ok"];
        assert!(ok.successes + ok.failure_count() > 0, "{attack}");
        assert!(r.outcome.ops.contains_key("probe:eose"), "{attack}");
        assert!(r.outcome.metrics.contains_key("relay_state"), "{attack}");
        if row.relay_up && ok.successes > 0 {
            assert!(
                row.acked > 0 && row.acked_lost.is_some(),
                "{attack}: {row:?}"
            );
            assert!(row.probe_ok_p99_ms.is_some(), "{attack}");
        }
        // The relay runs in this process: its memory is read.
        assert!(row.peak_rss_anon_mib.is_some_and(|m| m > 0.0), "{attack}");
        let j = json["totals"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["scenario"] == attack.name())
            .unwrap();
        for field in [
            "relay_up",
            "relay_state",
            "peak_rss_mib",
            "peak_rss_anon_mib",
            "probe_ok_p99_ms",
            "probe_eose_p99_ms",
            "live_delivery_p99_ms",
            "acked_lost",
            "verdict",
        ] {
            assert!(j["abuse"].get(field).is_some(), "{attack}: no {field}");
        }
    }
    let idle = &run.totals[1].outcome;
    assert!(idle.metrics["idle_accepted"] + idle.metrics["idle_refused"] > 0.0);
    assert!(idle.ops.contains_key("probe:connect"));
    relay.shutdown();
}

#[test]
fn what_a_relay_lacks_is_not_applicable() {
    let stub = common::start_in_thread(Behavior::NoSearch);
    let scenarios = [
        Attack::DeflateBomb,
        Attack::HostileSearch,
        Attack::AuthRelayed,
    ]
    .map(Scenario::Abuse)
    .to_vec();
    let mut settings = small(&stub.url, scenarios);
    settings.timeout = Duration::from_millis(500);
    let run = nostrwire_loadgen::run(&settings).unwrap();
    for r in &run.totals {
        let row = report::abuse_json(r).unwrap();
        assert!(
            row.verdict.starts_with("n/a"),
            "{}: {}",
            r.scenario,
            row.verdict
        );
        assert!(matches!(r.outcome.status, Status::Unsupported(_)));
        assert!(row.relay_up);
        assert_eq!(row.acked_lost, Some(0), "{}", r.scenario);
    }
}

/// `spread-ipv6-48` against our relay behind a (claimed) reverse proxy:
/// connections from as many /64s of one /48 are held to the relay's
/// per-/48 cap, and the probe, from elsewhere, keeps connecting.
#[test]
fn an_ipv6_48_spread_over_its_64s_is_held_to_its_cap() {
    const CAP: usize = 8;
    let (relay, _dir) = common::start_relay_with(|c| {
        c.relay.real_ip_header = "X-Forwarded-For".into();
        c.rate.connections_per_ipv6_48 = CAP;
    });
    let url = format!("ws://{}", relay.local_addr());
    let mut settings = small(&url, vec![Scenario::Abuse(Attack::SpreadIpv6_48)]);
    settings.abuse.spread_connections = 20;
    let run = nostrwire_loadgen::run(&settings).unwrap();
    let r = &run.totals[0];
    let row = report::abuse_json(r).unwrap();
    let m = &r.outcome.metrics;
    assert_eq!(m["attack_connections"], CAP as f64, "{:?}", r.outcome.notes);
    assert_eq!(
        m["attack_refused"],
        (20 - CAP) as f64,
        "{:?}",
        r.outcome.notes
    );
    let connect = &r.outcome.ops["probe:connect"];
    assert!(connect.successes > 0, "{}", row.verdict);
    assert_eq!(connect.failure_count(), 0, "{}", row.verdict);
    relay.shutdown();
}
