use super::*;
use crate::model::XlaReportKind;

fn reports(text: &str) -> Vec<XlaOomReport> {
    let mut scanner = Scanner::default();
    for (i, line) in text.lines().enumerate() {
        scanner.line(i as u64 + 1, line);
    }
    scanner.finish()
}

fn fixture(name: &str) -> String {
    let path = format!("{}/../../tests/xla/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

const GIB: u64 = 1 << 30;
const MIB: u64 = 1 << 20;

#[test]
fn sizes_read_as_xla_prints_them() {
    let f = |t: &str| whole_figure(t).map(|f| (f.bytes, f.rounding));
    assert_eq!(f("0B"), Some((0, 0)));
    assert_eq!(f("980.0K"), Some((980 * 1024, 51)));
    assert_eq!(f("16.00G"), Some((16 * GIB, GIB / 200)));
    assert_eq!(f("528.00M"), Some((528 * MIB, MIB / 200)));
    assert_eq!(
        f("117.03MiB"),
        Some(((117.03 * MIB as f64).round() as u64, MIB / 200))
    );
    assert_eq!(f("214748364800"), Some((214_748_364_800, 0)));
    assert_eq!(f("0xc000000"), Some((0xc00_0000, 0)));
    // `2.62G` is 2.625G rounded: within half a unit of the last digit.
    assert!(whole_figure("2.62G").unwrap().agrees_with(2_818_572_288));
    assert!(!whole_figure("2.62G").unwrap().agrees_with(2_830_000_000));
    for not_a_size in [
        "",
        "G",
        "1.2.3G",
        "12 bytes",
        "1.5Q",
        "99999999999999999999999G",
        "-1K",
    ] {
        assert_eq!(whole_figure(not_a_size), None, "{not_a_size}");
    }
}

/// The TPU compile-time report: every figure as the report prints it, the
/// usage breakdowns, the allocations with their operators and labels.
#[test]
fn reads_the_tpu_compile_time_report() {
    let all = reports(&fixture("tpu_compile_oom.log"));
    assert_eq!(all.len(), 2);
    let hbm = &all[0];
    assert_eq!(hbm.kind, XlaReportKind::CompileTime);
    assert_eq!(hbm.line, 5);
    assert_eq!(hbm.memory_space.as_deref(), Some("hbm"));
    assert_eq!(hbm.capacity.as_ref().map(|c| c.bytes), Some(16 * GIB));
    assert_eq!(hbm.used.as_ref().map(|u| u.text.as_str()), Some("18.87G"));
    assert_eq!(hbm.over.as_ref().map(|o| o.text.as_str()), Some("2.87G"));
    let names: Vec<(&str, Option<&str>)> = hbm
        .usage
        .iter()
        .map(|u| (u.name.as_str(), u.size.as_ref().map(|s| s.text.as_str())))
        .collect();
    assert_eq!(
        names,
        [
            ("reserved", Some("528.00M")),
            ("program", Some("18.36G")),
            ("arguments", None),
            ("output", None)
        ]
    );
    let program: Vec<&str> = hbm.program.iter().map(|u| u.name.as_str()).collect();
    assert_eq!(program, ["global", "scoped", "HLO temp"]);
    assert_eq!(
        hbm.program[2].detail.as_deref(),
        Some("92.8% utilization, 0.3% fragmentation (56.95M)")
    );
    assert_eq!(hbm.allocations.len(), 4);
    let labels = &hbm.allocations[0];
    assert_eq!(labels.rank, Some(1));
    assert_eq!(
        labels.shape.as_deref(),
        Some("s32[29360128,10]{1,0:T(8,128)}")
    );
    assert_eq!(labels.op_type.as_deref(), Some("OneHot"));
    assert_eq!(labels.op_name.as_deref(), Some("jit(train_step)/labels"));
    assert_eq!(labels.instruction.as_deref(), Some("iota.2"));
    assert_eq!(labels.opcode.as_deref(), Some("iota"));
    assert_eq!(labels.allocation_type.as_deref(), Some("HLO temp"));
    let one_hot = &hbm.allocations[1];
    assert_eq!(one_hot.source.as_deref(), Some("train.py:41"));
    // A tuple-shaped label, cut short by the report: its opcode still reads.
    assert_eq!(hbm.allocations[2].opcode.as_deref(), Some("fusion"));
    assert_eq!(hbm.allocations[2].op_name, None);
    // No padding: no `Unpadded size` line.
    assert_eq!(hbm.allocations[3].unpadded_size, None);
    // The second report, in another memory space, with the HLO temp's
    // padded and unpadded sizes and known argument and output sizes.
    let vmem = &all[1];
    assert_eq!(vmem.memory_space.as_deref(), Some("vmem"));
    let (unpadded, padded) = vmem.hlo_temp_unpadded_padded.clone().unwrap();
    assert_eq!(
        (unpadded.text.as_str(), padded.text.as_str()),
        ("20.67M", "20.75M")
    );
    assert_eq!(
        vmem.usage[3].detail.as_deref(),
        Some("shares 0B with arguments")
    );
}

/// Every tiled shape of the fixtures: memtool's padded and unpadded sizes
/// print as the report's.
#[test]
fn computed_layouts_agree_with_every_report() {
    let mut checked = 0;
    for name in ["tpu_compile_oom.log", "tpu_allocation_oom.log"] {
        for r in reports(&fixture(name)) {
            for a in &r.allocations {
                let layout = a.layout.as_ref().expect("every shape parses");
                let size = a.size.as_ref().unwrap();
                assert!(size.agrees_with(layout.padded_bytes), "{a:?}");
                if let Some(u) = &a.unpadded_size {
                    assert!(u.agrees_with(layout.unpadded_bytes), "{a:?}");
                }
                if let Some(p) = &a.padding {
                    let computed = layout.padded_bytes - layout.unpadded_bytes;
                    assert!(p.agrees_with(computed), "{a:?}");
                }
                checked += 1;
            }
        }
    }
    assert_eq!(checked, 8);
}

#[test]
fn reads_the_one_line_allocation_report_once() {
    let all = reports(&fixture("tpu_allocation_oom.log"));
    assert_eq!(all.len(), 2);
    let hbm = &all[0];
    assert_eq!(hbm.kind, XlaReportKind::Allocation);
    // Logged by jaxlib and again by the exception that carries it.
    assert_eq!((hbm.line, hbm.repeated_at_lines.clone()), (4, vec![8]));
    assert_eq!(
        hbm.request.as_ref().map(|r| r.bytes),
        Some(327_680 * 327_680)
    );
    assert_eq!(hbm.capacity.as_ref().map(|r| r.bytes), Some(16 * GIB));
    assert_eq!(hbm.memory_space.as_deref(), Some("hbm"));
    assert_eq!(hbm.instruction, None);
    let a = &hbm.allocations[0];
    assert_eq!(a.allocation.as_deref(), Some("#allocation7"));
    assert_eq!(
        a.shape.as_deref(),
        Some("u8[327680,327680]{1,0:T(8,128)(4,1)}")
    );
    assert_eq!(
        a.allocation_type.as_deref(),
        Some("output of xor_convert_fusion@{}")
    );
    let vmem = &all[1];
    assert_eq!(vmem.memory_space.as_deref(), Some("vmem"));
    assert_eq!(vmem.instruction.as_deref(), Some("gated_matmul_kernel.2"));
    assert_eq!(vmem.capacity.as_ref().map(|r| r.bytes), Some(64 * MIB));
}

#[test]
fn reads_the_gpu_failure_with_the_allocators_dump() {
    let all = reports(&fixture("gpu_bfc_oom.log"));
    assert_eq!(all.len(), 1, "{all:#?}");
    let gpu = &all[0];
    assert_eq!(gpu.kind, XlaReportKind::GpuAllocator);
    assert_eq!(gpu.request.as_ref().map(|r| r.bytes), Some(200 * GIB));
    assert_eq!(gpu.memory_space.as_deref(), Some("GPU_0_bfc"));
    let bfc = gpu.bfc.as_ref().unwrap();
    assert_eq!(bfc.limit_bytes, Some(15_753_315_328));
    // 27×256 + 3×1280 + 40×1 MiB + 12×384 MiB + 2×4 GiB, as the script writes.
    let in_use = 27 * 256 + 3 * 1280 + 40 * MIB + 12 * 384 * MIB + 2 * 4 * GIB;
    assert_eq!(bfc.in_use_bytes, Some(in_use));
    assert_eq!(bfc.in_use_by_size.len(), 5);
    assert_eq!(
        (bfc.free_chunks, bfc.largest_free_chunk_bytes),
        (4, 6 * MIB)
    );
    assert_eq!(bfc.max_alloc_size_bytes, Some(4 * GIB));
    // The bare line: no dump, no capacity.
    let bare = reports(&fixture("gpu_oom_line.txt"));
    assert_eq!(bare.len(), 1);
    assert_eq!(bare[0].bfc, None);
    assert_eq!(bare[0].request.as_ref().map(|r| r.bytes), Some(200 * GIB));
}

/// A dump that follows the runtime's message belongs to it; a BFC failure
/// without one is a report of its own; a retry the caller tolerates is none.
#[test]
fn bfc_dumps_find_their_failure() {
    let after = "RESOURCE_EXHAUSTED: Out of memory while trying to allocate 16.00GiB.\n\
                 W bfc_allocator.cc:501] Allocator (GPU_0_bfc) ran out of memory trying to \
                 allocate 16.00GiB (rounded to 17179869184)requested by op\n\
                 Stats: \nLimit:  1000\nInUse:  900\n";
    let all = reports(after);
    assert_eq!(all.len(), 1, "{all:#?}");
    assert_eq!(all[0].bfc.as_ref().and_then(|b| b.limit_bytes), Some(1000));
    // The runtime's rounded figure becomes the allocator's exact one.
    assert_eq!(all[0].request, Some(ReportedBytes::exact(17_179_869_184)));
    let alone = "W bfc_allocator.cc:501] Allocator (GPU_0_bfc) ran out of memory trying to \
                 allocate 1.00GiB (rounded to 1073741824)requested by op\nStats: \nLimit: 5\n";
    let all = reports(alone);
    assert_eq!(all.len(), 1);
    assert_eq!(all[0].request, Some(ReportedBytes::exact(1 << 30)));
    let retry = "W bfc_allocator.cc:243] Allocator (GPU_0_bfc) ran out of memory trying to \
                 allocate 1.25GiB with freed_by_count=0. The caller indicates that this is \
                 not a failure, but may mean that there could be performance gains\n";
    assert!(reports(retry).is_empty());
}

#[test]
fn text_without_a_report_holds_none() {
    assert!(reports("hello\nLimit: 5\n  1. Size: 3G\nTotal hbm usage >= 1G:\n").is_empty());
    // A report cut short after its first line is still one.
    let cut = reports("Ran out of memory in memory space hbm. Used 17.60G of 16.00G hbm.");
    assert_eq!(cut.len(), 1);
    assert_eq!(cut[0].over, None);
}

/// Any text gives reports or none, never a panic: every prefix of the
/// fixtures, and each line of them mangled.
#[test]
fn any_text_is_read_without_panicking() {
    for name in [
        "tpu_compile_oom.log",
        "tpu_allocation_oom.log",
        "gpu_bfc_oom.log",
    ] {
        let text = fixture(name);
        for cut in (0..text.len())
            .step_by(7)
            .filter(|&c| text.is_char_boundary(c))
        {
            reports(&text[..cut]);
        }
        for line in text.lines() {
            for cut in (0..line.len()).filter(|&c| line.is_char_boundary(c)) {
                let (a, b) = line.split_at(cut);
                reports(&format!("{b}{a}"));
                reports(&format!("{a}\u{2028}é{b}"));
            }
        }
    }
}

/// Thousands of distinct reports cost time in proportion, and a report
/// logged again anywhere is one.
#[test]
fn many_reports_are_read_in_linear_time() {
    let mut text = String::new();
    for i in 0..20_000u64 {
        text.push_str(&format!(
            "RESOURCE_EXHAUSTED: Out of memory while trying to allocate {} bytes.\n",
            1000 + i
        ));
    }
    text.push_str("RESOURCE_EXHAUSTED: Out of memory while trying to allocate 1000 bytes.\n");
    let start = std::time::Instant::now();
    let all = reports(&text);
    assert_eq!(all.len(), 20_000);
    assert_eq!(all[0].repeated_at_lines, [20_001]);
    assert!(start.elapsed().as_secs() < 20, "{:?}", start.elapsed());
}

#[test]
fn lines_are_cut_at_the_limit() {
    let mut long = vec![b'x'; MAX_LINE * 3];
    long.extend_from_slice(b"\nnext\n");
    let mut reader = std::io::Cursor::new(long);
    let mut line = Vec::new();
    assert_eq!(read_line(&mut reader, &mut line).unwrap(), MAX_LINE * 3 + 1);
    assert_eq!(line.len(), MAX_LINE);
    line.clear();
    assert_eq!(read_line(&mut reader, &mut line).unwrap(), 5);
    assert_eq!(line, b"next\n");
}
