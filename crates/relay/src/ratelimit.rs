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
    connections: Mutex<HashMap<Group, usize>>,
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

    /// Counts a new connection from `address` (a [`client_key`]): in its
    /// own count (`connections_per_ip`) and, for IPv6, in its /56's and
    /// /48's (`connections_per_ipv6_56`, `connections_per_ipv6_48`). `Err`
    /// names the setting of the first count that is full; nothing is
    /// counted then. The guard gives the slot back.
    ///
    /// [`client_key`]: crate::address::client_key
    pub fn connect(&self, address: IpAddr) -> Result<ConnectionSlot<'_>, &'static str> {
        let (max, max_56, max_48) = {
            let s = self.settings();
            (
                s.connections_per_ip,
                s.connections_per_ipv6_56,
                s.connections_per_ipv6_48,
            )
        };
        let mut keys = [None; 3];
        keys[0] = Some(((0, address), max, "connections_per_ip"));
        if let Some([n56, n48]) = crate::address::wider_networks(address) {
            keys[1] = Some((n56, max_56, "connections_per_ipv6_56"));
            keys[2] = Some((n48, max_48, "connections_per_ipv6_48"));
        }
        let mut map = self.connections.lock().expect("connection counts");
        for (key, max, setting) in keys.iter().flatten() {
            if *max > 0 && map.get(key).is_some_and(|open| open >= max) {
                return Err(setting);
            }
        }
        for (key, _, _) in keys.iter().flatten() {
            *map.entry(*key).or_default() += 1;
        }
        Ok(ConnectionSlot {
            limiter: self,
            keys: keys.map(|k| k.map(|(key, _, _)| key)),
        })
    }
}

/// A connection group the connection counts keep: `(0, address)` for a
/// client's own address, `(bits, network)` for a wider IPv6 network.
type Group = (u8, IpAddr);

/// One counted connection; dropping it frees the slot.
#[derive(Debug)]
pub struct ConnectionSlot<'a> {
    limiter: &'a RateLimiter,
    keys: [Option<Group>; 3],
}

impl Drop for ConnectionSlot<'_> {
    fn drop(&mut self) {
        let mut map = self.limiter.connections.lock().expect("connection counts");
        for key in self.keys.iter().flatten() {
            if let Some(open) = map.get_mut(key) {
                *open -= 1;
                if *open == 0 {
                    map.remove(key);
                }
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
        assert_eq!(limiter.connect(ip).unwrap_err(), "connections_per_ip");
        drop(a);
        assert!(limiter.connect(ip).is_ok());
    }

    /// The `i`-th /64 of 2001:db8:4b00::/48, as `client_key` gives it.
    fn slash64(net: u16, i: u16) -> IpAddr {
        let ip = format!("2001:db8:{net:x}:{i:x}:5a1e:7:1:{:x}", i ^ 0x55);
        crate::address::client_key(ip.parse().unwrap(), 64)
    }

    /// A tunnel-broker /48 is 65,536 /64s, 32 connections each by the
    /// per-address limit: it would take every one of `max_connections`'
    /// 20,000 slots. Its /56s and the /48 as a whole are capped.
    #[test]
    fn one_48_spread_over_its_64s_takes_no_more_than_its_caps() {
        let limiter = RateLimiter::new(RateSettings::default());
        let defaults = RateSettings::default();
        let (per_56, per_48) = (
            defaults.connections_per_ipv6_56,
            defaults.connections_per_ipv6_48,
        );
        assert!(per_56 > 0 && per_48 > per_56 && per_48 < 20_000);
        // Every /64 of the /48 tries its 32 connections; the first /56
        // gives out after its cap, then each /56 until the /48's is spent.
        let mut held = Vec::new();
        let mut refused = std::collections::BTreeMap::new();
        for i in 0..=u16::MAX {
            for _ in 0..defaults.connections_per_ip {
                match limiter.connect(slash64(0x4b00, i)) {
                    Ok(slot) => held.push(slot),
                    Err(setting) => *refused.entry(setting).or_insert(0u64) += 1,
                }
            }
        }
        assert_eq!(held.len(), per_48, "the /48 holds its cap, no more");
        assert!(
            refused.contains_key("connections_per_ipv6_56"),
            "{refused:?}"
        );
        assert!(
            refused.contains_key("connections_per_ipv6_48"),
            "{refused:?}"
        );
        // Another /48, and an IPv4 client, still connect.
        assert!(limiter.connect(slash64(0x4b01, 0)).is_ok());
        assert!(limiter.connect("192.0.2.9".parse().unwrap()).is_ok());
        // Slots come back: one freed in the /48 lets one more in.
        assert!(limiter.connect(slash64(0x4b00, 0xffff)).is_err());
        held.pop();
        let again = limiter.connect(slash64(0x4b00, 0xfffe));
        assert!(again.is_ok(), "{:?}", again.err());
        drop(again);
        drop(held);
        assert!(
            limiter.connections.lock().unwrap().is_empty(),
            "every count given back"
        );
    }

    #[test]
    fn a_56_is_capped_over_its_64s() {
        let limiter = RateLimiter::new(RateSettings::default());
        let per_56 = RateSettings::default().connections_per_ipv6_56;
        // 256 /64s of one /56, one connection each.
        let held: Vec<_> = (0..256u16)
            .filter_map(|i| limiter.connect(slash64(0x4b00, 0x1200 | i)).ok())
            .collect();
        assert_eq!(held.len(), per_56);
        assert_eq!(
            limiter.connect(slash64(0x4b00, 0x12ff)).unwrap_err(),
            "connections_per_ipv6_56"
        );
        // The next /56 of the same /48 is its own.
        assert!(limiter.connect(slash64(0x4b00, 0x1300)).is_ok());
    }

    #[test]
    fn a_cap_of_zero_is_no_cap() {
        let limiter = RateLimiter::new(RateSettings {
            connections_per_ip: 0,
            connections_per_ipv6_56: 0,
            connections_per_ipv6_48: 0,
            ..RateSettings::default()
        });
        let held: Vec<_> = (0..2_000u16)
            .map(|i| limiter.connect(slash64(0x4b00, i)).unwrap())
            .collect();
        assert_eq!(held.len(), 2_000);
    }
}
