//! The cluster layer's errors.

use crate::store::StoreError;

/// What can go wrong between a node and the cluster.
#[non_exhaustive]
#[derive(Debug)]
pub enum ClusterError {
    /// No NATS server could be reached.
    Connect(String),
    /// The stream, a consumer or the nodes' bucket could not be read or
    /// made (JetStream without quorum, for one).
    Stream(String),
    /// A message of the stream is not an event record.
    Record(String),
    /// The local store failed.
    Store(StoreError),
    /// The cluster's runtime could not start.
    Runtime(std::io::Error),
}

impl ClusterError {
    /// A stable name.
    pub fn as_str(&self) -> &'static str {
        match self {
            ClusterError::Connect(_) => "connect",
            ClusterError::Stream(_) => "stream",
            ClusterError::Record(_) => "record",
            ClusterError::Store(_) => "store",
            ClusterError::Runtime(_) => "runtime",
        }
    }
}

impl std::fmt::Display for ClusterError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ClusterError::Connect(e) => write!(f, "cannot reach NATS: {e}"),
            ClusterError::Stream(e) => write!(f, "JetStream: {e}"),
            ClusterError::Record(e) => write!(f, "a stream message is not an event: {e}"),
            ClusterError::Store(e) => write!(f, "{e}"),
            ClusterError::Runtime(e) => write!(f, "cannot start the cluster's runtime: {e}"),
        }
    }
}

impl std::error::Error for ClusterError {}

impl From<StoreError> for ClusterError {
    fn from(e: StoreError) -> Self {
        ClusterError::Store(e)
    }
}
