use super::*;
use crate::model::{Allocation, Axis, Event, EventKind, Memory, MemoryKind, Site, Step};
use crate::report::Report;

/// 30,000 steps of one allocation each: "What the timeline shows" lists
/// five steps and one row for the rest, naming their range and the
/// highest (a profile like this once took 24 s here: each step's row
/// scanned every landmark).
#[test]
fn many_steps_are_a_few_rows_of_the_timeline_table() {
    // Step 12,345 is the highest.
    let table = timeline_table_of_steps(30_000, 12_345);
    assert_eq!(
        steps_listed(&table),
        ["step 0", "step 1", "step 2", "step 3", "step 4"]
    );
    let more = row_named(&table, "+29995 more steps");
    assert_eq!(text(&more[3]), "steps 5–29999, the highest shown");
    assert!(matches!(more[2], Cell::Bytes(300)), "{:?}", more[2]);
    assert!(table.rows.len() < 15, "{:?}", row_names(&table));
}

/// Six steps: the sixth is listed as the others are (as in
/// `tf_cnn.xplane.pb`'s summary), not as a row "+1 more steps" for it alone.
#[test]
fn one_step_past_the_listed_is_listed() {
    let table = timeline_table_of_steps(6, 5);
    assert_eq!(
        steps_listed(&table),
        ["step 0", "step 1", "step 2", "step 3", "step 4", "step 5"]
    );
    let names = row_names(&table);
    assert!(!names.iter().any(|n| n.starts_with('+')), "{names:?}");
    // Seven: five listed and one row for the other two.
    let table = timeline_table_of_steps(7, 5);
    let more = row_named(&table, "+2 more steps");
    assert_eq!(text(&more[3]), "steps 5–6, the highest shown");
}

fn text(c: &Cell) -> String {
    match c {
        Cell::Text(s) => s.clone(),
        other => format!("{other:?}"),
    }
}

/// The first cell of each row of `table`.
fn row_names(table: &crate::report::Table) -> Vec<String> {
    table.rows.iter().map(|r| text(&r[0])).collect()
}

/// The rows of `table` that name a step.
fn steps_listed(table: &crate::report::Table) -> Vec<String> {
    let mut names = row_names(table);
    names.retain(|n| n.starts_with("step "));
    names
}

/// The row of `table` named `name`.
fn row_named<'t>(table: &'t crate::report::Table, name: &str) -> &'t [Cell] {
    table
        .rows
        .iter()
        .find(|r| text(&r[0]) == name)
        .unwrap_or_else(|| panic!("no row {name:?} in {:?}", row_names(table)))
}

/// "What the timeline shows" of `steps` steps of one allocation each, step
/// `highest` the highest (300 bytes, the others 100–102).
fn timeline_table_of_steps(steps: i64, highest: i64) -> crate::report::Table {
    let mut profile = Profile::default();
    let site = profile.names.site(Site::default());
    let mut m = Memory::new("m", MemoryKind::Allocator, Axis::EventIndex);
    for s in 0..steps {
        let bytes = if s == highest {
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
    report
        .tables()
        .into_iter()
        .find(|t| t.title.starts_with("What the timeline shows"))
        .expect("the table")
}
