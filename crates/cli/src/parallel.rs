//! Order-preserving parallel map over a batch, on scoped threads.

use std::sync::atomic::{AtomicUsize, Ordering};

/// Items a worker claims at a time.
const CLAIM: usize = 16;

/// Applies `f` to every item on `threads` threads; results keep input order.
pub fn map<T: Sync, R: Send>(items: &[T], threads: usize, f: impl Fn(&T) -> R + Sync) -> Vec<R> {
    if threads <= 1 || items.len() <= CLAIM {
        return items.iter().map(&f).collect();
    }
    let next = AtomicUsize::new(0);
    let parts: Vec<Vec<(usize, R)>> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                scope.spawn(|| {
                    let mut done = Vec::new();
                    loop {
                        let start = next.fetch_add(CLAIM, Ordering::Relaxed);
                        if start >= items.len() {
                            return done;
                        }
                        let end = (start + CLAIM).min(items.len());
                        for (i, item) in items[start..end].iter().enumerate() {
                            done.push((start + i, f(item)));
                        }
                    }
                })
            })
            .collect();
        workers
            .into_iter()
            .map(|w| w.join().expect("worker panicked"))
            .collect()
    });
    let mut slots: Vec<Option<R>> = (0..items.len()).map(|_| None).collect();
    for (i, r) in parts.into_iter().flatten() {
        slots[i] = Some(r);
    }
    slots
        .into_iter()
        .map(|r| r.expect("every item mapped"))
        .collect()
}

/// Worker threads to use when the user did not say: all cores.
pub fn default_threads(requested: Option<usize>) -> usize {
    requested
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
        .max(1)
}

#[cfg(test)]
mod tests {
    #[test]
    fn keeps_order() {
        let items: Vec<u32> = (0..1000).collect();
        for threads in [1, 2, 3, 8] {
            assert_eq!(
                super::map(&items, threads, |x| x * 2),
                items.iter().map(|x| x * 2).collect::<Vec<_>>()
            );
        }
    }
}
