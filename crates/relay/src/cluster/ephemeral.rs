//! Ephemeral events (kinds 20000–29999) between nodes: published on a
//! plain NATS subject, never in the stream, and handed straight to this
//! node's fan-out, as the node that received them did with its own. At
//! most once: on their own bounded queue to NATS, so a slow NATS never
//! holds a stored event behind them, and dropped (and counted) where a
//! queue is full.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use async_nats::HeaderMap;
use bytes::Bytes;
use futures_util::StreamExt;
use tokio::sync::mpsc::Receiver;

use super::{ephemeral_subject, State, NODE_HEADER};
use crate::msg::{FanoutMsg, LiveEvent};
use crate::store::Admitted;

/// Publishes this node's ephemeral events until the node stops.
pub(super) async fn publish(state: Arc<State>, mut inbox: Receiver<Vec<u8>>) {
    let subject = ephemeral_subject(&state.settings.stream);
    while let Some(record) = inbox.recv().await {
        let Some(context) = state.context.get() else {
            state.ephemeral_out_dropped.fetch_add(1, Ordering::Relaxed);
            continue;
        };
        let mut headers = HeaderMap::new();
        headers.insert(NODE_HEADER, state.node.as_str());
        let sent = context
            .client()
            .publish_with_headers(subject.clone(), headers, Bytes::from(record))
            .await;
        if sent.is_err() {
            state.ephemeral_out_dropped.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// Delivers the other nodes' ephemeral events until the node stops.
pub(super) async fn receive(state: Arc<State>, client: async_nats::Client) {
    let subject = ephemeral_subject(&state.settings.stream);
    let mut subscription = match client.subscribe(subject).await {
        Ok(subscription) => subscription,
        Err(e) => {
            tracing::error!("cannot subscribe to the cluster's ephemeral events: {e}");
            return;
        }
    };
    while let Some(message) = subscription.next().await {
        let from_here = message
            .headers
            .as_ref()
            .and_then(|h| h.get(NODE_HEADER))
            .is_some_and(|node| node.as_str() == state.node);
        if from_here {
            continue;
        }
        match Admitted::from_record(message.payload.to_vec()) {
            Ok(event) => {
                state.ephemeral_in.fetch_add(1, Ordering::Relaxed);
                let live = Arc::new(LiveEvent { serial: 0, event });
                if state
                    .fanout_tx
                    .try_send(FanoutMsg::Events(vec![live]))
                    .is_err()
                {
                    state.ephemeral_in_dropped.fetch_add(1, Ordering::Relaxed);
                }
            }
            Err(e) => tracing::warn!("an ephemeral event from the cluster is not a record: {e}"),
        }
    }
}
