//! Stage 1, `nostrwire.v2`: the dictionary sets the store compresses
//! records with, named by the SHA-256 of their files (`spec/transport.md`
//! §6.2). Served at `GET /dictionaries/<hex>`, listed in NIP-11, announced
//! to every v2 connection when it opens and again when the store trains a
//! set.
//!
//! A store keeps its set for good once it has one, so every set seen here
//! stays served: records naming it stay on disk.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use nostrwire_wire::transport::SetHash;
use sha2::{Digest, Sha256};
use tokio::sync::watch;

use crate::store::EventStore;

/// URL path under which sets are served.
pub const PATH: &str = "/dictionaries/";

/// One set file, as stored.
#[derive(Debug)]
pub struct SetFile {
    /// SHA-256 of `bytes`.
    pub hash: SetHash,
    /// `hash` as lowercase hex (its URL and NIP-11 name).
    pub hex: String,
    /// The set file (`spec/nwb.md` §11.2), exactly as the store holds it.
    pub bytes: Arc<[u8]>,
}

/// The sets the relay serves, and the one new records are compressed with.
#[derive(Debug)]
pub struct Dictionaries {
    /// Every set served, the current one last.
    sets: RwLock<Vec<Arc<SetFile>>>,
    /// The first 8 bytes of the current set's hash (0: none), read on every
    /// delivery to decide what a client can be sent.
    current_tag: AtomicU64,
    current: watch::Sender<Option<SetHash>>,
}

/// The 8-byte tag of a set's hash (never 0 for a real hash in practice;
/// a hash whose first 8 bytes are zero would only mean records go out
/// uncompressed).
pub fn tag(hash: &SetHash) -> u64 {
    u64::from_le_bytes(hash[..8].try_into().expect("8 bytes"))
}

impl Dictionaries {
    /// The sets of `store` now.
    pub fn new(store: &dyn EventStore) -> Dictionaries {
        let dictionaries = Dictionaries {
            sets: RwLock::default(),
            current_tag: AtomicU64::new(0),
            current: watch::Sender::new(None),
        };
        dictionaries.refresh(store);
        dictionaries
    }

    /// Takes up the store's set if it changed (it trained one); returns
    /// whether it did.
    pub fn refresh(&self, store: &dyn EventStore) -> bool {
        let Some(bytes) = store.dictionary_file() else {
            return false;
        };
        {
            let sets = self.sets.read().unwrap_or_else(|e| e.into_inner());
            if sets.last().is_some_and(|s| Arc::ptr_eq(&s.bytes, &bytes)) {
                return false;
            }
        }
        let hash: SetHash = Sha256::digest(&bytes).into();
        let file = Arc::new(SetFile {
            hash,
            hex: hex(&hash),
            bytes,
        });
        {
            let mut sets = self.sets.write().unwrap_or_else(|e| e.into_inner());
            sets.retain(|s| s.hash != hash);
            sets.push(file);
        }
        self.current_tag.store(tag(&hash), Ordering::Release);
        self.current.send_replace(Some(hash));
        tracing::info!(set = %hex(&hash), "dictionary set served for nostrwire.v2");
        true
    }

    /// The set new records are compressed with.
    pub fn current(&self) -> Option<SetHash> {
        *self.current.borrow()
    }

    /// The tag of the current set (0: none).
    pub fn current_tag(&self) -> u64 {
        self.current_tag.load(Ordering::Acquire)
    }

    /// Told of every change of the current set.
    pub fn subscribe(&self) -> watch::Receiver<Option<SetHash>> {
        self.current.subscribe()
    }

    /// The set named `hex` (64 lowercase hex digits), if served.
    pub fn get(&self, hex: &str) -> Option<Arc<SetFile>> {
        self.sets
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .find(|s| s.hex == hex)
            .cloned()
    }

    /// Whether `hash` names a served set.
    pub fn serves(&self, hash: &SetHash) -> bool {
        self.sets
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .any(|s| s.hash == *hash)
    }

    /// The names of the served sets, the current one first (NIP-11).
    pub fn names(&self) -> Vec<String> {
        self.sets
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .rev()
            .map(|s| s.hex.clone())
            .collect()
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Bytes of a set one fetch writes at a time.
pub const FETCH_CHUNK: usize = 64 << 10;

/// What fetches of sets (`GET /dictionaries/<hex>`) hold while their
/// writes are in flight, within `limits.dictionary_fetch_bytes`. A fetch
/// writes slices of the shared set, never a copy: per fetch, at most one
/// chunk is in flight, the room it holds here until the client's socket
/// took it, so fetchers that do not read hold the budget, not the relay's
/// memory, and the next fetches wait for room.
#[derive(Debug)]
pub struct Fetches {
    room: Arc<Semaphore>,
    cap: usize,
}

impl Fetches {
    /// A budget of `cap` bytes (at least one chunk).
    pub fn new(cap: usize) -> Fetches {
        let cap = cap.clamp(FETCH_CHUNK, Semaphore::MAX_PERMITS);
        Fetches {
            room: Arc::new(Semaphore::new(cap)),
            cap,
        }
    }

    /// Waits for room for a chunk of `n` bytes (at most [`FETCH_CHUNK`]),
    /// held until the returned permit is dropped.
    pub async fn hold(&self, n: usize) -> OwnedSemaphorePermit {
        let n = n.min(FETCH_CHUNK) as u32;
        self.room
            .clone()
            .acquire_many_owned(n)
            .await
            .expect("the fetch budget is never closed")
    }

    /// Bytes held now.
    pub fn held(&self) -> usize {
        self.cap - self.room.available_permits()
    }

    /// Appends the budget's figures to a `/metrics` page.
    pub fn render_metrics(&self, out: &mut String) {
        use std::fmt::Write as _;
        let _ = write!(
            out,
            "# HELP nostrwire_dictionary_fetch_bytes Bytes of dictionary sets in flight to fetching clients (limits.dictionary_fetch_bytes counts them).\n\
             # TYPE nostrwire_dictionary_fetch_bytes gauge\nnostrwire_dictionary_fetch_bytes {}\n\
             # HELP nostrwire_dictionary_fetch_cap_bytes limits.dictionary_fetch_bytes as in effect.\n\
             # TYPE nostrwire_dictionary_fetch_cap_bytes gauge\nnostrwire_dictionary_fetch_cap_bytes {}\n",
            self.held(),
            self.cap
        );
    }
}
