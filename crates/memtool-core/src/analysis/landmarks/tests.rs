//! The landmarks of a small made-up training loop, counted by hand.

use super::*;
use crate::model::{Allocation, Axis, Event, Frame, MemoryKind, Site, SiteId};
use std::collections::BTreeMap;

/// Two steps: forward (two layers), loss, backward with the layers made
/// again (checkpointing), an optimizer step that makes state in step 1
/// only.
fn two_steps() -> (Names, Memory) {
    let mut names = Names::default();
    let frame = |names: &mut Names, function: &str| {
        let function = names.string(function);
        let file = names.string("model.py");
        names.frame(Frame {
            function,
            file,
            line: 1,
        })
    };
    let layer = frame(&mut names, "layer");
    let forward = frame(&mut names, "forward");
    let engine = frame(&mut names, "engine");
    let adam = frame(&mut names, "adam");
    let site = |names: &mut Names, frames: &[FrameId], phase| {
        let stack = names.stack_leaf_first(frames);
        names.site(Site {
            stack,
            phase: Some(phase),
            ..Site::default()
        })
    };
    let fwd = site(&mut names, &[layer, forward], Phase::Forward);
    let loss = site(&mut names, &[forward], Phase::Loss);
    let again = site(&mut names, &[layer, forward, engine], Phase::Backward);
    let grad = site(&mut names, &[engine], Phase::Backward);
    let opt = site(&mut names, &[adam], Phase::Optimizer);
    let mut m = Memory::new("m", MemoryKind::Allocator, Axis::EventIndex);
    let mut at = 0;
    let mut push = |m: &mut Memory, kind, alloc: AllocId| {
        m.events.push(Event::new(at, kind, alloc));
        at += 1;
    };
    let alloc = |m: &mut Memory, site: SiteId, bytes: u64| {
        m.push_allocation(Allocation {
            bytes,
            requested: bytes,
            count: 1,
            address: None,
            site,
        })
    };
    for step in 0..2 {
        let acts: Vec<AllocId> = (0..2).map(|_| alloc(&mut m, fwd, 100)).collect();
        for &a in &acts {
            push(&mut m, EventKind::Alloc, a);
        }
        let l = alloc(&mut m, loss, 10);
        push(&mut m, EventKind::Alloc, l);
        // The forward's activations and the loss go at once.
        for &a in acts.iter().chain([&l]) {
            push(&mut m, EventKind::Free, a);
        }
        let wave: Vec<AllocId> = (0..4).map(|_| alloc(&mut m, again, 50)).collect();
        for &a in &wave {
            push(&mut m, EventKind::Alloc, a);
        }
        let g = alloc(&mut m, grad, 20);
        push(&mut m, EventKind::Alloc, g);
        for &a in &wave {
            push(&mut m, EventKind::Free, a);
        }
        if step == 0 {
            let state = alloc(&mut m, opt, 40);
            push(&mut m, EventKind::Alloc, state);
        }
        let tmp = alloc(&mut m, opt, 5);
        push(&mut m, EventKind::Alloc, tmp);
        push(&mut m, EventKind::Free, tmp);
        push(&mut m, EventKind::Free, g);
    }
    m.find_phases(&names);
    (names, m)
}

#[test]
fn steps_spans_waves_cliffs_state_and_floor_of_two_steps() {
    let (names, m) = two_steps();
    let all = find(&names, &m, &FrameFilter::All);
    let of = |kind| -> Vec<(Option<i64>, i64, i64, u64)> {
        all.iter()
            .filter(|l| l.kind == kind)
            .map(|l| (l.step, l.start, l.end, l.bytes))
            .collect()
    };
    // Step 0: events 0..=18, its peak 220 B (activations freed, the
    // wave and the gradient live) at 10; step 1 from 19, 40 B higher:
    // the state made at 15.
    assert_eq!(
        of(LandmarkKind::Step),
        vec![(Some(0), 0, 18, 220), (Some(1), 19, 36, 260)]
    );
    assert_eq!(
        of(LandmarkKind::Forward),
        vec![(Some(0), 0, 1, 200), (Some(1), 19, 20, 240)]
    );
    assert_eq!(
        of(LandmarkKind::Loss),
        vec![(Some(0), 2, 2, 210), (Some(1), 21, 21, 250)]
    );
    // The backward pass: the wave (4 × 50 B) made again, then a gradient.
    assert_eq!(
        of(LandmarkKind::Recompute),
        vec![(Some(0), 6, 9, 200), (Some(1), 25, 28, 200)]
    );
    assert_eq!(
        of(LandmarkKind::OptimizerState),
        vec![(Some(0), 15, 15, 40)]
    );
    // At once: the activations and the loss (210 B) after the loss, the
    // wave's 200 B in the backward pass, the optimizer's temporary and
    // the gradient (25 B) at the end: each over (220 - 40) / 20 B.
    let cliffs = of(LandmarkKind::Cliff);
    assert_eq!(
        cliffs[..3],
        [
            (Some(0), 3, 5, 210),
            (Some(0), 11, 14, 200),
            (Some(0), 17, 18, 25)
        ]
    );
    assert!(all
        .iter()
        .any(|l| l.kind == LandmarkKind::Cliff && l.label.starts_with("cliff after the loss")));
    // From step 2 on, the state is always there: 40 B, first reached
    // when step 2's loss is freed.
    assert_eq!(of(LandmarkKind::Floor), vec![(None, 24, 36, 40)]);
    assert_eq!(of(LandmarkKind::LargestAllocation)[0].3, 100);
}

#[test]
fn built_in_names_are_short() {
    assert_eq!(callee_name("<built-in function linear>"), "linear");
    assert_eq!(
        callee_name("<built-in method zeros_like of type object at 0x7f>"),
        "zeros_like"
    );
    assert_eq!(callee_name("forward"), "forward");
}

/// 10,000 marked steps on a time axis, each a few allocations of sizes
/// that vary with the step: the landmarks found on four threads (the steps'
/// figures, which choose the steps kept) are those found on one, in order
/// of kind, rank, start and end.
#[test]
fn many_steps_on_threads_are_the_landmarks_of_one() {
    let mut names = Names::default();
    let op = |names: &mut Names, name: &str| {
        let op = Some(names.string(name));
        names.site(Site {
            op,
            ..Site::default()
        })
    };
    let sites = [op(&mut names, "conv"), op(&mut names, "softmax")];
    let mut m = Memory::new("m", MemoryKind::Allocator, Axis::TimePs);
    let mut at = 0i64;
    for s in 0..10_000i64 {
        let start = at;
        let mut made = Vec::new();
        for k in 0..4u64 {
            let bytes = 1000 + (s as u64 % 7) * 100 + k * 10;
            let a = m.push_allocation(Allocation {
                bytes,
                requested: bytes,
                count: 1,
                address: None,
                site: sites[(k % 2) as usize],
            });
            m.events.push(Event::new(at, EventKind::Alloc, a));
            at += 1_000;
            made.push(a);
        }
        for a in made {
            m.events.push(Event::new(at, EventKind::Free, a));
            at += 1_000;
        }
        m.steps.push(crate::model::Step {
            id: s,
            start,
            end: at - 1,
        });
    }
    let frames = FrameFilter::default();
    let one = find_on(&names, &m, &frames, 1);
    let four = find_on(&names, &m, &frames, 4);
    assert_eq!(one.landmarks.len(), four.landmarks.len());
    assert!(one == four, "the landmarks differ");
    assert_eq!(one.landmarks, find(&names, &m, &frames));
    let omitted = one.omitted[&LandmarkKind::Step];
    let one = one.landmarks;
    let steps = one.iter().filter(|l| l.kind == LandmarkKind::Step).count();
    assert!(steps <= KEPT_STEPS, "{steps}");
    assert_eq!(steps + omitted, 10_000);
    assert_eq!(one[0].start_label, "t+0 s (step 0)");
    // The order a stable sort of the old comparator gives.
    let mut sorted = one.clone();
    sorted.sort_by(|a, b| {
        let rank = |l: &Landmark| match l.kind {
            LandmarkKind::LargestAllocation => std::cmp::Reverse(l.bytes),
            _ => std::cmp::Reverse(0),
        };
        a.kind
            .cmp(&b.kind)
            .then(rank(a).cmp(&rank(b)))
            .then(a.start.cmp(&b.start))
            .then(a.end.cmp(&b.end))
    });
    assert!(sorted == one, "not in order");
}

/// Each step's figures (what chooses the steps kept and counts the rest)
/// agree with the landmarks the step gets: their number by kind, the
/// step's peak, its spike's bytes and its largest cliff's.
#[test]
fn figures_count_what_a_step_gets() {
    let (names, m) = two_steps();
    let frames = FrameFilter::All;
    let mut t = Timeline {
        memory: &m,
        names: &names,
        in_use: InUse::default(),
        made: EventOf::none(m.allocations.len()),
        freed: EventOf::none(m.allocations.len()),
        frames_keys: std::sync::OnceLock::new(),
    };
    let mut in_use = Vec::new();
    replay::for_each_point(&m, |p| {
        if p.index > 0 {
            in_use.push(p.bytes);
        }
    });
    t.in_use = InUse::of(in_use);
    replay::for_each_lifespan(&m, |span| {
        t.made.set(span.alloc, span.made);
        t.freed.set(span.alloc, span.freed);
    });
    let steps = steps(&t);
    assert_eq!(steps.len(), 2);
    for step in &steps {
        let figures = per_step::figures(&t, step, 40);
        let mut got = Vec::new();
        per_step::step_landmarks(&t, step, 40, &frames, &mut got);
        for kind in PER_STEP_KINDS {
            let of: Vec<&Landmark> = got.iter().filter(|l| l.kind == kind).collect();
            assert_eq!(
                figures.count(kind),
                of.len(),
                "{kind:?} of step {}",
                step.id
            );
            let most = of.iter().map(|l| l.bytes).max().unwrap_or(0);
            match kind {
                LandmarkKind::Step => assert_eq!(figures.peak, most),
                LandmarkKind::Spike => assert_eq!(figures.spike, most),
                LandmarkKind::Cliff => assert_eq!(figures.cliff, most),
                _ => {}
            }
        }
        // The fixture has each per-step kind but zero_grad (and a spike).
        assert_eq!(figures.count(LandmarkKind::Recompute), 1);
        assert_eq!(figures.count(LandmarkKind::Forward), 1);
        assert_eq!(figures.count(LandmarkKind::ZeroGrad), 0);
    }
}

/// 3,000 marked steps of two allocations each (a spike on the step's peak
/// and one cliff), step 1,777 the highest: the landmarks are those of at
/// most [`KEPT_STEPS`] steps — the first six, the last, the highest, every
/// 75th — and the rest are counted by kind. Before the bound: 9,001
/// landmarks, and no `omitted`.
#[test]
fn many_steps_keep_a_bounded_few_and_count_the_rest() {
    let mut names = Names::default();
    let op = Some(names.string("matmul"));
    let site = names.site(Site {
        op,
        ..Site::default()
    });
    let mut m = Memory::new("m", MemoryKind::Allocator, Axis::EventIndex);
    let n = 3_000i64;
    let mut at = 0i64;
    for s in 0..n {
        let big = if s == 1_777 {
            5_000
        } else {
            1_000 + (s as u64 % 7) * 10
        };
        let start = at;
        let ids: Vec<AllocId> = [big, 500]
            .into_iter()
            .map(|bytes| {
                m.push_allocation(Allocation {
                    bytes,
                    requested: bytes,
                    count: 1,
                    address: None,
                    site,
                })
            })
            .collect();
        for (kind, alloc) in [
            (EventKind::Alloc, ids[0]),
            (EventKind::Alloc, ids[1]),
            (EventKind::Free, ids[1]),
            (EventKind::Free, ids[0]),
        ] {
            m.events.push(Event::new(at, kind, alloc));
            at += 1;
        }
        m.steps.push(crate::model::Step {
            id: s,
            start,
            end: at - 1,
        });
    }
    let found = find_on(&names, &m, &FrameFilter::All, 2);
    let kept =
        |kind| -> Vec<&Landmark> { found.landmarks.iter().filter(|l| l.kind == kind).collect() };
    let steps: Vec<i64> = kept(LandmarkKind::Step)
        .iter()
        .map(|l| l.step.unwrap())
        .collect();
    // The first six; the last; the highest and then the seven next (steps
    // 6, 13, …, 48: 1,060 + 500 B); every 75th from 0 (40, 0 among the
    // first): 6 + 1 + 8 + 39. The spikes and cliffs are the highest's.
    assert_eq!(steps.len(), 54, "{steps:?}");
    for s in (0..6).chain([6, 13, 48, 75, 2_925, 1_777, n - 1]) {
        assert!(steps.contains(&s), "step {s} left out: {steps:?}");
    }
    // Each kept step's spike and cliff, the same steps.
    for kind in [LandmarkKind::Spike, LandmarkKind::Cliff] {
        let of: Vec<i64> = kept(kind).iter().map(|l| l.step.unwrap()).collect();
        assert_eq!(of, steps, "{kind:?}");
    }
    assert!(!steps.contains(&7) && !steps.contains(&76));
    let rest = (n as usize) - steps.len();
    assert_eq!(
        found.omitted,
        BTreeMap::from([
            (LandmarkKind::Step, rest),
            (LandmarkKind::Spike, rest),
            (LandmarkKind::Cliff, rest),
        ])
    );
    // The highest step's landmarks as they always were.
    let highest = kept(LandmarkKind::Step)
        .into_iter()
        .max_by_key(|l| l.bytes)
        .unwrap();
    assert_eq!(
        (
            highest.step,
            highest.start,
            highest.bytes,
            highest.label.as_str()
        ),
        (Some(1_777), 4 * 1_777, 5_500, "step 1777: peak 5.37 KiB")
    );
    let spike = kept(LandmarkKind::Spike)
        .into_iter()
        .max_by_key(|l| l.bytes)
        .unwrap();
    assert_eq!(
        (spike.step, spike.bytes, spike.allocation_count),
        (Some(1_777), 5_500, 2)
    );
    // Three per kept step, the largest allocations (one site: one).
    assert_eq!(found.landmarks.len(), 3 * steps.len() + 1);
}

/// A step's cliff figures, counted without making the runs, are those of
/// the runs `cliffs` makes (their number, at most three, and the largest):
/// on 300 steps of allocations and runs of frees of varied lengths and
/// sizes, frees of what is no longer live among them, at several floors.
#[test]
fn cliff_figures_are_those_of_the_cliff_runs() {
    let mut names = Names::default();
    let site = names.site(Site::default());
    let mut m = Memory::new("m", MemoryKind::Allocator, Axis::TimePs);
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let mut next = |n: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % n
    };
    let mut at = 0i64;
    let mut live: Vec<AllocId> = Vec::new();
    for s in 0..300i64 {
        let start = at;
        for _ in 0..1 + next(12) {
            if next(3) > 0 || live.is_empty() {
                let bytes = 1 + next(5_000);
                let a = m.push_allocation(Allocation {
                    bytes,
                    requested: bytes,
                    count: 1,
                    address: None,
                    site,
                });
                m.events.push(Event::new(at, EventKind::Alloc, a));
                live.push(a);
            } else {
                for _ in 0..1 + next(6) {
                    let Some(&a) = live.get(next(live.len() as u64 + 2) as usize) else {
                        continue;
                    };
                    // Left live now and then: a second free of it changes nothing.
                    if next(4) > 0 {
                        live.retain(|&l| l != a);
                    }
                    m.events.push(Event::new(at, EventKind::Free, a));
                    at += 10;
                }
            }
            at += 10;
        }
        m.steps.push(crate::model::Step {
            id: s,
            start,
            end: at - 1,
        });
    }
    let mut t = Timeline {
        memory: &m,
        names: &names,
        in_use: InUse::default(),
        made: EventOf::none(m.allocations.len()),
        freed: EventOf::none(m.allocations.len()),
        frames_keys: std::sync::OnceLock::new(),
    };
    let mut in_use = Vec::new();
    replay::for_each_point(&m, |p| {
        if p.index > 0 {
            in_use.push(p.bytes);
        }
    });
    t.in_use = InUse::of(in_use);
    let steps = steps(&t);
    assert_eq!(steps.len(), 300);
    let mut with_cliffs = 0;
    for floor in [0, 2_000, 50_000, u64::MAX] {
        for step in &steps {
            let figures = per_step::figures(&t, step, floor);
            let (_, peak) = t.highest(step.first, step.last);
            let runs = per_step::cliff_runs(&t, step, Some(step.id), peak, floor);
            assert_eq!(usize::from(figures.cliffs), runs.len(), "step {}", step.id);
            let largest = runs.iter().map(|r| r.2).max().unwrap_or(0);
            assert_eq!(figures.cliff, largest, "step {}", step.id);
            with_cliffs += usize::from(!runs.is_empty());
        }
    }
    assert!(with_cliffs > 100, "{with_cliffs}");
}

#[test]
fn galloping_from_a_point_finds_what_a_binary_search_of_all_finds() {
    // Times with runs of equal ones, as events at one instant.
    let at: Vec<i64> = vec![1, 1, 2, 3, 3, 3, 5, 8, 8, 13, 21, 21, 21, 21, 34];
    for target in 0..36 {
        let whole = at.partition_point(|&a| a < target);
        // From any point before which every time is below the target.
        for from in 0..=whole {
            assert_eq!(
                partition_from(&at, from, |&a| a < target),
                whole,
                "{target} from {from}"
            );
        }
    }
    assert_eq!(partition_from(&at, 6, |&a| a <= 21), 14);
    assert_eq!(partition_from(&at, 15, |&a| a <= 40), 15);
    assert_eq!(partition_from::<i64>(&[], 0, |&a| a < 1), 0);
}
