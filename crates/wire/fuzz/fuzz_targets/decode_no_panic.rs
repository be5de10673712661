//! Any bytes: every decoder returns, never panics, and never allocates past
//! its limits (the fuzzer's RSS limit catches that).
#![no_main]

use libfuzzer_sys::fuzz_target;
use nostrwire_event::{PreimageFields, SignedFields};
use nostrwire_wire::compress::{DictSet, RecordDecompressor};
use nostrwire_wire::frame::{split_frame, FrameReader};
use nostrwire_wire::{peek_kind_and_pubkey, EventView, Limits};

fuzz_target!(|data: &[u8]| {
    let limits = Limits::DEFAULT;
    if let Ok(view) = EventView::decode_with(data, &limits) {
        // Accessors of an accepted record never fail.
        let _ = view.compute_id();
        let _ = view.to_json();
        let _ = view.to_event();
        for tag in view.tags() {
            let _ = tag.first_value();
        }
    }
    let _ = peek_kind_and_pubkey(data);
    let _ = split_frame(data, limits.max_record_bytes);
    let mut frames = FrameReader::new(data, 1 << 16);
    while let Ok(Some(_)) = frames.next_frame() {}
    let _ = DictSet::from_bytes(data);
    if let Ok(mut d) = RecordDecompressor::new(None) {
        if let Ok(record) = d.record(data, &limits) {
            let _ = EventView::decode_with(record, &limits);
        }
    }
});
