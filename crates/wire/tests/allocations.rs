//! Allocation counts: encoding takes exactly one allocation (pre-sized, never
//! regrown), decoding to a view and computing the id from it take none.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use nostrwire_event::{EventRef, PreimageFields};
use nostrwire_wire::{encode_event, encode_json_event, EventView};

struct Counting;

thread_local! {
    static COUNT: Cell<usize> = const { Cell::new(0) };
}

// SAFETY: forwards to the system allocator; only counts calls per thread.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let _ = COUNT.try_with(|c| c.set(c.get() + 1));
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as the caller's.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let _ = COUNT.try_with(|c| c.set(c.get() + 1));
        // SAFETY: same contract as the caller's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

fn allocations<T>(f: impl FnOnce() -> T) -> (T, usize) {
    let before = COUNT.with(Cell::get);
    let value = f();
    (value, COUNT.with(Cell::get) - before)
}

const CORPUS: &str = include_str!("../../../testdata/real-events.jsonl");

#[test]
fn one_allocation_to_encode_none_to_decode_or_hash() {
    for (i, line) in CORPUS.lines().enumerate() {
        let event = EventRef::parse(line.as_bytes()).unwrap();
        let owned = event.to_event();
        let (record, n) = allocations(|| encode_json_event(&event));
        assert_eq!(n, 1, "event {i}: encoding from JSON allocated {n} times");
        let (again, n) = allocations(|| encode_event(&owned));
        assert_eq!(n, 1, "event {i}: encoding from Event allocated {n} times");
        assert_eq!(again, record);
        let ((), n) = allocations(|| {
            let view = EventView::decode(&record).unwrap();
            assert_eq!(view.compute_id(), owned.id);
        });
        assert_eq!(n, 0, "event {i}: decode + id allocated {n} times");
    }
}
