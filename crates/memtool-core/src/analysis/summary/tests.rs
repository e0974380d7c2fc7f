use super::*;
use crate::model::{Allocation, Axis, Event, EventKind, Memory, MemoryKind, Site, Step};
use crate::report::Report;

/// 30,000 steps of one allocation each: "What the timeline shows" lists
/// five steps and one row for the rest, naming their range and the
/// highest (a profile like this once took 24 s here: each step's row
/// scanned every landmark).
#[test]
fn many_steps_are_a_few_rows_of_the_timeline_table() {
    let mut profile = Profile::default();
    let site = profile.names.site(Site::default());
    let mut m = Memory::new("m", MemoryKind::Allocator, Axis::EventIndex);
    let steps = 30_000i64;
    for s in 0..steps {
        // Step 12,345 is the highest.
        let bytes = if s == 12_345 {
            300
        } else {
            100 + (s % 3) as u64
        };
        let a = m.push_allocation(Allocation {
            bytes,
            requested: bytes,
            count: 1,
            address: None,
            site,
        });
        for (at, kind) in [(2 * s, EventKind::Alloc), (2 * s + 1, EventKind::Free)] {
            m.events.push(Event::new(at, kind, a));
        }
        m.steps.push(Step {
            id: s,
            start: 2 * s,
            end: 2 * s + 1,
        });
    }
    profile.memories.push(m);
    let report = summarize(&profile, &Options::default());
    let table = report
        .tables()
        .into_iter()
        .find(|t| t.title.starts_with("What the timeline shows"))
        .expect("the table");
    let text = |c: &Cell| match c {
        Cell::Text(s) => s.clone(),
        other => format!("{other:?}"),
    };
    let names: Vec<String> = table.rows.iter().map(|r| text(&r[0])).collect();
    let steps_listed: Vec<&String> = names.iter().filter(|n| n.starts_with("step ")).collect();
    assert_eq!(
        steps_listed,
        ["step 0", "step 1", "step 2", "step 3", "step 4"]
    );
    let more = table
        .rows
        .iter()
        .find(|r| text(&r[0]) == "+29995 more steps")
        .expect("one row for the rest");
    assert_eq!(text(&more[3]), "steps 5–29999, the highest shown");
    assert!(matches!(more[2], Cell::Bytes(300)), "{:?}", more[2]);
    assert!(table.rows.len() < 15, "{names:?}");
}
