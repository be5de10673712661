//! What a connection holds in the relay's counts, each released by one
//! drop guard however the connection's task ends (a panic included): its
//! socket slot (`limits.max_connections`, taken at `accept`), its place
//! among the open connections and in the memory budget's fair shares, and
//! its subscriptions and sessions at its ingest worker.

use std::net::IpAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use tokio::sync::OwnedSemaphorePermit;

use crate::memory::Membership;
use crate::msg::{ConnId, IngestMsg, Outbox};
use crate::Shared;

/// One of the relay's `max_connections` socket slots, from `accept` until
/// the connection's task ends, however it ends (a panic included).
#[derive(Debug)]
pub(crate) struct SocketSlot {
    _permit: OwnedSemaphorePermit,
    shared: Arc<Shared>,
}

impl SocketSlot {
    /// A free slot, counted in `sockets_open`; `None` when all are taken.
    pub(crate) fn take(shared: &Arc<Shared>) -> Option<SocketSlot> {
        let permit = shared.sockets.clone().try_acquire_owned().ok()?;
        shared.metrics.sockets_open.fetch_add(1, Ordering::Relaxed);
        Some(SocketSlot {
            _permit: permit,
            shared: shared.clone(),
        })
    }
}

impl Drop for SocketSlot {
    fn drop(&mut self) {
        self.shared
            .metrics
            .sockets_open
            .fetch_sub(1, Ordering::Relaxed);
    }
}

/// What an upgraded connection holds in the relay's counts (the open
/// connections, its place in the memory budget's fair shares, its
/// subscriptions and sessions at its ingest worker), given back in one
/// place when it ends, however it ends (a panic in its task included).
#[derive(Debug)]
pub(crate) struct OpenConnection {
    shared: Arc<Shared>,
    id: ConnId,
    address: IpAddr,
    _membership: Membership,
}

impl OpenConnection {
    pub(crate) fn new(shared: &Arc<Shared>, id: ConnId, address: IpAddr, outbox: &Outbox) -> Self {
        let metrics = &shared.metrics;
        metrics.connections_open.fetch_add(1, Ordering::Relaxed);
        metrics.connections_total.fetch_add(1, Ordering::Relaxed);
        OpenConnection {
            shared: shared.clone(),
            id,
            address,
            _membership: shared.memory.join(id, Arc::new(outbox.clone())),
        }
    }
}

impl Drop for OpenConnection {
    fn drop(&mut self) {
        self.shared
            .metrics
            .connections_open
            .fetch_sub(1, Ordering::Relaxed);
        let worker = self.shared.ingest_for(self.id);
        let _ = worker.send(IngestMsg::Closed(self.id, self.address));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::msg::{Budget, Transport};

    /// A connection task that panics gives back its socket slot, its place
    /// among the open connections and in the memory budget, and what its
    /// queue held.
    #[test]
    fn a_connection_task_that_dies_gives_everything_back() {
        let dir = tempfile::tempdir().unwrap();
        let mut config = crate::Config::default();
        config.relay.listen = "127.0.0.1:0".into();
        config.relay.data = dir.path().to_path_buf();
        config.limits.max_connections = 3;
        let relay = crate::start(config).unwrap();
        let shared = relay.shared.clone();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        runtime.block_on(async {
            let s = shared.clone();
            let task = tokio::spawn(async move {
                let _slot = SocketSlot::take(&s).expect("a free slot");
                let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
                let budget = Budget::new(1 << 20, Some(s.memory.clone()));
                let outbox = Outbox::new(tx, budget, Transport::Json);
                let _open = OpenConnection::new(&s, 7, "192.0.2.1".parse().unwrap(), &outbox);
                assert!(outbox.send(vec![b' '; 10_000]));
                assert!(s.memory.used() >= 10_000);
                assert_eq!(s.metrics.connections_open.load(Ordering::Relaxed), 1);
                assert_eq!(s.sockets.available_permits(), 2);
                drop(rx);
                panic!("the connection task dies");
            });
            assert!(task.await.unwrap_err().is_panic());
        });
        assert_eq!(shared.metrics.sockets_open.load(Ordering::Relaxed), 0);
        assert_eq!(shared.metrics.connections_open.load(Ordering::Relaxed), 0);
        assert_eq!(shared.sockets.available_permits(), 3);
        assert_eq!(shared.memory.used(), 0);
        assert_eq!(shared.memory.fair_share(), shared.memory.cap());
        drop(shared);
        relay.shutdown();
    }
}
