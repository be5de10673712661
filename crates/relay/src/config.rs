//! Every setting, declared once: name, type, default, documentation and
//! whether it can change without a restart. The config struct, the TOML
//! reader and `nostrwire relay --print-config` all come from `settings!`.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::store::Durability;

/// Who may read `GET /metrics` (`relay.metrics`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MetricsAccess {
    /// Clients on this machine only.
    #[default]
    Loopback,
    /// Anyone who can reach the listener.
    Everyone,
    /// Nobody: `/metrics` answers 404.
    Off,
}

/// Metadata of one setting.
#[derive(Clone, Copy, Debug)]
pub struct Setting {
    /// TOML section.
    pub section: &'static str,
    /// Key within the section.
    pub name: &'static str,
    /// What it does.
    pub doc: &'static str,
    /// Whether a running relay picks up a change when it reloads its
    /// configuration file (SIGHUP); the others take a restart.
    pub reloadable: bool,
}

macro_rules! settings {
    ($( [$section:ident : $Section:ident] $doc_section:literal
        $( $name:ident : $ty:ty = $default:expr ; reloadable = $rel:literal ; $doc:literal )*
    )*) => {
        /// The relay configuration (see `nostrwire relay --print-config`).
        #[derive(Clone, Debug, Default, Serialize, Deserialize)]
        #[serde(deny_unknown_fields, default)]
        pub struct Config {
            $(
                #[doc = $doc_section]
                pub $section: $Section,
            )*
        }

        $(
            #[doc = $doc_section]
            #[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
            #[serde(deny_unknown_fields, default)]
            pub struct $Section {
                $(
                    #[doc = $doc]
                    pub $name: $ty,
                )*
            }

            impl Default for $Section {
                fn default() -> Self {
                    $Section { $( $name: $default, )* }
                }
            }
        )*

        /// Every setting in declaration order.
        pub const SETTINGS: &[Setting] = &[
            $( $( Setting {
                section: stringify!($section),
                name: stringify!($name),
                doc: $doc,
                reloadable: $rel,
            }, )* )*
        ];

        /// Section docs in declaration order.
        const SECTIONS: &[(&str, &str)] = &[ $( (stringify!($section), $doc_section), )* ];

        impl Config {
            /// Takes the reloadable settings of `new`; returns the names
            /// (`section.name`) of the others that differ in `new`, which
            /// keep their present values until a restart.
            pub fn reload_from(&mut self, new: &Config) -> Vec<&'static str> {
                let mut need_restart = Vec::new();
                $( $(
                    if $rel {
                        self.$section.$name = new.$section.$name.clone();
                    } else if self.$section.$name != new.$section.$name {
                        need_restart.push(concat!(stringify!($section), ".", stringify!($name)));
                    }
                )* )*
                need_restart
            }

            /// The settings (`section.name`) whose values differ in `other`.
            pub fn differences(&self, other: &Config) -> Vec<&'static str> {
                let mut out = Vec::new();
                $( $(
                    if self.$section.$name != other.$section.$name {
                        out.push(concat!(stringify!($section), ".", stringify!($name)));
                    }
                )* )*
                out
            }
        }
    };
}

impl Config {
    /// The JSON parser's limits for client messages (`[limits]`): the relay
    /// and `nostrwire import` parse with the same.
    pub fn event_limits(&self) -> nostrwire_event::Limits {
        nostrwire_event::Limits {
            max_event_bytes: self.limits.max_message_bytes,
            max_message_bytes: self.limits.max_message_bytes,
            max_string_bytes: self.limits.max_message_bytes,
            max_tags: self.limits.max_event_tags,
            max_filters: self.limits.max_filters,
            ..nostrwire_event::Limits::DEFAULT
        }
    }
}

settings! {
    [relay: RelaySettings] "Network and data location."
    listen: String = "127.0.0.1:7777".into(); reloadable = false;
        "Address and port to listen on (`--listen` overrides)."
    data: PathBuf = PathBuf::from("./nostrwire-data"); reloadable = false;
        "Directory of the LMDB database (`--data` overrides)."
    url: String = String::new(); reloadable = false;
        "Public WebSocket URL of this relay, for NIP-62 `relay` tags and NIP-42 AUTH (empty: NIP-62 takes `ws://` and the listen address, and an AUTH event's `relay` tag must name the host and path the client connected to, from its `Host` header)."
    real_ip_header: String = String::new(); reloadable = false;
        "Behind a reverse proxy: the HTTP header that carries the client's address (`X-Forwarded-For`, whose last address is taken, or `X-Real-IP`), for per-address limits and the plugin. Empty: the address of the TCP peer. Set it only when every connection comes through the proxy, since any client can send the header."
    ipv6_prefix: u8 = 64; reloadable = false;
        "Per-address limits (connections, rate buckets, the ingest and query pools' turns) count an IPv6 client by this many leading bits of its address (1-128): a host is usually given a whole /64, so by its full address one client would be 2^64 clients. IPv4 clients count by their full address."
    metrics: MetricsAccess = MetricsAccess::Loopback; reloadable = false;
        "Who gets `GET /metrics`: `loopback` (clients on this machine, by the address `real_ip_header` gives when set), `everyone`, or `off`. Others get 404. To scrape from another machine, keep `loopback` and proxy the path, or use `everyone` on a firewalled listener."

    [info: InfoSettings] "NIP-11 relay information document."
    name: String = "nostrwire".into(); reloadable = true;
        "Relay name."
    description: String = "A nostrwire relay".into(); reloadable = true;
        "Relay description."
    pubkey: String = String::new(); reloadable = true;
        "Administrator's public key (hex), or empty."
    contact: String = String::new(); reloadable = true;
        "Administrator contact, or empty."
    icon: String = String::new(); reloadable = true;
        "URL of the relay's icon (a square image), or empty."
    banner: String = String::new(); reloadable = true;
        "URL of a banner image, or empty."
    terms_of_service: String = String::new(); reloadable = true;
        "URL of the terms of service, or empty."
    privacy_policy: String = String::new(); reloadable = true;
        "URL of the privacy policy, or empty."
    posting_policy: String = String::new(); reloadable = true;
        "URL of a page on what may be posted here, or empty."
    relay_countries: Vec<String> = Vec::new(); reloadable = true;
        "ISO 3166-1 alpha-2 codes of the countries whose laws apply to the relay (`*` for none in particular); empty: not stated."
    language_tags: Vec<String> = Vec::new(); reloadable = true;
        "IETF language tags of the languages spoken on the relay (`*` for any); empty: not stated."
    tags: Vec<String> = Vec::new(); reloadable = true;
        "Topics or limitations of the relay (`sfw-only`, `bitcoin-only`, …); empty: none."

    [storage: StorageSettings] "The database."
    durability: Durability = Durability::Full; reloadable = false;
        "full: fsync every commit; meta: fsync data, not metadata (a crash may lose the last commit); none: no fsync (a machine crash may lose recent commits). The search index, derived from the events, never syncs its commits: after a machine restart that may have lost some, it is rebuilt."
    map_size_gib: u64 = 256; reloadable = false;
        "Largest size the database may reach, in GiB (address space, not disk)."
    compression_level: i32 = 3; reloadable = false;
        "zstd level for stored event records (1-22); 0 stores them raw. A record is kept raw when compression does not make it smaller."
    compress_min_bytes: usize = 256; reloadable = false;
        "Records smaller than this many bytes are stored raw unless a dictionary serves their kind (zstd without a dictionary gains little on them and costs time on every read); with one, every record is compressed when that makes it smaller."
    dictionaries: PathBuf = PathBuf::new(); reloadable = false;
        "Dictionary set file from `nostrwire dict train --per-kind` (empty: compress without dictionaries). The first set given is copied into the database and kept there for good, because stored records name its dictionaries."
    auto_dictionaries: u64 = 20_000; reloadable = false;
        "Once this many events are stored in a database without a dictionary set (and `dictionaries` is empty), the relay trains per-kind zstd dictionaries from its newest events (up to 20,000), on a thread of its own, keeps them in the database for good and compresses new records with them; records stored before stay as they are. 0 never trains."
    index_lag: u64 = 4096; reloadable = false;
        "Stored events whose entries in the time-ordered indexes (created_at, kind, author, author and kind, tags) and in the id index may wait. The writer writes them in batches, in key order, when it has been idle for 20 ms, or once a commit leaves more than this many waiting: then one transaction of at most `index_txn_writes` writes after each commit, so arriving events wait for one transaction rather than a whole batch (all of it at once when more than twice this many wait); queries read the waiting events' keys directly, so results never miss a stored event. 0 writes each event's entries in its own commit (slower publishing: a follow list alone has hundreds)."
    index_txn_writes: usize = 1024; reloadable = false;
        "Most writes (index blocks, id entries, search postings) in one transaction of an index batch, of the writer's or of the search thread's; a batch that writes more commits several times. LMDB keeps about the largest transaction's worth of pages free in its files, so smaller values keep the files smaller and cost more commits (see docs/design-store.md, \"Space\")."

    [limits: LimitSettings] "Limits; each violation is answered with its NIP-01 prefix."
    max_message_bytes: usize = 1 << 20; reloadable = false;
        "Largest WebSocket message accepted, in bytes."
    max_event_tags: usize = 10_000; reloadable = false;
        "Most tags in one event."
    max_subscriptions: usize = 200; reloadable = false;
        "Most open subscriptions per connection."
    max_filters: usize = 32; reloadable = false;
        "Most filters in one REQ or COUNT."
    max_sync_sessions: usize = 8; reloadable = false;
        "Open NIP-77 negentropy sync sessions per connection."
    max_sync_items: usize = 500_000; reloadable = false;
        "Most events one NIP-77 sync session may cover (about 40 bytes of memory each); larger sets get NEG-ERR `blocked:`."
    sync_frame_bytes: u64 = 60_000; reloadable = false;
        "Largest negentropy message the relay sends, in bytes (0: unlimited); bigger rounds are split into more round trips."
    max_limit: usize = 5_000; reloadable = false;
        "Largest `limit` honoured; larger ones are clamped."
    default_limit: usize = 500; reloadable = false;
        "Stored events returned per filter when the filter has no `limit`."
    future_seconds: u64 = 900; reloadable = false;
        "Reject events dated more than this many seconds ahead (0: no check)."
    past_seconds: u64 = 0; reloadable = false;
        "Reject events older than this many seconds (0: no check)."
    max_connections: usize = 20_000; reloadable = false;
        "Most simultaneous connections."
    max_connection_bytes: usize = 16 << 20; reloadable = false;
        "Memory one connection may hold: its subscriptions (filters, searches, read gates, fan-out entries), stored results waiting to be sent and its outgoing queue. A REQ, COUNT or NEG-OPEN that would go over it gets CLOSED (or NEG-ERR) `rate-limited:`; stored results wait while the queue holds more than a quarter of it, and its queries render at most a quarter of it while they scan, taken as matches are found (beyond that they are rendered when sent); live events that would go over it cut the connection off. Control messages (OK, EOSE, CLOSED, NOTICE, AUTH, COUNT answers) never cut it off: when it has no room for them they go in an allowance of 16 KiB outside it, and a connection that leaves that much of them unread besides is cut off as a slow reader."
    relay_memory_bytes: usize = 0; reloadable = false;
        "Memory all connections together may hold (what `max_connection_bytes` counts, summed); 0: a sixteenth of the machine's memory, between 64 MiB and 256 MiB. When it is spent, a connection holding more than its fair share (this divided by the open connections) gets `CLOSED rate-limited:` for new requests, its queries wait (and give up with `CLOSED rate-limited:` after `slow_reader_seconds`), and one that does not read its output is cut off; connections within their share are still served, and so is the output of a client that reads it; answers always reach the client."
    dictionary_fetch_bytes: usize = 8 << 20; reloadable = false;
        "Bytes of dictionary sets (`GET /dictionaries/<sha256>`) all fetches together may have in flight. A fetch writes the set, held once and shared by every fetch, in 64 KiB chunks, each holding its room here until the client's socket took it (the socket's send buffer is kept to a chunk too); a fetch waits for room, within its 10 seconds."
    ingest_queue_bytes: usize = 128 << 20; reloadable = false;
        "Bytes of client messages read but not yet handled, relay-wide (an event's until its OK); each connection may hold at most twice `max_message_bytes` of it. A connection whose share is full is not read until its messages are handled (TCP backpressure), so a fast or hostile sender cannot grow the relay's memory."
    slow_reader_seconds: u64 = 10; reloadable = false;
        "Seconds a connection may leave its queue full while stored results wait, or take to accept one socket write, before it is cut off and its socket closed."
    idle_seconds: u64 = 300; reloadable = false;
        "A connection without open subscriptions that sends nothing for this many seconds is closed (0: never)."
    count_cap: usize = 1_000_000; reloadable = false;
        "Largest exact COUNT; above it the answer is the cap with `approximate: true`."

    [websocket: WebSocketSettings] "WebSocket compression (permessage-deflate, RFC 7692), negotiated per connection when the client offers it, and the binary transport."
    binary: bool = true; reloadable = false;
        "Answer clients that offer the `nostrwire.v1` subprotocol with it (spec/transport.md). Off: every connection speaks NIP-01 JSON."
    deflate: bool = true; reloadable = false;
        "Accept permessage-deflate offers. Off: every connection is uncompressed."
    deflate_level: u32 = 1; reloadable = false;
        "DEFLATE level for messages the relay sends (1: fastest, 9: smallest)."
    server_context_takeover: bool = true; reloadable = false;
        "Keep the relay's compression window between messages of a connection: smaller messages, about 300 KiB per connection that has received a compressed message. Off: the window is reset after every message and compressor state is shared per thread."
    client_context_takeover: bool = true; reloadable = false;
        "Let clients keep their compression window between messages (about 40 KiB of relay memory per connection that sent a compressed message). Off: clients are told to reset it after every message."
    deflate_min_bytes: usize = 64; reloadable = false;
        "Messages shorter than this are sent uncompressed."
    ping_seconds: u64 = 60; reloadable = false;
        "After this many seconds without a frame from a client, the relay sends a ping; a client that sends nothing within as long again is disconnected (0: no pings)."

    [auth: AuthSettings] "NIP-42 authentication and read restrictions."
    enabled: bool = true; reloadable = false;
        "Send an AUTH challenge and accept AUTH (NIP-42). Off: AUTH is refused, protected events (NIP-70) cannot be published and restricted kinds are never served."
    challenge_on_connect: bool = true; reloadable = false;
        "Send the AUTH challenge as soon as a client connects, as NIP-42 clients expect (nostr-tools, NDK). Off: it is sent just before the connection's first `auth-required:` answer, which saves a frame per connection and keeps clients that do not speak NIP-42 from reading it as an answer to something else."
    window_seconds: u64 = 600; reloadable = false;
        "How far an AUTH event's created_at may be from the relay's clock, in seconds."
    write_requires_auth: bool = false; reloadable = false;
        "Refuse EVENT with `auth-required:` until the connection has authenticated."
    restricted_kinds: Vec<u16> = vec![4, 1059]; reloadable = false;
        "Kinds served only to an authenticated author or `p`-tagged recipient (direct messages, gift wraps). Empty: no read restriction."
    max_pubkeys: usize = 8; reloadable = false;
        "Most pubkeys one connection may authenticate as; further AUTHs get `OK false` `rate-limited:`."

    [policy: PolicySettings] "Who and what may be published."
    kinds_allow: Vec<u16> = Vec::new(); reloadable = true;
        "If non-empty, only these kinds are accepted."
    kinds_deny: Vec<u16> = Vec::new(); reloadable = true;
        "Kinds always refused with `blocked:`."
    pubkeys_allow: Vec<String> = Vec::new(); reloadable = true;
        "If non-empty, only events by these authors (hex public keys) are accepted."
    min_pow_difficulty: u8 = 0; reloadable = true;
        "Proof of work (NIP-13): events whose id has fewer leading zero bits are refused with `pow:` (checked before the signature, so unmined floods cost little), and so are events whose `nonce` tag commits to a lower target difficulty (its third element). 0: off."
    plugin: PathBuf = PathBuf::new(); reloadable = false;
        "Write-policy plugin: a program speaking strfry's plugin protocol (JSON lines on stdin/stdout; accept, reject, shadowReject). Empty: none."
    plugin_timeout_ms: u64 = 2_000; reloadable = false;
        "How long the plugin may take to answer one event before the event is refused (and the plugin restarted)."

    [admin: AdminSettings] "Relay management over HTTP (NIP-86 with NIP-98 authorization; docs/operations.md)."
    pubkeys: Vec<String> = Vec::new(); reloadable = true;
        "Public keys (hex) allowed to manage the relay through NIP-86 on its HTTP port. Empty: the management API answers every call 401."
    window_seconds: u64 = 60; reloadable = false;
        "How far a NIP-98 authorization event's created_at may be from the relay's clock, in seconds."

    [rate: RateSettings] "Rate limits (token buckets). Unauthenticated connections share one bucket per IP address; an authenticated connection uses its pubkey's bucket when the pubkey rates are set. 0 turns a limit off."
    events_per_second: f64 = 0.0; reloadable = true;
        "EVENT messages per second per IP address, sustained."
    events_burst: f64 = 100.0; reloadable = true;
        "EVENT messages one IP address may send at once before the rate applies."
    reqs_per_second: f64 = 0.0; reloadable = true;
        "REQ, COUNT and NEG-OPEN messages per second per IP address, sustained."
    reqs_burst: f64 = 100.0; reloadable = true;
        "REQ, COUNT and NEG-OPEN messages one IP address may send at once."
    pubkey_events_per_second: f64 = 0.0; reloadable = true;
        "EVENT messages per second per authenticated pubkey (0: authenticated connections stay on their IP's bucket)."
    pubkey_reqs_per_second: f64 = 0.0; reloadable = true;
        "REQ, COUNT and NEG-OPEN messages per second per authenticated pubkey (0: the IP's bucket)."
    connections_per_ip: usize = 32; reloadable = true;
        "Simultaneous WebSocket connections per IP address; more get HTTP 429 (0: no limit). Behind a reverse proxy, set `relay.real_ip_header`, or every client shares the proxy's address."
    connections_per_ipv6_56: usize = 128; reloadable = true;
        "Simultaneous WebSocket connections from one IPv6 /56 (a home's or small site's allocation: 256 /64s, each counted by `connections_per_ip`), all its addresses together; more get HTTP 429 (0: no limit)."
    connections_per_ipv6_48: usize = 512; reloadable = true;
        "Simultaneous WebSocket connections from one IPv6 /48 (a site's or a tunnel broker's allocation: 65,536 /64s), all its addresses together; more get HTTP 429 (0: no limit). Without it one /48 could take every `limits.max_connections` slot, 32 per /64."

    [search: SearchSettings] "NIP-50 full-text search."
    enabled: bool = true; reloadable = false;
        "Keep an inverted index of event text and answer `search` filters. Turning it off drops the index (no write cost); turning it on again rebuilds it when the database opens."
    max_reads: usize = 100_000; reloadable = false;
        "Most postings (and probes of other terms) one search filter reads; past it, results are ranked among the newest events examined and COUNT answers `approximate: true`."
    index_lag: u64 = 1024; reloadable = false;
        "Stored events the search index may trail by. The search thread indexes them in one batch, in the index's own environment, once more than this many wait or no commit has come for 20 ms; searches scan the trailing events directly, so results never miss a stored event. 0 indexes after every commit (more pages written per event)."
    max_terms: usize = 16; reloadable = false;
        "Most distinct terms in one search string; longer searches get CLOSED `invalid:`."
    max_unindexed: u64 = 20_000; reloadable = false;
        "Most stored events the search index may trail by for searches to be answered (never less than `index_lag`): a search tokenizes the trailing events itself. Further behind (the index being built after an upgrade, after the machine restarted without a clean stop, or after turning search on; or indexing not keeping up with publishing), searches get CLOSED `error: the search index is being built` until it catches up. The relay serves everything else meanwhile and builds the index in the background."

    [performance: PerformanceSettings] "Threads and batching."
    ingest_threads: usize = 0; reloadable = false;
        "Parse-and-verify workers (0: one per core)."
    query_threads: usize = 0; reloadable = false;
        "Query workers (0: one per core)."
    writer_batch: usize = 2_000; reloadable = false;
        "Most events committed in one transaction."
    writer_linger_us: u64 = 1_000; reloadable = false;
        "Longest the writer holds a transaction open for connections that published in its last two commits (0: commit at once); see ARCHITECTURE.md, group commit."
    query_slice: usize = 2_000; reloadable = false;
        "Index entries one query examines before yielding to others."
    event_cache_mib: usize = 64; reloadable = false;
        "MiB of memory for stored events sent to JSON clients, kept decompressed and rendered (sharded by serial, evicting by second chance): the next query that finds one copies its JSON instead of decompressing and rendering it again. Each query still looks every event up in its own snapshot, so a removed event is never served from here. 0 keeps none."

    [cluster: ClusterSettings] "Several relays that hold the same events through a NATS JetStream stream (docs/cluster.md). Off by default: a single relay needs none of it."
    enabled: bool = false; reloadable = false;
        "Join a cluster: publish every admitted event to the stream, answer `OK` once it is applied in stream order, and store and fan out the events the other nodes publish."
    urls: Vec<String> = vec!["nats://127.0.0.1:4222".into()]; reloadable = false;
        "NATS servers to connect to (any one of the NATS cluster will do; the client learns the others)."
    stream: String = "nostrwire".into(); reloadable = false;
        "JetStream stream that holds the events (subject `STREAM.events`; ephemeral events cross on `STREAM.ephemeral`, the nodes' progress is in the key-value bucket `STREAM-nodes`). Created when missing."
    replicas: usize = 3; reloadable = false;
        "Copies of the stream NATS keeps (1–5); a write is acknowledged once a majority of them holds it."
    node: String = String::new(); reloadable = false;
        "This node's name in `nostrwire cluster status` (letters, digits, `-`, `_`; empty: the listen address with `-` for `.` and `:`)."
    publish_timeout_ms: u64 = 2_000; reloadable = false;
        "Longest an event waits for JetStream's acknowledgement before it is refused with `error: cluster unavailable`."
}

impl Config {
    /// Reads a TOML config file; unknown keys are errors.
    pub fn from_toml(text: &str) -> anyhow::Result<Config> {
        Ok(toml::from_str(text)?)
    }

    /// The fully commented default configuration.
    pub fn default_toml() -> String {
        let defaults = toml::Table::try_from(Config::default()).expect("serializable");
        let mut out = String::from(
            "# nostrwire relay configuration. Every setting is shown with its default.\n\
             # Changes take effect on restart; those marked \"reloadable\" also when\n\
             # the relay gets SIGHUP (it reads this file again).\n",
        );
        for (section, doc) in SECTIONS {
            out.push_str(&format!("\n# {doc}\n[{section}]\n"));
            let table = defaults[*section].as_table().expect("section table");
            for s in SETTINGS.iter().filter(|s| s.section == *section) {
                let doc = match s.reloadable {
                    true => format!("{} (reloadable)", s.doc),
                    false => s.doc.to_string(),
                };
                for line in wrap(&doc, 76) {
                    out.push_str(&format!("# {line}\n"));
                }
                let value = &table[s.name];
                out.push_str(&format!("{} = {}\n", s.name, value));
            }
        }
        out
    }

    /// Checks what the types cannot: rates are finite and not negative, the
    /// plugin exists.
    pub fn validate(&self) -> anyhow::Result<()> {
        let r = &self.rate;
        for (name, v) in [
            ("events_per_second", r.events_per_second),
            ("events_burst", r.events_burst),
            ("reqs_per_second", r.reqs_per_second),
            ("reqs_burst", r.reqs_burst),
            ("pubkey_events_per_second", r.pubkey_events_per_second),
            ("pubkey_reqs_per_second", r.pubkey_reqs_per_second),
        ] {
            anyhow::ensure!(
                v.is_finite() && v >= 0.0,
                "rate.{name} must be a number >= 0, not {v}"
            );
        }
        let admin = &self.info.pubkey;
        anyhow::ensure!(
            admin.is_empty() || nostrwire_event::PublicKey::from_hex(admin).is_ok(),
            "info.pubkey: {admin:?} is not a public key (64 hex characters)"
        );
        anyhow::ensure!(
            (1..=128).contains(&self.relay.ipv6_prefix),
            "relay.ipv6_prefix must be between 1 and 128, not {}",
            self.relay.ipv6_prefix
        );
        for key in &self.admin.pubkeys {
            anyhow::ensure!(
                nostrwire_event::PublicKey::from_hex(key).is_ok(),
                "admin.pubkeys: {key:?} is not a public key (64 hex characters)"
            );
        }
        self.cluster.validate()?;
        let plugin = &self.policy.plugin;
        anyhow::ensure!(
            plugin.as_os_str().is_empty() || plugin.is_file(),
            "policy.plugin: {} is not a file",
            plugin.display()
        );
        Ok(())
    }

    /// The relay-wide memory budget: `limits.relay_memory_bytes`, or its
    /// default for this machine.
    pub fn relay_memory_bytes(&self) -> usize {
        match self.limits.relay_memory_bytes {
            0 => crate::memory::default_relay_bytes(),
            n => n,
        }
    }

    /// The listen address as a WebSocket URL, unless `relay.url` is set.
    pub fn public_url(&self) -> String {
        if self.relay.url.is_empty() {
            format!("ws://{}", self.relay.listen)
        } else {
            self.relay.url.clone()
        }
    }
}

impl ClusterSettings {
    /// Checks the names NATS would refuse, before anything connects.
    fn validate(&self) -> anyhow::Result<()> {
        if !self.enabled {
            return Ok(());
        }
        let plain = |s: &str| {
            !s.is_empty()
                && s.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        };
        anyhow::ensure!(!self.urls.is_empty(), "cluster.urls: no NATS server given");
        anyhow::ensure!(
            plain(&self.stream),
            "cluster.stream: {:?} is not a stream name (letters, digits, - and _)",
            self.stream
        );
        anyhow::ensure!(
            self.node.is_empty() || plain(&self.node),
            "cluster.node: {:?} is not a node name (letters, digits, - and _)",
            self.node
        );
        anyhow::ensure!(
            (1..=5).contains(&self.replicas),
            "cluster.replicas must be 1 to 5, not {}",
            self.replicas
        );
        anyhow::ensure!(
            self.publish_timeout_ms > 0,
            "cluster.publish_timeout_ms must be above 0"
        );
        Ok(())
    }
}

fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut lines = vec![String::new()];
    for word in text.split_whitespace() {
        let line = lines.last_mut().expect("non-empty");
        if !line.is_empty() && line.len() + 1 + word.len() > width {
            lines.push(word.to_string());
        } else {
            if !line.is_empty() {
                line.push(' ');
            }
            line.push_str(word);
        }
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn printed_default_config_parses_back_to_the_defaults() {
        let text = Config::default_toml();
        let parsed = Config::from_toml(&text).unwrap();
        assert_eq!(
            toml::Table::try_from(parsed).unwrap(),
            toml::Table::try_from(Config::default()).unwrap()
        );
        for s in SETTINGS {
            assert!(
                text.contains(&format!("\n{} = ", s.name)),
                "{} missing",
                s.name
            );
        }
    }

    #[test]
    fn unknown_keys_and_bad_values_are_errors() {
        assert!(Config::from_toml("[limits]\nmax_filterz = 3\n").is_err());
        assert!(Config::from_toml("[storage]\ndurability = \"sometimes\"\n").is_err());
        let c = Config::from_toml("[storage]\ndurability = \"none\"\n").unwrap();
        assert_eq!(c.storage.durability, Durability::None);
        assert_eq!(c.limits.max_filters, 32);
        let bad_admin = Config::from_toml("[info]\npubkey = \"npub1xyz\"\n").unwrap();
        assert!(bad_admin.validate().is_err());
        assert!(Config::default().validate().is_ok());
    }

    #[test]
    fn a_reload_takes_reloadable_settings_and_names_the_rest() {
        let mut running = Config::default();
        let mut new = Config::default();
        new.info.name = "renamed".into();
        new.rate.events_per_second = 2.0;
        new.storage.durability = Durability::None;
        new.relay.listen = "127.0.0.1:1".into();
        let need_restart = running.reload_from(&new);
        assert_eq!(need_restart, ["relay.listen", "storage.durability"]);
        assert_eq!(running.info.name, "renamed");
        assert_eq!(running.rate.events_per_second, 2.0);
        assert_eq!(running.storage.durability, Durability::Full);
        assert_eq!(running.relay.listen, Config::default().relay.listen);
    }
}
