//! `nostrwire stream`: live mirroring between upstream relays and the
//! running local relay, each upstream with its direction and filter (what
//! strfry's `stream` and `router` do). docs/operations.md, "Streaming with
//! other relays", is the user's description and says what is guaranteed.
//!
//! Everything goes through the local relay's WebSocket, so through its one
//! writer and its admission checks: the database is never opened here.
//! Each direction of each upstream is a [`pipe::Pipe`]: a live REQ on one
//! side, each event published on the other with its `OK` awaited, a bounded
//! number in flight, reconnection with backoff, and a cursor in the state
//! file from which the next session asks again (less `--overlap`).

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{bail, Context};
use nostrwire_event::Filter;
use nostrwire_loadgen::ws::WsUrl;

use crate::cmd::sync::{listen_url, Direction};

mod config;
mod pipe;
mod state;

use config::{Group, RouterConfig};
use pipe::{Counts, Pipe, Recent, Settings};
use state::State;

/// Seconds asked again before the cursor when nothing sets them.
const DEFAULT_OVERLAP: u64 = 600;

/// Arguments of `nostrwire stream`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The upstream relay (`ws://host:port/path`); or `--config` for several.
    #[arg(required_unless_present = "config")]
    pub url: Option<String>,
    /// Which way events move: `down` (upstream to the local relay), `up`
    /// (the local relay to upstream) or `both`.
    #[arg(long, value_enum, default_value = "down", hide_possible_values = true)]
    pub dir: Direction,
    /// Only events matching this NIP-01 filter (JSON; no `limit` or `until`).
    #[arg(long)]
    pub filter: Option<String>,
    /// A stream configuration file (TOML): several upstreams, each with its
    /// URLs, direction and filter, as strfry's `router` takes them.
    #[arg(long, conflicts_with_all = ["url", "filter"])]
    pub config: Option<PathBuf>,
    /// The running local relay (default: `ws://` and the relay
    /// configuration's listen address).
    #[arg(long)]
    pub local: Option<String>,
    /// The relay's configuration file, for its listen address and database.
    #[arg(long)]
    pub relay_config: Option<PathBuf>,
    /// The relay's database directory (overrides the relay configuration),
    /// beside which the state file is kept; it is never opened.
    #[arg(long)]
    pub data: Option<PathBuf>,
    /// The state file with the cursors (default: `stream-state.json` in the
    /// database directory).
    #[arg(long)]
    pub state: Option<PathBuf>,
    /// Seconds asked again before the cursor on every (re)connection
    /// [default: 600].
    #[arg(long)]
    pub overlap: Option<u64>,
    /// Events published and not yet answered, per direction, at most; the
    /// source is not read beyond it.
    #[arg(long, default_value_t = 1000)]
    pub in_flight: usize,
    /// Ids remembered per relay, to publish nothing back where it came from.
    #[arg(long, default_value_t = 100_000)]
    pub recent_ids: usize,
    /// Seconds to wait for a connection or for an `OK`.
    #[arg(long, default_value_t = 30)]
    pub timeout: u64,
    /// Seconds between progress lines (0: none).
    #[arg(long, default_value_t = 10)]
    pub progress: u64,
}

/// A stream filter: NIP-01 JSON, without the fields a live stream cannot
/// honour.
pub(crate) fn stream_filter(json: &str) -> anyhow::Result<Filter> {
    let filter = Filter::from_json(json.as_bytes()).context("invalid filter")?;
    if filter.limit.is_some() {
        bail!("invalid filter: a stream takes no `limit` (it moves every event from its cursor)");
    }
    if filter.until.is_some() {
        bail!("invalid filter: a stream takes no `until` (it moves live events)");
    }
    Ok(filter)
}

/// A relay URL a stream can use: `ws://`, the NIP-01 JSON transport.
fn relay_url(url: &str, what: &str) -> anyhow::Result<WsUrl> {
    let parsed = WsUrl::parse(url).map_err(|e| anyhow::anyhow!("invalid {what} {url:?}: {e}"))?;
    if parsed.binary {
        bail!("invalid {what} {url:?}: a stream speaks NIP-01 JSON, give a plain ws:// URL");
    }
    Ok(parsed)
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let router = match &args.config {
        Some(path) => RouterConfig::load(path)?,
        None => {
            let url = args
                .url
                .clone()
                .context("give an upstream URL or --config")?;
            let filter = match &args.filter {
                Some(json) => stream_filter(json).context("--filter")?,
                None => Filter::new(),
            };
            RouterConfig {
                groups: vec![Group {
                    name: String::new(),
                    dir: args.dir,
                    urls: vec![url],
                    filter,
                }],
                ..RouterConfig::default()
            }
        }
    };
    let local_given = args.local.clone().or(router.local.clone());
    let state_given = args.state.clone().or(router.state.clone());
    let relay = if local_given.is_none() || state_given.is_none() {
        Some(super::relay::load_config(
            args.relay_config.as_ref(),
            args.data.clone(),
        )?)
    } else {
        None
    };
    let local_text = match (&local_given, &relay) {
        (Some(url), _) => url.clone(),
        (None, Some(config)) => listen_url(&config.relay.listen),
        (None, None) => unreachable!("the relay config is read when --local is not given"),
    };
    let local = relay_url(&local_text, "local relay URL")?;
    let state_path = match (state_given, &relay) {
        (Some(path), _) => path,
        (None, Some(config)) => config.relay.data.join("stream-state.json"),
        (None, None) => unreachable!("the relay config is read when --state is not given"),
    };
    let state = Arc::new(State::load(&state_path)?);
    let settings = Settings {
        overlap: args.overlap.or(router.overlap).unwrap_or(DEFAULT_OVERLAP),
        in_flight: args.in_flight.max(1),
        timeout: Duration::from_secs(args.timeout.max(1)),
        max_backoff: Duration::from_secs(5),
    };

    let mut pipes = Vec::new();
    for group in &router.groups {
        for url in &group.urls {
            let upstream = relay_url(url, "upstream URL")?;
            if upstream == local {
                bail!("{url} is the local relay: a stream mirrors between two relays");
            }
            // Ids each side has, shared by the two directions of `both`.
            let at_upstream = Arc::new(Recent::new(args.recent_ids));
            let at_local = Arc::new(Recent::new(args.recent_ids));
            let name = match group.name.as_str() {
                "" => String::new(),
                name => format!("{name}/"),
            };
            let pipe = |dir: &str, source: &WsUrl, dest: &WsUrl, from, to| Pipe {
                label: format!("{name}{dir} {url}"),
                key: format!("{name}{dir} {url}"),
                source: source.clone(),
                dest: dest.clone(),
                filter: group.filter.clone(),
                at_source: Arc::clone(from),
                at_dest: Arc::clone(to),
                settings: settings.clone(),
                state: Arc::clone(&state),
                counts: Arc::new(Mutex::new(Counts::default())),
            };
            if matches!(group.dir, Direction::Down | Direction::Both) {
                pipes.push(pipe("down", &upstream, &local, &at_upstream, &at_local));
            }
            if matches!(group.dir, Direction::Up | Direction::Both) {
                pipes.push(pipe("up", &local, &upstream, &at_local, &at_upstream));
            }
        }
    }
    if let Some(dup) = duplicate_key(&pipes) {
        bail!("{dup} is streamed twice: give each upstream and direction once");
    }

    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(serve(pipes, state, local_text, args.progress))
}

fn duplicate_key(pipes: &[Pipe]) -> Option<&str> {
    let mut keys = std::collections::HashSet::new();
    pipes
        .iter()
        .find(|p| !keys.insert(p.key.as_str()))
        .map(|p| p.key.as_str())
}

async fn serve(
    pipes: Vec<Pipe>,
    state: Arc<State>,
    local: String,
    progress: u64,
) -> anyhow::Result<ExitCode> {
    state.save()?;
    eprintln!(
        "stream: {} direction(s) with the local relay {local}; cursors in {}",
        pipes.len(),
        state.path().display()
    );
    let watched: Vec<(String, Arc<Mutex<Counts>>)> = pipes
        .iter()
        .map(|p| (p.label.clone(), Arc::clone(&p.counts)))
        .collect();
    for pipe in pipes {
        tokio::spawn(pipe.run());
    }
    let mut last: Vec<Counts> = vec![Counts::default(); watched.len()];
    let mut save = tokio::time::interval(Duration::from_millis(250));
    let mut report = tokio::time::interval(Duration::from_secs(progress.max(1)));
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    loop {
        tokio::select! {
            _ = save.tick() => {
                if let Err(e) = state.save() {
                    eprintln!("stream: {e:#}");
                }
            }
            _ = report.tick(), if progress > 0 => print_progress(&watched, &mut last, false),
            _ = tokio::signal::ctrl_c() => break,
            _ = term.recv() => break,
        }
    }
    state.save()?;
    print_progress(&watched, &mut last, true);
    Ok(ExitCode::SUCCESS)
}

/// One line per direction whose counts changed (every one when `all`).
fn print_progress(watched: &[(String, Arc<Mutex<Counts>>)], last: &mut [Counts], all: bool) {
    for ((label, counts), last) in watched.iter().zip(last.iter_mut()) {
        let now = counts.lock().expect("counts").clone();
        if !all && now == *last {
            continue;
        }
        let refused: u64 = now.refused.values().sum();
        let reasons: Vec<String> = now
            .refused
            .iter()
            .map(|(reason, n)| format!("{n} {reason}"))
            .collect();
        let reasons = match reasons.is_empty() {
            true => String::new(),
            false => format!(" ({})", reasons.join(", ")),
        };
        eprintln!(
            "stream: {label}: {} moved, {} duplicate, {} skipped, {refused} refused{reasons}, \
             {} waiting, {} reconnects, cursor {}",
            now.moved, now.duplicate, now.skipped, now.waiting, now.reconnects, now.cursor
        );
        *last = now;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filters_that_a_stream_cannot_honour_are_refused() {
        assert!(stream_filter(r#"{"kinds":[1],"since":5}"#).is_ok());
        for (json, expected) in [
            (r#"{"limit":10}"#, "limit"),
            (r#"{"until":10}"#, "until"),
            (r#"{"kinds":"x"}"#, "invalid filter"),
        ] {
            let err = format!("{:#}", stream_filter(json).unwrap_err());
            assert!(err.contains(expected), "{json}: {err}");
        }
    }

    #[test]
    fn listen_addresses_become_urls() {
        assert_eq!(listen_url("0.0.0.0:7777"), "ws://127.0.0.1:7777");
        assert_eq!(listen_url("[::]:80"), "ws://[::1]:80");
        assert_eq!(listen_url("10.0.0.2:7000"), "ws://10.0.0.2:7000");
    }
}
