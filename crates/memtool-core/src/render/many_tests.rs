//! Profiles of many memories (issue 25): the page's size is bounded
//! whatever their number, the text tables fold the memories past the
//! largest into one row, and JSON keeps every memory — all measured in
//! bytes and rows, never in time.

use super::page::FoldedTable;
use super::*;
use crate::analysis::{diff, frag, leaks, peak, summary, LISTED_MEMORIES};
use crate::model::{Allocation, Axis, Event, EventKind, Format, InputInfo, MemoryKind, Site};
use crate::report::{self, OutputFormat, Presentation, Report};

/// `n` devices as a pprof of many `device` labels reads: device `i` holds
/// `1 + i % 7` buffers of 1 MiB, allocated one after another, with
/// addresses (so the address grid and the blocks are drawn too).
fn many_devices(n: usize) -> Profile {
    let mut profile = Profile::default();
    profile.inputs.push(InputInfo {
        path: "many.prof".into(),
        format: Format::Pprof,
        executables: None,
    });
    let names = &mut profile.names;
    let (file, function) = (names.string("model.py"), names.string("layer"));
    let frame = names.frame(crate::model::Frame {
        function,
        file,
        line: 1,
    });
    let stack = names.stack_leaf_first(&[frame]);
    let site = names.site(Site {
        stack,
        op: None,
        shape: None,
        dtype: None,
        category: None,
        phase: None,
        ..Site::default()
    });
    for i in 0..n {
        let mut m = Memory::new(format!("dev:{i}"), MemoryKind::Device, Axis::EventIndex);
        for j in 0..(1 + i % 7) as u64 {
            let id = m.push_allocation(Allocation {
                bytes: 1 << 20,
                requested: 1 << 20,
                count: 1,
                address: crate::model::Address::new(j << 20),
                site,
            });
            m.events.push(Event::new(j as i64, EventKind::Alloc, id));
        }
        profile.memories.push(m);
    }
    profile
}

fn text(report: &dyn Report, format: OutputFormat) -> String {
    let mut out = Vec::new();
    report::exporter(
        format,
        Presentation {
            top: 10,
            width: None,
        },
    )
    .export(report, &mut out)
    .unwrap();
    String::from_utf8(out).unwrap()
}

#[test]
fn the_page_is_bounded_whatever_the_number_of_memories() {
    let options = RenderOptions::default();
    let small = html(Inputs::One(&many_devices(1_000)), &options);
    let big_profile = many_devices(10_000);
    let big = html(Inputs::One(&big_profile), &options);
    // Ten times the memories, the same page but for a few figures.
    assert!(big.len() <= 5 << 20, "{} bytes", big.len());
    assert!(
        big.len().abs_diff(small.len()) < 2_000,
        "{} then {} bytes",
        small.len(),
        big.len()
    );
    // The largest drawn: 16 sections, 16 memories' data.
    assert_eq!(
        big.matches("<section class=\"memory\"").count(),
        marks::SECTIONS
    );
    let data: serde_json::Value = {
        let start = big.find("id=\"memtool-data\">").unwrap() + "id=\"memtool-data\">".len();
        let end = start + big[start..].find("</script>").unwrap();
        serde_json::from_str(&big[start..end]).unwrap()
    };
    assert_eq!(data["memories"].as_array().unwrap().len(), marks::SECTIONS);
    // The others: one table, 200 rows, then one row with their count and
    // the sum of their peaks. Devices i ≡ 6 (mod 7) peak at 7 MiB, the
    // largest; 1,428 of them, 16 drawn, 200 listed, the rest summed with
    // all the smaller ones.
    let table = &big[big.find("<details class=\"beyond\">").unwrap()..];
    assert!(table.contains(&format!(
        "{} more memories not drawn: the page draws the 16 with the largest peaks",
        10_000 - marks::SECTIONS
    )));
    let rest = 10_000 - marks::SECTIONS - FoldedTable::ROWS;
    let total_mib: u64 = (0..10_000u64).map(|i| 1 + i % 7).sum::<u64>()
        - 7 * (marks::SECTIONS + FoldedTable::ROWS) as u64;
    assert!(
        table.contains(&format!(
            "<tfoot><tr><td>+{rest} more (totals)</td><td></td><td class=\"num\" data-v=\"{}\">",
            total_mib << 20
        )),
        "{}",
        &table[..table.find("</details>").unwrap()]
    );
    assert_eq!(
        table[..table.find("</details>").unwrap()]
            .matches("<tr><td>dev:")
            .count(),
        FoldedTable::ROWS
    );
}

#[test]
fn tables_fold_past_the_largest_and_json_keeps_every_memory() {
    let options = crate::analysis::Options::default();
    let sizes = [500usize, 5_000];
    let mut tables = Vec::new();
    let mut json = Vec::new();
    for n in sizes {
        let profile = many_devices(n);
        let reports: Vec<Box<dyn Report>> = vec![
            Box::new(summary::summarize(&profile, &options)),
            Box::new(peak::peak(&profile, &options)),
            Box::new(leaks::leaks(&profile, &options)),
            Box::new(frag::frag(&profile, &options)),
            Box::new(diff::diff(&profile, &profile, &options, None)),
        ];
        tables.push(
            reports
                .iter()
                .map(|r| text(r.as_ref(), OutputFormat::Table))
                .collect::<Vec<_>>(),
        );
        json.push(text(reports[0].as_ref(), OutputFormat::Json));
        let doc: serde_json::Value = serde_json::from_str(json.last().unwrap()).unwrap();
        assert_eq!(doc["memories"].as_array().unwrap().len(), n);
    }
    // JSON grows with the memories, linearly: ten times the memories, ten
    // times the bytes (ids grow a digit, so a little more).
    let ratio = json[1].len() as f64 / json[0].len() as f64;
    assert!((9.5..11.5).contains(&ratio), "JSON grew {ratio:.2}×");
    // The text tables do not: they list the 50 largest and fold the rest
    // into one row with their count and totals.
    for (small, big) in tables[0].iter().zip(&tables[1]) {
        assert!(
            big.len() < small.len() + 2_000,
            "{} then {} bytes:\n{big}",
            small.len(),
            big.len()
        );
    }
    let summary = &tables[1][0];
    let more = 5_000 - LISTED_MEMORIES;
    assert!(
        summary.contains(&format!("+{more} more (totals)")),
        "{summary}"
    );
    let memories = summary.split("\n\n").next().unwrap();
    assert_eq!(memories.matches("\n dev:").count(), LISTED_MEMORIES);
    let peak = &tables[1][1];
    assert!(peak.contains(&format!("+{more} more (totals)")), "{peak}");
    // The 714 memories of one verdict: one line naming five.
    let leaks = &tables[1][2];
    assert!(
        leaks.contains(
            "dev:6, dev:13, dev:20, dev:27, dev:34 and 709 more memories: grew once: +7.00 MiB"
        ),
        "{leaks}"
    );
    assert!(leaks.contains(&format!("+{more} more memories have no growth table")));
}

#[test]
fn the_image_draws_the_largest_memories_only() {
    let options = RenderOptions::default();
    let small = svg(Inputs::One(&many_devices(100)), &options);
    let big = svg(Inputs::One(&many_devices(1_000)), &options);
    assert!(small.contains(">84 more memories not drawn: the image draws the 16 with"));
    assert!(big.contains(">984 more memories not drawn: the image draws the 16 with"));
    // Sixteen panels either way: the same size but for the count.
    assert!(
        big.len().abs_diff(small.len()) < 200,
        "{} then {}",
        small.len(),
        big.len()
    );
    // Sixteen memories or fewer: every one drawn, no note.
    let few = svg(Inputs::One(&many_devices(16)), &options);
    assert!(!few.contains("not drawn"));
    assert!(few.contains(">dev:15"), "{few}");
}

#[test]
fn the_diff_totals_table_lists_the_largest_changes_and_folds_the_rest() {
    let options = crate::analysis::Options::default();
    let n = 10_000;
    let base = many_devices(n);
    // dev:9 grows by one buffer of 1 MiB: the largest change, listed
    // though its peak is not among the largest.
    let mut new = many_devices(n);
    let grown = &mut new.memories[9];
    let site = grown.allocations[0].site;
    let id = grown.push_allocation(Allocation {
        bytes: 1 << 20,
        requested: 1 << 20,
        count: 1,
        address: crate::model::Address::new(1 << 30),
        site,
    });
    grown.events.push(Event::new(100, EventKind::Alloc, id));
    let report = diff::diff(&base, &new, &options, None);
    let table = text(&report, OutputFormat::Table);
    let totals = table.split("\n\n").next().unwrap();
    // The title, the header, its rule, 50 memories, the folded row and
    // the total; then the note.
    let rows = totals.lines().take_while(|l| !l.starts_with(" - ")).count();
    assert_eq!(rows, 3 + LISTED_MEMORIES + 2, "{totals}");
    assert_eq!(totals.matches("\n dev:").count(), LISTED_MEMORIES);
    assert!(totals.contains("\n dev:9 "), "{totals}");
    // Listed in the report's order: dev:9 first, then the largest peaks
    // (devices i ≡ 6 mod 7, 7 MiB each).
    let first: Vec<&str> = totals
        .lines()
        .skip(3)
        .take(3)
        .map(|l| l.split_whitespace().next().unwrap())
        .collect();
    assert_eq!(first, ["dev:6", "dev:9", "dev:13"], "{totals}");
    // The others, summed: every device's peak but the listed ones'.
    let all_mib: u64 = (0..n as u64).map(|i| 1 + i % 7).sum();
    let listed_mib = 7 * (LISTED_MEMORIES as u64 - 1) + 3;
    let folded = totals
        .lines()
        .find(|l| l.contains(&format!("+{} more (totals)", n - LISTED_MEMORIES)))
        .unwrap_or_else(|| panic!("{totals}"));
    let mib = report::units::bytes((all_mib - listed_mib) << 20);
    assert_eq!(folded.matches(mib.as_str()).count(), 2, "{folded} vs {mib}");
    assert!(folded.contains("  0 B"), "{folded}");
    assert!(
        table.contains(&format!(
            "+{} more: memories past the {LISTED_MEMORIES} largest changes",
            n - LISTED_MEMORIES
        )),
        "{table}"
    );
    // JSON keeps every memory.
    let doc: serde_json::Value = serde_json::from_str(&text(&report, OutputFormat::Json)).unwrap();
    assert_eq!(doc["memories"].as_array().unwrap().len(), n);
    assert_eq!(doc["total"]["delta_bytes"], 1 << 20);
}
