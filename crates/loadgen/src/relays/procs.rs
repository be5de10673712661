//! The relays of a comparison as processes: ours and each peer started on
//! a loopback port with a fresh data directory and its configuration,
//! waited for, described, and stopped.

use std::fs::{self, File};
use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::Error;

/// Pinned peer versions (docs/bench-methodology.md); `scripts/compare-relays.sh`
/// installs these (a test checks that the two agree).
pub const KHATRU_VERSION: &str = "v0.19.0";
/// eventstore, khatru's storage backends.
pub const EVENTSTORE_VERSION: &str = "v0.16.2";
/// go-nostr, khatru's protocol library.
pub const GO_NOSTR_VERSION: &str = "v0.51.8";
/// nostr-rs-relay from crates.io.
pub const NOSTR_RS_RELAY_VERSION: &str = "0.8.12";
/// rnostr from crates.io.
pub const RNOSTR_VERSION: &str = "0.4.8";
/// rnostr's nostr-bench from crates.io.
pub const NOSTR_BENCH_VERSION: &str = "0.4.0";

/// A relay of the comparison.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Kind {
    /// `nostrwire relay`.
    Ours,
    /// khatru with eventstore's LMDB backend.
    KhatruLmdb,
    /// khatru with eventstore's Badger backend.
    KhatruBadger,
    /// nostr-rs-relay (SQLite).
    NostrRsRelay,
    /// rnostr (LMDB).
    Rnostr,
}

impl Kind {
    /// The peers by name: `khatru-lmdb`, `khatru-badger`, `nostr-rs-relay`, `rnostr`.
    pub fn peer(name: &str) -> Result<Kind, Error> {
        Ok(match name {
            "khatru-lmdb" => Kind::KhatruLmdb,
            "khatru-badger" => Kind::KhatruBadger,
            "nostr-rs-relay" => Kind::NostrRsRelay,
            "rnostr" => Kind::Rnostr,
            other => {
                return Err(Error::Usage(format!(
                    "unknown peer {other:?} (known: khatru-lmdb, khatru-badger, nostr-rs-relay, rnostr)"
                )))
            }
        })
    }

    /// The relay's name in every report.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Ours => crate::headline::OURS,
            Kind::KhatruLmdb => "khatru-lmdb",
            Kind::KhatruBadger => "khatru-badger",
            Kind::NostrRsRelay => "nostr-rs-relay",
            Kind::Rnostr => "rnostr",
        }
    }
}

/// What every relay start needs.
#[derive(Clone, Debug)]
pub struct Env {
    /// The `nostrwire` binary (ours, and the load tester).
    pub nostrwire: PathBuf,
    /// Where the peers are installed (`bin/` below it).
    pub peers_dir: PathBuf,
    /// Scratch space: data directories, configurations, logs.
    pub work: PathBuf,
    /// The load tester's `--kind-mix`.
    pub kind_mix: PathBuf,
    /// The load tester's `--corpus`.
    pub corpus: PathBuf,
}

impl Env {
    /// A relay's data directory (ours: `ours`).
    pub fn data_dir(&self, kind: Kind) -> PathBuf {
        match kind {
            Kind::Ours => self.work.join("ours"),
            k => self.work.join(k.name()),
        }
    }

    /// `nostrwire load` reading this run's kind mix and corpus.
    pub fn load(&self) -> Command {
        let mut cmd = Command::new(&self.nostrwire);
        cmd.arg("load")
            .arg("--kind-mix")
            .arg(&self.kind_mix)
            .arg("--corpus")
            .arg(&self.corpus);
        cmd
    }

    fn log(&self, kind: Kind) -> PathBuf {
        self.data_dir(kind).with_extension("log")
    }
}

/// A started relay; stopped (SIGKILL) when dropped unless stopped before.
#[derive(Debug)]
pub struct Running {
    /// Which relay.
    pub kind: Kind,
    /// `ws://127.0.0.1:PORT`.
    pub url: String,
    /// Its port.
    pub port: u16,
    /// The relay process.
    pub child: Child,
    /// Its row of the relays table (`| name | version | config | durability |`).
    pub describe: String,
}

impl Running {
    /// The relay's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Whether the process still runs.
    pub fn alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// SIGTERM, then SIGKILL if it has not gone within `grace` (a relay
    /// wedged by an attack may not shut down).
    pub fn stop(&mut self, grace: Duration) {
        if !self.alive() {
            return;
        }
        // SAFETY: kill has no memory-safety preconditions; the pid is our child's.
        unsafe { libc::kill(self.child.id() as libc::pid_t, libc::SIGTERM) };
        let end = Instant::now() + grace;
        while Instant::now() < end {
            if !self.alive() {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        eprintln!(
            "bench relays: {} (pid {}) ignored SIGTERM for {} s: SIGKILL",
            self.kind.name(),
            self.child.id(),
            grace.as_secs()
        );
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if self.alive() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Whether something accepts TCP connections on 127.0.0.1:`port`.
pub fn port_in_use(port: u16) -> bool {
    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    TcpStream::connect_timeout(&addr, Duration::from_millis(500)).is_ok()
}

/// `port`, or the first port after it nothing listens on (another relay on
/// this machine would otherwise answer in place of ours).
pub fn free_port(mut port: u16) -> u16 {
    while port_in_use(port) {
        eprintln!(
            "bench relays: port {port} is in use by another process: trying {}",
            port + 1
        );
        port += 1;
    }
    port
}

/// Our relay's configuration. Throughput runs open up to thousands of
/// connections from 127.0.0.1, which the default per-address limit (32)
/// would refuse: like the peers, which have no such limit, ours gets none.
/// Equal work: the peers serve every kind to anyone, so ours lifts its
/// NIP-42 read restriction and every relay answers the same queries with
/// the same events; no AUTH challenge on connect either (a client that
/// does not speak NIP-42, nostr-bench, would take it for the answer to its
/// first message). The abuse scenarios keep every default (their attacker
/// has an address of its own). Returns the file's text and what the
/// throughput runs change (the relays table names it either way).
pub fn ours_config(abuse: bool, has_challenge_setting: bool) -> (String, String) {
    let mut text = "[rate]\nconnections_per_ip = 0\n\n[auth]\nrestricted_kinds = []\n".to_string();
    let mut changed = "`connections_per_ip = 0` and `restricted_kinds = []`".to_string();
    if has_challenge_setting {
        text.push_str("challenge_on_connect = false\n");
        changed =
            "`connections_per_ip = 0`, `restricted_kinds = []` and `challenge_on_connect = false`"
                .into();
    }
    if abuse {
        text.clear();
    }
    (text, changed)
}

/// nostr-rs-relay's configuration: limits raised to 1 MiB, no rate limits,
/// NIP-42 and verified users off.
pub fn nostr_rs_relay_config(port: u16, data: &Path) -> String {
    format!(
        "[info]\nrelay_url = \"ws://127.0.0.1:{port}/\"\nname = \"nostr-rs-relay bench\"\n\
         [database]\ndata_directory = \"{d}\"\n[network]\naddress = \"127.0.0.1\"\nport = {port}\n\
         [limits]\nmax_event_bytes = 1048576\nmax_ws_message_bytes = 1048576\nmax_ws_frame_bytes = 1048576\n\
         [authorization]\nnip42_auth = false\n[verified_users]\nmode = \"disabled\"\n",
        d = data.display()
    )
}

/// rnostr's configuration: rate limiter off, message limit 1 MiB,
/// `max_limit` 5000, events of the last ten years accepted.
pub fn rnostr_config(port: u16, data: &Path) -> String {
    format!(
        "[information]\nname = \"rnostr bench\"\n[data]\npath = \"{d}/db\"\n[network]\n\
         host = \"127.0.0.1\"\nport = {port}\n[thread]\nhttp = 0\nreader = 0\n[limitation]\n\
         max_message_length = 1048576\nmax_subscriptions = 100\nmax_filters = 10\nmax_limit = 5000\n\
         max_event_tags = 10000\nmax_event_time_older_than_now = 315360000\n\
         max_event_time_newer_than_now = 900\n[rate_limiter]\nenabled = false\n",
        d = data.display()
    )
}

fn output_of(cmd: &mut Command) -> Option<String> {
    let out = cmd.stderr(Stdio::null()).output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// The command that starts `kind` on `port` (its configuration written
/// beside its data directory, created when missing) and its row of the
/// relays table.
pub fn prepare(env: &Env, kind: Kind, port: u16, abuse: bool) -> Result<(Command, String), Error> {
    let data = env.data_dir(kind);
    fs::create_dir_all(&data)?;
    let bin = |name: &str| env.peers_dir.join("bin").join(name);
    let installed = |p: &Path| {
        if p.is_file() {
            Ok(())
        } else {
            Err(Error::Usage(format!(
                "{} is not installed at {} (scripts/compare-relays.sh --install-only installs it)",
                kind.name(),
                p.display()
            )))
        }
    };
    let (cmd, describe) = match kind {
        Kind::Ours => {
            let print = output_of(Command::new(&env.nostrwire).args(["relay", "--print-config"]))
                .unwrap_or_default();
            let has_challenge = print.lines().any(|l| l.starts_with("challenge_on_connect"));
            let (text, changed) = ours_config(abuse, has_challenge);
            let config = env.work.join("ours.toml");
            fs::write(&config, text)?;
            let version = output_of(Command::new(&env.nostrwire).arg("--version"))
                .unwrap_or_else(|| "nostrwire".into());
            let tree = output_of(Command::new("git").args(["rev-parse", "--short", "HEAD"]))
                .map(|t| format!(" (tree at {t})"))
                .unwrap_or_default();
            let durability = print
                .lines()
                .find(|l| l.starts_with("durability"))
                .unwrap_or("see the config");
            let mut cmd = Command::new(&env.nostrwire);
            cmd.arg("relay")
                .arg("--config")
                .arg(&config)
                .args(["--listen", &format!("127.0.0.1:{port}"), "--data"])
                .arg(&data);
            let describe = format!(
                "| nostrwire | {version}{tree} | `nostrwire relay --listen 127.0.0.1:{port} --data DIR`, default config (`nostrwire relay --print-config`) except {changed} outside the abuse scenarios | {durability} |"
            );
            (cmd, describe)
        }
        Kind::KhatruLmdb | Kind::KhatruBadger => {
            let exe = bin("khatru-bench");
            installed(&exe)?;
            let backend = if kind == Kind::KhatruLmdb {
                "lmdb"
            } else {
                "badger"
            };
            let mut cmd = Command::new(exe);
            cmd.args(["-addr", &format!("127.0.0.1:{port}"), "-data"])
                .arg(&data)
                .args(["-backend", backend]);
            let describe = format!(
                "| {} | khatru {KHATRU_VERSION}, eventstore {EVENTSTORE_VERSION} ({backend}), go-nostr {GO_NOSTR_VERSION} | no policies (no rate limits), MaxMessageSize default 512,000 | eventstore's {backend} backend with its default options |",
                kind.name()
            );
            (cmd, describe)
        }
        Kind::NostrRsRelay => {
            let exe = bin("nostr-rs-relay");
            installed(&exe)?;
            let config = data.join("config.toml");
            fs::write(&config, nostr_rs_relay_config(port, &data))?;
            let mut cmd = Command::new(exe);
            cmd.arg("--config").arg(&config).arg("--db").arg(&data);
            let describe = format!("| nostr-rs-relay | {NOSTR_RS_RELAY_VERSION} (crates.io) | limits raised to 1 MiB, messages_per_sec/subscriptions_per_min unset (unlimited), NIP-42 off, verified users off | SQLite, one transaction per event (WAL) |");
            (cmd, describe)
        }
        Kind::Rnostr => {
            let exe = bin("rnostr");
            installed(&exe)?;
            let config = data.join("rnostr.toml");
            fs::write(&config, rnostr_config(port, &data))?;
            let mut cmd = Command::new(exe);
            cmd.args(["relay", "-c"]).arg(&config);
            let describe = format!("| rnostr | {RNOSTR_VERSION} (crates.io) | rate limiter off, message limit 1 MiB, max_limit 5000 | LMDB; writer commits every 100 ms (hard-coded) |");
            (cmd, describe)
        }
    };
    Ok((cmd, describe))
}

/// Starts `kind` on the first free port from `port`, on its data directory
/// (created when missing), and waits until it listens.
pub fn start(env: &Env, kind: Kind, port: u16, abuse: bool) -> Result<Running, Error> {
    let port = free_port(port);
    let (mut cmd, describe) = prepare(env, kind, port, abuse)?;
    let log = env.log(kind);
    let out = File::create(&log)?;
    let child = cmd
        .stdin(Stdio::null())
        .stdout(out.try_clone()?)
        .stderr(out)
        .spawn()
        .map_err(|e| Error::Usage(format!("cannot start {}: {e}", kind.name())))?;
    let mut running = Running {
        kind,
        url: format!("ws://127.0.0.1:{port}"),
        port,
        child,
        describe,
    };
    // Up to 10 s for the port to open.
    for _ in 0..100 {
        super::interrupt::check()?;
        if !running.alive() {
            return Err(Error::Usage(format!(
                "{} exited before opening port {port}: {}",
                kind.name(),
                log_tail(&log)
            )));
        }
        if port_in_use(port) {
            return Ok(running);
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    running.stop(Duration::from_secs(10));
    Err(Error::Usage(format!(
        "{} did not open port {port}: {}",
        kind.name(),
        log_tail(&log)
    )))
}

/// The last lines of a relay's log, for an error.
fn log_tail(path: &Path) -> String {
    let text = fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(5)..].join(" / ")
}

/// What a relay sends on a new WebSocket connection before the client says
/// anything (within 1 s): `AUTH`, `other`, `nothing` (or `unknown` when it
/// cannot be reached). A client that takes the first text frame for the
/// answer to its first message (nostr-bench does) misreads a relay that
/// greets it.
pub fn greeting(port: u16) -> &'static str {
    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    let Ok(mut s) = TcpStream::connect_timeout(&addr, Duration::from_secs(2)) else {
        return "unknown";
    };
    let request = format!(
        "GET / HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
         Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
    );
    if s.write_all(request.as_bytes()).is_err() {
        return "unknown";
    }
    let end = Instant::now() + Duration::from_secs(1);
    let mut reply = Vec::new();
    let mut buf = [0u8; 4096];
    while let Some(left) = end.checked_duration_since(Instant::now()) {
        if left.is_zero() || s.set_read_timeout(Some(left)).is_err() {
            break;
        }
        match s.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => reply.extend_from_slice(&buf[..n]),
        }
    }
    classify_greeting(&reply)
}

/// `AUTH` when the bytes hold `["AUTH"` (spaces allowed after the bracket),
/// `other` for any other JSON array, `nothing` otherwise.
pub fn classify_greeting(reply: &[u8]) -> &'static str {
    let auth = reply.iter().enumerate().any(|(i, &b)| {
        b == b'['
            && reply[i + 1..]
                .iter()
                .skip_while(|&&c| c == b' ')
                .take(6)
                .eq(b"\"AUTH\"".iter())
    });
    if auth {
        "AUTH"
    } else if reply.windows(2).any(|w| w == b"[\"") {
        "other"
    } else {
        "nothing"
    }
}

/// Waits until ours has written its trailing indexes (the time-ordered and
/// search backlogs on `/metrics` both empty), or a minute has passed.
pub fn wait_for_indexes(port: u16) {
    for _ in 0..120 {
        if metrics_backlog(port) == Some(0) || super::interrupt::interrupted() {
            return;
        }
        std::thread::sleep(Duration::from_millis(500));
    }
}

fn metrics_backlog(port: u16) -> Option<u64> {
    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(2)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(
        s,
        "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut text = String::new();
    s.read_to_string(&mut text).ok()?;
    Some(backlog(&text))
}

/// The sum of `nostrwire_db_index_backlog_events` and
/// `nostrwire_db_search_backlog_events` in a metrics page.
pub fn backlog(metrics: &str) -> u64 {
    metrics
        .lines()
        .filter_map(|l| {
            let rest = l
                .strip_prefix("nostrwire_db_index_backlog_events ")
                .or_else(|| l.strip_prefix("nostrwire_db_search_backlog_events "))?;
            rest.trim().parse::<f64>().ok()
        })
        .sum::<f64>() as u64
}

/// Stops every relay (SIGTERM, SIGKILL after `grace`).
pub fn stop_all(relays: &mut [Running], grace: Duration) {
    for r in relays.iter_mut() {
        if r.alive() {
            // SAFETY: as in `Running::stop`.
            unsafe { libc::kill(r.child.id() as libc::pid_t, libc::SIGTERM) };
        }
    }
    for r in relays.iter_mut() {
        r.stop(grace);
    }
}
