//! Memory that clients make the relay hold, in two budgets: each
//! connection's (`limits.max_connection_bytes`: its subscriptions, the
//! stored results its queries hold, its queued output) and, around all of
//! them, the relay's (`limits.relay_memory_bytes`).
//!
//! Per-connection and per-address limits do not bound an attacker with
//! many addresses; the relay-wide budget does. When it is spent, the
//! connections that hold the most and read the least give way first:
//!
//! - a connection holding no more than its fair share (the budget divided
//!   by the open connections) may still take what it needs, so a client
//!   that reads keeps being served while others hold the budget;
//! - one holding more than its share is refused: its new requests get
//!   `CLOSED rate-limited:`, its queries wait, and output that would add to
//!   its queue cuts it off if it leaves what it was sent unread (a client
//!   that reads is sent it, within its own budget);
//! - control messages (`OK`, `EOSE`, `CLOSED`, `NOTICE`, `AUTH`, `COUNT`
//!   answers) are never refused: they have an allowance of their own
//!   outside the connection's budget (`msg::CONTROL_ALLOWANCE`), counted
//!   here, so the answer that tells a client it is over its share reaches
//!   it;
//! - the relay reclaims what it overdrew by cutting off the connections
//!   above their share that have not taken a byte of their output for a
//!   while, largest first ([`RelayMemory::reclaim`]).
//!
//! Everything taken is in these budgets, so the overdraw is bounded:
//! every connection's fair share beyond the cap (the cap again), plus what
//! one query slice finds per connection (a scan's matches are counted
//! after the slice that found them, then the scan waits; nothing is
//! reserved ahead of them), the output of clients that read it (within
//! their own budgets), and each connection's control allowance.
//!
//! Once most of a large peak has been given back, or most of a crowd of
//! connections has gone, the allocator is asked to return its free pages
//! to the system (`malloc_trim`), so the memory an attack made the relay
//! take does not stay with the process.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Why a budget refused bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Short {
    /// The connection's own budget (`limits.max_connection_bytes`) is spent.
    Connection,
    /// The relay's budget (`limits.relay_memory_bytes`) is spent and the
    /// connection holds more than its fair share of it.
    Relay,
}

/// A connection that has queued output and has not taken any of it for
/// this long is not reading, for the choice of who gives way.
pub(crate) const NOT_READING: Duration = Duration::from_millis(500);
/// Reclaiming scans every connection: at most this often.
const RECLAIM_EVERY: Duration = Duration::from_millis(20);
/// Peaks below this are not worth returning to the system.
const TRIM_MIN_PEAK: usize = 64 << 20;
/// Crowds of connections smaller than this are not worth a trim when
/// they leave.
const TRIM_MIN_CONNECTIONS: usize = 256;
/// How long after the budget fell below a quarter of its peak the
/// allocator is trimmed (frees of a closing attack come in bursts).
const TRIM_DELAY: Duration = Duration::from_secs(1);

/// The relay-wide budget, and the open connections that draw on it.
#[derive(Debug)]
pub struct RelayMemory {
    cap: usize,
    used: AtomicUsize,
    /// Highest `used` since the allocator was last trimmed.
    peak: AtomicUsize,
    trimming: AtomicBool,
    members: Mutex<HashMap<u64, Arc<dyn Member>>>,
    open: AtomicUsize,
    /// Most connections open since the allocator was last trimmed.
    open_peak: AtomicUsize,
    /// Milliseconds since `epoch` of the last reclaim.
    last_reclaim: AtomicU64,
    epoch: Instant,
    /// Connections cut off to give memory back.
    pub cut_offs: AtomicU64,
    /// Requests and query steps refused or held back for want of memory.
    pub refusals: AtomicU64,
    /// Times the allocator was asked to return free memory.
    pub trims: AtomicU64,
}

/// What the budget needs of a connection to choose who gives way: what it
/// holds, whether it reads, and a way to cut it off (`msg::Outbox`).
pub trait Member: Send + Sync + std::fmt::Debug {
    /// Bytes it holds, in all its budgets.
    fn holding(&self) -> usize;
    /// Bytes of output queued that the client has not taken.
    fn unread(&self) -> usize;
    /// How long since the client last took any of its output.
    fn idle_for(&self) -> Duration;
    /// True once it was cut off or closed.
    fn is_gone(&self) -> bool;
    /// Drops its queue and closes it: it held its share and did not read.
    fn cut_off(&self);
}

impl RelayMemory {
    /// A budget of `cap` bytes (at least 1 MiB), nothing used.
    pub fn new(cap: usize) -> Arc<RelayMemory> {
        Arc::new(RelayMemory {
            cap: cap.max(1 << 20),
            used: AtomicUsize::new(0),
            peak: AtomicUsize::new(0),
            trimming: AtomicBool::new(false),
            members: Mutex::default(),
            open: AtomicUsize::new(0),
            open_peak: AtomicUsize::new(0),
            last_reclaim: AtomicU64::new(0),
            epoch: Instant::now(),
            cut_offs: AtomicU64::new(0),
            refusals: AtomicU64::new(0),
            trims: AtomicU64::new(0),
        })
    }

    /// The cap, in bytes.
    pub fn cap(&self) -> usize {
        self.cap
    }

    /// Bytes held by all connections together.
    pub fn used(&self) -> usize {
        self.used.load(Ordering::Relaxed)
    }

    /// True while the budget is spent.
    pub fn is_short(&self) -> bool {
        self.used() >= self.cap
    }

    /// What one connection may hold while the budget is spent.
    pub fn fair_share(&self) -> usize {
        self.cap / self.open.load(Ordering::Relaxed).max(1)
    }

    /// Counts connection `id` in (for the fair share) until the returned
    /// guard is dropped; reclaiming may cut it off.
    pub fn join(self: &Arc<Self>, id: u64, member: Arc<dyn Member>) -> Membership {
        self.members
            .lock()
            .expect("memory members")
            .insert(id, member);
        let open = self.open.fetch_add(1, Ordering::Relaxed) + 1;
        self.open_peak.fetch_max(open, Ordering::Relaxed);
        Membership {
            memory: self.clone(),
            id,
        }
    }

    /// Appends the budget's figures to a `/metrics` page.
    pub fn render_metrics(&self, out: &mut String) {
        use std::fmt::Write as _;
        let counters = [
            (
                "nostrwire_relay_memory_bytes",
                "gauge",
                "Bytes all connections hold together (limits.relay_memory_bytes counts them).",
                self.used() as u64,
            ),
            (
                "nostrwire_relay_memory_cap_bytes",
                "gauge",
                "limits.relay_memory_bytes as in effect.",
                self.cap as u64,
            ),
            (
                "nostrwire_relay_memory_cut_offs_total",
                "counter",
                "Connections cut off because they held more than their share of a spent budget and did not read.",
                self.cut_offs.load(Ordering::Relaxed),
            ),
            (
                "nostrwire_relay_memory_refusals_total",
                "counter",
                "Requests refused and queued output denied because the budget was spent.",
                self.refusals.load(Ordering::Relaxed),
            ),
            (
                "nostrwire_relay_memory_trims_total",
                "counter",
                "Times free memory was returned to the system after a peak.",
                self.trims.load(Ordering::Relaxed),
            ),
        ];
        for (name, kind, help, value) in counters {
            let _ = write!(
                out,
                "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {value}\n"
            );
        }
    }

    /// Takes `n` bytes for a connection that will then hold `holding`.
    fn take(&self, n: usize, holding: usize) -> Result<(), Short> {
        let used = self.used.fetch_add(n, Ordering::Relaxed) + n;
        if used <= self.cap {
            return Ok(());
        }
        self.peak.fetch_max(used, Ordering::Relaxed);
        if holding <= self.fair_share() {
            // Within its share: served, and someone above theirs gives way.
            self.reclaim(0);
            return Ok(());
        }
        self.used.fetch_sub(n, Ordering::Relaxed);
        self.refusals.fetch_add(1, Ordering::Relaxed);
        // Refused, but not for good: those that hold the budget without
        // reading give way to what was asked.
        self.reclaim(n);
        Err(Short::Relay)
    }

    /// Takes `n` bytes whatever the budget says: for memory that exists
    /// already and is only changing hands.
    fn force(&self, n: usize) {
        let used = self.used.fetch_add(n, Ordering::Relaxed) + n;
        if used > self.cap {
            self.peak.fetch_max(used, Ordering::Relaxed);
        }
    }

    fn give_back(&self, n: usize) {
        let used = self.used.fetch_sub(n, Ordering::Relaxed) - n;
        let peak = self.peak.load(Ordering::Relaxed);
        if peak >= TRIM_MIN_PEAK && used < peak / 4 && !self.trimming.swap(true, Ordering::AcqRel) {
            self.schedule_trim();
        }
    }

    /// Cuts off connections above their fair share that are not reading,
    /// the largest holders first, until what they hold would bring the
    /// budget back under its cap with `need` bytes to spare (what a refused
    /// or waiting connection asks for). At most once every 20 ms.
    pub fn reclaim(&self, need: usize) {
        let now = self.epoch.elapsed().as_millis() as u64;
        let last = self.last_reclaim.load(Ordering::Relaxed);
        if now < last + RECLAIM_EVERY.as_millis() as u64
            || self
                .last_reclaim
                .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
                .is_err()
        {
            return;
        }
        let over = (self.used() + need).saturating_sub(self.cap);
        if over == 0 {
            return;
        }
        let share = self.fair_share();
        let mut candidates: Vec<(usize, Arc<dyn Member>)> = {
            let members = self.members.lock().expect("memory members");
            members
                .values()
                .filter(|m| !m.is_gone())
                .map(|m| (m.holding(), m))
                .filter(|(holding, m)| {
                    *holding > share && m.unread() > 0 && m.idle_for() >= NOT_READING
                })
                .map(|(holding, m)| (holding, m.clone()))
                .collect()
        };
        candidates.sort_unstable_by_key(|c| std::cmp::Reverse(c.0));
        let mut freed = 0;
        for (holding, member) in candidates {
            if freed >= over {
                break;
            }
            member.cut_off();
            self.cut_offs.fetch_add(1, Ordering::Relaxed);
            freed += holding;
        }
    }

    /// Returns free memory to the system a moment after a large peak was
    /// given back, on a thread of its own (trimming takes milliseconds).
    fn schedule_trim(&self) {
        // The next trim waits for a new peak.
        self.peak.store(self.used(), Ordering::Relaxed);
        self.open_peak
            .store(self.open.load(Ordering::Relaxed), Ordering::Relaxed);
        self.trims.fetch_add(1, Ordering::Relaxed);
        let spawned = std::thread::Builder::new().name("trim".into()).spawn(|| {
            std::thread::sleep(TRIM_DELAY);
            trim_allocator();
        });
        if spawned.is_err() {
            tracing::debug!("could not start the allocator trim");
        }
        self.trimming.store(false, Ordering::Release);
    }
}

/// Asks the C allocator to return every free page it holds.
fn trim_allocator() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only walks the allocator's own free lists.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// A connection counted in the relay's budget; leaves when dropped.
#[derive(Debug)]
pub struct Membership {
    memory: Arc<RelayMemory>,
    id: u64,
}

impl Drop for Membership {
    fn drop(&mut self) {
        if self
            .memory
            .members
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&self.id)
            .is_some()
        {
            let memory = &self.memory;
            let open = memory.open.fetch_sub(1, Ordering::Relaxed) - 1;
            // When most of a crowd of connections has gone, what their
            // tasks and buffers held goes back to the system too.
            let peak = memory.open_peak.load(Ordering::Relaxed);
            if peak >= TRIM_MIN_CONNECTIONS
                && open < peak / 8
                && !memory.trimming.swap(true, Ordering::AcqRel)
            {
                memory.schedule_trim();
            }
        }
    }
}

/// One connection's memory budget (`limits.max_connection_bytes`): what
/// its subscriptions hold (filters, parsed searches, read gates, their
/// entries in the fan-out index), the stored results its queries hold until
/// they are sent, and its queued output; drawn from the relay's budget.
#[derive(Debug)]
pub struct Budget {
    cap: usize,
    used: AtomicUsize,
    relay: Option<Arc<RelayMemory>>,
}

impl Budget {
    /// A budget of `cap` bytes, nothing used, within `relay`'s (`None`:
    /// on its own, for tests and tools).
    pub fn new(cap: usize, relay: Option<Arc<RelayMemory>>) -> Arc<Budget> {
        Arc::new(Budget {
            cap,
            used: AtomicUsize::new(0),
            relay,
        })
    }

    /// Bytes in use.
    pub fn used(&self) -> usize {
        self.used.load(Ordering::Relaxed)
    }

    /// The cap.
    pub fn cap(&self) -> usize {
        self.cap
    }

    /// The relay's budget this one draws on.
    pub fn relay(&self) -> Option<&Arc<RelayMemory>> {
        self.relay.as_ref()
    }

    /// Whether the relay's budget is spent and this connection holds more
    /// than its fair share of it: its queries wait.
    pub fn must_wait(&self) -> bool {
        self.relay
            .as_ref()
            .is_some_and(|r| r.is_short() && self.used() > r.fair_share())
    }

    /// While [`Budget::must_wait`]: asks the relay to cut off connections
    /// that hold the budget without reading (above their share, output
    /// untaken), enough for what this one holds beyond its share, so that
    /// a connection that waits is not left waiting by clients that never
    /// read.
    pub fn make_room(&self) {
        if let Some(relay) = &self.relay {
            relay.reclaim(self.used().saturating_sub(relay.fair_share()));
        }
    }

    /// Takes `n` bytes if they fit; nothing taken if not.
    pub fn take(&self, n: usize) -> Result<(), Short> {
        let used = self.take_own(n)?;
        if let Some(relay) = &self.relay {
            if let Err(short) = relay.take(n, used) {
                self.used.fetch_sub(n, Ordering::Relaxed);
                return Err(short);
            }
        }
        Ok(())
    }

    /// Takes `n` bytes of this budget alone if they fit; returns what it
    /// then holds.
    fn take_own(&self, n: usize) -> Result<usize, Short> {
        let mut used = self.used.load(Ordering::Relaxed);
        loop {
            if used.saturating_add(n) > self.cap {
                return Err(Short::Connection);
            }
            match self.used.compare_exchange_weak(
                used,
                used + n,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => return Ok(used + n),
                Err(now) => used = now,
            }
        }
    }

    /// Takes `n` bytes if they fit this budget, whatever the relay's
    /// says (counted in it all the same): for output of a client that
    /// reads it, and for control messages.
    pub fn take_within(&self, n: usize) -> Result<(), Short> {
        self.take_own(n)?;
        if let Some(relay) = &self.relay {
            relay.force(n);
        }
        Ok(())
    }

    /// Takes `n` bytes whatever the caps say: memory that exists already
    /// and is only changing hands.
    pub fn take_anyway(&self, n: usize) {
        self.used.fetch_add(n, Ordering::Relaxed);
        if let Some(relay) = &self.relay {
            relay.force(n);
        }
    }

    /// Gives back `n` bytes.
    pub fn give_back(&self, n: usize) {
        self.used.fetch_sub(n, Ordering::Relaxed);
        if let Some(relay) = &self.relay {
            relay.give_back(n);
        }
    }

    /// Holds `n` bytes until the guard is dropped.
    pub fn hold(self: &Arc<Self>, n: usize) -> Result<Held, Short> {
        self.take(n).map(|()| Held {
            budget: self.clone(),
            bytes: n,
        })
    }

    /// Holds nothing yet.
    pub fn hold_none(self: &Arc<Self>) -> Held {
        Held {
            budget: self.clone(),
            bytes: 0,
        }
    }
}

impl Drop for Budget {
    /// A connection's budget goes when its last holder does: whatever it
    /// still counts (a queue its writer never drained, say, when the
    /// connection's task died) goes back to the relay's.
    fn drop(&mut self) {
        if let Some(relay) = &self.relay {
            relay.give_back(*self.used.get_mut());
        }
    }
}

/// Bytes held in a [`Budget`]; given back when dropped.
#[derive(Debug)]
pub struct Held {
    budget: Arc<Budget>,
    bytes: usize,
}

impl Held {
    /// Bytes held.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Gives back `n` of the held bytes now (at most all of them).
    pub fn release(&mut self, n: usize) {
        let n = n.min(self.bytes);
        self.bytes -= n;
        self.budget.give_back(n);
    }

    /// Holds `n` more bytes if they fit.
    pub fn grow(&mut self, n: usize) -> Result<(), Short> {
        self.budget.take(n)?;
        self.bytes += n;
        Ok(())
    }

    /// Holds `n` more bytes whatever the caps say: for memory that exists
    /// already and is only changing hands.
    pub fn grow_anyway(&mut self, n: usize) {
        self.budget.take_anyway(n);
        self.bytes += n;
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        self.budget.give_back(self.bytes);
    }
}

/// The default of `limits.relay_memory_bytes`: a sixteenth of the
/// machine's memory, between 64 MiB and 256 MiB. The rest is the page
/// cache's, which serves every query from the database file.
pub fn default_relay_bytes() -> usize {
    let total = physical_memory().unwrap_or(4 << 30);
    (total / 16).clamp(64 << 20, 256 << 20)
}

/// Bytes of physical memory, from the operating system.
fn physical_memory() -> Option<usize> {
    // SAFETY: sysconf only reads system configuration.
    let (pages, size) = unsafe {
        (
            libc::sysconf(libc::_SC_PHYS_PAGES),
            libc::sysconf(libc::_SC_PAGESIZE),
        )
    };
    (pages > 0 && size > 0).then(|| pages as usize * size as usize)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn within_the_relay_budget_connections_take_what_their_own_allows() {
        let relay = RelayMemory::new(4 << 20);
        let a = Budget::new(3 << 20, Some(relay.clone()));
        assert!(a.take(3 << 20).is_ok());
        assert_eq!(a.take(1), Err(Short::Connection));
        assert_eq!(relay.used(), 3 << 20);
        a.give_back(3 << 20);
        assert_eq!(relay.used(), 0);
    }
}
