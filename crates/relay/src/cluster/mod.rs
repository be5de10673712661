//! Stage 6 across machines: several relays that hold the same events
//! through one NATS JetStream stream (`docs/cluster.md`).
//!
//! A node publishes every event it admits to the stream, with the event id
//! as the message id (JetStream drops a second copy within its duplicate
//! window), and answers `OK` only when it has applied that event in stream
//! order, like every other node: the store's verdicts (duplicate, deleted,
//! superseded) are then the same everywhere.
//!
//! | file | concern |
//! |---|---|
//! | `publish.rs` | admitted events → the stream; the publishers waiting for their event to come back |
//! | `apply.rs` | the stream, in order, from the applied sequence on → the writer |
//! | `ephemeral.rs` | ephemeral events between nodes on a plain subject, never stored |
//! | `status.rs` | each node's applied sequence and lag: the key-value bucket, `/metrics`, `nostrwire cluster status` |
//! | `error.rs` | [`ClusterError`] |

mod apply;
mod ephemeral;
mod error;
mod publish;
pub mod status;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use async_nats::jetstream;
use crossbeam_channel::Sender;
use tokio::sync::mpsc::{self, unbounded_channel, UnboundedSender};
use tokio::sync::{watch, Notify};
use tokio_util::sync::CancellationToken;

pub use error::ClusterError;
pub use status::{read_status, ClusterStatus, NodeStatus};

use crate::config::ClusterSettings;
use crate::msg::{Accepted, FanoutMsg, WriterMsg};
use crate::store::EventStore;
use publish::Waiters;

/// Ephemeral events waiting for NATS: beyond this many, new ones are
/// dropped (and counted) rather than delay anything else.
const EPHEMERAL_QUEUE: usize = 1024;

/// Header naming the node that published a message.
const NODE_HEADER: &str = "Nostrwire-Node";

/// The subject of the stored events in `stream`.
pub fn events_subject(stream: &str) -> String {
    format!("{stream}.events")
}

/// The subject ephemeral events cross on.
pub fn ephemeral_subject(stream: &str) -> String {
    format!("{stream}.ephemeral")
}

/// The key-value bucket where each node reports its progress.
pub fn nodes_bucket(stream: &str) -> String {
    format!("{stream}-nodes")
}

/// This node's name: `cluster.node`, or the listen address made a name.
pub fn node_name(settings: &ClusterSettings, listen: &str) -> String {
    if !settings.node.is_empty() {
        return settings.node.clone();
    }
    listen
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect()
}

/// What the cluster's tasks share.
struct State {
    settings: ClusterSettings,
    node: String,
    public_url: String,
    store: Arc<dyn EventStore>,
    writer_tx: Sender<WriterMsg>,
    fanout_tx: Sender<FanoutMsg>,
    /// [`Links::record_limits`].
    record_limits: nostrwire_wire::Limits,
    /// Set once connected and the stream exists.
    context: OnceLock<jetstream::Context>,
    /// Woken when `context` is set.
    connected: Notify,
    /// Publishers waiting for their event to be applied, and the highest
    /// stream sequence handed to the writer (changed together).
    waiters: Mutex<Waiters>,
    /// The stream's last sequence as last seen (acks, deliveries, stream
    /// info).
    stream_last: AtomicU64,
    /// The sequence the store is applied up to, as the writer reports it
    /// after each commit ([`Cluster::applied`]): publishers wait on it.
    applied: watch::Sender<u64>,
    /// The last sequence the writer is through with, applied or not
    /// ([`Cluster::applied`]; set after `applied`): the stream's reader
    /// waits on it before it starts again from `applied`, and starts again
    /// when it passes `applied`.
    through: watch::Sender<u64>,
    /// Events refused because the stream did not acknowledge them.
    refused: AtomicU64,
    /// Ephemeral events received from other nodes.
    ephemeral_in: AtomicU64,
    /// Ephemeral events not sent to the other nodes: the queue to NATS was
    /// full, or the node was not connected.
    ephemeral_out_dropped: AtomicU64,
    /// Other nodes' ephemeral events not delivered here: fan-out's queue
    /// was full.
    ephemeral_in_dropped: AtomicU64,
    /// Cancelled by [`Cluster::shutdown`]: every task ends on it.
    stop: CancellationToken,
}

impl std::fmt::Debug for State {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("State")
            .field("node", &self.node)
            .field("stream", &self.settings.stream)
            .finish_non_exhaustive()
    }
}

impl State {
    /// The JetStream context, once connected.
    async fn ready(&self) -> Option<jetstream::Context> {
        loop {
            // Made before the check: a wakeup in between is not missed.
            let connected = self.connected.notified();
            if let Some(context) = self.context.get() {
                return Some(context.clone());
            }
            tokio::select! {
                () = connected => {}
                () = self.stop.cancelled() => return None,
            }
        }
    }

    /// Waits `time` unless the node stops first (then false).
    async fn pause(&self, time: Duration) -> bool {
        tokio::select! {
            () = tokio::time::sleep(time) => true,
            () = self.stop.cancelled() => false,
        }
    }

    fn publish_timeout(&self) -> Duration {
        Duration::from_millis(self.settings.publish_timeout_ms)
    }

    /// A node's state before it connects, its store applied up to
    /// `applied`.
    fn new(settings: &ClusterSettings, links: Links, applied: u64) -> State {
        State {
            node: node_name(settings, &links.listen),
            settings: settings.clone(),
            public_url: links.public_url,
            store: links.store,
            writer_tx: links.writer_tx,
            fanout_tx: links.fanout_tx,
            record_limits: links.record_limits,
            context: OnceLock::new(),
            connected: Notify::new(),
            waiters: Mutex::new(Waiters::new(applied)),
            stream_last: AtomicU64::new(applied),
            applied: watch::Sender::new(applied),
            through: watch::Sender::new(applied),
            refused: AtomicU64::new(0),
            ephemeral_in: AtomicU64::new(0),
            ephemeral_out_dropped: AtomicU64::new(0),
            ephemeral_in_dropped: AtomicU64::new(0),
            stop: CancellationToken::new(),
        }
    }

    /// A node's state with no NATS connection, over `store`.
    #[cfg(test)]
    fn for_tests(store: Arc<dyn EventStore>) -> State {
        let applied = store.applied_sequence().unwrap();
        let links = Links {
            store,
            writer_tx: crossbeam_channel::unbounded().0,
            fanout_tx: crossbeam_channel::unbounded().0,
            public_url: String::new(),
            listen: "test".into(),
            record_limits: nostrwire_wire::Limits::DEFAULT,
        };
        State::new(&ClusterSettings::default(), links, applied)
    }
}

/// A node's link to the cluster: its own small runtime, where the
/// publisher, the stream's reader, the ephemeral subscription and the
/// status reports run.
#[derive(Debug)]
pub struct Cluster {
    state: Arc<State>,
    publish_tx: UnboundedSender<Accepted>,
    /// Ephemeral events to NATS, on a path of their own: bounded, and
    /// never in front of a stored event.
    ephemeral_tx: mpsc::Sender<Vec<u8>>,
    runtime: Mutex<Option<tokio::runtime::Runtime>>,
}

/// What a node needs from the relay to join the cluster.
#[derive(Debug)]
pub struct Links {
    /// The store the stream is applied to.
    pub store: Arc<dyn EventStore>,
    /// The writer, which applies the stream.
    pub writer_tx: Sender<WriterMsg>,
    /// Fan-out, for other nodes' ephemeral events.
    pub fanout_tx: Sender<FanoutMsg>,
    /// This node's WebSocket URL, for `nostrwire cluster status`.
    pub public_url: String,
    /// The listen address (the default node name).
    pub listen: String,
    /// The limits the stream's records are decoded under: this node's own
    /// (`[limits]`), which every node of the cluster admits under.
    pub record_limits: nostrwire_wire::Limits,
}

impl Cluster {
    /// Starts connecting (in the background: the relay serves reads while
    /// NATS is unreachable, and refuses writes) and reading the stream
    /// after the store's applied sequence.
    pub fn start(settings: &ClusterSettings, links: Links) -> Result<Cluster, ClusterError> {
        let applied = links.store.applied_sequence()?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("cluster")
            .enable_all()
            .build()
            .map_err(ClusterError::Runtime)?;
        let state = Arc::new(State::new(settings, links, applied));
        let (publish_tx, publish_rx) = unbounded_channel();
        runtime.spawn(publish::run(state.clone(), publish_rx));
        let (ephemeral_tx, ephemeral_rx) = mpsc::channel(EPHEMERAL_QUEUE);
        runtime.spawn(ephemeral::publish(state.clone(), ephemeral_rx));
        let s = state.clone();
        runtime.spawn(async move {
            let Some(client) = connect(&s).await else {
                return;
            };
            tokio::spawn(ephemeral::receive(s.clone(), client));
            tokio::spawn(apply::run(s.clone()));
            status::report(s).await;
        });
        tracing::info!(
            node = state.node,
            stream = settings.stream,
            applied,
            "joining the cluster"
        );
        Ok(Cluster {
            state,
            publish_tx,
            ephemeral_tx,
            runtime: Mutex::new(Some(runtime)),
        })
    }

    /// This node's name.
    pub fn node(&self) -> &str {
        &self.state.node
    }

    /// Publishes an admitted event; its publisher gets `OK` when this node
    /// applies it, or `OK false` when the stream does not take it.
    pub fn publish(&self, accepted: Accepted) {
        if let Err(e) = self.publish_tx.send(accepted) {
            let accepted = e.0;
            accepted.ticket.reply.send_ok(
                accepted.event.id(),
                false,
                "error: relay is shutting down",
            );
        }
    }

    /// Sends an ephemeral event's record to the other nodes, at most once:
    /// when the queue to NATS is full it is dropped, and counted.
    pub fn publish_ephemeral(&self, record: &[u8]) {
        if self.ephemeral_tx.try_send(record.to_vec()).is_err() {
            self.state
                .ephemeral_out_dropped
                .fetch_add(1, Ordering::Relaxed);
        }
    }

    /// The writer has committed the stream up to `applied` and is through
    /// with it up to `through`; above `applied`, it could not apply what it
    /// was handed (a failed commit), and the reader reads it again.
    pub fn applied(&self, applied: u64, through: u64) {
        self.state.applied.send_if_modified(|current| {
            let newer = applied > *current;
            *current = (*current).max(applied);
            newer
        });
        self.state.through.send_replace(through);
    }

    /// Appends the cluster's metrics (Prometheus text).
    pub fn render_metrics(&self, out: &mut String) {
        status::render_metrics(&self.state, out);
    }

    /// Stops the cluster's tasks (before the writer stops: the stream's
    /// reader feeds it). Publishers still waiting get no answer; their
    /// connections are closed by then.
    pub fn shutdown(&self) {
        self.state.stop.cancel();
        let runtime = self
            .runtime
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        if let Some(runtime) = runtime {
            runtime.shutdown_timeout(Duration::from_secs(2));
        }
    }
}

/// How long the first attempt at creating the stream may take; attempt `n`
/// may take `n` times as long, up to [`SETUP_ATTEMPTS_GROWING`] times.
const SETUP_ATTEMPT: Duration = Duration::from_secs(1);

/// Attempts after which an attempt's bound stops growing (10 s: the NATS
/// client's own request timeout).
const SETUP_ATTEMPTS_GROWING: u32 = 10;

/// Pause after a failed attempt at creating the stream.
const SETUP_PAUSE: Duration = Duration::from_millis(200);

/// Connects to NATS and makes sure the stream and the nodes' bucket exist,
/// retrying until they do or the node stops.
async fn connect(state: &State) -> Option<async_nats::Client> {
    let settings = &state.settings;
    let client = loop {
        let options = async_nats::ConnectOptions::new()
            .name(format!("nostrwire {}", state.node))
            .connection_timeout(Duration::from_secs(2))
            .retry_on_initial_connect();
        match options.connect(settings.urls.clone()).await {
            Ok(client) => break client,
            Err(e) => {
                tracing::warn!("cannot connect to NATS ({e}); retrying");
                if !state.pause(Duration::from_secs(1)).await {
                    return None;
                }
            }
        }
    };
    let context = jetstream::ContextBuilder::new()
        .timeout(state.publish_timeout())
        .ack_timeout(state.publish_timeout())
        .max_ack_inflight(16_384)
        .build(client.clone());
    // While the NATS servers are still forming their cluster, JetStream
    // requests go unanswered, and the client would wait out its 10 s
    // request timeout before trying again: each attempt is bounded
    // instead, first by one second, then by one more each time (a slow
    // but working server gets the time it needs), and the next follows at
    // once.
    let mut attempt = 0u32;
    loop {
        attempt += 1;
        let bound = SETUP_ATTEMPT * attempt.min(SETUP_ATTEMPTS_GROWING);
        let outcome = tokio::select! {
            r = tokio::time::timeout(bound, ensure_stream(&context, settings)) => r,
            () = state.stop.cancelled() => return None,
        };
        let e = match outcome {
            Ok(Ok(())) => break,
            Ok(Err(e)) => e.to_string(),
            Err(_) => format!("no answer within {} ms", bound.as_millis()),
        };
        tracing::warn!("cluster stream {}: {e}; retrying", settings.stream);
        if !state.pause(SETUP_PAUSE).await {
            return None;
        }
    }
    let _ = state.context.set(context);
    state.connected.notify_waiters();
    tracing::info!(node = state.node, "connected to the cluster");
    Some(client)
}

/// Creates the stream and the nodes' bucket when they are missing.
async fn ensure_stream(
    context: &jetstream::Context,
    settings: &ClusterSettings,
) -> Result<(), ClusterError> {
    context
        .get_or_create_stream(jetstream::stream::Config {
            name: settings.stream.clone(),
            subjects: vec![events_subject(&settings.stream)],
            num_replicas: settings.replicas,
            storage: jetstream::stream::StorageType::File,
            duplicate_window: Duration::from_secs(120),
            ..Default::default()
        })
        .await
        .map_err(|e| ClusterError::Stream(e.to_string()))?;
    let bucket = nodes_bucket(&settings.stream);
    if context.get_key_value(&bucket).await.is_err() {
        context
            .create_key_value(jetstream::kv::Config {
                bucket,
                history: 1,
                num_replicas: settings.replicas,
                ..Default::default()
            })
            .await
            .map_err(|e| ClusterError::Stream(e.to_string()))?;
    }
    Ok(())
}
