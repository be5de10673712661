//! The nostrwire relay: NIP-01 over WebSocket on embedded LMDB.
//!
//! Thread roles (one file each), connected by typed inboxes (`msg.rs`):
//! - [`server`] (stage 1): tokio sockets; HTTP (NIP-11, metrics) and
//!   WebSocket frames; parses nothing but the HTTP request head.
//! - [`ingest`] (stages 2–5): parse, policy, verify, admit, on a
//!   worker pool; all frames of one connection go to the same worker, in order.
//! - [`writer`] (stage 6a): the one thread that writes; group commit, then `OK`.
//! - the store's [`search::SearchIndexer`] (stage 6a): brings the search
//!   index, in its own LMDB environment, up to date with the writer's commits.
//! - [`query`] (stage 6a): REQ and COUNT on read snapshots, time-sliced.
//! - [`fanout`] (stage 6b): live subscriptions, indexed by id, author, kind, tag.
//! - [`cluster`] (stage 6, `[cluster]` only): events through a NATS
//!   JetStream stream shared by several relays, applied in stream order.

pub mod address;
pub mod admin;
pub mod cluster;
pub mod config;
pub mod dictionaries;
pub mod fanout;
pub mod ingest;
pub mod memory;
pub mod metrics;
pub mod msg;
pub mod nip11;
pub mod plugin;
pub mod policy;
pub mod query;
pub mod ratelimit;
pub mod server;
pub mod signatures;
pub mod slots;
pub mod sync;
pub mod turns;
pub mod web;
pub mod writer;

use std::net::SocketAddr;
use std::sync::{Arc, RwLock};
use std::thread::JoinHandle;
use std::time::Duration;

use anyhow::Context;
use crossbeam_channel::{bounded, unbounded, Sender};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

pub use config::Config;
use metrics::Metrics;
use msg::{FanoutMsg, IngestMsg, WriterMsg};
pub use nostrwire_store as store;
pub use nostrwire_store::search;
use store::EventStore;
use store::{LmdbStore, OpenOptions};

/// Seconds since the Unix epoch.
pub fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// State shared by every thread role.
#[derive(Debug)]
pub struct Shared {
    /// The configuration the relay started with. Reloadable settings may
    /// have changed since: read those through [`Shared::current_config`]
    /// (NIP-11), [`Shared::write_policy`] and [`Shared::rate`].
    pub config: Config,
    /// The configuration with the reloadable settings as last reloaded.
    current: RwLock<Arc<Config>>,
    /// Parser limits derived from the configuration.
    pub event_limits: nostrwire_event::Limits,
    /// The same limits for nwb records on the binary transport.
    pub wire_limits: nostrwire_wire::Limits,
    /// Storage.
    pub store: Arc<dyn EventStore>,
    /// The store's dictionary sets, as `nostrwire.v2` serves them.
    pub dictionaries: Arc<dictionaries::Dictionaries>,
    /// Metrics.
    pub metrics: Metrics,
    /// The writer's inbox.
    pub writer_tx: Sender<WriterMsg>,
    /// The fan-out inbox.
    pub fanout_tx: Sender<FanoutMsg>,
    /// Subscriptions registered with, or dropped from, the fan-out and
    /// not yet applied there.
    pub fanout_pending: fanout::Pending,
    /// The search index's thread, told of each commit (with `search.enabled`).
    pub search_indexer: Option<Arc<search::SearchIndexer>>,
    /// The query pool's queue (connections take turns).
    pub queries: query::Queue,
    /// Publishing rules (`[policy]` lists and the NIP-86 ones), replaced
    /// on reload and on each NIP-86 change.
    write_policy: RwLock<Arc<policy::WritePolicy>>,
    /// The operators' NIP-86 lists, as stored.
    moderation: RwLock<Arc<admin::moderation::Moderation>>,
    /// Held while a NIP-86 change is stored and put in force.
    pub(crate) admin_lock: std::sync::Mutex<()>,
    /// Token buckets and connection counts (`[rate]`).
    pub rate: ratelimit::RateLimiter,
    /// Cancelled when the relay is told to stop: the accept loop, every
    /// connection and the purge timer end on it; then the stages behind
    /// them are drained in pipeline order (see [`start`]).
    pub stop: CancellationToken,
    /// The sockets' tasks (connections, the purge timer): stopping waits
    /// for them to end, close frames sent, before draining the stages.
    pub tasks: TaskTracker,
    /// Highest event serial the fan-out thread has delivered: stored events
    /// above it may still reach live subscriptions.
    pub fanned_serial: std::sync::atomic::AtomicU64,
    /// Most sockets open at once: `limits.max_connections`, lowered to fit
    /// the process's descriptor limit.
    pub max_sockets: usize,
    /// One permit per socket that may be open (`max_sockets`), taken at
    /// `accept`.
    pub sockets: Arc<tokio::sync::Semaphore>,
    /// The memory all connections together may hold
    /// (`limits.relay_memory_bytes`).
    pub memory: Arc<memory::RelayMemory>,
    /// What fetches of dictionary sets hold while their writes are in
    /// flight (`limits.dictionary_fetch_bytes`).
    pub set_fetches: dictionaries::Fetches,
    /// Room in the ingest queues, in bytes (`limits.ingest_queue_bytes`):
    /// each client frame holds its size until it is handled.
    pub ingest_room: Arc<tokio::sync::Semaphore>,
    /// The size of `ingest_room`.
    pub ingest_room_bytes: usize,
    /// In a cluster (`[cluster]`): the link to the stream that admitted
    /// events go to instead of the writer.
    pub cluster: Option<cluster::Cluster>,
    ingest_tx: Vec<Sender<IngestMsg>>,
}

impl Shared {
    /// The configuration with the reloadable settings as last reloaded.
    pub fn current_config(&self) -> Arc<Config> {
        self.current
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Publishing rules (`[policy]` lists) as last reloaded.
    pub fn write_policy(&self) -> Arc<policy::WritePolicy> {
        self.write_policy
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The operators' NIP-86 lists in force.
    pub fn moderation(&self) -> Arc<admin::moderation::Moderation> {
        self.moderation
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Puts NIP-86 lists (already stored) in force: ingest's policy, and
    /// the next connection and NIP-11 document.
    pub(crate) fn set_moderation(&self, moderation: admin::moderation::Moderation) {
        let moderation = Arc::new(moderation);
        let mut policy = self.write_policy.write().unwrap_or_else(|e| e.into_inner());
        *policy = Arc::new(policy.with_moderation(moderation.clone()));
        *self.moderation.write().unwrap_or_else(|e| e.into_inner()) = moderation;
    }

    /// The NIP-11 settings in force: the configuration as last reloaded,
    /// with the name, description and icon NIP-86 changed.
    pub fn info_config(&self) -> Config {
        self.moderation().apply_info(&self.current_config())
    }

    /// Applies the reloadable settings of `new` (see [`Reloader::reload`]).
    fn reload(&self, new: &Config) -> anyhow::Result<Vec<&'static str>> {
        new.validate()?;
        let mut current = Config::clone(&self.current_config());
        let need_restart = current.reload_from(new);
        let policy = policy::WritePolicy::from_config(&current)?.with_moderation(self.moderation());
        self.rate.set_settings(current.rate.clone());
        *self.write_policy.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(policy);
        *self.current.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(current);
        Ok(need_restart)
    }

    /// The ingest worker that owns connection `id`.
    pub fn ingest_for(&self, id: u64) -> &Sender<IngestMsg> {
        &self.ingest_tx[(id % self.ingest_tx.len() as u64) as usize]
    }
}

/// Messages waiting for the fan-out thread (a stored batch is one).
const FANOUT_QUEUE: usize = 4_096;
/// Descriptors kept for the relay's own use (database files, plugin
/// pipes, the spare that keeps `accept` from starving) beyond sockets.
const RESERVED_DESCRIPTORS: u64 = 128;

/// Raises the soft limit on open descriptors to the hard limit, and
/// returns how many sockets fit under it: `wanted`, or fewer (with a
/// warning) when the limit leaves no room for them.
fn fit_descriptors(wanted: usize) -> usize {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit only read and write the struct passed.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return wanted;
    }
    if limit.rlim_cur < limit.rlim_max {
        let raised = libc::rlimit {
            rlim_cur: limit.rlim_max,
            rlim_max: limit.rlim_max,
        };
        // SAFETY: as above.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == 0 {
            limit = raised;
        }
    }
    let room = limit.rlim_cur.saturating_sub(RESERVED_DESCRIPTORS) as usize;
    if room < wanted {
        tracing::warn!(
            "the descriptor limit ({}) leaves room for {room} connections, not limits.max_connections = {wanted}; raise it (ulimit -n) to serve more",
            limit.rlim_cur
        );
    }
    wanted.min(room).max(1)
}

fn threads(configured: usize) -> usize {
    if configured > 0 {
        configured
    } else {
        std::thread::available_parallelism().map_or(2, |n| n.get())
    }
}

/// Opens the store described by `config`; a `writer` (the relay, `import`)
/// holds the database's writer lock while open.
pub fn open_store(config: &Config, writer: bool) -> anyhow::Result<LmdbStore> {
    let options = OpenOptions {
        map_size: (config.storage.map_size_gib as usize) << 30,
        durability: config.storage.durability,
        relay_urls: vec![config.public_url()],
        compression_level: config.storage.compression_level,
        compress_min_bytes: config.storage.compress_min_bytes,
        dictionaries: (!config.storage.dictionaries.as_os_str().is_empty())
            .then(|| config.storage.dictionaries.clone()),
        search: config.search.enabled,
        search_max_reads: config.search.max_reads,
        search_max_unindexed: config.search.max_unindexed.max(config.search.index_lag),
        index_lag: config.storage.index_lag,
        index_txn_writes: config.storage.index_txn_writes.max(1),
        auto_dictionaries: config.storage.auto_dictionaries,
        writer_lock: writer,
        max_record_bytes: config
            .limits
            .max_message_bytes
            .max(nostrwire_wire::Limits::DEFAULT.max_record_bytes),
        event_cache_bytes: config.performance.event_cache_mib.saturating_mul(1 << 20),
        ..OpenOptions::default()
    };
    LmdbStore::open(&config.relay.data, &options).with_context(|| {
        format!(
            "cannot open the database in {}",
            config.relay.data.display()
        )
    })
}

/// A running relay.
#[derive(Debug)]
pub struct Relay {
    shared: Arc<Shared>,
    addr: SocketAddr,
    stop: CancellationToken,
    main: Option<JoinHandle<()>>,
}

impl Relay {
    /// The address it listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops accepting, closes connections, commits queued writes, syncs and
    /// returns when everything has stopped.
    pub fn shutdown(mut self) {
        self.stop.cancel();
        if let Some(main) = self.main.take() {
            let _ = main.join();
        }
    }

    /// Blocks until the relay stops (after [`Relay::stop_handle`] is used or a signal).
    pub fn wait(mut self) {
        if let Some(main) = self.main.take() {
            let _ = main.join();
        }
    }

    /// A handle that stops the relay from anywhere (a signal handler);
    /// [`Relay::wait`] returns once it has stopped.
    pub fn stop_handle(&self) -> StopHandle {
        StopHandle(self.stop.clone())
    }

    /// A handle that applies a changed configuration to the running relay.
    pub fn reloader(&self) -> Reloader {
        Reloader {
            shared: self.shared.clone(),
        }
    }
}

/// Stops a running relay ([`Relay::stop_handle`]).
#[derive(Clone, Debug)]
pub struct StopHandle(CancellationToken);

impl StopHandle {
    /// Tells the relay to stop: it stops accepting, closes connections,
    /// commits queued writes and syncs. Returns at once.
    pub fn stop(&self) {
        self.0.cancel();
    }
}

/// Applies the reloadable settings of a new configuration (the ones
/// `nostrwire relay --print-config` marks "reloadable": the NIP-11
/// document, the `[policy]` lists and the `[rate]` limits) to a running
/// relay. Connections stay open; the next message meets the new values.
#[derive(Clone)]
pub struct Reloader {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for Reloader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Reloader")
    }
}

impl Reloader {
    /// Checks `new` and applies its reloadable settings; returns the names
    /// (`section.name`) of the other settings it changes, which keep their
    /// values until a restart. An invalid configuration changes nothing.
    pub fn reload(&self, new: &Config) -> anyhow::Result<Vec<&'static str>> {
        self.shared.reload(new)
    }
}

/// Starts a relay with `config`; returns once it is listening.
pub fn start(config: Config) -> anyhow::Result<Relay> {
    config.validate()?;
    let store: Arc<dyn EventStore> = Arc::new(open_store(&config, true)?);
    let moderation = Arc::new(admin::moderation::Moderation::load(&*store)?);
    let write_policy =
        policy::WritePolicy::from_config(&config)?.with_moderation(moderation.clone());
    let listener = std::net::TcpListener::bind(&config.relay.listen)
        .with_context(|| format!("cannot listen on {}", config.relay.listen))?;
    listener.set_nonblocking(true)?;
    let addr = listener.local_addr()?;

    let event_limits = config.event_limits();
    let wire_limits = nostrwire_wire::Limits {
        max_record_bytes: config.limits.max_message_bytes,
        max_tags: config.limits.max_event_tags,
        max_string_bytes: config.limits.max_message_bytes,
        ..nostrwire_wire::Limits::DEFAULT
    };
    // Bounded, like every queue between threads: a full one makes its
    // senders wait, back to the sockets, which then stop being read.
    let (writer_tx, writer_rx) = writer::inbox(&config);
    let (fanout_tx, fanout_rx) = bounded(FANOUT_QUEUE);
    let n_ingest = threads(config.performance.ingest_threads);
    let n_query = threads(config.performance.query_threads);
    let mut ingest_rx = Vec::new();
    let mut ingest_tx = Vec::new();
    for _ in 0..n_ingest {
        let (tx, rx) = unbounded();
        ingest_tx.push(tx);
        ingest_rx.push(rx);
    }
    let rate = ratelimit::RateLimiter::new(config.rate.clone());
    let max_sockets = fit_descriptors(config.limits.max_connections);
    let ingest_room_bytes = config.limits.ingest_queue_bytes.clamp(
        2 * config.limits.max_message_bytes,
        tokio::sync::Semaphore::MAX_PERMITS,
    );
    let cluster = config
        .cluster
        .enabled
        .then(|| {
            cluster::Cluster::start(
                &config.cluster,
                cluster::Links {
                    store: store.clone(),
                    writer_tx: writer_tx.clone(),
                    fanout_tx: fanout_tx.clone(),
                    public_url: config.public_url(),
                    listen: addr.to_string(),
                    record_limits: wire_limits,
                },
            )
        })
        .transpose()?;
    let search_indexer = match config.search.enabled {
        true => Some(Arc::new(search::SearchIndexer::spawn(
            store.clone(),
            config.search.index_lag,
        )?)),
        false => None,
    };
    let dictionaries = Arc::new(dictionaries::Dictionaries::new(&*store));
    let relay_memory = memory::RelayMemory::new(config.relay_memory_bytes());
    let set_fetches = dictionaries::Fetches::new(config.limits.dictionary_fetch_bytes);
    let shared = Arc::new(Shared {
        current: RwLock::new(Arc::new(config.clone())),
        config,
        event_limits,
        wire_limits,
        store,
        dictionaries,
        metrics: Metrics::default(),
        writer_tx,
        fanout_pending: fanout::Pending::new(fanout_tx.clone()),
        fanout_tx,
        search_indexer,
        queries: query::Queue::default(),
        write_policy: RwLock::new(Arc::new(write_policy)),
        moderation: RwLock::new(moderation),
        admin_lock: std::sync::Mutex::default(),
        rate,
        stop: CancellationToken::new(),
        tasks: TaskTracker::new(),
        fanned_serial: Default::default(),
        max_sockets,
        sockets: Arc::new(tokio::sync::Semaphore::new(max_sockets)),
        memory: relay_memory,
        set_fetches,
        ingest_room: Arc::new(tokio::sync::Semaphore::new(ingest_room_bytes)),
        ingest_room_bytes,
        ingest_tx,
        cluster,
    });

    let mut roles: Vec<(&str, JoinHandle<()>)> = Vec::new();
    let spawn = |name: &str, f: Box<dyn FnOnce() + Send>| {
        std::thread::Builder::new()
            .name(name.to_string())
            .spawn(f)
            .expect("spawn thread")
    };
    let store_writer = writer::spawn(&shared, writer_rx)?;
    let s = shared.clone();
    roles.push((
        "fanout",
        spawn(
            "fanout",
            Box::new(move || fanout::run(fanout_rx, &s.fanout_pending, &s.fanned_serial)),
        ),
    ));
    let mut ingest_handles = Vec::new();
    for (i, rx) in ingest_rx.into_iter().enumerate() {
        let s = shared.clone();
        ingest_handles.push(spawn(
            &format!("ingest-{i}"),
            Box::new(move || ingest::run(s, rx)),
        ));
    }
    let mut query_handles = Vec::new();
    for i in 0..n_query {
        let s = shared.clone();
        query_handles.push(spawn(
            &format!("query-{i}"),
            Box::new(move || query::run(s)),
        ));
    }

    let stop = shared.stop.clone();
    let main_shared = shared.clone();
    let main = std::thread::Builder::new()
        .name("sockets".into())
        .spawn(move || {
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(threads(0))
                .enable_all()
                .build()
                .expect("tokio runtime");
            runtime.block_on(async {
                let listener = tokio::net::TcpListener::from_std(listener).expect("listener");
                let purge_shared = main_shared.clone();
                main_shared.tasks.spawn(async move {
                    loop {
                        tokio::select! {
                            _ = tokio::time::sleep(Duration::from_secs(60)) => {
                                let _ = purge_shared.writer_tx.try_send(WriterMsg::Purge);
                            }
                            _ = purge_shared.stop.cancelled() => return,
                        }
                    }
                });
                // A set the store trains is served, and announced to v2
                // connections, within a second.
                let dict_shared = main_shared.clone();
                main_shared.tasks.spawn(async move {
                    loop {
                        tokio::select! {
                            _ = tokio::time::sleep(Duration::from_secs(1)) => {
                                dict_shared.dictionaries.refresh(&*dict_shared.store);
                            }
                            _ = dict_shared.stop.cancelled() => return,
                        }
                    }
                });
                server::serve(main_shared.clone(), listener, main_shared.stop.clone()).await;
                // The connections send their close frames and end; a few
                // seconds at most, then the runtime drops what is left.
                main_shared.tasks.close();
                let _ =
                    tokio::time::timeout(Duration::from_secs(5), main_shared.tasks.wait()).await;
            });
            runtime.shutdown_timeout(Duration::from_secs(2));
            // Drain the roles in pipeline order, each once everything before
            // it has ended: ingest, then queries, the cluster, writer, fan-out.
            for tx in &main_shared.ingest_tx {
                let _ = tx.send(IngestMsg::Shutdown);
            }
            for h in ingest_handles {
                let _ = h.join();
            }
            main_shared.queries.close();
            for h in query_handles {
                let _ = h.join();
            }
            if let Some(cluster) = &main_shared.cluster {
                cluster.shutdown();
            }
            let _ = main_shared.writer_tx.send(WriterMsg::Shutdown);
            store_writer.join();
            let _ = main_shared.fanout_tx.send(FanoutMsg::Shutdown);
            for (_, h) in roles {
                let _ = h.join();
            }
            if let Some(indexer) = &main_shared.search_indexer {
                indexer.stop();
            }
            tracing::info!("relay stopped");
        })?;
    Ok(Relay {
        shared,
        addr,
        stop,
        main: Some(main),
    })
}
