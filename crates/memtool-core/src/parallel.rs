//! Running independent pieces of work (one input file each) on threads of
//! their own, with results in the order the work was given, so output never
//! depends on which thread finished first.

/// `f` applied to each item, one scoped thread per item, results in item
/// order. A panic in a worker resumes in the caller.
pub fn map_in_order<T: Send, R: Send>(items: Vec<T>, f: impl Fn(T) -> R + Sync) -> Vec<R> {
    if items.len() <= 1 {
        return items.into_iter().map(f).collect();
    }
    let f = &f;
    std::thread::scope(|scope| {
        let workers: Vec<_> = items
            .into_iter()
            .map(|item| scope.spawn(move || f(item)))
            .collect();
        workers
            .into_iter()
            .map(|w| {
                w.join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
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
