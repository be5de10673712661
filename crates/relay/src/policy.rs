//! Stage 5: policy. Who may publish what (kind and author lists, NIP-70,
//! `write_requires_auth`), NIP-42 authentication, and who may read the
//! restricted kinds ([`ReadGate`]).

use std::collections::HashSet;
use std::sync::Arc;

use nostrwire_event::{EventId, Filter, Kind, PreimageFields, PublicKey, SignedFields};
use nostrwire_wire::EventView;

use crate::config::Config;

/// The AUTH event kind (NIP-42).
pub const AUTH_KIND: u16 = 22242;

/// Publishing rules from `[policy]`, parsed once at start.
#[derive(Debug, Default)]
pub struct WritePolicy {
    kinds_allow: HashSet<u16>,
    kinds_deny: HashSet<u16>,
    pubkeys_allow: HashSet<PublicKey>,
    min_pow: u32,
}

impl WritePolicy {
    /// Parses the `[policy]` lists; an invalid public key is an error.
    pub fn from_config(config: &Config) -> anyhow::Result<WritePolicy> {
        let p = &config.policy;
        let mut pubkeys_allow = HashSet::new();
        for hex in &p.pubkeys_allow {
            let key = PublicKey::from_hex(hex).map_err(|e| {
                anyhow::anyhow!("policy.pubkeys_allow: {hex:?} is not a public key: {e}")
            })?;
            pubkeys_allow.insert(key);
        }
        Ok(WritePolicy {
            kinds_allow: p.kinds_allow.iter().copied().collect(),
            kinds_deny: p.kinds_deny.iter().copied().collect(),
            pubkeys_allow,
            min_pow: u32::from(p.min_pow_difficulty),
        })
    }

    /// The `pow:` refusal when `id` has less proof of work (NIP-13) than
    /// `min_pow_difficulty` asks for.
    pub fn pow_refusal(&self, id: &EventId) -> Option<String> {
        let difficulty = difficulty(id);
        (difficulty < self.min_pow)
            .then(|| format!("pow: difficulty {difficulty} is less than {}", self.min_pow))
    }

    /// Whether `min_pow_difficulty` is set.
    pub fn asks_for_pow(&self) -> bool {
        self.min_pow > 0
    }

    /// The `pow:` refusal when the event's `nonce` tag commits to a target
    /// below `min_pow_difficulty` (NIP-13: its third element): work aimed
    /// lower that came out lucky is refused like work that fell short.
    /// A nonce tag without a target commits to nothing and passes.
    pub fn committed_pow_refusal(&self, view: &EventView<'_>) -> Option<String> {
        if self.min_pow == 0 {
            return None;
        }
        let target = view
            .tags()
            .find(|tag| tag.name().eq_str("nonce"))
            .and_then(|tag| tag.iter().nth(2))?;
        let target: u32 = target.to_str().trim().parse().unwrap_or(0);
        (target < self.min_pow).then(|| {
            format!(
                "pow: committed target difficulty {target} is less than {}",
                self.min_pow
            )
        })
    }

    /// The `blocked:` reason, if the lists refuse this author or kind.
    pub fn refuses(&self, author: &PublicKey, kind: Kind) -> Option<&'static str> {
        let kind = kind.as_u16();
        if self.kinds_deny.contains(&kind)
            || (!self.kinds_allow.is_empty() && !self.kinds_allow.contains(&kind))
        {
            return Some("blocked: this relay does not accept events of this kind");
        }
        if !self.pubkeys_allow.is_empty() && !self.pubkeys_allow.contains(author) {
            return Some("blocked: this relay only accepts events from its members");
        }
        None
    }
}

/// The proof of work of an event id (NIP-13): its leading zero bits.
pub fn difficulty(id: &EventId) -> u32 {
    let bytes = id.as_bytes();
    match bytes.iter().position(|&b| b != 0) {
        Some(i) => 8 * i as u32 + bytes[i].leading_zeros(),
        None => 8 * bytes.len() as u32,
    }
}

/// Checks a NIP-42 AUTH event against the connection's challenge. The id
/// and signature are checked by the caller afterwards (the costly part).
pub fn check_auth<E: SignedFields>(
    config: &Config,
    event: &E,
    challenge: &str,
    now: u64,
) -> Result<(), &'static str> {
    if event.kind().as_u16() != AUTH_KIND {
        return Err("invalid: AUTH needs an event of kind 22242");
    }
    let created = event.created_at().as_u64();
    if created.abs_diff(now) > config.auth.window_seconds {
        return Err("invalid: AUTH event created_at is too far from the relay's clock");
    }
    let tag = |name: &str| first_tag_value(event, name);
    if tag("challenge").as_deref() != Some(challenge) {
        return Err("invalid: AUTH challenge does not match this connection's");
    }
    let Some(relay) = tag("relay") else {
        return Err("invalid: AUTH event has no relay tag");
    };
    // Without a configured public URL the relay cannot know the name clients
    // reach it by (a proxy may stand in front), so any relay tag is taken.
    if !config.relay.url.is_empty() && normalize_url(&relay) != normalize_url(&config.relay.url) {
        return Err("invalid: AUTH relay tag names another relay");
    }
    Ok(())
}

/// The first value of the first tag called `name`, from either event form.
pub fn first_tag_value<E: PreimageFields>(event: &E, name: &str) -> Option<String> {
    let mut found = None;
    event.any_tag(&mut |n, value| {
        if n == name {
            found = value.map(str::to_string);
            return true;
        }
        false
    });
    found
}

/// `wss://Relay.Example/` and `wss://relay.example` name the same relay.
fn normalize_url(url: &str) -> String {
    let url = url.trim().to_ascii_lowercase();
    let rest = url
        .strip_prefix("wss://")
        .or_else(|| url.strip_prefix("ws://"))
        .unwrap_or(&url);
    rest.trim_end_matches('/').to_string()
}

/// Who may see events of the restricted kinds: their author and the pubkeys
/// they `p`-tag, when authenticated as one of them. A subscription carries
/// one when its filters can match a restricted kind.
#[derive(Debug)]
pub struct ReadGate {
    kinds: Vec<u16>,
    /// Authenticated pubkeys of the connection, as hex (how `p` tags read).
    viewers: Vec<String>,
}

impl ReadGate {
    /// The gate for `filters` seen by `viewers`; `None` when no filter can
    /// match a restricted kind.
    pub fn for_filters(
        config: &Config,
        filters: &[Filter],
        viewers: &[PublicKey],
    ) -> Option<Arc<ReadGate>> {
        let kinds = &config.auth.restricted_kinds;
        let reachable = filters.iter().any(|f| match &f.kinds {
            None => true,
            Some(ks) => ks.iter().any(|k| kinds.contains(&k.as_u16())),
        });
        (!kinds.is_empty() && reachable).then(|| {
            Arc::new(ReadGate {
                kinds: kinds.clone(),
                viewers: viewers.iter().map(PublicKey::to_hex).collect(),
            })
        })
    }

    /// The restricted kinds a filter names explicitly (refused before
    /// authentication with `auth-required:`).
    pub fn named_kinds(config: &Config, filters: &[Filter]) -> Vec<u16> {
        let mut named: Vec<u16> = filters
            .iter()
            .filter_map(|f| f.kinds.as_ref())
            .flatten()
            .map(|k| k.as_u16())
            .filter(|k| config.auth.restricted_kinds.contains(k))
            .collect();
        named.sort_unstable();
        named.dedup();
        named
    }

    /// Does the gate hold back any kind the search index holds? (By default
    /// it restricts kinds 4 and 1059, which are never indexed.)
    pub fn restricts_searchable(&self) -> bool {
        self.kinds
            .iter()
            .any(|&k| crate::search::indexed_kind(nostrwire_event::Kind(k)))
    }

    /// May a subscription with `gate` (or none) see `event`?
    pub fn admits(gate: Option<&ReadGate>, event: &EventView<'_>) -> bool {
        gate.is_none_or(|g| g.allows(event))
    }

    /// May this connection see `event`?
    pub fn allows(&self, event: &EventView<'_>) -> bool {
        if !self.kinds.contains(&event.kind().as_u16()) {
            return true;
        }
        if self.viewers.is_empty() {
            return false;
        }
        let author = event.pubkey().to_hex();
        if self.viewers.contains(&author) {
            return true;
        }
        event.tags().any(|t| {
            t.name().eq_str("p")
                && t.first_value()
                    .is_some_and(|v| self.viewers.iter().any(|p| v.eq_str(p)))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn difficulty_counts_leading_zero_bits_as_nip13_says() {
        let id = |hex: &str| EventId::from_hex(&format!("{hex:0<64}")).unwrap();
        // The examples of NIP-13.
        assert_eq!(
            difficulty(&id(
                "000000000e9d97a1ab09fc381030b346cdd7a142ad57e6df0b46dc9bef6c7e2d"
            )),
            36
        );
        assert_eq!(difficulty(&id("002f")), 10);
        assert_eq!(difficulty(&id("8")), 0);
        assert_eq!(difficulty(&id("1")), 3);
        assert_eq!(difficulty(&id("0")), 256);
    }

    #[test]
    fn relay_urls_compare_without_scheme_case_or_trailing_slash() {
        assert_eq!(
            normalize_url("wss://Relay.Example/"),
            normalize_url("ws://relay.example")
        );
        assert_ne!(
            normalize_url("wss://relay.example/a"),
            normalize_url("wss://relay.example/b")
        );
    }

    #[test]
    fn lists_refuse_kinds_and_strangers() {
        let stranger = nostrwire_event::Keys::derive(1, 1).public_key();
        let member = nostrwire_event::Keys::derive(1, 2).public_key();
        let mut config = Config::default();
        config.policy.kinds_deny = vec![7];
        config.policy.pubkeys_allow = vec![member.to_hex()];
        let policy = WritePolicy::from_config(&config).unwrap();
        assert!(policy.refuses(&member, Kind(1)).is_none());
        assert!(policy
            .refuses(&member, Kind(7))
            .unwrap()
            .starts_with("blocked:"));
        assert!(policy
            .refuses(&stranger, Kind(1))
            .unwrap()
            .starts_with("blocked:"));
        config.policy.pubkeys_allow = vec!["nothex".into()];
        assert!(WritePolicy::from_config(&config).is_err());
    }
}
