//! A compiled program's peak buffer by buffer: what `peak` shows for a
//! program's memory space, and what `oom`'s post-mortem of a program over
//! capacity reads. It sits below both, so `peak` (whose `--budget` opens
//! with that post-mortem) and `oom` depend on it and not on each other.

use serde::Serialize;

use crate::model::{AllocId, Memory, Names, Profile, ProgramBuffer, SiteId};

use super::group::{self, Group, GroupBy};
use super::{point_step, replay};

/// XProf's Memory Viewer sums buffers under this size into one row.
pub const XPROF_SMALL_BUFFER_BYTES: u64 = 16384;

/// The peak of a compiled program's memory space, buffer by buffer.
#[derive(Debug, Serialize)]
pub struct ProgramPeak {
    /// Index of the event that causes the peak (0 when nothing is allocated
    /// past the start), as XProf's `peakHeapSizePosition`.
    pub peak_position: i64,
    /// The instruction being executed at the peak.
    pub peak_instruction: Option<String>,
    /// Live bytes before each event and after the last (n + 1 points).
    pub heap_timeline_bytes: Vec<u64>,
    /// The same without padding.
    pub heap_timeline_requested_bytes: Vec<u64>,
    /// Every buffer live at the peak, largest first (with `--xprof-compat`:
    /// in XProf's order, buffers under 16 KiB in one last row).
    pub buffers_at_peak: Vec<BufferAtPeak>,
    /// Bytes at the peak per training phase (`forward`, `backward`,
    /// `optimizer`; `<none>` for buffers without one), largest first; empty
    /// when the program computes no gradients. The phase breakdown's
    /// groups.
    pub phases: Vec<Group>,
    /// For a training step (a program that computes gradients): parameters
    /// that come back as outputs of the same shape, both live at the peak in
    /// buffers of their own (its parameters and optimizer state): donating
    /// them (`jax.jit(..., donate_argnums=…)`)
    /// lets the output reuse the parameter's memory. Absent when none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub donation: Option<Donation>,
}

/// What donating a program's parameters would save at its peak.
#[derive(Debug, Serialize)]
pub struct Donation {
    /// Parameters live at the peak beside an output of their shape.
    pub parameters: u64,
    /// Their bytes: what the peak would lose.
    pub bytes: u64,
}

/// The parameters live at the peak that an output of the same shape, live
/// beside them in a buffer of its own, could have reused: each output is
/// matched to one parameter of its shape (largest first). Parameters XLA
/// already aliases to an output share its allocation and are not counted.
fn donation(memory: &Memory, names: &crate::model::Names, live: &[AllocId]) -> Option<Donation> {
    let mut parameters: Vec<(String, u64)> = Vec::new();
    let mut outputs: Vec<String> = Vec::new();
    for &id in live {
        let a = memory.allocation(id);
        let site = names.site_of(a.site);
        let (Some(category), Some(shape)) = (site.category, site.shape) else {
            continue;
        };
        let shape = names.str(shape).to_string();
        match names.str(category) {
            "Parameter" => parameters.push((shape, a.bytes)),
            "Output" => outputs.push(shape),
            _ => {}
        }
    }
    parameters.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    let mut matched = vec![false; parameters.len()];
    let (mut count, mut bytes) = (0u64, 0u64);
    for shape in outputs {
        if let Some(i) = (0..parameters.len()).find(|&i| !matched[i] && parameters[i].0 == shape) {
            matched[i] = true;
            count += 1;
            bytes = bytes.saturating_add(parameters[i].1);
        }
    }
    (count > 0).then_some(Donation {
        parameters: count,
        bytes,
    })
}

/// One buffer live at a program's peak.
#[derive(Debug, Serialize)]
pub struct BufferAtPeak {
    /// The instruction that defines it (with its tuple index, `fusion{1}`).
    pub instruction: String,
    /// What the instruction does (`fusion`, `dot`, `parameter`).
    pub opcode: Option<String>,
    /// Its shape as XLA prints it.
    pub shape: Option<String>,
    /// Bytes the buffer takes, with padding.
    pub bytes: u64,
    /// Bytes without layout padding.
    pub unpadded_bytes: u64,
    /// The framework op (`jit(step)/transpose(jvp())/dot_general`).
    pub op_name: Option<String>,
    /// Parameter, Output, Thread-local, Constant or Temporary.
    pub category: Option<String>,
    /// forward, backward or optimizer, when the op name tells.
    pub phase: Option<String>,
    /// The innermost source line, `file:line`.
    pub source: Option<String>,
}

impl BufferAtPeak {
    /// The buffer of a program's allocation at `site`, named by `buffer`,
    /// taking `(bytes, unpadded_bytes)`.
    pub(crate) fn of(
        names: &Names,
        site: SiteId,
        buffer: Option<&ProgramBuffer>,
        (bytes, unpadded_bytes): (u64, u64),
    ) -> BufferAtPeak {
        let text = |id: Option<crate::model::StrId>| id.map(|s| names.str(s).to_string());
        let site = names.site_of(site);
        BufferAtPeak {
            instruction: buffer.map_or_else(String::new, |b| names.str(b.name).to_string()),
            opcode: text(buffer.and_then(|b| b.opcode)),
            shape: text(site.shape),
            bytes,
            unpadded_bytes,
            op_name: text(site.op),
            category: text(site.category),
            phase: site.phase.map(|p| p.name().to_string()),
            source: names.leaf(site.stack).map(|f| {
                let frame = names.frame_of(f);
                format!("{}:{}", names.str(frame.file), frame.line)
            }),
        }
    }
}

pub(super) fn sorted_by_size(memory: &Memory, live: &[AllocId]) -> Vec<AllocId> {
    let mut ids = live.to_vec();
    ids.sort_by(|a, b| {
        memory
            .allocation(*b)
            .bytes
            .cmp(&memory.allocation(*a).bytes)
            .then(a.cmp(b))
    });
    ids
}

pub(crate) fn program_peak(
    profile: &Profile,
    memory: &Memory,
    p: replay::Point,
    live: &[AllocId],
    xprof_compat: bool,
) -> Option<ProgramPeak> {
    let program = memory.program.as_ref()?;
    let names = &profile.names;
    let mut heap_timeline_bytes = Vec::new();
    let mut heap_timeline_requested_bytes = Vec::new();
    replay::for_each_point(memory, |point| {
        heap_timeline_bytes.push(point.bytes);
        heap_timeline_requested_bytes.push(point.requested);
    });
    let order = if xprof_compat {
        // Whole-program buffers first, then the heap's in the order they
        // were allocated: XProf's `maxHeap` order.
        live.to_vec()
    } else {
        sorted_by_size(memory, live)
    };
    // XProf shows each buffer's own size, and in memory spaces other than 0
    // leaves out the buffers that live through the whole program.
    let shown = |id: AllocId| {
        let a = memory.allocation(id);
        match program.buffer(id).filter(|_| xprof_compat) {
            Some(b) => (b.own_bytes, b.own_unpadded_bytes),
            None => (a.bytes, a.requested),
        }
    };
    let mut small = 0u64;
    let mut buffers_at_peak: Vec<BufferAtPeak> = order
        .into_iter()
        .filter(|id| {
            !(xprof_compat && program.memory_space != 0 && memory.live_at_start.contains(id))
        })
        .filter(|&id| {
            let bytes = shown(id).0;
            let lumped = xprof_compat && bytes < XPROF_SMALL_BUFFER_BYTES;
            if lumped {
                small = small.saturating_add(bytes);
            }
            !lumped
        })
        .map(|id| {
            let (bytes, unpadded_bytes) = shown(id);
            BufferAtPeak::of(
                names,
                memory.allocation(id).site,
                program.buffer(id),
                (bytes, unpadded_bytes),
            )
        })
        .collect();
    // The same groups as the phase breakdown, kept where programs always
    // gave them.
    let by_site = group::totals_by_site(memory, live);
    let phases = if group::has_values(names, &by_site, GroupBy::Phase) {
        group::breakdown(
            names,
            &by_site,
            GroupBy::Phase,
            &super::FrameFilter::default(),
        )
    } else {
        Vec::new()
    };
    if small > 0 {
        buffers_at_peak.push(BufferAtPeak {
            instruction: format!("small (<{XPROF_SMALL_BUFFER_BYTES} bytes)"),
            opcode: None,
            shape: None,
            bytes: small,
            unpadded_bytes: 0,
            op_name: None,
            category: None,
            phase: None,
            source: None,
        });
    }
    // A training step (one that computes gradients) is the program that
    // runs again on its own outputs, where donating pays.
    let donation = if phases.is_empty() {
        None
    } else {
        donation(memory, names, live)
    };
    Some(ProgramPeak {
        peak_position: if p.index == 0 { 0 } else { p.at },
        peak_instruction: point_step(memory, p.index).map(str::to_string),
        heap_timeline_bytes,
        heap_timeline_requested_bytes,
        buffers_at_peak,
        phases,
        donation,
    })
}
