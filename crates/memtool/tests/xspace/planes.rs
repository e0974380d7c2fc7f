//! Synthetic XSpaces, written here field by field (proto/xplane.proto).

fn varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn field_varint(out: &mut Vec<u8>, number: u32, v: u64) {
    varint(out, u64::from(number) << 3);
    varint(out, v);
}

fn field_bytes(out: &mut Vec<u8>, number: u32, bytes: &[u8]) {
    varint(out, (u64::from(number) << 3) | 2);
    varint(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

/// A metadata map entry (`event_metadata` = 4, `stat_metadata` = 5).
fn metadata_entry(out: &mut Vec<u8>, map: u32, id: u64, name: &str) {
    let mut meta = Vec::new();
    field_varint(&mut meta, 1, id);
    field_bytes(&mut meta, 2, name.as_bytes());
    let mut entry = Vec::new();
    field_varint(&mut entry, 1, id);
    field_bytes(&mut entry, 2, &meta);
    field_bytes(out, map, &entry);
}

/// An XSpace with one `/host:CPU` plane holding one `train` step event.
pub(super) fn host_plane_without_allocator_events() -> Vec<u8> {
    let mut stat = Vec::new();
    field_varint(&mut stat, 1, 1);
    field_varint(&mut stat, 4, 0); // int64_value: step_num = 0
    let mut event = Vec::new();
    field_varint(&mut event, 1, 1);
    field_varint(&mut event, 2, 1000);
    field_varint(&mut event, 3, 5000);
    field_bytes(&mut event, 4, &stat);
    let mut line = Vec::new();
    field_varint(&mut line, 1, 1);
    field_bytes(&mut line, 2, b"python");
    field_bytes(&mut line, 4, &event);
    let mut plane = Vec::new();
    field_varint(&mut plane, 1, 1);
    field_bytes(&mut plane, 2, b"/host:CPU");
    field_bytes(&mut plane, 3, &line);
    metadata_entry(&mut plane, 4, 1, "train");
    metadata_entry(&mut plane, 5, 1, "step_num");
    let mut space = Vec::new();
    field_bytes(&mut space, 1, &plane);
    space
}

/// One allocator event: (offset ps, is a free, heap after it, bytes, address).
type Ev = (u64, bool, u64, u64, u64);

/// A `/host:CPU` plane with one line starting at `line_ns` holding events of
/// allocator `GPU_0_bfc`; no `Task Environment` plane.
pub(super) fn allocator_space(line_ns: u64, events: &[Ev]) -> Vec<u8> {
    let events: Vec<(Ev, Option<u64>)> = events.iter().map(|&e| (e, None)).collect();
    allocator_space_with_stack(line_ns, &events)
}

/// [`allocator_space`] with the stack each event reports reserved
/// (`bytes_reserved`), as TPU allocators do.
pub(super) fn allocator_space_with_stack(line_ns: u64, events: &[(Ev, Option<u64>)]) -> Vec<u8> {
    // stat ids: 1 allocator_name, 2 bytes_allocated, 3 allocation_bytes,
    // 4 addr, 5 bytes_reserved
    let int_stat = |id: u64, v: u64| {
        let mut s = Vec::new();
        field_varint(&mut s, 1, id);
        field_varint(&mut s, 3, v);
        s
    };
    let mut name = Vec::new();
    field_varint(&mut name, 1, 1);
    field_bytes(&mut name, 5, b"GPU_0_bfc");
    let mut line = Vec::new();
    field_varint(&mut line, 1, 1);
    field_varint(&mut line, 3, line_ns);
    for &((offset, free, heap, bytes, address), stack) in events {
        let mut event = Vec::new();
        field_varint(&mut event, 1, if free { 2 } else { 1 });
        field_varint(&mut event, 2, offset);
        field_bytes(&mut event, 4, &name);
        field_bytes(&mut event, 4, &int_stat(2, heap));
        field_bytes(&mut event, 4, &int_stat(3, bytes));
        field_bytes(&mut event, 4, &int_stat(4, address));
        if let Some(stack) = stack {
            field_bytes(&mut event, 4, &int_stat(5, stack));
        }
        field_bytes(&mut line, 4, &event);
    }
    let mut plane = Vec::new();
    field_bytes(&mut plane, 2, b"/host:CPU");
    field_bytes(&mut plane, 3, &line);
    metadata_entry(&mut plane, 4, 1, "MemoryAllocation");
    metadata_entry(&mut plane, 4, 2, "MemoryDeallocation");
    for (id, name) in [
        (1, "allocator_name"),
        (2, "bytes_allocated"),
        (3, "allocation_bytes"),
        (4, "addr"),
        (5, "bytes_reserved"),
    ] {
        metadata_entry(&mut plane, 5, id, name);
    }
    let mut space = Vec::new();
    field_bytes(&mut space, 1, &plane);
    space
}

pub(super) fn epoch_timestamps() -> Vec<u8> {
    allocator_space(
        1_795_320_112_346_504_805,
        &[(0, false, 100, 100, 1), (10, false, 300, 200, 2)],
    )
}
