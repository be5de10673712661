//! The attacks `nostrwire load` knows by name, and their sizes.
//!
//! Below both [`crate::scenario`] (whose [`crate::Scenario`] names an attack)
//! and [`crate::abuse`] (which runs one), so neither imports the other's
//! floor.

use std::fmt;
use std::time::Duration;

use serde::Serialize;

/// A class of hostile client.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Attack {
    /// Connections that subscribe to everything and never read their socket.
    SlowReaders,
    /// Many idle WebSocket connections and half-open upgrades from one address.
    IdleFlood,
    /// REQs with the most filters and thousands of values each; many AUTHs per connection.
    OversizedSubs,
    /// Compressed messages that inflate to about a megabyte each.
    DeflateBomb,
    /// EVENT messages with tens of thousands of unknown keys.
    QuadraticJson,
    /// Live NIP-50 searches of tens of thousands of terms.
    HostileSearch,
    /// Another author's deletion, then the deleted event sent again.
    DeletionUndo,
    /// An AUTH event that names another relay.
    AuthRelayed,
    /// Slow readers spread over many addresses, each within the per-address limits.
    SpreadSlowReaders,
    /// Oversized live subscriptions from many addresses.
    SpreadOversizedSubs,
    /// Heavy queries, read to the end, from many addresses.
    SpreadHeavyQueries,
    /// Connections spread over many /64s of one IPv6 /48 (a tunnel
    /// broker's allocation), claimed through `X-Forwarded-For`.
    SpreadIpv6_48,
}

impl Attack {
    /// Every attack, in the order `abuse` runs them.
    pub const ALL: [Attack; 12] = [
        Attack::SlowReaders,
        Attack::IdleFlood,
        Attack::OversizedSubs,
        Attack::DeflateBomb,
        Attack::QuadraticJson,
        Attack::HostileSearch,
        Attack::DeletionUndo,
        Attack::AuthRelayed,
        Attack::SpreadSlowReaders,
        Attack::SpreadOversizedSubs,
        Attack::SpreadHeavyQueries,
        Attack::SpreadIpv6_48,
    ];

    /// The scenario name (`abuse-` and the attack).
    pub fn name(self) -> &'static str {
        match self {
            Attack::SlowReaders => "abuse-slow-readers",
            Attack::IdleFlood => "abuse-idle-flood",
            Attack::OversizedSubs => "abuse-oversized-subs",
            Attack::DeflateBomb => "abuse-deflate-bomb",
            Attack::QuadraticJson => "abuse-quadratic-json",
            Attack::HostileSearch => "abuse-hostile-search",
            Attack::DeletionUndo => "abuse-deletion-undo",
            Attack::AuthRelayed => "abuse-auth-relayed",
            Attack::SpreadSlowReaders => "abuse-spread-slow-readers",
            Attack::SpreadOversizedSubs => "abuse-spread-oversized-subs",
            Attack::SpreadHeavyQueries => "abuse-spread-heavy-queries",
            Attack::SpreadIpv6_48 => "abuse-spread-ipv6-48",
        }
    }

    /// The attack name without the `abuse-` prefix.
    pub fn short_name(self) -> &'static str {
        &self.name()["abuse-".len()..]
    }

    /// Whether the attack checks a rule (a definite yes/no) rather than load.
    pub fn is_correctness(self) -> bool {
        matches!(self, Attack::DeletionUndo | Attack::AuthRelayed)
    }

    /// Whether the attack needs stored events first (`--seed-events`).
    pub fn needs_seed(self) -> bool {
        matches!(
            self,
            Attack::SlowReaders
                | Attack::HostileSearch
                | Attack::SpreadSlowReaders
                | Attack::SpreadHeavyQueries
        )
    }
}

impl fmt::Display for Attack {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Sizes of the attacks (the CLI's `--attack-*` and related flags).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct AbuseParams {
    /// How long each attack lasts, seconds.
    pub seconds: f64,
    /// Probe events published (and queries made) per second during an attack.
    pub probe_rate: f64,
    /// Connections that never read (`slow-readers`).
    pub slow_readers: usize,
    /// Subscriptions of everything each slow reader opens.
    pub slow_reader_reqs: usize,
    /// Idle WebSocket connections (`idle-flood`).
    pub idle_flood: usize,
    /// TCP connections left in the middle of their upgrade request (`idle-flood`).
    pub half_open: usize,
    /// Oversized REQs (`oversized-subs`).
    pub oversized_reqs: usize,
    /// Filters per oversized REQ.
    pub oversized_filters: usize,
    /// Values per filter of an oversized REQ (fewer when they would not fit `message_bytes`).
    pub oversized_values: usize,
    /// AUTH events per connection, each with a fresh key (`oversized-subs`).
    pub auths: usize,
    /// Size of one hostile message (tag lists, inflated messages, unknown-key events).
    pub message_bytes: usize,
    /// Compressed messages sent behind one slow message (`deflate-bomb`).
    pub deflate_messages: usize,
    /// Unknown-key EVENT messages sent at once, each on its own connection (`quadratic-json`).
    pub quadratic_messages: usize,
    /// Terms in one hostile search (`hostile-search`).
    pub search_terms: usize,
    /// Hostile live searches (`hostile-search`).
    pub hostile_searches: usize,
    /// Addresses the `spread-*` attacks come from (127.0.0.2 and up).
    pub attack_addresses: usize,
    /// Connections of a `spread-*` attack, over its addresses.
    pub spread_connections: usize,
    /// Subscriptions each `spread-slow-readers` connection opens.
    pub spread_reqs: usize,
    /// Seconds to wait after an attack before the relay's memory is read
    /// again (`relay_rss_anon_after_kib`); 0 reads it at once.
    pub settle_seconds: f64,
}

impl Default for AbuseParams {
    fn default() -> AbuseParams {
        AbuseParams {
            seconds: 15.0,
            probe_rate: 10.0,
            slow_readers: 20,
            slow_reader_reqs: 50,
            idle_flood: 1_000,
            half_open: 200,
            oversized_reqs: 100,
            oversized_filters: 32,
            oversized_values: 5_000,
            auths: 200,
            message_bytes: 1_000_000,
            deflate_messages: 2_000,
            quadratic_messages: 8,
            search_terms: 40_000,
            hostile_searches: 20,
            attack_addresses: 30,
            spread_connections: 900,
            spread_reqs: 4,
            settle_seconds: 0.0,
        }
    }
}

impl AbuseParams {
    /// How long each attack lasts (at least 0.1 s).
    pub(crate) fn duration(&self) -> Duration {
        Duration::from_secs_f64(self.seconds.max(0.1))
    }

    /// Probe events one attack may publish.
    pub fn probe_events(&self) -> usize {
        (self.probe_rate * self.seconds).ceil() as usize + 5
    }
}
