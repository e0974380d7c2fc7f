//! Running independent pieces of work (one input file each) on threads of
//! their own, with results in the order the work was given, so output never
//! depends on which thread finished first: [`map_in_order`], a thread per
//! item, for a few items (the two sides of a diff); [`map_bounded`], a pool of
//! at most `jobs` threads, for many (the hosts of a logdir, the ranks of a
//! job), so a thousand inputs never mean a thousand threads and their
//! memory at once.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

/// The number of threads a pool runs when the caller does not say: every
/// core the process may use (1 where that is not known). Asked once: the
/// standard library reads the process's cgroup files on every call (four
/// files; five calls in one `summary`).
pub fn default_jobs() -> usize {
    static JOBS: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *JOBS.get_or_init(|| std::thread::available_parallelism().map_or(1, usize::from))
}

/// The threads `jobs` asks for: `jobs` itself, or [`default_jobs`] for 0
/// (`--jobs 0`: every core).
pub fn threads(jobs: usize) -> usize {
    if jobs == 0 {
        default_jobs()
    } else {
        jobs
    }
}

/// `f` applied to each item by a pool of at most `jobs` threads (0: as many
/// as [`default_jobs`]), results in item order. Each thread takes the next
/// item when it is done with one, so at most `jobs` items are being worked
/// on at any moment: what `f` holds while it works (a whole profile) is
/// there `jobs` times at most, and what it returns (a summary) is all that
/// stays. The calling thread is one of the workers, so a pool whose threads
/// cannot be started (no memory left for their stacks) still finishes. A
/// panic in a worker resumes in the caller.
pub fn map_bounded<T: Send, R: Send>(
    items: Vec<T>,
    jobs: usize,
    f: impl Fn(T) -> R + Sync,
) -> Vec<R> {
    let jobs = threads(jobs);
    let count = items.len();
    if count <= 1 || jobs <= 1 {
        return items.into_iter().map(f).collect();
    }
    let slots: Vec<Mutex<Option<T>>> = items.into_iter().map(|i| Mutex::new(Some(i))).collect();
    let results: Vec<Mutex<Option<R>>> = (0..count).map(|_| Mutex::new(None)).collect();
    let next = AtomicUsize::new(0);
    let work = || loop {
        let i = next.fetch_add(1, Ordering::Relaxed);
        let Some(slot) = slots.get(i) else {
            break;
        };
        let item = slot.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(item) = item {
            let result = f(item);
            *results[i].lock().unwrap_or_else(|e| e.into_inner()) = Some(result);
        }
    };
    std::thread::scope(|scope| {
        let helpers: Vec<_> = (1..jobs.min(count))
            .filter_map(|_| std::thread::Builder::new().spawn_scoped(scope, work).ok())
            .collect();
        work();
        for helper in helpers {
            if let Err(panic) = helper.join() {
                std::panic::resume_unwind(panic);
            }
        }
    });
    results
        .into_iter()
        .map(|r| {
            r.into_inner()
                .unwrap_or_else(|e| e.into_inner())
                .expect("every item was taken by a worker, which stored its result")
        })
        .collect()
}

/// `f` applied to each item, one scoped thread per item, results in item
/// order. A panic in a worker resumes in the caller. An item whose thread
/// cannot be started (no memory left for its stack) runs on the caller's.
pub fn map_in_order<T: Send, R: Send>(items: Vec<T>, f: impl Fn(T) -> R + Sync) -> Vec<R> {
    if items.len() <= 1 {
        return items.into_iter().map(f).collect();
    }
    let f = &f;
    std::thread::scope(|scope| {
        let workers: Vec<_> = items
            .into_iter()
            .map(|item| {
                // The item comes back when the thread does not start.
                let slot = std::sync::Arc::new(std::sync::Mutex::new(Some(item)));
                let taken = std::sync::Arc::clone(&slot);
                let spawned = std::thread::Builder::new().spawn_scoped(scope, move || {
                    let item = taken.lock().unwrap_or_else(|e| e.into_inner()).take();
                    item.map(f)
                });
                (spawned.ok(), slot)
            })
            .collect();
        workers
            .into_iter()
            .map(|(worker, slot)| {
                let ran = worker.and_then(|w| {
                    w.join()
                        .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
                });
                ran.unwrap_or_else(|| {
                    let item = slot.lock().unwrap_or_else(|e| e.into_inner()).take();
                    f(item.expect("an item whose thread never ran is still in its slot"))
                })
            })
            .collect()
    })
}

/// `a` on a scoped thread of its own while the caller runs `b`: two
/// independent pieces of work of one input (`summary`'s landmarks beside
/// its other figures). Each result is what it would be on one thread. `a`
/// runs on the caller's thread, after `b`, when its thread cannot be
/// started (no memory left for its stack); a panic in it resumes in the
/// caller. `a`'s timing spans nest under the caller's open span.
pub fn join<A: Send, B>(a: impl FnOnce() -> A + Send, b: impl FnOnce() -> B) -> (A, B) {
    let depth = crate::timings::depth();
    // `a` comes back when its thread does not start.
    let slot = std::sync::Mutex::new(Some(a));
    std::thread::scope(|scope| {
        let spawned = std::thread::Builder::new().spawn_scoped(scope, || {
            let a = slot.lock().unwrap_or_else(|e| e.into_inner()).take();
            a.map(|a| crate::timings::nested_at(depth, a))
        });
        let b = b();
        let ran = spawned.ok().and_then(|worker| {
            worker
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
        });
        let a = ran.unwrap_or_else(|| {
            let a = slot.lock().unwrap_or_else(|e| e.into_inner()).take();
            a.expect("work whose thread never ran is still in its slot")()
        });
        (a, b)
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn join_gives_each_side_its_result() {
        let data: Vec<u64> = (1..=1000).collect();
        let (sum, max) = super::join(|| data.iter().sum::<u64>(), || data.iter().copied().max());
        assert_eq!((sum, max), (500_500, Some(1000)));
    }

    #[test]
    fn results_come_in_item_order() {
        let out = super::map_in_order((0..8u64).collect(), |i| {
            // Later items finish first.
            std::thread::sleep(std::time::Duration::from_millis(8 - i));
            i * 10
        });
        assert_eq!(out, (0..8u64).map(|i| i * 10).collect::<Vec<_>>());
    }

    #[test]
    fn a_bounded_pool_keeps_item_order_and_never_runs_more_than_jobs_at_once() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        let (running, most) = (AtomicUsize::new(0), AtomicUsize::new(0));
        let out = super::map_bounded((0..40u64).collect(), 3, |i| {
            let now = running.fetch_add(1, Ordering::SeqCst) + 1;
            most.fetch_max(now, Ordering::SeqCst);
            std::thread::sleep(std::time::Duration::from_millis(2 + (i % 3)));
            running.fetch_sub(1, Ordering::SeqCst);
            i * 10
        });
        assert_eq!(out, (0..40u64).map(|i| i * 10).collect::<Vec<_>>());
        let most = most.load(Ordering::SeqCst);
        assert!((2..=3).contains(&most), "{most} items at once with 3 jobs");
        // One job, and no items, need no thread.
        assert_eq!(super::map_bounded(vec![1, 2], 1, |i| i + 1), vec![2, 3]);
        assert!(super::map_bounded(Vec::<u8>::new(), 4, |i| i).is_empty());
    }
}
