//! Canonical decoding: any accepted record is the one encoding of its event,
//! so decode → encode gives back exactly the input, through the owned event
//! and through canonical JSON alike.
#![no_main]

use libfuzzer_sys::fuzz_target;
use nostrwire_event::{EventRef, SignedFields};
use nostrwire_wire::{encode_event, encode_json_event, EventView};

fuzz_target!(|data: &[u8]| {
    let Ok(view) = EventView::decode(data) else {
        return;
    };
    assert_eq!(encode_event(&view.to_event()), data);
    let json = view.to_json();
    let event = EventRef::parse(json.as_bytes()).expect("canonical JSON of a decoded record parses");
    assert_eq!(encode_json_event(&event), data);
});
