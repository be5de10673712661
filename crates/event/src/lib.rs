//! NIP-01 events for nostrwire.
//!
//! Stage 3→4 of the pipeline (bytes → frame → **codec → validated event** →
//! policy → storage / fan-out): strict JSON parsing into a zero-copy
//! [`EventRef`] or an owned [`Event`], canonical serialization, the event id,
//! BIP-340 signatures, [`Filter`]s and client/relay [`message`]s.
//!
//! ```
//! use nostrwire_event::{EventRef, PreimageFields, SignedFields};
//!
//! let line = br#"{"id":"29bf928a2081ec678312deba584106445ee3a731eb65f652676ec4d14e9cc28a","pubkey":"364ff74823ba9819d6b4da381b20bbce8e31e2abf5fbe298db62064aa8be7b73","created_at":1758667457,"kind":0,"tags":[],"content":"{\"name\":\"RSS-to-Nostr of MintPress News\",\"about\":\"RSS-to-Nostr feed of MintPress News\\nMore RSS-To-Nostr can be found in my following list\",\"website\":\"https://www.mintpressnews.com/\"}","sig":"3eac02f8b564cadc426dcc2097cfc930fb65117d2e30a4639e3b2eb703b3a9676835e6b914221a3230bbfd8bb33644bf75c49a4958433d54df27cbe75371216b"}"#;
//! let event = EventRef::parse(line)?;
//! event.verify()?; // id, then signature
//! assert_eq!(event.kind().as_u16(), 0);
//! # Ok::<(), nostrwire_event::Error>(())
//! ```
//!
//! Strictness choices (each with its own [`ErrorKind`]) are listed in the
//! crate README and pinned by `vectors/event/`.

#![warn(missing_docs)]

pub mod canonical;
mod error;
mod event;
mod filter;
pub mod hex;
pub mod json;
mod keys;
mod limits;
pub mod message;
mod reader;
mod types;

pub use canonical::{HashSink, PreimageFields, SignedFields};
pub use error::{Error, ErrorKind, Result};
pub use event::{Event, EventRef, RawTags, TagElements, TagIter, TagRef, UnsignedEvent};
pub use filter::{matches_any, Filter, TagCondition};
pub use json::{JsonStr, Sink};
pub use keys::{verify_signature, Keys};
pub use limits::Limits;
pub use message::{parse_event_line, ClientMessage, RelayMessage};
pub use types::{EventId, Kind, KindClass, PublicKey, Signature, Tag, Timestamp};
