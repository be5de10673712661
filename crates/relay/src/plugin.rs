//! The write-policy plugin: an external program that decides, event by
//! event, whether to accept, reject or silently drop, speaking strfry's
//! plugin protocol so existing strfry plugins work unchanged.
//!
//! One JSON object per line on the plugin's stdin:
//! `{"type":"new","event":{…},"receivedAt":<unix>,"sourceType":"IP4"|"IP6","sourceInfo":"<address>"}`
//! and one answer per line on its stdout:
//! `{"id":"<event id>","action":"accept"|"reject"|"shadowReject","msg":"…"}`.
//!
//! Each ingest worker runs its own instance (no locking; workers never wait
//! on each other's plugin). A plugin that dies is started again on the next
//! event, at most once per [`RESTART_INTERVAL`]; one that does not answer
//! within the timeout (taking its input counts: lines are written by a
//! thread of their own, so a plugin that stops reading cannot block the
//! worker) is killed and restarted. While it cannot answer, events are
//! refused with `error:`, never accepted unchecked.

use std::io::{BufRead, BufReader, Write};
use std::net::IpAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError, SendTimeoutError, Sender};
use nostrwire_event::EventId;

/// Least time between two starts of the plugin.
pub const RESTART_INTERVAL: Duration = Duration::from_secs(1);

/// Prefixes a plugin's `msg` may already carry (NIP-01 `OK` reasons).
const PREFIXES: &[&str] = &[
    "blocked:",
    "rate-limited:",
    "invalid:",
    "restricted:",
    "pow:",
    "duplicate:",
    "error:",
    "mute:",
    "auth-required:",
];

/// The plugin's decision on one event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    /// Store it.
    Accept,
    /// Refuse it with this `OK false` message.
    Reject(String),
    /// Answer `OK true` but store nothing (strfry's `shadowReject`).
    ShadowReject,
}

struct Running {
    child: Child,
    /// Lines for the plugin's stdin, written by the `plugin-writer` thread.
    input: Sender<Vec<u8>>,
    lines: Receiver<String>,
}

/// One worker's plugin process.
pub struct Plugin {
    path: PathBuf,
    timeout: Duration,
    running: Option<Running>,
    last_start: Option<Instant>,
}

impl std::fmt::Debug for Plugin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Plugin")
            .field("path", &self.path)
            .field("running", &self.running.is_some())
            .finish()
    }
}

impl Plugin {
    /// A plugin started on first use.
    pub fn new(path: PathBuf, timeout: Duration) -> Plugin {
        Plugin {
            path,
            timeout,
            running: None,
            last_start: None,
        }
    }

    fn start(&mut self) -> Result<(), String> {
        if self
            .last_start
            .is_some_and(|t| t.elapsed() < RESTART_INTERVAL)
        {
            return Err("error: write policy plugin is restarting".into());
        }
        self.last_start = Some(Instant::now());
        let mut child = Command::new(&self.path)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| {
                tracing::error!("cannot start plugin {}: {e}", self.path.display());
                "error: write policy plugin unavailable".to_string()
            })?;
        let mut stdin = child.stdin.take().expect("piped stdin");
        let stdout = child.stdout.take().expect("piped stdout");
        // One line in flight: the worker waits for its answer anyway.
        let (input, to_write) = crossbeam_channel::bounded::<Vec<u8>>(1);
        std::thread::Builder::new()
            .name("plugin-writer".into())
            .spawn(move || {
                // Ends when the plugin is stopped (the write fails, or the
                // sender is dropped).
                for line in to_write {
                    if stdin.write_all(&line).and_then(|()| stdin.flush()).is_err() {
                        break;
                    }
                }
            })
            .map_err(|e| format!("error: cannot write to write policy plugin: {e}"))?;
        let (tx, lines) = crossbeam_channel::unbounded();
        std::thread::Builder::new()
            .name("plugin-reader".into())
            .spawn(move || {
                for line in BufReader::new(stdout).lines() {
                    let Ok(line) = line else { break };
                    if tx.send(line).is_err() {
                        break;
                    }
                }
            })
            .map_err(|e| format!("error: cannot read from write policy plugin: {e}"))?;
        tracing::info!("write policy plugin {} started", self.path.display());
        self.running = Some(Running {
            child,
            input,
            lines,
        });
        Ok(())
    }

    fn stop(&mut self, why: &str) {
        if let Some(mut r) = self.running.take() {
            tracing::warn!("write policy plugin {}: {why}", self.path.display());
            let _ = r.child.kill();
            let _ = r.child.wait();
        }
    }

    /// Asks the plugin about one verified event (`json` is its canonical JSON).
    pub fn decide(&mut self, id: &EventId, json: &str, ip: IpAddr, now: u64) -> Decision {
        // `json` is already canonical JSON: spliced in, not re-encoded.
        let line = format!(
            "{{\"type\":\"new\",\"event\":{json},\"receivedAt\":{now},\"sourceType\":\"{}\",\"sourceInfo\":\"{ip}\"}}\n",
            if ip.is_ipv4() { "IP4" } else { "IP6" },
        );
        // The timeout covers taking the line and answering it.
        let deadline = Instant::now() + self.timeout;
        // A plugin found dead on write gets one fresh start for this event.
        for attempt in 0..2 {
            if self.running.is_none() {
                if let Err(reason) = self.start() {
                    return Decision::Reject(reason);
                }
            }
            let r = self.running.as_mut().expect("running");
            match r.input.send_deadline(line.as_bytes().to_vec(), deadline) {
                Ok(()) => return self.answer(id, deadline),
                Err(SendTimeoutError::Timeout(_)) => {
                    self.stop("did not read its input in time; restarting");
                    return Decision::Reject("error: write policy plugin timed out".into());
                }
                Err(SendTimeoutError::Disconnected(_)) => {}
            }
            self.stop("stopped accepting input");
            if attempt == 0 {
                self.last_start = None;
            }
        }
        Decision::Reject("error: write policy plugin unavailable".into())
    }

    fn answer(&mut self, id: &EventId, deadline: Instant) -> Decision {
        let want = id.to_hex();
        loop {
            let r = self.running.as_mut().expect("running");
            let line = match r.lines.recv_deadline(deadline) {
                Ok(line) => line,
                Err(RecvTimeoutError::Timeout) => {
                    self.stop("did not answer in time; restarting");
                    return Decision::Reject("error: write policy plugin timed out".into());
                }
                Err(RecvTimeoutError::Disconnected) => {
                    self.stop("exited");
                    return Decision::Reject("error: write policy plugin stopped".into());
                }
            };
            let Ok(reply) = serde_json::from_str::<serde_json::Value>(&line) else {
                tracing::warn!("plugin wrote a line that is not JSON: {line:.200}");
                continue;
            };
            // Answers to earlier, timed-out requests are skipped.
            if reply["id"].as_str() != Some(want.as_str()) {
                continue;
            }
            let msg = reply["msg"].as_str().unwrap_or("").trim();
            return match reply["action"].as_str() {
                Some("accept") => Decision::Accept,
                Some("shadowReject") => Decision::ShadowReject,
                Some("reject") => Decision::Reject(if msg.is_empty() {
                    "blocked: rejected by the relay's write policy".into()
                } else if PREFIXES.iter().any(|p| msg.starts_with(p)) {
                    msg.to_string()
                } else {
                    format!("blocked: {msg}")
                }),
                other => {
                    tracing::warn!("plugin answered with unknown action {other:?}");
                    Decision::Reject("error: write policy plugin gave no valid action".into())
                }
            };
        }
    }
}

impl Drop for Plugin {
    fn drop(&mut self) {
        if let Some(mut r) = self.running.take() {
            // Ending the writer closes stdin, which lets a well-behaved
            // plugin exit on its own.
            drop(r.input);
            let _ = r.child.kill();
            let _ = r.child.wait();
        }
    }
}
