//! Ordered parallel map over a slice on scoped threads (the caller's thread
//! is one of them), for work done with the GIL released.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

/// The number of threads to use: `requested`, else every core.
pub(crate) fn threads(requested: Option<usize>) -> usize {
    requested
        .unwrap_or_else(|| {
            std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(1)
        })
        .max(1)
}

/// `f` applied to blocks of `block` items, results in input order. Threads
/// take blocks from a shared counter, so uneven items (a 400 KB follow list
/// among short notes) do not leave a thread idle. `f` gets a whole block so
/// that it can keep per-block state (a zstd context).
pub(crate) fn map_blocks<T, R, F>(items: &[T], threads: usize, block: usize, f: F) -> Vec<R>
where
    T: Sync,
    R: Send,
    F: Fn(&[T]) -> Vec<R> + Sync,
{
    let block = block.max(1);
    let blocks = items.len().div_ceil(block);
    let threads = threads.min(blocks);
    if threads <= 1 {
        return items.chunks(block).flat_map(&f).collect();
    }
    let next = AtomicUsize::new(0);
    let done: Mutex<Vec<(usize, Vec<R>)>> = Mutex::new(Vec::with_capacity(blocks));
    let work = || loop {
        let i = next.fetch_add(1, Ordering::Relaxed);
        if i >= blocks {
            break;
        }
        let end = ((i + 1) * block).min(items.len());
        let out = f(&items[i * block..end]);
        done.lock().expect("no panics while held").push((i, out));
    };
    std::thread::scope(|s| {
        for _ in 1..threads {
            s.spawn(work);
        }
        work();
    });
    let mut done = done.into_inner().expect("no panics while held");
    done.sort_unstable_by_key(|(i, _)| *i);
    done.into_iter().flat_map(|(_, out)| out).collect()
}
