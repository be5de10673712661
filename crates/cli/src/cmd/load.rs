//! `nostrwire load`: relay load tests with pre-signed events, matched answers
//! and HDR latencies; several relays compared in interleaved rounds.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use nostrwire_event::Timestamp;
use nostrwire_loadgen::abuse::AbuseParams;
use nostrwire_loadgen::{report, Error, Scenario, Settings};

/// Arguments of `nostrwire load`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Relay to load (`ws://host:port[/path]`); the baseline of every ratio.
    /// Write `binary+ws://…` to speak the nostrwire.v1 binary transport, or
    /// `v2+ws://…` for nostrwire.v2 (the relay's dictionary set fetched and
    /// held) (publish, query, dump, mixed, concurrent, large and connections
    /// only),
    /// `deflate+ws://…` or `deflate-nct+ws://…` to offer permessage-deflate
    /// with or without context takeover; prefixes combine.
    #[arg(long)]
    pub relay: String,
    /// Scenario, repeatable or comma-separated: publish, publish-open, burst,
    /// query, dump, mixed, concurrent, fanout, large, connections, search, sync,
    /// or all. Abuse scenarios (hostile clients while a probe publishes and
    /// queries; docs/bench-methodology.md, "Abuse scenarios"): abuse-slow-readers,
    /// abuse-idle-flood, abuse-oversized-subs, abuse-deflate-bomb,
    /// abuse-quadratic-json, abuse-hostile-search, abuse-deletion-undo,
    /// abuse-auth-relayed, abuse-spread-slow-readers, abuse-spread-oversized-subs,
    /// abuse-spread-heavy-queries, abuse-spread-ipv6-48, or abuse for all of
    /// them (not part of all).
    #[arg(long, default_value = "publish", value_delimiter = ',')]
    pub scenario: Vec<String>,
    /// Events (or queries) per scenario and round.
    #[arg(long, default_value_t = 10_000)]
    pub count: usize,
    /// Connections for publish and query work.
    #[arg(long, default_value_t = 8)]
    pub connections: usize,
    /// Upper bound of each scenario's measured phase, in seconds.
    #[arg(long, default_value_t = 60.0)]
    pub duration: f64,
    /// Offered rate (events/s over all connections) for publish-open and the fanout publisher.
    #[arg(long, default_value_t = 1_000.0)]
    pub rate: f64,
    /// Replay events from a JSON Lines file instead of generating them (each event is sent once).
    #[arg(long, value_name = "FILE.jsonl")]
    pub replay: Option<PathBuf>,
    /// Seed for kinds, authors, contents and connection randomness.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// `created_at` of the newest generated event (default: now); with --seed, a byte-identical workload.
    #[arg(long)]
    pub newest: Option<u64>,
    /// Seconds to wait for any single answer; a later answer is a timeout failure.
    #[arg(long, default_value_t = 5.0)]
    pub timeout: f64,
    /// Write every figure, the settings and the host as JSON.
    #[arg(long, value_name = "FILE.json")]
    pub report: Option<PathBuf>,
    /// Write a Markdown summary (and an SVG chart beside it unless --svg is given).
    #[arg(long, value_name = "FILE.md")]
    pub markdown: Option<PathBuf>,
    /// Write the SVG latency chart here.
    #[arg(long, value_name = "FILE.svg")]
    pub svg: Option<PathBuf>,
    /// More relays to run the same scenarios against, interleaved with --relay (A B A B).
    #[arg(long, num_args = 1.., value_name = "URL")]
    pub compare: Vec<String>,
    /// Rounds per relay (default 1, or 3 with --compare).
    #[arg(long)]
    pub rounds: Option<usize>,
    /// Distinct authors of generated events.
    #[arg(long, default_value_t = 100)]
    pub authors: usize,
    /// Kind mix table (`kind<TAB>percent`).
    #[arg(long, default_value_os_t = crate::default_kind_mix())]
    pub kind_mix: PathBuf,
    /// Corpus whose tags and contents generated events start from (prose,
    /// encrypted payloads and `e` ids are drawn anew).
    #[arg(long, default_value_os_t = crate::default_corpus())]
    pub corpus: PathBuf,
    /// Idle connections opened by the `connections` scenario.
    #[arg(long, default_value_t = 1_000)]
    pub idle_connections: usize,
    /// Live subscribers in the `fanout` scenario.
    #[arg(long, default_value_t = 50)]
    pub subscribers: usize,
    /// Events per burst per connection in `burst`.
    #[arg(long, default_value_t = 100)]
    pub burst_size: usize,
    /// Milliseconds between bursts in `burst`.
    #[arg(long, default_value_t = 200)]
    pub burst_gap_ms: u64,
    /// Events in `large` (kind-3 follow lists of 1,000+ tags).
    #[arg(long, default_value_t = 200)]
    pub large_events: usize,
    /// Events stored before `query` and `search` run.
    #[arg(long, default_value_t = 1_000)]
    pub seed_events: usize,
    /// Abuse: how long each attack lasts, in seconds (the probe runs meanwhile).
    #[arg(long, default_value_t = 15.0, help_heading = "Abuse scenarios")]
    pub attack_seconds: f64,
    /// Abuse: probe events published, and queries made, per second during an attack.
    #[arg(long, default_value_t = 10.0, help_heading = "Abuse scenarios")]
    pub probe_rate: f64,
    /// abuse-slow-readers: connections that subscribe to everything and never read.
    #[arg(long, default_value_t = 20, help_heading = "Abuse scenarios")]
    pub slow_readers: usize,
    /// abuse-slow-readers: subscriptions (`{"limit":5000}`) per slow reader.
    #[arg(long, default_value_t = 50, help_heading = "Abuse scenarios")]
    pub slow_reader_reqs: usize,
    /// abuse-idle-flood: idle WebSocket connections opened from this address.
    #[arg(long, default_value_t = 1_000, help_heading = "Abuse scenarios")]
    pub idle_flood: usize,
    /// abuse-idle-flood: TCP connections left in the middle of their upgrade request.
    #[arg(long, default_value_t = 200, help_heading = "Abuse scenarios")]
    pub half_open: usize,
    /// abuse-oversized-subs: oversized live REQs (authors lists, short `#t`
    /// lists and one-filter `#t` lists in turn).
    #[arg(long, default_value_t = 100, help_heading = "Abuse scenarios")]
    pub oversized_reqs: usize,
    /// abuse-oversized-subs: filters per oversized REQ.
    #[arg(long, default_value_t = 32, help_heading = "Abuse scenarios")]
    pub oversized_filters: usize,
    /// abuse-oversized-subs: values per filter (fewer authors when they
    /// would not fit --attack-message-bytes).
    #[arg(long, default_value_t = 5_000, help_heading = "Abuse scenarios")]
    pub oversized_values: usize,
    /// abuse-oversized-subs: AUTH events (fresh keys) on one connection, then
    /// as many small REQs; skipped when the relay sends no challenge.
    #[arg(long, default_value_t = 200, help_heading = "Abuse scenarios")]
    pub auths: usize,
    /// Abuse: bytes of one hostile message (tag lists, inflated messages,
    /// unknown-key events); keep it under the relay's message limit.
    #[arg(long, default_value_t = 1_000_000, help_heading = "Abuse scenarios")]
    pub attack_message_bytes: usize,
    /// abuse-deflate-bomb: compressed messages, each inflating to
    /// --attack-message-bytes, sent behind one slow message.
    #[arg(long, default_value_t = 2_000, help_heading = "Abuse scenarios")]
    pub deflate_messages: usize,
    /// abuse-quadratic-json: EVENT messages with unknown keys sent at once
    /// (half `\u`-escaped keys, half plain), each on its own connection.
    #[arg(long, default_value_t = 8, help_heading = "Abuse scenarios")]
    pub quadratic_messages: usize,
    /// abuse-hostile-search: terms in one search string.
    #[arg(long, default_value_t = 40_000, help_heading = "Abuse scenarios")]
    pub search_terms: usize,
    /// abuse-hostile-search: live search subscriptions.
    #[arg(long, default_value_t = 20, help_heading = "Abuse scenarios")]
    pub hostile_searches: usize,
    /// abuse-spread-*: addresses the attack comes from (127.0.0.2 and up,
    /// when the relay is on loopback; the probe stays on 127.0.0.1).
    #[arg(long, default_value_t = 30, help_heading = "Abuse scenarios")]
    pub attack_addresses: usize,
    /// abuse-spread-*: connections, spread over --attack-addresses.
    #[arg(long, default_value_t = 900, help_heading = "Abuse scenarios")]
    pub spread_connections: usize,
    /// abuse-spread-slow-readers: subscriptions (`{"kinds":[1],"limit":5000}`) per connection.
    #[arg(long, default_value_t = 4, help_heading = "Abuse scenarios")]
    pub spread_reqs: usize,
    /// Abuse: seconds to wait after each attack before the relay's anonymous
    /// memory is read again (what it kept).
    #[arg(long, default_value_t = 0.0, help_heading = "Abuse scenarios")]
    pub settle_seconds: f64,
    /// Client worker threads (default: all cores).
    #[arg(long)]
    pub threads: Option<usize>,
    /// No progress bar.
    #[arg(long)]
    pub quiet: bool,
}

fn seconds(name: &str, v: f64) -> Result<Duration, Error> {
    if v.is_finite() && v > 0.0 {
        Ok(Duration::from_secs_f64(v))
    } else {
        Err(Error::Usage(format!(
            "{name} must be a positive number of seconds"
        )))
    }
}

fn settings(args: &Args) -> Result<Settings, Error> {
    let mut scenarios = Vec::new();
    for s in &args.scenario {
        scenarios.extend(Scenario::expand(s)?);
    }
    let mut relays = vec![args.relay.clone()];
    relays.extend(args.compare.iter().cloned());
    let newest = match args.newest {
        Some(t) => {
            Some(Timestamp::new(t).map_err(|_| Error::Usage("--newest is out of range".into()))?)
        }
        None => None,
    };
    let s = Settings {
        relays,
        scenarios,
        count: args.count,
        connections: args.connections,
        duration: seconds("--duration", args.duration)?,
        rate: args.rate,
        replay: args.replay.clone(),
        seed: args.seed,
        timeout: seconds("--timeout", args.timeout)?,
        rounds: args
            .rounds
            .unwrap_or(if args.compare.is_empty() { 1 } else { 3 }),
        authors: args.authors,
        kind_mix: args.kind_mix.clone(),
        corpus: args.corpus.clone(),
        idle_connections: args.idle_connections,
        subscribers: args.subscribers,
        burst_size: args.burst_size,
        burst_gap: Duration::from_millis(args.burst_gap_ms),
        large_events: args.large_events,
        seed_events: args.seed_events,
        newest,
        threads: args.threads,
        progress: !args.quiet,
        abuse: AbuseParams {
            seconds: args.attack_seconds,
            probe_rate: args.probe_rate,
            slow_readers: args.slow_readers,
            slow_reader_reqs: args.slow_reader_reqs,
            idle_flood: args.idle_flood,
            half_open: args.half_open,
            oversized_reqs: args.oversized_reqs,
            oversized_filters: args.oversized_filters,
            oversized_values: args.oversized_values,
            auths: args.auths,
            message_bytes: args.attack_message_bytes,
            deflate_messages: args.deflate_messages,
            quadratic_messages: args.quadratic_messages,
            search_terms: args.search_terms,
            hostile_searches: args.hostile_searches,
            attack_addresses: args.attack_addresses,
            spread_connections: args.spread_connections,
            spread_reqs: args.spread_reqs,
            settle_seconds: args.settle_seconds,
        },
    };
    s.validate()?;
    Ok(s)
}

fn write(path: &PathBuf, text: &str) -> anyhow::Result<()> {
    std::fs::write(path, text).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    for (path, flag) in [(&args.kind_mix, "--kind-mix"), (&args.corpus, "--corpus")] {
        if let Err(e) = crate::input::input_file(path, flag) {
            eprintln!("nostrwire load: {e:#}");
            return Ok(ExitCode::from(2));
        }
    }
    let settings = match settings(&args) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("nostrwire load: {e}");
            return Ok(ExitCode::from(2));
        }
    };
    let result = match nostrwire_loadgen::run(&settings) {
        Ok(r) => r,
        Err(e @ (Error::Usage(_) | Error::Unreachable { .. } | Error::Input(_))) => {
            eprintln!("nostrwire load: {e}");
            return Ok(ExitCode::from(2));
        }
        Err(e) => return Err(e.into()),
    };
    print!("{}", report::table(&result));
    if let Some(path) = &args.report {
        let json = serde_json::to_string_pretty(&report::json(&result))?;
        write(path, &json)?;
    }
    let svg_path = args
        .svg
        .clone()
        .or_else(|| args.markdown.as_ref().map(|m| m.with_extension("svg")));
    if let Some(path) = &svg_path {
        write(path, &report::svg(&result))?;
    }
    if let Some(path) = &args.markdown {
        let link = svg_path.as_ref().and_then(|p| {
            let md_dir = path.parent().unwrap_or(std::path::Path::new(""));
            p.strip_prefix(md_dir)
                .ok()
                .or_else(|| p.file_name().map(std::path::Path::new))
                .map(|p| p.display().to_string())
        });
        write(path, &report::markdown(&result, link.as_deref()))?;
    }
    Ok(ExitCode::SUCCESS)
}
