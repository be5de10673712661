//! Stage 5: policy. Who may publish what (kind and author lists, NIP-70,
//! `write_requires_auth`), NIP-42 authentication, and who may read the
//! restricted kinds ([`KindGate`]).

use std::collections::HashSet;
use std::sync::Arc;

use nostrwire_event::{EventId, Filter, Kind, PreimageFields, PublicKey, SignedFields};
use nostrwire_wire::EventView;

use crate::config::Config;
use crate::store::ReadGate;

/// The AUTH event kind (NIP-42).
pub const AUTH_KIND: u16 = 22242;

/// Publishing rules from `[policy]`, parsed once at start.
#[derive(Debug, Default)]
pub struct WritePolicy {
    kinds_allow: HashSet<u16>,
    kinds_deny: HashSet<u16>,
    pubkeys_allow: HashSet<PublicKey>,
    min_pow: u32,
    /// The operators' NIP-86 lists.
    moderation: Arc<crate::admin::moderation::Moderation>,
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
            moderation: Arc::default(),
        })
    }

    /// The same rules with the operators' NIP-86 lists.
    pub fn with_moderation(&self, moderation: Arc<crate::admin::moderation::Moderation>) -> Self {
        WritePolicy {
            kinds_allow: self.kinds_allow.clone(),
            kinds_deny: self.kinds_deny.clone(),
            pubkeys_allow: self.pubkeys_allow.clone(),
            min_pow: self.min_pow,
            moderation,
        }
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

    /// The `blocked:` reason, if the lists (`[policy]`'s, then NIP-86's)
    /// refuse this event, author or kind.
    pub fn refuses(&self, id: &EventId, author: &PublicKey, kind: Kind) -> Option<&'static str> {
        if let Some(refusal) = self.moderation.refuses(id, author, kind) {
            return Some(refusal);
        }
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
    relay_url: &str,
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
    // The URL the client reached (`relay.url`, else its Host header and
    // path): an AUTH signed for another relay is never taken here, so a
    // relay cannot pass our challenge on to its users and log in as them.
    if relay_name(&relay) != relay_name(relay_url) {
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

/// What names a relay in a URL, as NIP-42 lets relays compare them: the
/// host in lower case with its port unless it is the scheme's default, and
/// the path without a trailing slash. `ws://` and `wss://` (and a bare
/// `host[:port]/path`, as a `Host` header and request path give it) name
/// the same relay: `wss://Relay.Example:443/` is `relay.example`.
pub fn relay_name(url: &str) -> String {
    let url = url.trim();
    let (scheme, rest) = match url.split_once("://") {
        Some((scheme, rest)) => (scheme.to_ascii_lowercase(), rest),
        None => (String::new(), url),
    };
    let rest = rest.split(['?', '#']).next().unwrap_or("");
    let (authority, path) = match rest.find('/') {
        Some(i) => rest.split_at(i),
        None => (rest, ""),
    };
    let host = authority
        .rsplit_once('@')
        .map_or(authority, |(_, host)| host)
        .to_ascii_lowercase();
    let default_port = match scheme.as_str() {
        "ws" | "http" => &[":80"][..],
        "wss" | "https" => &[":443"][..],
        _ => &[":80", ":443"][..],
    };
    let host = default_port
        .iter()
        .find_map(|port| host.strip_suffix(port))
        .unwrap_or(&host);
    format!("{host}{}", path.trim_end_matches('/'))
}

/// Who may see events of the restricted kinds: their author and the pubkeys
/// they `p`-tag, when authenticated as one of them. A subscription carries
/// one when its filters can match a restricted kind.
#[derive(Debug)]
pub struct KindGate {
    kinds: Vec<u16>,
    /// Authenticated pubkeys of the connection, as hex (how `p` tags read).
    viewers: Vec<String>,
}

impl KindGate {
    /// The gate for `filters` seen by `viewers`; `None` when no filter can
    /// match a restricted kind.
    pub fn for_filters(
        config: &Config,
        filters: &[Filter],
        viewers: &[PublicKey],
    ) -> Option<Arc<KindGate>> {
        let kinds = &config.auth.restricted_kinds;
        let reachable = filters.iter().any(|f| match &f.kinds {
            None => true,
            Some(ks) => ks.iter().any(|k| kinds.contains(&k.as_u16())),
        });
        (!kinds.is_empty() && reachable).then(|| {
            Arc::new(KindGate {
                kinds: kinds.clone(),
                viewers: viewers.iter().map(PublicKey::to_hex).collect(),
            })
        })
    }

    /// Heap bytes it holds (for connection budgets).
    pub fn footprint(&self) -> usize {
        std::mem::size_of::<KindGate>()
            + self.kinds.len() * 2
            + self.viewers.len() * (std::mem::size_of::<String>() + 64)
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

    /// May a subscription with `gate` (or none) see `event`?
    pub fn admits(gate: Option<&KindGate>, event: &EventView<'_>) -> bool {
        gate.is_none_or(|g| g.allows(event))
    }
}

impl ReadGate for KindGate {
    /// Does the gate hold back any kind the search index holds? (By default
    /// it restricts kinds 4 and 1059, which are never indexed.)
    fn restricts_searchable(&self) -> bool {
        self.kinds
            .iter()
            .any(|&k| crate::search::indexed_kind(nostrwire_event::Kind(k)))
    }

    /// May this connection see `event`?
    fn allows(&self, event: &EventView<'_>) -> bool {
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
    fn relay_urls_compare_without_scheme_case_default_port_or_trailing_slash() {
        let same = [
            "wss://Relay.Example/",
            "ws://relay.example",
            "wss://relay.example:443",
            "ws://relay.example:80/",
            "relay.example",
            "relay.example:443",
        ];
        for url in same {
            assert_eq!(relay_name(url), "relay.example", "{url}");
        }
        assert_eq!(relay_name("ws://127.0.0.1:7777/"), "127.0.0.1:7777");
        assert_eq!(relay_name("127.0.0.1:7777"), "127.0.0.1:7777");
        assert_eq!(relay_name("wss://r.example/nostr?x=1"), "r.example/nostr");
        for other in [
            "wss://relay.example/a",
            "wss://relay.example:8443",
            "ws://relay.example:443",
            "wss://evil.example",
            "wss://relay.example.evil.example",
        ] {
            assert_ne!(relay_name(other), "relay.example", "{other}");
        }
    }

    #[test]
    fn lists_refuse_kinds_and_strangers() {
        let stranger = nostrwire_event::Keys::derive(1, 1).public_key();
        let member = nostrwire_event::Keys::derive(1, 2).public_key();
        let mut config = Config::default();
        config.policy.kinds_deny = vec![7];
        config.policy.pubkeys_allow = vec![member.to_hex()];
        let policy = WritePolicy::from_config(&config).unwrap();
        assert!(policy
            .refuses(&EventId::from_bytes([0; 32]), &member, Kind(1))
            .is_none());
        assert!(policy
            .refuses(&EventId::from_bytes([0; 32]), &member, Kind(7))
            .unwrap()
            .starts_with("blocked:"));
        assert!(policy
            .refuses(&EventId::from_bytes([0; 32]), &stranger, Kind(1))
            .unwrap()
            .starts_with("blocked:"));
        config.policy.pubkeys_allow = vec!["nothex".into()];
        assert!(WritePolicy::from_config(&config).is_err());
    }
}
