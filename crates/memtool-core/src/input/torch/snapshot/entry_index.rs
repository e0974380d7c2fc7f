//! The trace entry of each event, kept in about a byte per event.
//!
//! A snapshot's events sit on the event-index axis only when some `alloc`
//! or `free_completed` entry has no `time_us`, which is known once the whole
//! trace is read; until then every event's entry index is kept. Indices
//! only grow, and consecutive events are a few entries apart (a
//! `free_requested` or a segment event between them), so each is kept as
//! the gap from the one before: a byte, with the rare larger gap (or an
//! index that goes back, which the reader never makes) kept whole on the
//! side. Eight bytes per event were a fifth of a snapshot's model.

/// A gap byte that says "the index is the next one in `far`".
const FAR: u8 = u8::MAX;

/// Entry indices in the order they were pushed (see the module's text).
#[derive(Default)]
pub(super) struct EntryIndices {
    gaps: Vec<u8>,
    /// The indices whose gap byte is [`FAR`], in order.
    far: Vec<u64>,
    last: u64,
}

impl EntryIndices {
    pub(super) fn push(&mut self, index: u64) {
        match index.checked_sub(self.last).map(u8::try_from) {
            Some(Ok(gap)) if gap != FAR => self.gaps.push(gap),
            _ => {
                self.gaps.push(FAR);
                self.far.push(index);
            }
        }
        self.last = index;
    }

    /// The indices, in the order they were pushed.
    pub(super) fn iter(&self) -> impl Iterator<Item = u64> + '_ {
        let mut far = self.far.iter();
        let mut last = 0u64;
        self.gaps.iter().map(move |&gap| {
            last = if gap == FAR {
                // `push` adds one to `far` with every FAR byte.
                far.next().copied().unwrap_or(last)
            } else {
                last + u64::from(gap)
            };
            last
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn indices_come_back_as_pushed() {
        // Gaps of 0, 1, 254 (the largest kept in a byte), 255 and more
        // (kept whole), a first index far from 0, an index that goes back
        // and the largest index.
        let pushed = [
            1_000u64,
            1_000,
            1_001,
            1_255,
            1_510,
            1_511,
            70_000,
            69_999,
            70_253,
            u64::MAX,
            u64::MAX,
        ];
        let mut kept = EntryIndices::default();
        for &i in &pushed {
            kept.push(i);
        }
        assert_eq!(kept.iter().collect::<Vec<_>>(), pushed);
        // 1_000, 1_510 (gap 255), 70_000, 69_999, u64::MAX are kept whole.
        assert_eq!(kept.far, [1_000, 1_510, 70_000, 69_999, u64::MAX]);
        assert_eq!(kept.gaps.len(), pushed.len());
    }

    #[test]
    fn nothing_pushed_gives_nothing() {
        assert_eq!(EntryIndices::default().iter().count(), 0);
    }
}
