//! Running independent pieces of work (one input file each) on threads of
//! their own, with results in the order the work was given, so output never
//! depends on which thread finished first.

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

#[cfg(test)]
mod tests {
    #[test]
    fn results_come_in_item_order() {
        let out = super::map_in_order((0..8u64).collect(), |i| {
            // Later items finish first.
            std::thread::sleep(std::time::Duration::from_millis(8 - i));
            i * 10
        });
        assert_eq!(out, (0..8u64).map(|i| i * 10).collect::<Vec<_>>());
    }
}
