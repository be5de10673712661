//! Token buckets for `[rate]`: EVENT and REQ budgets per IP address or per
//! authenticated pubkey, and connection counts per IP address. Shared by all
//! ingest workers (one connection's peers may land on any of them), so the
//! maps are sharded behind small mutexes.

use std::collections::HashMap;
use std::hash::{BuildHasher, Hash};
use std::net::IpAddr;
use std::sync::{Mutex, RwLock};
use std::time::Instant;

use nostrwire_event::PublicKey;

use crate::config::RateSettings;

const SHARDS: usize = 16;
/// Above this many buckets a shard forgets the full ones (they behave
/// exactly like absent ones), so memory follows active clients only.
const SHARD_SWEEP_AT: usize = 4_096;

/// What a bucket meters.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Budget {
    /// EVENT messages.
    Events,
    /// REQ, COUNT and NEG-OPEN messages.
    Reqs,
}

/// Who a bucket belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Subject {
    /// An address (unauthenticated, or pubkey rates not set).
    Ip(IpAddr),
    /// An authenticated pubkey.
    Pubkey(PublicKey),
}

#[derive(Debug)]
struct Bucket {
    tokens: f64,
    at: Instant,
}

/// All buckets and connection counts.
#[derive(Debug)]
pub struct RateLimiter {
    /// Replaced when the configuration is reloaded; buckets keep their
    /// tokens and meet the new rates from then on.
    settings: RwLock<RateSettings>,
    hasher: std::collections::hash_map::RandomState,
    buckets: Vec<Mutex<HashMap<(Budget, Subject), Bucket>>>,
    connections: Mutex<HashMap<IpAddr, usize>>,
}

impl RateLimiter {
    /// Limits from `[rate]`.
    pub fn new(settings: RateSettings) -> RateLimiter {
        RateLimiter {
            settings: RwLock::new(settings),
            hasher: Default::default(),
            buckets: (0..SHARDS).map(|_| Mutex::default()).collect(),
            connections: Mutex::default(),
        }
    }

    /// Applies new limits (a reloaded `[rate]`).
    pub fn set_settings(&self, settings: RateSettings) {
        *self.settings.write().unwrap_or_else(|e| e.into_inner()) = settings;
    }

    fn settings(&self) -> std::sync::RwLockReadGuard<'_, RateSettings> {
        self.settings.read().unwrap_or_else(|e| e.into_inner())
    }

    /// The subject and rate a message is charged to: the pubkey's bucket
    /// when authenticated and pubkey rates are set, else the address's.
    fn plan(&self, budget: Budget, ip: IpAddr, pubkey: Option<PublicKey>) -> (Subject, f64, f64) {
        let s = self.settings();
        let burst = match budget {
            Budget::Events => s.events_burst,
            Budget::Reqs => s.reqs_burst,
        };
        match pubkey {
            Some(pk) if s.rate(budget, true) > 0.0 => {
                (Subject::Pubkey(pk), s.rate(budget, true), burst)
            }
            _ => (Subject::Ip(ip), s.rate(budget, false), burst),
        }
    }

    /// Whether any rate for `budget` is set (lets callers skip the lookups).
    pub fn limits(&self, budget: Budget) -> bool {
        let s = self.settings();
        s.rate(budget, false) > 0.0 || s.rate(budget, true) > 0.0
    }

    /// Takes one token; false when the bucket is empty (answer `rate-limited:`).
    pub fn allow(&self, budget: Budget, ip: IpAddr, pubkey: Option<PublicKey>) -> bool {
        let (subject, rate, burst) = self.plan(budget, ip, pubkey);
        if rate <= 0.0 {
            return true;
        }
        let burst = burst.max(1.0);
        let key = (budget, subject);
        let shard = &self.buckets[(self.hasher.hash_one(key) as usize) % SHARDS];
        let mut map = shard.lock().expect("rate shard");
        let now = Instant::now();
        if map.len() >= SHARD_SWEEP_AT {
            let settings = self.settings().clone();
            map.retain(|(budget, subject), b| {
                let rate = settings.rate(*budget, matches!(subject, Subject::Pubkey(_)));
                b.tokens + now.duration_since(b.at).as_secs_f64() * rate < burst
            });
        }
        let bucket = map.entry(key).or_insert(Bucket {
            tokens: burst,
            at: now,
        });
        bucket.tokens =
            (bucket.tokens + now.duration_since(bucket.at).as_secs_f64() * rate).min(burst);
        bucket.at = now;
        if bucket.tokens >= 1.0 {
            bucket.tokens -= 1.0;
            true
        } else {
            false
        }
    }

    /// Counts a new connection from `ip`; `None` when the address already
    /// has `connections_per_ip` open. The guard gives the slot back.
    pub fn connect(&self, ip: IpAddr) -> Option<ConnectionSlot<'_>> {
        let max = self.settings().connections_per_ip;
        let mut map = self.connections.lock().expect("connection counts");
        let open = map.entry(ip).or_default();
        if max > 0 && *open >= max {
            if *open == 0 {
                map.remove(&ip);
            }
            return None;
        }
        *open += 1;
        Some(ConnectionSlot { limiter: self, ip })
    }
}

/// One counted connection; dropping it frees the slot.
#[derive(Debug)]
pub struct ConnectionSlot<'a> {
    limiter: &'a RateLimiter,
    ip: IpAddr,
}

impl Drop for ConnectionSlot<'_> {
    fn drop(&mut self) {
        let mut map = self.limiter.connections.lock().expect("connection counts");
        if let Some(open) = map.get_mut(&self.ip) {
            *open -= 1;
            if *open == 0 {
                map.remove(&self.ip);
            }
        }
    }
}

impl RateSettings {
    /// Sustained rate of `budget`, for a pubkey's bucket or an address's.
    fn rate(&self, budget: Budget, pubkey: bool) -> f64 {
        match (budget, pubkey) {
            (Budget::Events, false) => self.events_per_second,
            (Budget::Events, true) => self.pubkey_events_per_second,
            (Budget::Reqs, false) => self.reqs_per_second,
            (Budget::Reqs, true) => self.pubkey_reqs_per_second,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings() -> RateSettings {
        RateSettings {
            events_per_second: 1.0,
            events_burst: 3.0,
            connections_per_ip: 2,
            ..RateSettings::default()
        }
    }

    #[test]
    fn a_bucket_allows_its_burst_then_refuses() {
        let limiter = RateLimiter::new(settings());
        let ip: IpAddr = "192.0.2.1".parse().unwrap();
        let other: IpAddr = "192.0.2.2".parse().unwrap();
        let granted = (0..10)
            .filter(|_| limiter.allow(Budget::Events, ip, None))
            .count();
        assert_eq!(granted, 3);
        assert!(
            limiter.allow(Budget::Events, other, None),
            "buckets are per address"
        );
        assert!(
            limiter.allow(Budget::Reqs, ip, None),
            "REQs are not limited here"
        );
    }

    #[test]
    fn authenticated_pubkeys_get_their_own_bucket_when_configured() {
        let ip: IpAddr = "192.0.2.1".parse().unwrap();
        let pk = nostrwire_event::Keys::derive(2, 1).public_key();
        let limiter = RateLimiter::new(settings());
        for _ in 0..3 {
            assert!(limiter.allow(Budget::Events, ip, None));
        }
        assert!(
            !limiter.allow(Budget::Events, ip, Some(pk)),
            "no pubkey rate: the IP's bucket"
        );
        let limiter = RateLimiter::new(RateSettings {
            pubkey_events_per_second: 1.0,
            ..settings()
        });
        for _ in 0..3 {
            assert!(limiter.allow(Budget::Events, ip, None));
        }
        assert!(limiter.allow(Budget::Events, ip, Some(pk)));
    }

    #[test]
    fn connection_slots_are_counted_and_returned() {
        let limiter = RateLimiter::new(settings());
        let ip: IpAddr = "192.0.2.1".parse().unwrap();
        let a = limiter.connect(ip).unwrap();
        let _b = limiter.connect(ip).unwrap();
        assert!(limiter.connect(ip).is_none());
        drop(a);
        assert!(limiter.connect(ip).is_some());
    }
}
