//! The nostrwire binary event format, **nwb**.
//!
//! A compact, versioned, canonical binary encoding of NIP-01 events. The
//! normative spec is `spec/nwb.md`; every encoder and decoder function links
//! to the section it implements.
//!
//! - [`encode_json_event`] / [`encode_event`]: JSON view or owned event →
//!   record, one pass, one allocation ([spec §3](https://github.com/nostrwire/nostrwire/blob/main/spec/nwb.md#3-event-record)).
//! - [`EventView::decode`]: record → verified zero-copy view with O(1)
//!   id/pubkey/sig/created_at/kind, lazy tags, content as `&str`, the id
//!   computed straight from the view and canonical JSON output (through
//!   [`PreimageFields`] and [`SignedFields`]).
//! - [`peek_kind_and_pubkey`] and friends: selective reads without decoding.
//! - [`frame`]: length-prefixed streams; [`compress`]: zstd records with
//!   trained per-kind dictionaries.
//! - [`transport`]: the binary client–relay WebSocket transport
//!   (`nostrwire.v1`), events as nwb records.
//!
//! ```
//! use nostrwire_event::{EventRef, SignedFields};
//! use nostrwire_wire::{encode_json_event, EventView};
//!
//! let json = br#"{"id":"29bf928a2081ec678312deba584106445ee3a731eb65f652676ec4d14e9cc28a","pubkey":"364ff74823ba9819d6b4da381b20bbce8e31e2abf5fbe298db62064aa8be7b73","created_at":1758667457,"kind":0,"tags":[],"content":"{\"name\":\"RSS-to-Nostr of MintPress News\",\"about\":\"RSS-to-Nostr feed of MintPress News\\nMore RSS-To-Nostr can be found in my following list\",\"website\":\"https://www.mintpressnews.com/\"}","sig":"3eac02f8b564cadc426dcc2097cfc930fb65117d2e30a4639e3b2eb703b3a9676835e6b914221a3230bbfd8bb33644bf75c49a4958433d54df27cbe75371216b"}"#;
//! let record = encode_json_event(&EventRef::parse(json)?);
//! let view = EventView::decode(&record)?;
//! view.verify()?; // id recomputed from the binary view, then the signature
//! assert_eq!(view.to_json().as_bytes(), &json[..]);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

#![warn(missing_docs)]

pub mod compress;
mod encode;
mod error;
pub mod frame;
mod layout;
mod limits;
pub mod transport;
mod unescape;
pub mod varint;
mod view;

pub use encode::{
    encode_event, encode_event_into, encode_json_event, encode_json_event_into, try_encode_event,
    try_encode_event_into,
};
pub use error::{Error, Result};
pub use layout::{
    is_hex_compactable, peek_created_at, peek_id, peek_kind, peek_kind_and_pubkey, peek_pubkey,
    peek_sig, COMPRESSED_V1, EVENT_V1, OFF_CREATED_AT, OFF_ID, OFF_KIND, OFF_PUBKEY, OFF_SIG,
    PREFIX_LEN,
};
pub use limits::Limits;
pub use nostrwire_event::{PreimageFields, SignedFields};
pub use view::{Elements, EventView, TagView, Tags, Value};
