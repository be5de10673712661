//! Any bytes: the event parser returns an error or an event, never panics;
//! an accepted event re-serializes to canonical JSON that parses back to the
//! same fields and id.
#![no_main]

use libfuzzer_sys::fuzz_target;
use nostrwire_event::{EventRef, Limits, PreimageFields, SignedFields};

fuzz_target!(|data: &[u8]| {
    let limits = Limits {
        max_tags: 64,
        max_tag_elements: 16,
        ..Limits::DEFAULT
    };
    let Ok(event) = EventRef::parse_with(data, &limits) else {
        return;
    };
    let canonical = event.to_json();
    let again =
        EventRef::parse_with(canonical.as_bytes(), &limits).expect("canonical output parses");
    assert_eq!(again.to_json(), canonical);
    assert_eq!(again.compute_id(), event.compute_id());
    let owned = event.to_event();
    assert_eq!(owned.to_json(), canonical);
    let _ = event.verify();
});
