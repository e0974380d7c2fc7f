//! The reported peak ([`replay::reported_peak`]), how many moments reach
//! it ([`replay::peak_moments`]) and the allocator's last reserved figure,
//! from one walk: each was a walk of its own over the allocator's samples
//! (an XSpace allocator reports one per event, each decoded from its
//! compact form at ~77 instructions) or over the replayed points. Three
//! walks of 660,000 samples were a third of `summary`'s analysis besides
//! the landmarks. The walk reads the allocated figures a block of samples
//! at a time ([`crate::model::AllocatorSamples::for_each_allocated`]), and
//! the last reserved figure is looked for from the end, past blocks that
//! have none.

use crate::model::Memory;

use super::replay::{self, Peak, Ties};

/// What [`walk`] finds.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PeakWalk {
    /// As [`replay::reported_peak`].
    pub peak: Peak,
    /// As [`replay::peak_moments`] of `peak`.
    pub moments: usize,
    /// Where the samples were walked (an allocator reporting at every
    /// event): the last reserved figure of any sample, `Some(None)` when
    /// none has one; `None` where they were not walked.
    pub last_reserved: Option<Option<u64>>,
}

/// The highest figure seen so far and the runs of consecutive figures at
/// it, each after a lower one: [`replay::peak_moments`] counted as the
/// figures come, before the peak is known.
#[derive(Default)]
struct Runs {
    highest: Option<u64>,
    runs: usize,
    previous: Option<u64>,
}

impl Runs {
    fn see(&mut self, bytes: u64) {
        match self.highest {
            Some(h) if bytes < h => {}
            Some(h) if bytes == h => {
                if self.previous != Some(h) {
                    self.runs += 1;
                }
            }
            _ => {
                self.highest = Some(bytes);
                self.runs = 1;
            }
        }
        self.previous = Some(bytes);
    }

    /// The moments at `bytes`: the runs at the highest figure when it is
    /// that, else 1 (a peak above every figure — the live allocations'
    /// total over the allocator's — is reached once, as `peak_moments`
    /// says of a peak no figure equals).
    fn moments_at(&self, bytes: u64) -> usize {
        match self.highest {
            Some(h) if h == bytes => self.runs.max(1),
            _ => 1,
        }
    }
}

/// [`replay::reported_peak`] and [`replay::peak_moments`] of it from one
/// walk, with the last reserved figure where the samples are walked.
pub fn walk(memory: &Memory, ties: Ties) -> Option<PeakWalk> {
    // As `reported_peak`: a compiled program's peak is the first position
    // its heap reaches it.
    let ties = if memory.program.is_some() {
        Ties::First
    } else {
        ties
    };
    // Only an allocator that reports its state at every event has a peak
    // of its own (`reported_peak`).
    let dense = replay::samples_every_event(memory);
    let mut best: Option<(usize, u64)> = None;
    let mut runs = Runs::default();
    if dense {
        // The allocated figure of each sample, a block of samples at a
        // time, not each sample decoded.
        memory.allocator_samples.for_each_allocated(|i, bytes| {
            let Some(bytes) = bytes else {
                return;
            };
            runs.see(bytes);
            let better = match (best, ties) {
                (None, _) => true,
                (Some((_, b)), Ties::First) => bytes > b,
                (Some((_, b)), Ties::Last) => bytes >= b,
            };
            if better {
                best = Some((i, bytes));
            }
        });
    }
    let last_reserved = dense.then(|| memory.allocator_samples.last_reserved_bytes());
    if let Some((sample, bytes)) = best {
        let index = replay::point_of_sample(memory, sample);
        let point = replay::point_at(memory, index)?;
        let peak = Peak {
            point,
            // As `reported_peak`: never below the live allocations (with
            // `Ties::Last`, XProf's figure as it is).
            bytes: match ties {
                Ties::First => bytes.max(point.bytes),
                Ties::Last => bytes,
            },
            sample: Some(sample),
        };
        return Some(PeakWalk {
            peak,
            moments: runs.moments_at(peak.bytes),
            last_reserved,
        });
    }
    // The replayed peak: the first (or last) point with the most live
    // bytes, and its moments among the points.
    let mut best: Option<replay::Point> = None;
    let mut runs = Runs::default();
    replay::for_each_point(memory, |p| {
        runs.see(p.bytes);
        let better = match (best, ties) {
            (None, _) => true,
            (Some(b), Ties::First) => p.bytes > b.bytes,
            (Some(b), Ties::Last) => p.bytes >= b.bytes,
        };
        if better {
            best = Some(p);
        }
    });
    let point = best?;
    Some(PeakWalk {
        peak: Peak {
            point,
            bytes: point.bytes,
            sample: None,
        },
        moments: runs.moments_at(point.bytes),
        last_reserved,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{
        AllocId, Allocation, AllocatorSample, Axis, Event, EventKind, MemoryKind, SiteId,
    };

    /// A memory of `sizes` allocated in turn, each freed after the next
    /// (so the live bytes rise and fall), with or without a sample per
    /// event whose in-use figure is `reported`.
    fn memory(sizes: &[u64], reported: Option<&[Option<u64>]>) -> Memory {
        let mut m = Memory::new("m", MemoryKind::Allocator, Axis::TimePs);
        let mut at = 0;
        for (i, &bytes) in sizes.iter().enumerate() {
            m.push_allocation(Allocation {
                bytes,
                requested: bytes,
                count: 1,
                address: None,
                site: SiteId(0),
            });
            at += 10;
            m.events
                .push(Event::new(at, EventKind::Alloc, AllocId(i as u32)));
            if i > 0 {
                at += 10;
                m.events
                    .push(Event::new(at, EventKind::Free, AllocId(i as u32 - 1)));
            }
        }
        if let Some(reported) = reported {
            let events = m.events.clone();
            for (e, figure) in events.iter().zip(reported.iter().cycle()) {
                let s = AllocatorSample::new(e.at)
                    .with_allocated_bytes(*figure)
                    .with_reserved_bytes(figure.map(|f| f * 2));
                m.allocator_samples.push(s);
            }
        }
        m
    }

    /// The one walk finds what the separate walks found: the peak, its
    /// moments (tied peaks included) and the last reserved figure, for
    /// either rule of ties, with and without the allocator's figures.
    #[test]
    fn one_walk_finds_what_the_separate_walks_found() {
        let sizes: &[&[u64]] = &[
            &[5, 9, 3, 9, 9, 2],
            &[1, 2, 3],
            &[7, 7, 7, 7],
            &[4],
            &[3, 8, 1, 8, 2, 8],
        ];
        let figures: &[Option<&[Option<u64>]>] = &[
            None,
            Some(&[Some(10), Some(30), None, Some(30), Some(5)]),
            Some(&[None]),
            Some(&[Some(1), Some(2), Some(2), Some(1)]),
            Some(&[Some(1)]),
        ];
        for sizes in sizes {
            for reported in figures {
                let m = memory(sizes, *reported);
                for ties in [Ties::First, Ties::Last] {
                    let walked = walk(&m, ties).unwrap();
                    let peak = replay::reported_peak(&m, ties).unwrap();
                    assert_eq!(walked.peak, peak, "{sizes:?} {reported:?} {ties:?}");
                    assert_eq!(
                        walked.moments,
                        replay::peak_moments(&m, &peak),
                        "{sizes:?} {reported:?} {ties:?}"
                    );
                    let reserved = m
                        .allocator_samples
                        .iter()
                        .rev()
                        .find_map(|s| s.reserved_bytes());
                    assert_eq!(
                        walked.last_reserved,
                        replay::samples_every_event(&m).then_some(reserved)
                    );
                }
            }
        }
    }
}
