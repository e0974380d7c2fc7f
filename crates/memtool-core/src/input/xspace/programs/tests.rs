//! XProf's own Memory Viewer unit tests
//! (`hlo_proto_to_memory_visualization_utils_test.cc`), rebuilt.

use super::phase::phase;
use super::replay::{ALLOC, FREE, SHARE_WITH};
use super::*;
use crate::analysis::replay;
use crate::model::Phase;
use memtool_proto::xla::buffer_allocation_proto::Assigned;
use memtool_proto::xla::heap_simulator_trace::Event as TraceEvent;
use memtool_proto::xla::logical_buffer_proto::Location;
use memtool_proto::xla::{
    BufferAssignmentProto, HeapSimulatorTrace, HloComputationProto, HloModuleProto, HloProto,
    LogicalBufferProto, OpMetadata,
};
use prost::Message;

const MIB: i64 = 1 << 20;
const U64: i32 = 9;

/// `fusion.1` … `fusion.4` (ids 0-3) each define a U64 in a tuple; logical
/// buffers 1-4 of the given sizes share one temporary allocation of 1 MiB;
/// `constant.1` fills a constant allocation of 1 MiB.
fn module(sizes: &[i64], events: &[(i32, i64, i64)]) -> HloProto {
    let u64_in_tuple = ShapeProto {
        element_type: 13,
        tuple_shapes: vec![ShapeProto {
            element_type: U64,
            ..Default::default()
        }],
        ..Default::default()
    };
    let instruction = |id: i64, name: &str| HloInstructionProto {
        name: name.to_string(),
        opcode: "fusion".to_string(),
        shape: Some(u64_in_tuple.clone()),
        metadata: Some(OpMetadata {
            op_name: format!("jit(f)/transpose(jvp(op{id}))"),
            ..Default::default()
        }),
        id,
    };
    let mut instructions: Vec<_> = (0..sizes.len() as i64)
        .map(|i| instruction(i, &format!("fusion.{}", i + 1)))
        .collect();
    instructions.push(instruction(9, "constant.1"));
    let buffer = |id: i64, size: i64, instruction_id: i64| LogicalBufferProto {
        id,
        size,
        defined_at: Some(Location {
            instruction_id,
            shape_index: vec![0],
            ..Default::default()
        }),
        color: 0,
    };
    let mut logical_buffers: Vec<_> = sizes
        .iter()
        .enumerate()
        .map(|(i, &size)| buffer(i as i64 + 1, size, i as i64))
        .collect();
    logical_buffers.push(buffer(10, MIB, 9));
    let assigned = |id: i64, size: i64| Assigned {
        logical_buffer_id: id,
        offset: 0,
        size,
    };
    HloProto {
        hlo_module: Some(HloModuleProto {
            name: "test_module".to_string(),
            computations: vec![HloComputationProto {
                instructions,
                ..Default::default()
            }],
            ..Default::default()
        }),
        buffer_assignment: Some(BufferAssignmentProto {
            logical_buffers,
            buffer_allocations: vec![
                BufferAllocationProto {
                    index: 0,
                    size: MIB,
                    assigned: sizes
                        .iter()
                        .enumerate()
                        .map(|(i, &s)| assigned(i as i64 + 1, s))
                        .collect(),
                    ..Default::default()
                },
                BufferAllocationProto {
                    index: 1,
                    size: MIB,
                    is_constant: true,
                    assigned: vec![assigned(10, MIB)],
                    ..Default::default()
                },
            ],
            heap_simulator_traces: vec![HeapSimulatorTrace {
                events: events
                    .iter()
                    .map(|&(kind, buffer_id, canonical)| TraceEvent {
                        kind,
                        buffer_id,
                        share_with_canonical_id: canonical,
                        instruction_name: format!("step{buffer_id}"),
                        ..Default::default()
                    })
                    .collect(),
                ..Default::default()
            }],
        }),
    }
}

fn read(hlo: &HloProto) -> Profile {
    let mut profile = Profile::default();
    let bytes = hlo.encode_to_vec();
    let decoded = Decoded::parse(&bytes).unwrap();
    Module::new(&decoded, 7).read_into(&mut profile, "test");
    profile
}

fn names_at_peak(profile: &Profile) -> Vec<String> {
    let memory = &profile.memories[0];
    let peak = replay::peak(memory).unwrap();
    let program = memory.program.as_ref().unwrap();
    let mut names: Vec<String> = replay::live_at(memory, peak.index)
        .into_iter()
        .map(|id| {
            profile
                .names
                .str(program.buffer(id).unwrap().name)
                .to_string()
        })
        .collect();
    names.sort();
    names
}

#[test]
fn buffers_are_placed_where_the_assignment_put_them() {
    let quarter = MIB / 4;
    let mut hlo = module(
        &[quarter, quarter, quarter],
        &[(ALLOC, 1, 0), (ALLOC, 2, 0), (FREE, 1, 0), (ALLOC, 3, 0)],
    );
    let assignment = hlo.buffer_assignment.as_mut().unwrap();
    // Buffer 3 reuses buffer 1's place; buffer 2 sits after it.
    assignment.buffer_allocations[0].assigned[1].offset = quarter;
    let profile = read(&hlo);
    let memory = &profile.memories[0];
    let program = memory.program.as_ref().unwrap();
    let address_of = |name: &str| {
        let (i, _) = program
            .buffers
            .iter()
            .enumerate()
            .find(|(_, b)| b.is_some_and(|b| profile.names.str(b.name) == name))
            .unwrap();
        memory.allocations[i].address()
    };
    // The temporary allocation (index 0) starts the space, the constant
    // allocation (index 1) follows it.
    assert_eq!(address_of("fusion.1{0}"), Some(0));
    assert_eq!(address_of("fusion.2{0}"), Some(quarter as u64));
    assert_eq!(address_of("fusion.3{0}"), Some(0));
    assert_eq!(address_of("constant.1{0}"), Some(MIB as u64));
}

#[test]
fn sharing_an_allocated_buffer_does_not_double_it() {
    let half = MIB / 2;
    let events = [
        (ALLOC, 1, 0),
        (SHARE_WITH, 2, 1),
        (FREE, 1, 0),
        (FREE, 2, 0),
    ];
    let profile = read(&module(&[half, half], &events));
    assert!(profile.warnings.is_empty(), "{:?}", profile.warnings);
    let memory = &profile.memories[0];
    assert_eq!(memory.id, "test_module(7)");
    let peak = replay::peak(memory).unwrap();
    // XProf: peak 1.5 MiB; unpadded 8 B (a U64) + 1 MiB of constants.
    assert_eq!(peak.bytes, (MIB + half) as u64);
    assert_eq!(peak.requested, MIB as u64 + 8);
    assert_eq!(peak.at, 0);
    let info = memory.program.as_ref().unwrap();
    assert_eq!(info.total_allocation_bytes, 2 * MIB as u64);
    assert_eq!(info.temporary_bytes, MIB as u64);
    assert_eq!(info.constant_bytes, MIB as u64);
    let mut timeline = Vec::new();
    replay::for_each_point(memory, |p| timeline.push(p.bytes));
    let (c, h) = (MIB as u64, half as u64);
    assert_eq!(timeline, vec![c, c + h, c + h, c + h, c]);
    assert_eq!(
        names_at_peak(&profile),
        vec!["constant.1{0}", "fusion.1{0}"]
    );
    assert_eq!(info.step(1), Some("step2"));
}

#[test]
fn a_share_chain_after_free_reuses_the_root_once() {
    let half = MIB / 2;
    let events = [
        (ALLOC, 1, 0),
        (SHARE_WITH, 2, 1),
        (FREE, 1, 0),
        (FREE, 2, 0),
        (SHARE_WITH, 3, 2),
        (FREE, 3, 0),
    ];
    let profile = read(&module(&[half, half, half], &events));
    let peak = replay::peak(&profile.memories[0]).unwrap();
    // XProf: 0.5 MiB and one buffer at peak (plus the constant here).
    assert_eq!(peak.bytes, (MIB + half) as u64);
    assert_eq!(names_at_peak(&profile).len(), 2);
}

#[test]
fn memory_reused_through_a_chain_is_named_after_its_current_holder() {
    let quarter = MIB / 4;
    let events = [
        (ALLOC, 1, 0),
        (SHARE_WITH, 2, 1),
        (FREE, 1, 0),
        (FREE, 2, 0),
        (ALLOC, 4, 0),
        (SHARE_WITH, 3, 2),
        (FREE, 3, 0),
        (FREE, 4, 0),
    ];
    let profile = read(&module(&[quarter, quarter, quarter, 2 * quarter], &events));
    let peak = replay::peak(&profile.memories[0]).unwrap();
    // XProf: 0.75 MiB at the SHARE_WITH C→B step, shown as fusion.3 and fusion.4.
    assert_eq!(peak.bytes, (MIB + 3 * quarter) as u64);
    assert_eq!(peak.at, 5);
    assert_eq!(
        names_at_peak(&profile),
        vec!["constant.1{0}", "fusion.3{0}", "fusion.4{0}"]
    );
}

#[test]
fn over_freeing_and_unknown_buffers_warn_and_keep_positions() {
    let half = MIB / 2;
    let events = [
        (ALLOC, 1, 0),
        (FREE, 1, 0),
        (FREE, 1, 0),
        (ALLOC, 99, 0),
        (7, 2, 0),
    ];
    let profile = read(&module(&[half, half], &events));
    let memory = &profile.memories[0];
    assert_eq!(memory.events.len(), 5);
    let mut timeline = Vec::new();
    replay::for_each_point(memory, |p| timeline.push(p.bytes));
    let c = MIB as u64;
    assert_eq!(timeline, vec![c, c + half as u64, c, c, c, c]);
    let warning = &profile.warnings[0].message;
    assert!(warning.contains("1 frees") && warning.contains("1 events of an unknown kind"));
    assert!(warning.contains("1 events on buffers"), "{warning}");
}

#[test]
fn further_traces_of_a_space_are_named_in_a_warning() {
    let half = MIB / 2;
    let mut hlo = module(&[half], &[(ALLOC, 1, 0), (FREE, 1, 0)]);
    let assignment = hlo.buffer_assignment.as_mut().unwrap();
    assignment.logical_buffers.push(LogicalBufferProto {
        id: 5,
        size: MIB,
        defined_at: Some(Location {
            instruction_id: 0,
            ..Default::default()
        }),
        color: 0,
    });
    assignment.buffer_allocations.push(BufferAllocationProto {
        index: 2,
        size: MIB,
        assigned: vec![Assigned {
            logical_buffer_id: 5,
            offset: 0,
            size: MIB,
        }],
        ..Default::default()
    });
    let event = |kind| TraceEvent {
        kind,
        buffer_id: 5,
        ..Default::default()
    };
    assignment.heap_simulator_traces.push(HeapSimulatorTrace {
        events: vec![event(ALLOC), event(FREE)],
        ..Default::default()
    });
    let profile = read(&hlo);
    let memory = &profile.memories[0];
    assert_eq!(replay::peak(memory).unwrap().bytes, (MIB + half) as u64);
    assert_eq!(
        memory.program.as_ref().unwrap().temporary_bytes,
        2 * MIB as u64
    );
    let warning = &profile.warnings[0].message;
    assert!(
        warning.contains("1 more heap simulator traces"),
        "{warning}"
    );
}

#[test]
fn xprof_compat_shows_own_sizes_and_hides_whole_program_buffers_off_space_0() {
    use crate::analysis::peak::{peak_with, PeakSettings};
    use crate::analysis::Options;
    let quarter = MIB / 4;
    // B (0.125 MiB) reuses A's 0.25 MiB after A is freed, while C is live.
    let events = [
        (ALLOC, 1, 0),
        (FREE, 1, 0),
        (ALLOC, 3, 0),
        (SHARE_WITH, 2, 1),
        (FREE, 2, 0),
        (FREE, 3, 0),
    ];
    let mut hlo = module(&[quarter, quarter / 2, quarter], &events);
    let assignment = hlo.buffer_assignment.as_mut().unwrap();
    for a in &mut assignment.buffer_allocations {
        a.color = 1;
    }
    for b in &mut assignment.logical_buffers {
        b.color = 1;
    }
    let profile = read(&hlo);
    assert_eq!(profile.memories[0].id, "test_module(7)/S(1)");
    let settings = PeakSettings {
        budget: None,
        xprof_compat: true,
        ..Default::default()
    };
    let report = peak_with(&profile, &Options::default(), &settings);
    let program = report.memories[0].program.as_ref().unwrap();
    // The heap holds C and A's 0.25 MiB (plus the constant's 1 MiB) ...
    assert_eq!(
        report.memories[0].peak.peak_bytes,
        (MIB + 2 * quarter) as u64
    );
    // ... XProf lists B with its own size, and no constant in space 1.
    let rows: Vec<(&str, u64)> = program
        .buffers_at_peak
        .iter()
        .map(|b| (b.instruction.as_str(), b.bytes))
        .collect();
    let (q, e) = (quarter as u64, quarter as u64 / 2);
    assert_eq!(rows, vec![("fusion.3{0}", q), ("fusion.2{0}", e)]);
}

#[test]
fn phases_follow_jax_op_names() {
    assert_eq!(
        phase("jit(f)/transpose(jvp(g))/dot", true, "Temporary"),
        Some(Phase::Backward)
    );
    assert_eq!(
        phase("jit(f)/jvp(g)/dot", true, "Temporary"),
        Some(Phase::Forward)
    );
    assert_eq!(phase("jit(f)/sub", true, "Output"), Some(Phase::Optimizer));
    assert_eq!(phase("jit(f)/sub", false, "Output"), None);
    assert_eq!(phase("params['w']", true, "Parameter"), None);
}

#[test]
fn program_ids_are_unsigned_and_never_merge_modules() {
    // As in a public TPU profile: modules keyed by event metadata ids of 2^63
    // and more, which the wire stores as negative int64s, beside a small one;
    // one id given by a `program_id` stat, stored as an int64.
    let hlo = module(&[MIB], &[(ALLOC, 1, 0), (FREE, 1, 0)]).encode_to_vec();
    let big = 12_190_760_917_235_803_885u64;
    let bytes = super::plane::tests::xspace(&[
        (big, None, &hlo),
        (11_287_434_908_481_120_160, None, &hlo),
        (3, Some(big - 1), &hlo),
        (2, None, &hlo),
    ]);
    let mut profile = Profile::default();
    super::read(&mut profile, "tpu.xplane.pb", &bytes).unwrap();
    let ids: Vec<&str> = profile.memories.iter().map(|m| m.id.as_str()).collect();
    assert_eq!(
        ids,
        [
            "test_module(2)",
            "test_module(11287434908481120160)",
            "test_module(12190760917235803884)",
            "test_module(12190760917235803885)",
        ]
    );
    assert!(profile.warnings.is_empty(), "{:?}", profile.warnings);
}

#[test]
fn two_different_modules_with_one_program_id_warn() {
    let a = module(&[MIB], &[(ALLOC, 1, 0), (FREE, 1, 0)]).encode_to_vec();
    let b = module(&[2 * MIB], &[(ALLOC, 1, 0), (FREE, 1, 0)]).encode_to_vec();
    let bytes = super::plane::tests::xspace(&[(1, Some(9), &a), (2, Some(9), &b)]);
    let mut profile = Profile::default();
    super::read(&mut profile, "x.pb", &bytes).unwrap();
    assert_eq!(profile.memories.len(), 1);
    assert_eq!(profile.warnings.len(), 1);
    assert!(
        profile.warnings[0].message.contains("program id 9"),
        "{:?}",
        profile.warnings
    );
}

/// Buffers claiming sizes whose sum does not fit in 64 bits (the buffer
/// allocations' too, which lay the space out end to end): the memory is cut
/// at 64 PiB with a warning, and every output handles the capped sizes.
#[test]
fn sizes_past_64_bits_are_capped_with_a_warning() {
    let huge = i64::MAX;
    let mut hlo = module(
        &[huge, huge, huge],
        &[(ALLOC, 1, 0), (ALLOC, 2, 0), (ALLOC, 3, 0)],
    );
    let assignment = hlo.buffer_assignment.as_mut().unwrap();
    for allocation in &mut assignment.buffer_allocations {
        allocation.size = huge;
    }
    for (i, assigned) in assignment.buffer_allocations[0]
        .assigned
        .iter_mut()
        .enumerate()
    {
        assigned.offset = huge - i as i64;
    }
    let bytes = super::plane::tests::xspace(&[(1, Some(1), &hlo.encode_to_vec())]);
    let profile = crate::load(
        vec![crate::Source::from_bytes("huge.xplane.pb", bytes)],
        &crate::LoadOptions::default(),
    )
    .unwrap();
    let memory = &profile.memories[0];
    assert_eq!(replay::peak(memory).unwrap().bytes, 1 << 56);
    assert!(
        profile.warnings.iter().any(|w| w
            .message
            .contains("buffer sizes add up to more than 64 PiB")),
        "{:?}",
        profile.warnings
    );
    crate::huge_size_tests::every_output(&profile);
}

/// A program over capacity gets the out-of-memory post-mortem, with the
/// layout padding at its peak: from the capacity the profile records, and
/// from a budget (`peak --budget`). The two 512 KiB buffers hold a U64
/// each, so all but 8 bytes of the one live at the peak is padding.
#[test]
fn a_program_over_capacity_gets_a_post_mortem_with_its_padding() {
    use crate::analysis::oom::{CapacitySource, Verdict};
    use crate::analysis::oom_report;
    use crate::analysis::{peak, Options};
    let half = MIB / 2;
    let events = [
        (ALLOC, 1, 0),
        (SHARE_WITH, 2, 1),
        (FREE, 1, 0),
        (FREE, 2, 0),
    ];
    let mut profile = read(&module(&[half, half], &events));
    let (peak_bytes, unpadded) = ((MIB + half) as u64, MIB as u64 + 8);
    let capacity = MIB as u64 + 64;
    profile.memories[0].capacity = Some(capacity);

    let found = oom_report::post_mortems(&profile, &Options::default());
    assert_eq!(found.len(), 1);
    let pm = &found[0];
    assert_eq!(pm.verdict, Verdict::Capacity);
    assert_eq!(pm.capacity_source, CapacitySource::Profile);
    assert_eq!(pm.request_bytes, peak_bytes);
    assert_eq!(pm.shortfall_bytes, peak_bytes - capacity);
    let program = pm.program.as_ref().unwrap();
    assert_eq!(program.over_bytes, peak_bytes - capacity);
    assert_eq!(program.padding_waste_bytes, peak_bytes - unpadded);
    assert_eq!(program.unpadded_peak_bytes, unpadded);
    assert!(
        pm.explanation.contains("without it the program would fit"),
        "{}",
        pm.explanation
    );
    let padded = program
        .buffers
        .iter()
        .find(|b| b.instruction == "fusion.1{0}")
        .unwrap();
    assert_eq!((padded.bytes, padded.unpadded_bytes), (half as u64, 8));
    assert_eq!(padded.shape.as_deref(), Some("u64[]"));

    // A capacity that fits gives none; a budget below the peak gives the same post-mortem.
    profile.memories[0].capacity = Some(peak_bytes);
    assert!(oom_report::post_mortems(&profile, &Options::default()).is_empty());
    let settings = peak::PeakSettings {
        budget: Some(capacity),
        xprof_compat: false,
        ..Default::default()
    };
    let report = peak::peak_with(&profile, &Options::default(), &settings);
    let budget = report.memories[0].budget.as_ref().unwrap();
    let pm = budget.post_mortem.as_ref().unwrap();
    assert_eq!(pm.capacity_source, CapacitySource::Given);
    assert_eq!(
        pm.program.as_ref().unwrap().padding_waste_bytes,
        peak_bytes - unpadded
    );
}
