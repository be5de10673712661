//! Allocation counts per encode and decode, taken in a separate process so
//! that the timing process never counts.
//!
//! The counting allocator wraps the system allocator in every binary that
//! links this crate; it counts only after [`count`] switches it on, which the
//! timing process never does (its cost there is one predictable branch per
//! allocation). `nostrwire bench formats` re-runs itself with a hidden flag
//! to count and reads the result as JSON.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};

use nostrwire_event::Event;

use crate::formats;
use crate::run::Allocs;

struct Counting;

static ON: AtomicBool = AtomicBool::new(false);
static COUNT: AtomicU64 = AtomicU64::new(0);
static BYTES: AtomicU64 = AtomicU64::new(0);

// SAFETY: forwards to the system allocator unchanged; only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if ON.load(Relaxed) {
            COUNT.fetch_add(1, Relaxed);
            BYTES.fetch_add(layout.size() as u64, Relaxed);
        }
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as the caller's.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if ON.load(Relaxed) {
            COUNT.fetch_add(1, Relaxed);
            BYTES.fetch_add(new_size as u64, Relaxed);
        }
        // SAFETY: same contract as the caller's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Counts allocations of `f` (this thread's work; run single-threaded).
fn measure(f: impl FnOnce()) -> (u64, u64) {
    COUNT.store(0, Relaxed);
    BYTES.store(0, Relaxed);
    ON.store(true, Relaxed);
    f();
    ON.store(false, Relaxed);
    (COUNT.load(Relaxed), BYTES.load(Relaxed))
}

/// Counts allocations per encode (into a fresh `Vec`, as a caller without a
/// reusable buffer would) and per decode to the owned model, for every format.
pub fn count(events: &[Event]) -> anyhow::Result<Vec<Allocs>> {
    let n = events.len().max(1) as f64;
    let mut out = Vec::new();
    for f in formats::all() {
        let records: Vec<Vec<u8>> = events
            .iter()
            .map(|e| {
                let mut r = Vec::new();
                f.encode(e, &mut r);
                r
            })
            .collect();
        // Warm lazily built state (thread-local builders) outside the count.
        f.pass_encode(events);
        let (ea, eb) = measure(|| {
            for e in events {
                let mut r = Vec::new();
                f.encode(e, &mut r);
                std::hint::black_box(r);
            }
        });
        let (da, db) = measure(|| {
            for r in &records {
                std::hint::black_box(f.decode(r).expect("checked"));
            }
        });
        out.push(Allocs {
            format: f.name().to_string(),
            encode_allocs: ea as f64 / n,
            encode_bytes: eb as f64 / n,
            decode_allocs: da as f64 / n,
            decode_bytes: db as f64 / n,
        });
    }
    Ok(out)
}
