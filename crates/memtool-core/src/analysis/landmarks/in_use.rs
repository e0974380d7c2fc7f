//! The bytes in use after each event, as the landmarks read them: four
//! bytes an event where eight held it. Values are stored as offsets from
//! the lowest of their block of [`BLOCK`] events, a block whose values
//! span more than 4 GiB whole. The landmarks' walk writes one value per
//! event of the memory, the largest thing they hold: at eight bytes it was
//! a sixth of an XSpace `summary`'s peak memory, and fresh memory costs
//! time as well as room (each page faulted in; ~0.75 ms per MiB on the
//! machine of BENCHMARKS.md Run AB-xspace).

/// Events a block holds.
const BLOCK_SHIFT: u32 = 12;
const BLOCK: usize = 1 << BLOCK_SHIFT;

#[derive(Clone, Copy, Debug)]
enum Block {
    /// Its values are `base` plus their `narrow` offsets.
    Narrow { base: u64 },
    /// Its values are in `wide`, from `at`.
    Wide { at: usize },
}

/// Bytes in use after each event, read by position ([`InUse::get`]) or
/// scanned for the first highest or lowest of a stretch.
#[derive(Debug, Default)]
pub(super) struct InUse {
    blocks: Vec<Block>,
    /// An offset per event (zero in wide blocks): as many as there are
    /// values.
    narrow: Vec<u32>,
    wide: Vec<u64>,
}

/// Makes an [`InUse`] from its values in event order.
pub(super) struct InUseBuilder {
    done: InUse,
    /// The values of the block being filled.
    block: Vec<u64>,
}

impl InUseBuilder {
    pub(super) fn with_capacity(events: usize) -> InUseBuilder {
        InUseBuilder {
            done: InUse {
                blocks: Vec::with_capacity(events.div_ceil(BLOCK)),
                narrow: Vec::with_capacity(events),
                wide: Vec::new(),
            },
            block: Vec::with_capacity(BLOCK.min(events)),
        }
    }

    /// The value after the next event.
    #[inline]
    pub(super) fn push(&mut self, bytes: u64) {
        self.block.push(bytes);
        if self.block.len() == BLOCK {
            self.flush();
        }
    }

    fn flush(&mut self) {
        let (Some(&low), Some(&high)) = (self.block.iter().min(), self.block.iter().max()) else {
            return;
        };
        let done = &mut self.done;
        if high - low <= u64::from(u32::MAX) {
            done.blocks.push(Block::Narrow { base: low });
            done.narrow
                .extend(self.block.iter().map(|&v| (v - low) as u32));
        } else {
            done.blocks.push(Block::Wide {
                at: done.wide.len(),
            });
            done.wide.extend_from_slice(&self.block);
            done.narrow.extend(std::iter::repeat_n(0, self.block.len()));
        }
        self.block.clear();
    }

    pub(super) fn finish(mut self) -> InUse {
        self.flush();
        self.done
    }
}

impl InUse {
    #[cfg(test)]
    pub(super) fn of(values: impl IntoIterator<Item = u64>) -> InUse {
        let mut built = InUseBuilder::with_capacity(0);
        for v in values {
            built.push(v);
        }
        built.finish()
    }

    /// The bytes in use after event `i` (`i` below the number of values).
    #[inline]
    pub(super) fn get(&self, i: usize) -> u64 {
        match self.blocks[i >> BLOCK_SHIFT] {
            Block::Narrow { base } => base + u64::from(self.narrow[i]),
            Block::Wide { at } => self.wide[at + (i & (BLOCK - 1))],
        }
    }

    /// The first event of `first..=last` (`last` held to the last event)
    /// where most is in use, and that much; `(first, 0)` where nothing
    /// is in use there, or the stretch is empty.
    pub(super) fn highest(&self, first: usize, last: usize) -> (usize, u64) {
        self.first_extreme(
            first,
            last,
            0,
            |v, best| v > best,
            |o| o.iter().max().copied(),
        )
    }

    /// The first event of `first..=last` (held to the last event) where
    /// the least is in use, and that much; `(first, u64::MAX)` where the
    /// stretch is empty.
    pub(super) fn lowest(&self, first: usize, last: usize) -> (usize, u64) {
        self.first_extreme(
            first,
            last,
            u64::MAX,
            |v, best| v < best,
            |o| o.iter().min().copied(),
        )
    }

    /// The first event of `first..=last` whose value is `better` than every
    /// one before it, starting from `(first, start)`: a block at a time,
    /// a narrow block's `extreme` offset found in one pass (which the
    /// compiler vectorizes) and then its first place.
    fn first_extreme(
        &self,
        first: usize,
        last: usize,
        start: u64,
        better: impl Fn(u64, u64) -> bool,
        extreme: impl Fn(&[u32]) -> Option<u32>,
    ) -> (usize, u64) {
        let mut best = (first, start);
        let end = last.saturating_add(1).min(self.narrow.len());
        let mut at = first;
        while at < end {
            let block_start = at & !(BLOCK - 1);
            let stop = (block_start + BLOCK).min(end);
            match self.blocks[at >> BLOCK_SHIFT] {
                Block::Narrow { base } => {
                    let offsets = &self.narrow[at..stop];
                    if let Some(offset) = extreme(offsets) {
                        let v = base + u64::from(offset);
                        if better(v, best.1) {
                            let j = offsets.iter().position(|&o| o == offset).unwrap_or(0);
                            best = (at + j, v);
                        }
                    }
                }
                Block::Wide { at: w } => {
                    let values = &self.wide[w + (at - block_start)..w + (stop - block_start)];
                    for (j, &v) in values.iter().enumerate() {
                        if better(v, best.1) {
                            best = (at + j, v);
                        }
                    }
                }
            }
            at = stop;
        }
        best
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `highest` and `lowest` as a scan of the values one by one finds them.
    fn scanned(values: &[u64], first: usize, last: usize) -> ((usize, u64), (usize, u64)) {
        let (mut high, mut low) = ((first, 0), (first, u64::MAX));
        for (i, &v) in values
            .iter()
            .enumerate()
            .take(last.saturating_add(1))
            .skip(first)
        {
            if v > high.1 {
                high = (i, v);
            }
            if v < low.1 {
                low = (i, v);
            }
        }
        (high, low)
    }

    #[test]
    fn every_value_reads_back_and_stretches_scan_as_one_by_one() {
        let n = 3 * BLOCK + 17;
        // Narrow blocks around different bases, one block spanning more
        // than 4 GiB (stored whole), repeated values for first-of-equals.
        let values: Vec<u64> = (0..n)
            .map(|i| match i / BLOCK {
                0 => (i % 97) as u64 * 1000,
                1 => 1 << 40 | (i % 13) as u64,
                2 if i % 500 == 0 => 7 << 33,
                2 => 5,
                _ => u64::from(u32::MAX) + (i % 7) as u64,
            })
            .collect();
        let in_use = InUse::of(values.iter().copied());
        assert_eq!(in_use.narrow.len(), n);
        assert!(matches!(in_use.blocks[2], Block::Wide { .. }));
        assert!(matches!(in_use.blocks[1], Block::Narrow { .. }));
        for (i, &v) in values.iter().enumerate() {
            assert_eq!(in_use.get(i), v, "{i}");
        }
        let edges = [
            0,
            1,
            96,
            97,
            BLOCK - 1,
            BLOCK,
            BLOCK + 1,
            2 * BLOCK + 499,
            2 * BLOCK + 500,
            3 * BLOCK,
            n - 1,
            n,
            n + 5,
        ];
        for &first in &edges {
            for &last in &edges {
                let (high, low) = scanned(&values, first, last);
                assert_eq!(in_use.highest(first, last), high, "{first}..={last}");
                assert_eq!(in_use.lowest(first, last), low, "{first}..={last}");
            }
        }
    }

    #[test]
    fn ties_across_blocks_and_in_a_whole_block_go_to_the_first() {
        // The highest recurs in every block, the last block is kept whole
        // (zeros beside 16 GiB): each stretch's first of them is found.
        let high = 1u64 << 34;
        let values: Vec<u64> = (0..3 * BLOCK)
            .map(|i| match (i / BLOCK, i % BLOCK) {
                (_, 7 | 100) => high,
                (2, _) => 0,
                _ => high - 1,
            })
            .collect();
        let in_use = InUse::of(values.iter().copied());
        assert!(matches!(in_use.blocks[2], Block::Wide { .. }));
        for (first, last) in [
            (0, 3 * BLOCK),
            (8, 3 * BLOCK),
            (BLOCK + 8, 3 * BLOCK),
            (2 * BLOCK, 3 * BLOCK),
        ] {
            let (high, low) = scanned(&values, first, last);
            assert_eq!(in_use.highest(first, last), high, "{first}..={last}");
            assert_eq!(in_use.lowest(first, last), low, "{first}..={last}");
        }
    }

    #[test]
    fn nothing_in_use_or_no_events() {
        let empty = InUse::of([]);
        assert_eq!(empty.narrow.len(), 0);
        assert_eq!(empty.highest(0, 0), (0, 0));
        assert_eq!(empty.lowest(0, 5), (0, u64::MAX));
        let zeros = InUse::of([0, 0, 0]);
        assert_eq!(zeros.highest(0, 2), (0, 0));
        assert_eq!(zeros.lowest(1, 2), (1, 0));
    }
}
