//! What the relay's operators decided over NIP-86: banned and allowed
//! pubkeys, banned events, allowed and disallowed kinds, blocked
//! addresses, and the relay's name, description and icon. Kept in the
//! database as one JSON value (the store's setting [`SETTING`]), written
//! through the writer, read once at start.

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;

use nostrwire_event::{EventId, Kind, PublicKey};
use serde::{Deserialize, Serialize};

use crate::config::Config;
use crate::store::{EventStore, StoreResult};

/// The store setting that holds the lists.
pub const SETTING: &str = "nip86";

/// The operators' lists. Keys are lower-case hex (pubkeys, event ids) or
/// an address as `IpAddr` prints it; values are the reasons given.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Moderation {
    /// Authors whose events are refused.
    pub banned_pubkeys: BTreeMap<String, String>,
    /// When not empty, only these authors may publish.
    pub allowed_pubkeys: BTreeMap<String, String>,
    /// Events refused (and removed when they were stored).
    pub banned_events: BTreeMap<String, String>,
    /// When not empty, only these kinds may be published.
    pub allowed_kinds: BTreeSet<u16>,
    /// Kinds refused.
    pub disallowed_kinds: BTreeSet<u16>,
    /// Client addresses whose connections are refused.
    pub blocked_ips: BTreeMap<String, String>,
    /// NIP-11 `name`, replacing `info.name` when set.
    pub name: Option<String>,
    /// NIP-11 `description`, replacing `info.description` when set.
    pub description: Option<String>,
    /// NIP-11 `icon`, replacing `info.icon` when set.
    pub icon: Option<String>,
}

impl Moderation {
    /// The lists stored in `store` (none: empty ones).
    pub fn load(store: &dyn EventStore) -> anyhow::Result<Moderation> {
        match store.setting(SETTING)? {
            None => Ok(Moderation::default()),
            Some(bytes) => serde_json::from_slice(&bytes)
                .map_err(|e| anyhow::anyhow!("the stored NIP-86 lists do not parse: {e}")),
        }
    }

    /// Stores the lists (call on the writer thread).
    pub fn save(&self, store: &dyn EventStore) -> StoreResult<()> {
        let bytes = serde_json::to_vec(self).expect("serializable");
        store.put_setting(SETTING, &bytes)
    }

    /// The `blocked:` reason when the lists refuse this event.
    pub fn refuses(&self, id: &EventId, author: &PublicKey, kind: Kind) -> Option<&'static str> {
        if !self.banned_events.is_empty() && self.banned_events.contains_key(&id.to_hex()) {
            return Some("blocked: this event is banned from this relay");
        }
        let author_hex = || author.to_hex();
        if !self.banned_pubkeys.is_empty() && self.banned_pubkeys.contains_key(&author_hex()) {
            return Some("blocked: this author is banned from this relay");
        }
        if !self.allowed_pubkeys.is_empty() && !self.allowed_pubkeys.contains_key(&author_hex()) {
            return Some("blocked: this relay only accepts events from its members");
        }
        let kind = kind.as_u16();
        if self.disallowed_kinds.contains(&kind)
            || (!self.allowed_kinds.is_empty() && !self.allowed_kinds.contains(&kind))
        {
            return Some("blocked: this relay does not accept events of this kind");
        }
        None
    }

    /// Whether connections from `ip` are refused.
    pub fn blocks(&self, ip: IpAddr) -> bool {
        !self.blocked_ips.is_empty()
            && self
                .blocked_ips
                .contains_key(&ip.to_canonical().to_string())
    }

    /// `config` with the NIP-11 fields the operators changed.
    pub fn apply_info(&self, config: &Config) -> Config {
        let mut config = config.clone();
        if let Some(name) = &self.name {
            config.info.name = name.clone();
        }
        if let Some(description) = &self.description {
            config.info.description = description.clone();
        }
        if let Some(icon) = &self.icon {
            config.info.icon = icon.clone();
        }
        config
    }
}
