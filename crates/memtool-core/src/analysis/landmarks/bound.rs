//! Which steps of a profile of many steps get their landmarks.
//!
//! A step's landmarks (the step, its phase spans, spike, cliffs and
//! recomputation waves) cost ~400 bytes and ~11,000 instructions each:
//! made for every step of a 30,000-step XSpace they were 150,000 landmarks,
//! half of `summary`'s time and a 72 MB JSON, and at 10^8 events they would
//! be ~20 GB. Past [`KEPT_STEPS`] steps, they are made only for the steps a
//! reader looks at; every step costs a few figures ([`StepFigures`]), which
//! choose them and count what the others would have had.

use super::per_step::StepFigures;

/// Steps whose landmarks are made, at most: every step of a profile of up
/// to this many gets them (so its landmarks are what they always were);
/// past it, the picks below, which add up to this: the first
/// `FIRST_STEPS` (the table's five and the first of its `+N more steps`
/// row), the last, the `HIGHEST_STEPS` highest and the last of the
/// highest, the `LARGEST_SPIKES` and `LARGEST_CLIFFS`, and up to
/// [`SPREAD_STEPS`] spread over the recording (the steps the page names).
/// Some are often the same step: fewer. ~300–500 landmarks, a few hundred
/// KB of JSON: nothing against a profile of more steps than this.
pub const KEPT_STEPS: usize =
    FIRST_STEPS + 1 + HIGHEST_STEPS + 1 + LARGEST_SPIKES + LARGEST_CLIFFS + SPREAD_STEPS;

/// The first steps kept: warm-up (the first step makes the optimizer's
/// state and compiles), the five steps the table lists and the first of
/// its `+N more steps` row.
const FIRST_STEPS: usize = 6;

/// The steps with the highest peaks kept: the memory's peak is in the
/// first of them, and the highest step past the table's first five (its
/// `+N more steps` row) among the first six.
const HIGHEST_STEPS: usize = 8;

/// The steps with the largest spikes kept, and those with the largest
/// cliffs.
const LARGEST_SPIKES: usize = 4;
const LARGEST_CLIFFS: usize = 4;

/// Steps spread evenly over the recording, at most: every
/// `steps.div_ceil(SPREAD_STEPS)`-th from the first, which are the steps
/// the page and the SVG name (`render`'s marks take the same rule).
pub const SPREAD_STEPS: usize = 40;

/// Which steps get their landmarks, by position: all of up to
/// [`KEPT_STEPS`]; else the first [`FIRST_STEPS`], the last, the
/// [`HIGHEST_STEPS`] with the highest peaks and the last of the highest
/// (equal peaks: the earliest first), the [`LARGEST_SPIKES`] with the
/// largest spikes and the [`LARGEST_CLIFFS`] with the largest cliffs
/// (likewise), and every `n.div_ceil(SPREAD_STEPS)`-th.
pub(super) fn chosen(figures: &[StepFigures]) -> Vec<bool> {
    let n = figures.len();
    if n <= KEPT_STEPS {
        return vec![true; n];
    }
    let mut keep = vec![false; n];
    keep[..FIRST_STEPS].fill(true);
    keep[n - 1] = true;
    for i in largest(figures, HIGHEST_STEPS, |f| f.peak) {
        keep[i] = true;
    }
    // The last of equal highest peaks: where `--xprof-compat` puts the peak.
    let highest = figures.iter().map(|f| f.peak).max().unwrap_or(0);
    if let Some(last) = figures.iter().rposition(|f| f.peak == highest) {
        keep[last] = true;
    }
    for i in largest(figures, LARGEST_SPIKES, |f| f.spike) {
        keep[i] = true;
    }
    for i in largest(figures, LARGEST_CLIFFS, |f| f.cliff) {
        keep[i] = true;
    }
    for i in (0..n).step_by(n.div_ceil(SPREAD_STEPS)) {
        keep[i] = true;
    }
    keep
}

/// The positions of the `k` steps with the largest `key` (over 0; equal
/// keys: the earliest first), in one pass that keeps the best `k` so far.
fn largest(figures: &[StepFigures], k: usize, key: impl Fn(&StepFigures) -> u64) -> Vec<usize> {
    // (key, position), best first.
    let mut best: Vec<(u64, usize)> = Vec::with_capacity(k + 1);
    for (i, f) in figures.iter().enumerate() {
        let v = key(f);
        // Not better than the worst kept (equal: that one is earlier).
        if v == 0 || (best.len() == k && best.last().is_some_and(|&(w, _)| v <= w)) {
            continue;
        }
        let at = best.partition_point(|&(w, _)| w >= v);
        best.insert(at, (v, i));
        best.truncate(k);
    }
    best.into_iter().map(|(_, i)| i).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn peaks(peaks: &[u64]) -> Vec<StepFigures> {
        peaks
            .iter()
            .map(|&peak| StepFigures {
                peak,
                ..StepFigures::default()
            })
            .collect()
    }

    #[test]
    fn the_largest_earliest_first() {
        let f = peaks(&[5, 9, 1, 9, 7, 0, 9]);
        assert_eq!(largest(&f, 2, |f| f.peak), [1, 3]);
        assert_eq!(largest(&f, 4, |f| f.peak), [1, 3, 6, 4]);
        // Nothing of 0.
        assert_eq!(largest(&f, 10, |f| f.peak), [1, 3, 6, 4, 0, 2]);
        assert!(largest(&f, 3, |f| f.spike).is_empty());
    }

    #[test]
    fn few_steps_are_all_kept() {
        assert_eq!(chosen(&peaks(&[1; KEPT_STEPS])), vec![true; KEPT_STEPS]);
    }

    #[test]
    fn many_steps_keep_the_first_the_last_the_highest_and_a_spread() {
        let n = 10_000;
        let mut f = peaks(&vec![10; n]);
        f[7_777].peak = 50;
        f[4_444].spike = 3;
        f[2_222].cliff = 8;
        let keep = chosen(&f);
        let kept: Vec<usize> = (0..n).filter(|&i| keep[i]).collect();
        // The first six, the last; the highest, then the earliest of equal
        // peaks (0 to 6); the spike's and the cliff's; every 250th (0 among
        // them): 6 + 1 + 2 + 2 + 39.
        assert_eq!(kept.len(), 50, "{kept:?}");
        for i in [0, 1, 5, 6, 7_777, 4_444, 2_222, 250, 9_750, n - 1] {
            assert!(keep[i], "step {i} not kept");
        }
        assert!(!keep[7] && !keep[251]);
        let widest = kept.windows(2).map(|w| w[1] - w[0]).max().unwrap();
        assert_eq!(widest, 250);
    }

    /// However the figures fall, never more than the bound.
    #[test]
    fn never_more_than_the_bound() {
        for n in [KEPT_STEPS + 1, 100, 1_000, 4_097] {
            let f: Vec<StepFigures> = (0..n as u64)
                .map(|i| StepFigures {
                    peak: i * 7 % 13,
                    spike: i * 5 % 11,
                    cliff: i % 17,
                    ..StepFigures::default()
                })
                .collect();
            let kept = chosen(&f).iter().filter(|&&k| k).count();
            assert!(kept <= KEPT_STEPS, "{n}: {kept}");
        }
    }
}
