//! Where each node stands: every second a node writes its applied
//! sequence to the key-value bucket `STREAM-nodes` (key: its name) and
//! reads the stream's last sequence; `/metrics` exports both and the lag;
//! `nostrwire cluster status` reads the bucket and the stream.

use std::fmt::Write;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use async_nats::jetstream;
use bytes::Bytes;
use futures_util::StreamExt;
use serde::{Deserialize, Serialize};

use super::{nodes_bucket, ClusterError, State};
use crate::config::ClusterSettings;

/// How often a node reports.
const REPORT_EVERY: Duration = Duration::from_secs(1);

/// One node's report, as the bucket holds it.
#[derive(Debug, Serialize, Deserialize)]
struct Report {
    url: String,
    applied: u64,
    stream_last: u64,
    /// Unix seconds of the report.
    at: u64,
}

/// Reports this node's progress until it stops.
pub(super) async fn report(state: Arc<State>) {
    let Some(context) = state.ready().await else {
        return;
    };
    let mut bucket = None;
    let mut tick = tokio::time::interval(REPORT_EVERY);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            () = state.stop.cancelled() => return,
        }
        if let Ok(stream) = context.get_stream(&state.settings.stream).await {
            state
                .stream_last
                .fetch_max(stream.cached_info().state.last_sequence, Ordering::Relaxed);
        }
        if bucket.is_none() {
            bucket = context
                .get_key_value(nodes_bucket(&state.settings.stream))
                .await
                .ok();
        }
        if let Some(bucket) = &bucket {
            let report = Report {
                url: state.public_url.clone(),
                applied: *state.applied.borrow(),
                stream_last: state.stream_last.load(Ordering::Relaxed),
                at: crate::now(),
            };
            let value = serde_json::to_vec(&report).unwrap_or_default();
            let _ = bucket.put(&state.node, Bytes::from(value)).await;
        }
    }
}

/// Appends the cluster's figures in the Prometheus text format.
pub(super) fn render_metrics(state: &State, out: &mut String) {
    let applied = *state.applied.borrow();
    let last = state.stream_last.load(Ordering::Relaxed).max(applied);
    let connected = state.context.get().is_some_and(|context| {
        context.client().connection_state() == async_nats::connection::State::Connected
    });
    let node = &state.node;
    let mut gauge = |name: &str, help: &str, kind: &str, v: u64| {
        let _ = writeln!(
            out,
            "# HELP {name} {help}\n# TYPE {name} {kind}\n{name}{{node=\"{node}\"}} {v}"
        );
    };
    gauge(
        "nostrwire_cluster_connected",
        "1 while this node is connected to NATS and the stream exists.",
        "gauge",
        u64::from(connected),
    );
    gauge(
        "nostrwire_cluster_applied_sequence",
        "Stream sequence this node's store is applied up to.",
        "gauge",
        applied,
    );
    gauge(
        "nostrwire_cluster_stream_sequence",
        "Last sequence of the cluster's stream, as this node last saw it.",
        "gauge",
        last,
    );
    gauge(
        "nostrwire_cluster_lag",
        "Stream messages this node has not applied yet.",
        "gauge",
        last - applied,
    );
    gauge(
        "nostrwire_cluster_refused_total",
        "Events refused because the stream did not acknowledge them (cluster unavailable).",
        "counter",
        state.refused.load(Ordering::Relaxed),
    );
    gauge(
        "nostrwire_cluster_ephemeral_received_total",
        "Ephemeral events received from other nodes.",
        "counter",
        state.ephemeral_in.load(Ordering::Relaxed),
    );
    gauge(
        "nostrwire_cluster_ephemeral_send_dropped_total",
        "Ephemeral events not sent to the other nodes (queue to NATS full, or not connected).",
        "counter",
        state.ephemeral_out_dropped.load(Ordering::Relaxed),
    );
    gauge(
        "nostrwire_cluster_ephemeral_receive_dropped_total",
        "Ephemeral events from other nodes not delivered here (fan-out's queue full).",
        "counter",
        state.ephemeral_in_dropped.load(Ordering::Relaxed),
    );
}

/// One node as `nostrwire cluster status` shows it.
#[derive(Clone, Debug, Serialize)]
pub struct NodeStatus {
    /// Its name (`cluster.node`).
    pub name: String,
    /// Its WebSocket URL.
    pub url: String,
    /// The stream sequence its store is applied up to.
    pub applied: u64,
    /// Messages of the stream it has not applied.
    pub lag: u64,
    /// Seconds since its last report (a stopped node stops reporting).
    pub reported_seconds_ago: u64,
}

/// One NATS server holding a copy of the stream.
#[derive(Clone, Debug, Serialize)]
pub struct Peer {
    /// The NATS server's name.
    pub name: String,
    /// Whether it leads the stream's group.
    pub leader: bool,
    /// Whether its copy is up to date (the leader always is).
    pub current: bool,
}

/// The cluster as `nostrwire cluster status` shows it.
#[derive(Clone, Debug, Serialize)]
pub struct ClusterStatus {
    /// The stream's name.
    pub stream: String,
    /// Its last sequence.
    pub last_sequence: u64,
    /// Messages it holds.
    pub messages: u64,
    /// Bytes it holds.
    pub bytes: u64,
    /// The NATS servers holding it.
    pub peers: Vec<Peer>,
    /// The relay nodes that reported, by name.
    pub nodes: Vec<NodeStatus>,
}

/// Reads the stream's state and every node's last report (a client of
/// NATS for a moment, on a runtime of its own).
pub fn read_status(settings: &ClusterSettings) -> Result<ClusterStatus, ClusterError> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(ClusterError::Runtime)?;
    runtime.block_on(async {
        tokio::time::timeout(Duration::from_secs(10), read(settings))
            .await
            .map_err(|_| ClusterError::Connect("no answer within 10 s".into()))?
    })
}

async fn read(settings: &ClusterSettings) -> Result<ClusterStatus, ClusterError> {
    let client = async_nats::ConnectOptions::new()
        .name("nostrwire cluster status")
        .connection_timeout(Duration::from_secs(3))
        .connect(settings.urls.clone())
        .await
        .map_err(|e| ClusterError::Connect(e.to_string()))?;
    let context = jetstream::ContextBuilder::new()
        .timeout(Duration::from_secs(3))
        .build(client);
    let stream_error = |e: &dyn std::fmt::Display| ClusterError::Stream(e.to_string());
    let mut stream = context
        .get_stream(&settings.stream)
        .await
        .map_err(|e| stream_error(&e))?;
    let info = stream.info().await.map_err(|e| stream_error(&e))?.clone();
    let last = info.state.last_sequence;
    let mut peers = Vec::new();
    if let Some(cluster) = &info.cluster {
        if let Some(leader) = &cluster.leader {
            peers.push(Peer {
                name: leader.clone(),
                leader: true,
                current: true,
            });
        }
        peers.extend(cluster.replicas.iter().map(|p| Peer {
            name: p.name.clone(),
            leader: false,
            current: p.current && !p.offline,
        }));
    }
    let bucket = context
        .get_key_value(nodes_bucket(&settings.stream))
        .await
        .map_err(|e| stream_error(&e))?;
    let mut names = Vec::new();
    if let Ok(mut keys) = bucket.keys().await {
        while let Some(Ok(key)) = keys.next().await {
            names.push(key);
        }
    }
    names.sort();
    let now = crate::now();
    let mut nodes = Vec::new();
    for name in names {
        let Ok(Some(value)) = bucket.get(&name).await else {
            continue;
        };
        let Ok(report) = serde_json::from_slice::<Report>(&value) else {
            continue;
        };
        nodes.push(NodeStatus {
            url: report.url,
            applied: report.applied,
            lag: last.saturating_sub(report.applied),
            reported_seconds_ago: now.saturating_sub(report.at),
            name,
        });
    }
    Ok(ClusterStatus {
        stream: settings.stream.clone(),
        last_sequence: last,
        messages: info.state.messages,
        bytes: info.state.bytes,
        peers,
        nodes,
    })
}
