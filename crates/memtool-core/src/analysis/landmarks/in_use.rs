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
    len: usize,
    blocks: Vec<Block>,
    /// An offset per event (zero in wide blocks).
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
                len: 0,
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
        done.len += self.block.len();
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

    /// The bytes in use after event `i` (`i` below [`InUse::len`]).
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
        let mut best = (first, 0);
        self.each_block(first, last, |at, block| match block {
            Stretch::Narrow(base, offsets) => {
                if let Some((j, high)) = first_highest(offsets) {
                    let high = base + u64::from(high);
                    if high > best.1 {
                        best = (at + j, high);
                    }
                }
            }
            Stretch::Wide(values) => {
                for (j, &v) in values.iter().enumerate() {
                    if v > best.1 {
                        best = (at + j, v);
                    }
                }
            }
        });
        best
    }

    /// The first event of `first..=last` (held to the last event) where
    /// the least is in use, and that much; `(first, u64::MAX)` where the
    /// stretch is empty.
    pub(super) fn lowest(&self, first: usize, last: usize) -> (usize, u64) {
        let mut best = (first, u64::MAX);
        self.each_block(first, last, |at, block| match block {
            Stretch::Narrow(base, offsets) => {
                if let Some((j, low)) = first_lowest(offsets) {
                    let low = base + u64::from(low);
                    if low < best.1 {
                        best = (at + j, low);
                    }
                }
            }
            Stretch::Wide(values) => {
                for (j, &v) in values.iter().enumerate() {
                    if v < best.1 {
                        best = (at + j, v);
                    }
                }
            }
        });
        best
    }

    /// `visit(first event, its block's part)` for each block's part of
    /// `first..=last`, in order.
    fn each_block(&self, first: usize, last: usize, mut visit: impl FnMut(usize, Stretch<'_>)) {
        let last = last.saturating_add(1).min(self.len);
        let mut at = first;
        while at < last {
            let index = at >> BLOCK_SHIFT;
            let start = index << BLOCK_SHIFT;
            let end = (start + BLOCK).min(last);
            match self.blocks[index] {
                Block::Narrow { base } => visit(at, Stretch::Narrow(base, &self.narrow[at..end])),
                Block::Wide { at: w } => visit(
                    at,
                    Stretch::Wide(&self.wide[w + (at - start)..w + (end - start)]),
                ),
            }
            at = end;
        }
    }
}

/// One block's part of a stretch.
enum Stretch<'a> {
    Narrow(u64, &'a [u32]),
    Wide(&'a [u64]),
}

/// The first position of the highest of `values`, and that value: the
/// highest found first (a pass the compiler vectorizes), then where.
fn first_highest(values: &[u32]) -> Option<(usize, u32)> {
    let high = *values.iter().max()?;
    values.iter().position(|&v| v == high).map(|j| (j, high))
}

/// [`first_highest`] for the lowest.
fn first_lowest(values: &[u32]) -> Option<(usize, u32)> {
    let low = *values.iter().min()?;
    values.iter().position(|&v| v == low).map(|j| (j, low))
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
        assert_eq!(in_use.len, n);
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
    fn nothing_in_use_or_no_events() {
        let empty = InUse::of([]);
        assert_eq!(empty.len, 0);
        assert_eq!(empty.highest(0, 0), (0, 0));
        assert_eq!(empty.lowest(0, 5), (0, u64::MAX));
        let zeros = InUse::of([0, 0, 0]);
        assert_eq!(zeros.highest(0, 2), (0, 0));
        assert_eq!(zeros.lowest(1, 2), (1, 0));
    }
}
