use askama::Template;

use super::page::{FragSection, MemoryView, Page, ProfileView};
use super::*;
use crate::model::{
    AllocId, Allocation, AllocatorSample, Axis, Event, EventKind, Format, Frame, InputInfo,
    MemoryKind, Site, SiteId,
};
use crate::report::units;

const XSS: &str = "</script><img src=x onerror=alert(1)>";
/// Leaves a mark the browser check looks for, should it ever run.
const XSS_MARK: &str =
    "<img src=x onerror=\"document.documentElement.setAttribute('data-xss','ran')\">\u{2028}<!--";

/// An allocator event stream as the XSpace and PyTorch readers fill it:
/// addresses, stacks, ops and categories, reserved bytes and a capacity.
/// `steps` training-like steps, each allocating `per_step` buffers and
/// freeing all but one of them (a slow leak).
fn event_profile(steps: u64, per_step: u64, hostile: bool) -> Profile {
    let mut profile = Profile::default();
    profile.inputs.push(InputInfo {
        path: if hostile {
            format!("{XSS}.pb")
        } else {
            "synthetic.xplane.pb".into()
        },
        format: Format::Pprof,
        executables: None,
    });
    let names = &mut profile.names;
    let file = names.string("train.py");
    let main_fn = names.string("main");
    let main = names.frame(Frame {
        function: main_fn,
        file,
        line: 1,
    });
    let sites: Vec<SiteId> = (0..8)
        .map(|i| {
            let function = names.string(&match (hostile, i) {
                (true, 0) => XSS.to_string(),
                (true, 2) => XSS_MARK.to_string(),
                _ => format!("layer{i}"),
            });
            let f = names.frame(Frame {
                function,
                file,
                line: 10 + i,
            });
            let stack = names.stack_leaf_first(&[f, main]);
            let op = names.string(&if hostile && i == 1 {
                XSS.to_string()
            } else {
                format!("op{i}")
            });
            let category = names.string(["activation", "parameter", "temp"][i as usize % 3]);
            let odd = (hostile && i == 3).then(|| names.string(XSS));
            names.site(Site {
                stack,
                op: Some(op),
                shape: odd,
                dtype: odd,
                category: Some(odd.unwrap_or(category)),
                phase: None,
                ..Site::default()
            })
        })
        .collect();
    let mut m = Memory::new("GPU_0_bfc", MemoryKind::Allocator, Axis::TimePs);
    m.capacity = Some(1 << 34);
    let mut at = 1_000i64;
    let mut next_addr = 0x7f00_0000_0000u64;
    let (mut live, mut reserved) = (0u64, 0u64);
    for step in 0..steps {
        let step_start = at + 100;
        let mut ids = Vec::new();
        for j in 0..per_step {
            let bytes = 4096 * (1 + (step * 7 + j) % 64);
            let id = m.push_allocation(Allocation {
                bytes,
                requested: bytes - 16,
                count: 1,
                address: crate::model::Address::new(next_addr),
                site: sites[(j % 8) as usize],
            });
            next_addr = 0x7f00_0000_0000 + (next_addr + bytes - 0x7f00_0000_0000) % (1 << 30);
            at += 100;
            m.events.push(Event::new(at, EventKind::Alloc, id));
            ids.push(id);
            live += bytes;
        }
        // A caching allocator keeps what it once held, in 2 MiB blocks.
        reserved = reserved.max(live.div_ceil(2 << 20) * (2 << 20));
        for &id in ids.iter().skip(1) {
            at += 100;
            m.events
                .push(Event::new(at, EventKind::Free, AllocId(id.0)));
            live -= m.allocations[id.index()].bytes;
        }
        m.steps.push(crate::model::Step {
            id: step as i64,
            start: step_start,
            end: at,
        });
        m.allocator_samples
            .push(AllocatorSample::new(at).with_reserved_bytes(Some(reserved)));
    }
    // Its addresses wrap within one 1 GiB range the allocator holds.
    m.held = vec![crate::model::AddressRange {
        start: 0x7f00_0000_0000,
        bytes: 1 << 30,
    }];
    profile.memories.push(m);
    profile
}

#[test]
fn same_input_same_bytes() {
    let profile = event_profile(50, 40, false);
    let options = RenderOptions::default();
    let a = html(Inputs::One(&profile), &options);
    let b = html(Inputs::One(&profile), &options);
    assert_eq!(a, b);
    let other = event_profile(50, 40, false);
    assert_eq!(a, html(Inputs::One(&other), &options));
    let d1 = html(
        Inputs::Diff {
            base: &profile,
            new: &other,
        },
        &options,
    );
    assert_eq!(
        d1,
        html(
            Inputs::Diff {
                base: &profile,
                new: &other
            },
            &options
        )
    );
}

#[test]
fn event_streams_render_every_section() {
    let profile = event_profile(50, 40, false);
    let page = html(Inputs::One(&profile), &RenderOptions::default());
    let peak = replay::peak(&profile.memories[0]).unwrap();
    assert!(page.contains(&format!("({} bytes, ", peak.bytes)));
    assert!(page.contains("Addresses over time"));
    assert!(page.contains("class=\"addr\" data-mem=\"m0-0\""));
    // Categories exist, so the timeline is stacked by them.
    assert!(page.contains("Stacked by category"));
    assert!(page.contains("capacity</dt><dd>16.00 GiB"));
    // One buffer per step is never freed: steady growth.
    assert!(
        page.contains("<dt>leaks</dt><dd>steady growth"),
        "{}",
        &page[..2000]
    );
    // Addresses give `frag` its address-gap figure: the section and the
    // header line say what it says.
    let frag = crate::analysis::frag::frag(&profile, &Options::default());
    let gaps = frag.memories[0].at_peak.as_ref().unwrap().address.unwrap();
    assert!(page.contains("<h3>Fragmentation</h3>"));
    assert!(page.contains(&format!(
        "({} gaps, largest {})</dd>",
        gaps.gaps,
        units::bytes(gaps.largest_gap_bytes)
    )));
    let data = embedded_data(&page);
    let m = &data["memories"][0];
    assert_eq!(m["peak"]["bytes"], peak.bytes);
    let hi: Vec<u64> = serde_json::from_value(m["timeline"]["hi"].clone()).unwrap();
    assert_eq!(hi.iter().max().copied(), Some(peak.bytes));
    let reserved: Vec<[u64; 2]> = serde_json::from_value(m["reserved"].clone()).unwrap();
    assert!(reserved.iter().all(|r| r[1] % (2 << 20) == 0));
    assert_eq!(
        reserved.iter().map(|r| r[1]).max(),
        Some(peak.bytes.div_ceil(2 << 20) * (2 << 20))
    );
    assert_eq!(m["flame"]["v"], peak.bytes);
    let steps = m["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 50);
    assert_eq!(steps[1]["label"], "step 1");
}

#[test]
fn frag_sections_show_when_given() {
    // Without addresses, ranges the allocator holds or its own figures:
    // no section at all.
    let mut profile = event_profile(5, 4, false);
    for a in &mut profile.memories[0].allocations {
        a.address = None;
    }
    profile.memories[0].allocator_samples.clear();
    profile.memories[0].held.clear();
    let page = html(Inputs::One(&profile), &RenderOptions::default());
    assert!(!page.contains("<dt>fragmentation</dt>") && !page.contains("Fragmentation"));
    // The template block the frag analysis feeds.
    let view = Page {
        title: "t".into(),
        inputs: Vec::new(),
        warnings: Vec::new(),
        oom: Vec::new(),
        diff: None,
        memory_count: 1,
        profiles: vec![ProfileView {
            heading: String::new(),
            folded: Vec::new(),
            empty_more: 0,
            memories: vec![MemoryView {
                frag: Some(FragSection::from_table(
                    "external fragmentation 12%".into(),
                    &{
                        let mut t =
                            crate::report::Table::new("Fragmentation", vec!["at", "largest_free"]);
                        t.rows
                            .push(vec!["<b>".into(), crate::report::Cell::Bytes(3 << 20)]);
                        t
                    },
                    10,
                )),
                ..test_memory_view()
            }],
            empty: Vec::new(),
        }],
        css: "",
        js: "",
        program_js: "",
        alloc_js: "",
        addr_js: "",
        tables_js: "",
        selftest_js: "",
        data_json: "{}".into(),
    };
    let page = view.render().unwrap();
    assert!(page.contains("<dt>fragmentation</dt><dd>external fragmentation 12%</dd>"));
    assert!(page.contains("<h3>Fragmentation</h3>"));
    assert!(page.contains("<td>&#60;b&#62;</td>") || page.contains("<td>&lt;b&gt;</td>"));
    assert!(page.contains("<th>largest free</th>"));
    assert!(page.contains("<td class=\"num\" data-v=\"3145728\">3.00 MiB</td>"));
}

/// Writes reports of synthetic event streams (including the hostile one)
/// where `scripts/browser-check.sh` asks for them, so the browser check
/// covers the event-stream sections that no reader produces yet.
#[test]
fn samples_for_the_browser_check() {
    let events = event_profile(300, 40, false);
    let hostile = event_profile(30, 12, true);
    let pages = [
        (
            "events.html",
            html(Inputs::One(&events), &RenderOptions::default()),
        ),
        (
            "xss.html",
            html(Inputs::One(&hostile), &RenderOptions::default()),
        ),
        (
            "events-diff.html",
            html(
                Inputs::Diff {
                    base: &hostile,
                    new: &events,
                },
                &RenderOptions::default(),
            ),
        ),
    ];
    for (_, page) in &pages {
        assert!(page.contains("id=\"memtool-data\""));
    }
    if let Some(dir) = std::env::var_os("MEMTOOL_RENDER_SAMPLES") {
        let dir = std::path::PathBuf::from(dir);
        std::fs::create_dir_all(&dir).unwrap();
        for (name, page) in &pages {
            std::fs::write(dir.join(name), page).unwrap();
        }
    }
}

fn test_memory_view() -> MemoryView {
    MemoryView {
        static_svg: String::new(),
        dom: "m0-0".into(),
        title: "gpu".into(),
        peak_short: String::new(),
        facts: Vec::new(),
        leak_verdict: String::new(),
        frag: None,
        stages: Vec::new(),
        group_by: "op".into(),
        resolution: String::new(),
        rows: Vec::new(),
        rows_omitted: String::new(),
        show_op: false,
        show_shape: false,
        show_dtype: false,
        show_category: false,
        show_source: true,
        show_stack: true,
        leak_rows: Vec::new(),
        leak_omitted: 0,
        leak_points: 0,
        has_addr: false,
        has_program: false,
        has_alloc: false,
        has_blocks: false,
        has_state: false,
    }
}

/// Where the embedded JSON starts and ends in a page.
fn data_span(page: &str) -> (usize, usize) {
    let start = page.find("id=\"memtool-data\">").unwrap() + "id=\"memtool-data\">".len();
    (start, start + page[start..].find("</script>").unwrap())
}

fn embedded_data(page: &str) -> serde_json::Value {
    let (start, end) = data_span(page);
    serde_json::from_str(&page[start..end]).unwrap()
}

#[test]
fn profile_text_is_escaped_everywhere() {
    let profile = event_profile(10, 8, true);
    for page in [
        html(Inputs::One(&profile), &RenderOptions::default()),
        html(
            Inputs::Diff {
                base: &profile,
                new: &profile,
            },
            &RenderOptions::default(),
        ),
    ] {
        assert!(
            !page.contains("<img"),
            "raw markup from the profile reached the page"
        );
        // Only our own two script elements close.
        assert_eq!(page.matches("</script>").count(), 2);
        assert_eq!(page.matches("<!--").count(), 0);
        // The text is there, escaped, in the tables and the title.
        assert!(
            page.contains("&#60;/script&#62;&#60;img src=x onerror=alert(1)&#62;")
                || page.contains("&lt;/script&gt;&lt;img src=x onerror=alert(1)&gt;")
        );
        // And intact once the script parses the data.
        let data = embedded_data(&page);
        let text = data.to_string();
        assert!(text.contains(XSS), "the JSON lost the name");
    }
}

#[test]
fn a_million_events_make_a_small_report() {
    // 20,000 steps × 25 allocations, 24 freed each: 980,000 events.
    let mut profile = event_profile(20_000, 25, false);
    let m = &mut profile.memories[0];
    // Round it past a million with short-lived buffers.
    let site = m.allocations[0].site;
    let mut at = m.events.last().unwrap().at;
    while m.events.len() < 1_000_000 {
        let id = m.push_allocation(Allocation {
            bytes: 256,
            requested: 256,
            count: 1,
            address: crate::model::Address::new(0x10_0000 + (m.events.len() as u64 % 1024) * 256),
            site,
        });
        at += 10;
        m.events.push(Event::new(at, EventKind::Alloc, id));
        at += 10;
        m.events.push(Event::new(at, EventKind::Free, id));
    }
    assert!(profile.memories[0].events.len() >= 1_000_000);
    let page = html(Inputs::One(&profile), &RenderOptions::default());
    eprintln!("1M-event report: {} bytes", page.len());
    assert!(page.len() < 5_000_000, "report is {} bytes", page.len());
    let data = embedded_data(&page);
    let peak = replay::peak(&profile.memories[0]).unwrap();
    assert_eq!(data["memories"][0]["peak"]["bytes"], peak.bytes);
    let cols = data["memories"][0]["timeline"]["x"]
        .as_array()
        .unwrap()
        .len();
    assert!(cols <= RenderOptions::default().width, "{cols} columns");
    // The drill-down's blocks are capped, and say of how many.
    let blocks = &data["memories"][0]["blocks"];
    let listed = blocks["bytes"].as_array().unwrap().len();
    assert_eq!(listed, super::blocks::MAX_BLOCKS);
    assert_eq!(
        blocks["total"].as_u64().unwrap() as usize,
        profile.memories[0].allocations.len()
    );
}

#[test]
fn svg_timelines_are_static_and_escaped() {
    let profile = event_profile(30, 12, true);
    let image = svg(Inputs::One(&profile), &RenderOptions::default());
    assert_eq!(image, svg(Inputs::One(&profile), &RenderOptions::default()));
    assert!(image.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\""));
    assert!(image.ends_with("</svg>\n"));
    assert!(!image.contains("<script") && !image.contains("<img"));
    let peak = replay::peak(&profile.memories[0]).unwrap();
    assert!(image.contains(&format!("GPU_0_bfc — peak {}", units::bytes(peak.bytes))));
    // One area per band, each named by its group.
    let bands = image.matches("<path ").count();
    assert_eq!(bands, 4, "one band per category");
    assert!(image.contains("<title>activation</title>"));
    // The hostile category is a band too, as text.
    assert!(image.contains("<title>&lt;/script&gt;&lt;img src=x onerror=alert(1)&gt;</title>"));
    let diff = svg(
        Inputs::Diff {
            base: &profile,
            new: &profile,
        },
        &RenderOptions::default(),
    );
    assert_eq!(
        diff.matches("— peak ").count() + diff.matches(">peak ").count(),
        4,
        "two titles and two peak marks"
    );
    assert!(svg(Inputs::One(&Profile::default()), &RenderOptions::default()).contains("No memory"));
}

#[test]
fn extreme_values_render_without_panicking() {
    let mut profile = Profile::default();
    let site = profile.names.site(Site::default());
    let mut m = Memory::new("x", MemoryKind::Allocator, Axis::TimePs);
    m.capacity = Some(u64::MAX);
    for (i, (at, address)) in [(i64::MIN, u64::MAX - 1), (i64::MAX, 0), (0, u64::MAX / 2)]
        .into_iter()
        .enumerate()
    {
        let id = m.push_allocation(Allocation {
            bytes: u64::MAX / 4,
            requested: u64::MAX / 4,
            count: 1,
            address: crate::model::Address::new(address),
            site,
        });
        m.events.push(Event::new(at, EventKind::Alloc, id));
        if i == 1 {
            m.events
                .push(Event::new(i64::MIN, EventKind::Free, AllocId(0)));
        }
    }
    m.allocator_samples
        .push(AllocatorSample::new(i64::MAX).with_reserved_bytes(Some(u64::MAX)));
    profile.memories.push(m);
    let options = RenderOptions::default();
    let page = html(Inputs::One(&profile), &options);
    assert!(page.contains("data-mem=\"m0-0\""));
    assert!(svg(Inputs::One(&profile), &options).ends_with("</svg>\n"));
    assert!(!folded(
        Inputs::Diff {
            base: &profile,
            new: &profile
        },
        &options
    )
    .is_empty());
    let both = html(
        Inputs::Diff {
            base: &profile,
            new: &profile,
        },
        &options,
    );
    assert!(both.contains("What changed"));
}

#[test]
fn folded_stacks_sum_to_the_peak() {
    let profile = event_profile(20, 10, false);
    let text = folded(Inputs::One(&profile), &RenderOptions::default());
    let sum: u64 = text
        .lines()
        .map(|l| l.rsplit_once(' ').unwrap().1.parse::<u64>().unwrap())
        .sum();
    assert_eq!(sum, replay::peak(&profile.memories[0]).unwrap().bytes);
    assert!(text.lines().all(|l| l.starts_with("main train.py:1;layer")));
}

#[test]
fn the_source_line_is_the_user_frame_whatever_its_name() {
    // A frame name holding the stack label's separator: the source column
    // is the user's frame, not the label cut at the first ` <- `.
    let mut profile = Profile::default();
    let names = &mut profile.names;
    let file = names.string("train.py");
    let [odd, main] = ["f <- g", "main"].map(|function| {
        let function = names.string(function);
        names.frame(Frame {
            function,
            file,
            line: 3,
        })
    });
    let stack = names.stack_leaf_first(&[odd, main]);
    let site = names.site(Site {
        stack,
        ..Default::default()
    });
    let mut m = Memory::new("gpu", MemoryKind::Allocator, Axis::TimePs);
    let id = m.push_allocation(Allocation {
        bytes: 64,
        requested: 64,
        count: 1,
        address: None,
        site,
    });
    m.events.push(Event::new(1, EventKind::Alloc, id));
    profile.memories.push(m);
    // Grouped by stack (by user frame, the first column is the source line
    // and the page shows it once).
    let options = RenderOptions {
        group_by: Some(GroupBy::Stack),
        ..RenderOptions::default()
    };
    let page = html(Inputs::One(&profile), &options)
        .replace("&#60;", "<")
        .replace("&lt;", "<");
    assert!(
        page.contains("<td title=\"f <- g train.py:3\">f <- g train.py:3</td></tr>"),
        "{page}"
    );
    let by_frame = html(Inputs::One(&profile), &RenderOptions::default());
    assert!(!by_frame.contains("<th>source line</th>"));
    assert!(by_frame.contains("<th>stack</th>"));
}

/// An allocator that reports its in-use figure at every event peaks where
/// that figure does (here at the last event, 500 bytes), not where the
/// replayed live set is largest (the first, 100 bytes): the folded stacks
/// and the differential call tree break down the peak every other output
/// reports.
#[test]
fn folded_stacks_and_the_diff_tree_take_the_reported_peak() {
    let mut profile = Profile::default();
    let names = &mut profile.names;
    let file = names.string("train.py");
    let sites: Vec<SiteId> = ["early", "late"]
        .iter()
        .map(|f| {
            let function = names.string(f);
            let frame = names.frame(Frame {
                function,
                file,
                line: 1,
            });
            let stack = names.stack_leaf_first(&[frame]);
            names.site(Site {
                stack,
                ..Site::default()
            })
        })
        .collect();
    let mut m = Memory::new("GPU_0_bfc", MemoryKind::Allocator, Axis::TimePs);
    for (bytes, site) in [(100, sites[0]), (50, sites[1])] {
        m.push_allocation(Allocation {
            bytes,
            requested: bytes,
            count: 1,
            address: None,
            site,
        });
    }
    let events = [
        (EventKind::Alloc, 0, 10),
        (EventKind::Free, 0, 0),
        (EventKind::Alloc, 1, 500),
    ];
    for (i, (kind, alloc, in_use)) in events.into_iter().enumerate() {
        let at = 10 * (i as i64 + 1);
        m.events.push(Event::new(at, kind, AllocId(alloc)));
        m.allocator_samples
            .push(AllocatorSample::new(at).with_allocated_bytes(Some(in_use)));
    }
    profile.memories.push(m);
    assert_eq!(replay::peak(&profile.memories[0]).unwrap().bytes, 100);
    let text = folded(Inputs::One(&profile), &RenderOptions::default());
    assert_eq!(text, "late train.py:1 50\n");
    let tree = super::html::diff_tree(&profile, &profile, &RenderOptions::default());
    let labels: Vec<(&str, u64, Option<u64>)> =
        tree.c.iter().map(|n| (n.n.as_str(), n.v, n.b)).collect();
    assert_eq!(labels, [("late train.py:1", 50, Some(50))]);
}

/// A profile read from a snapshot at `path`, with no memory yet.
fn snapshot_profile(path: &str) -> Profile {
    let mut profile = Profile::default();
    profile.inputs.push(InputInfo {
        path: path.into(),
        format: Format::TorchSnapshot,
        executables: None,
    });
    profile
}

/// A `cuda:0` memory of 4 KiB allocations, one per position, made at the
/// given sites in turn and never freed.
fn memory_of_sites(sites: impl IntoIterator<Item = SiteId>) -> Memory {
    let mut m = Memory::new("cuda:0", MemoryKind::Allocator, Axis::TimeUs);
    for (i, site) in sites.into_iter().enumerate() {
        let id = m.push_allocation(Allocation {
            bytes: 4096,
            requested: 4096,
            count: 1,
            address: crate::model::Address::new(4096 * i as u64),
            site,
        });
        m.events.push(Event::new(i as i64, EventKind::Alloc, id));
    }
    m
}

#[test]
fn long_names_and_deep_stacks_make_a_small_report() {
    // One stack of 100,000 frames and one frame named by a megabyte, each
    // allocating and growing (so they are leak findings too).
    let mut profile = snapshot_profile("deep.pickle");
    let names = &mut profile.names;
    let file = names.string("train.py");
    let deep: Vec<_> = (0..100_000)
        .map(|i| {
            let function = names.string(&format!("f{i}"));
            names.frame(Frame {
                function,
                file,
                line: i,
            })
        })
        .collect();
    let huge_name = names.string(&"x".repeat(1 << 20));
    let huge = names.frame(Frame {
        function: huge_name,
        file: huge_name,
        line: 1,
    });
    let sites: Vec<SiteId> = [
        names.stack_leaf_first(&deep),
        names.stack_leaf_first(&[huge]),
    ]
    .into_iter()
    .map(|stack| {
        names.site(Site {
            stack,
            op: Some(huge_name),
            shape: None,
            dtype: None,
            category: None,
            phase: None,
            ..Site::default()
        })
    })
    .collect();
    profile
        .memories
        .push(memory_of_sites((0..20).map(|i| sites[i % 2])));
    let page = html(Inputs::One(&profile), &RenderOptions::default());
    assert!(page.len() < 1_000_000, "report is {} bytes", page.len());
    assert!(page.contains("more bytes cut]"));
    let folded = folded(Inputs::One(&profile), &RenderOptions::default());
    assert!(folded.len() < 1_000_000, "folded is {} bytes", folded.len());
}

#[test]
fn each_timeline_is_a_picture_until_the_script_draws_it() {
    let mut profile = event_profile(30, 20, false);
    let m = &mut profile.memories[0];
    let (first, last) = (m.events[0].at, m.events[m.events.len() - 1].at);
    let mid = first + (last - first) / 2;
    m.phases = vec![
        crate::model::PhaseSpan {
            phase: crate::model::Phase::Forward,
            start: first,
            end: mid,
        },
        crate::model::PhaseSpan {
            phase: crate::model::Phase::Backward,
            start: mid + 1,
            end: last,
        },
    ];
    let page = html(Inputs::One(&profile), &RenderOptions::default());
    let start = page
        .find("<div class=\"timeline\" data-mem=")
        .expect("a timeline");
    let still = &page[start..];
    let svg = &still[still
        .find("<div class=\"static\"><svg")
        .expect("its picture")..];
    let svg = &svg[..svg.find("</svg>").unwrap()];
    // The bands of the chart, as `--format svg` draws them, in a third of
    // its columns.
    let data = embedded_data(&page);
    let bands = data["memories"][0]["timeline"]["bands"]
        .as_array()
        .unwrap()
        .len();
    assert_eq!(svg.matches("<path ").count(), bands);
    let full = super::svg::svg(Inputs::One(&profile), &RenderOptions::default());
    assert_eq!(full.matches("<path ").count(), bands);
    assert!(svg.len() < full.len(), "{} vs {}", svg.len(), full.len());
    assert!(svg.contains("peak "), "the peak is marked");
    // The training phases along the top, named.
    assert!(svg.contains("<title>forward</title>") && svg.contains(">backward</text>"));
}

#[test]
fn a_coarser_timeline_keeps_every_peak_and_adds_up() {
    let profile = event_profile(30, 20, false);
    let memory = &profile.memories[0];
    let facts = crate::analysis::PeakFacts::of(memory, Default::default()).unwrap();
    let (_, tl) = timeline::of_memory(
        &profile.names,
        memory,
        facts.point().index,
        &RenderOptions::default(),
    );
    let coarse = tl.coarsened(7);
    assert!(
        coarse.x.len() <= 7 && !coarse.x.is_empty(),
        "{}",
        coarse.x.len()
    );
    assert_eq!(coarse.hi.iter().max(), tl.hi.iter().max());
    assert_eq!(coarse.lo.iter().min(), tl.lo.iter().min());
    for (c, &hi) in coarse.hi.iter().enumerate() {
        let sum: u64 = coarse.bands.iter().map(|b| b.v[c]).sum();
        assert_eq!(sum, hi, "column {c}");
    }
}

#[test]
fn many_sites_of_long_distinct_frames_make_a_bounded_report() {
    // 200 sites, each a stack of 64 frames of its own named by 4 KiB (the
    // most a label keeps): 52 MB of distinct frame text, which the drill-down's
    // stacks, the call tree and the table would each repeat.
    let mut profile = snapshot_profile("wide.pickle");
    let names = &mut profile.names;
    let file = names.string("train.py");
    let sites: Vec<SiteId> = (0..200)
        .map(|s| {
            let frames: Vec<_> = (0..64)
                .map(|f| {
                    let function = names.string(&format!("{s}.{f}.{}", "x".repeat(4096)));
                    names.frame(Frame {
                        function,
                        file,
                        line: f,
                    })
                })
                .collect();
            let stack = names.stack_leaf_first(&frames);
            names.site(Site {
                stack,
                op: None,
                shape: None,
                dtype: None,
                category: None,
                phase: None,
                ..Site::default()
            })
        })
        .collect();
    profile.memories.push(memory_of_sites(sites));
    let page = html(Inputs::One(&profile), &RenderOptions::default());
    // The table's 200 rows (4 KiB cells and tooltips) are 2.6 MB of it.
    assert!(page.len() < 7_000_000, "report is {} bytes", page.len());
    // The call tree is nested 64 frames deep, past serde_json's limit: the
    // drill-down's data is read on its own.
    let (start, end) = data_span(&page);
    let json = &page[start..end];
    let at = json.find("\"blocks\":").unwrap() + "\"blocks\":".len();
    let mut blocks =
        serde_json::Deserializer::from_str(&json[at..]).into_iter::<serde_json::Value>();
    let blocks = blocks.next().unwrap().unwrap();
    // Every block is listed; the stacks of as many sites as the budget holds.
    assert_eq!(blocks["bytes"].as_array().unwrap().len(), 200);
    let kept = blocks["sites"].as_array().unwrap().len();
    // Each site is 256 KiB of frames: 4 fit in the 1 MiB budget.
    assert!((3..=4).contains(&kept), "{kept} stacks kept");
    let tree = json.find("\"flame\":").unwrap();
    assert!(at - tree < 2_300_000, "call tree of {} bytes", at - tree);
}

/// The bytes of each band held by the listed blocks live at column `col`,
/// as the page's drill-down sums them.
fn listed_at(m: &serde_json::Value, col: usize) -> Vec<u64> {
    let b = &m["blocks"];
    let v = |k: &str| -> Vec<i64> { serde_json::from_value(b[k].clone()).unwrap() };
    let (start, end, bytes, band) = (v("start"), v("end"), v("bytes"), v("band"));
    let x = m["timeline"]["x"][col].as_i64().unwrap();
    let bands = m["timeline"]["bands"].as_array().unwrap().len();
    let mut out = vec![0u64; bands];
    for k in 0..bytes.len() {
        if start[k] <= x && x < end[k] {
            out[band[k] as usize] += bytes[k] as u64;
        }
    }
    out
}

#[test]
fn the_drill_down_lists_what_each_band_holds() {
    let profile = event_profile(30, 20, false);
    let page = html(Inputs::One(&profile), &RenderOptions::default());
    let data = embedded_data(&page);
    let m = &data["memories"][0];
    let total = m["blocks"]["total"].as_u64().unwrap() as usize;
    assert_eq!(total, profile.memories[0].allocations.len());
    assert_eq!(m["blocks"]["bytes"].as_array().unwrap().len(), total);
    // Every block is listed, so at every column each band's listed blocks
    // add up to what the timeline draws for it (the timeline sums sites,
    // the drill-down lifetimes: two ways to the same figure).
    let cols = m["timeline"]["x"].as_array().unwrap().len();
    for col in [0, cols / 3, cols / 2, cols - 1] {
        let drawn: Vec<u64> = m["timeline"]["bands"]
            .as_array()
            .unwrap()
            .iter()
            .map(|b| b["v"][col].as_u64().unwrap())
            .collect();
        assert_eq!(listed_at(m, col), drawn, "column {col}");
    }
    // Each block's stack is kept, leaf first, with the frames' labels.
    let site = m["blocks"]["site"][0].as_i64().unwrap() as usize;
    let leaf = m["blocks"]["sites"][site]["stack"][0].as_u64().unwrap() as usize;
    assert!(m["blocks"]["frames"][leaf][0]
        .as_str()
        .unwrap()
        .starts_with("layer"));
    // The range the allocator holds is one segment, held throughout.
    assert_eq!(m["blocks"]["segments"].as_array().unwrap().len(), 1);
    assert_eq!(m["blocks"]["segments"][0][1], 1u64 << 30);
    assert!(page.contains("<h3>Allocator state</h3>"));
}

#[test]
fn memories_open_biggest_first_and_trivial_ones_are_one_table() {
    let mut profile = event_profile(5, 8, false);
    let mut tiny = Memory::new("jit_stage(0)", MemoryKind::ProgramSpace, Axis::ProgramOrder);
    let site = profile.memories[0].allocations[0].site;
    let id = tiny.push_allocation(Allocation {
        bytes: 8,
        requested: 8,
        count: 1,
        address: None,
        site,
    });
    tiny.live_at_start.push(id);
    // Profile order puts the 8 B memory first; the page does not.
    profile.memories.insert(0, tiny);
    let page = html(Inputs::One(&profile), &RenderOptions::default());
    assert!(
        !page.contains("id=\"m0-0\""),
        "the trivial memory has no section"
    );
    assert!(page.contains("<section class=\"memory\" id=\"m0-1\">"));
    let table = &page[page.find("<details class=\"trivial\">").unwrap()..];
    assert!(
        table.starts_with("<details class=\"trivial\"><summary>1 more memory too small to matter")
    );
    assert!(table.contains(
        "<td>jit_stage(0)</td><td>program_space</td><td class=\"num\" data-v=\"8\">8 B</td>"
    ));
    let data = embedded_data(&page);
    assert_eq!(data["memories"].as_array().unwrap().len(), 1);
    assert_eq!(data["memories"][0]["dom"], "m0-1");
}

#[test]
fn times_read_from_the_start_of_the_recording() {
    use super::marks::relative_time;
    assert_eq!(
        relative_time(Axis::TimeUs, 1_025_430, Some(1_000_000)).as_deref(),
        Some("t+25.43 ms")
    );
    assert_eq!(
        relative_time(Axis::TimePs, 500_000_000_000, Some(0)).as_deref(),
        Some("t+500.0 ms")
    );
    assert_eq!(
        relative_time(Axis::TimeUs, 3_250_000, Some(0)).as_deref(),
        Some("t+3.250 s")
    );
    assert_eq!(
        relative_time(Axis::TimeUs, 7, Some(7)).as_deref(),
        Some("t+0 s")
    );
    assert_eq!(relative_time(Axis::ProgramOrder, 45, Some(0)), None);
    // The page's header says it that way.
    let profile = event_profile(3, 4, false);
    let page = html(Inputs::One(&profile), &RenderOptions::default());
    let peak = replay::peak(&profile.memories[0]).unwrap();
    let start = profile.memories[0].recording_start();
    let expected = relative_time(Axis::TimePs, peak.at, start).unwrap();
    assert!(
        page.contains(&format!("<dt>peak at</dt><dd>{expected}")),
        "{expected}"
    );
}
