//! Replaying one memory space of a module: its whole-program allocations
//! live from the start, then its heap simulator trace, one event per trace
//! event, shared buffers reference counted on their canonical buffer.

use rustc_hash::FxHashMap as HashMap;

use super::assignment::Trace;
use super::id_map::IdMap;
use super::phase::phase;
use super::shape;
use super::{category, is_indefinite, size, Buffer, Module};
use memtool_proto::xla::{BufferAllocationProto, OpMetadata};

use crate::model::{
    AddressRange, AllocId, Allocation, Axis, Event, EventKind, Frame, FrameId, Memory, MemoryKind,
    Profile, ProgramAllocation, ProgramBuffer, ProgramInfo, Site, SiteId, StackId, StrId,
};

/// Bytes one memory may hold in all its allocations together, so that no sum
/// of live bytes can overflow whatever a hostile file claims (64 PiB).
const MEMORY_CAP: u64 = 1 << 56;

/// Longest chain of shared buffers followed to its canonical buffer.
const MAX_CHAIN: usize = 1024;

pub(super) const ALLOC: i32 = 0;
pub(super) const FREE: i32 = 1;
pub(super) const SHARE_WITH: i32 = 2;

/// The site and description a buffer's instruction, tuple index and
/// category give it.
#[derive(Clone, Copy)]
struct NamedSite {
    site: SiteId,
    name: StrId,
    opcode: Option<StrId>,
    /// Unpadded bytes of its shape; `None` without one (the buffer's own
    /// bytes count then).
    unpadded_bytes: Option<u64>,
}

/// Reference count of a logical buffer in the heap simulation.
#[derive(Default)]
struct Share {
    count: i64,
    canonical: Option<i64>,
}

/// Builds the memory of one memory space of one module.
pub(super) struct SpaceReader<'m, 'h, 'p> {
    module: &'m Module<'h>,
    pub(super) profile: &'p mut Profile,
    path: &'p str,
    memory: Memory,
    info: ProgramInfo,
    /// What [`Self::named`] found for a buffer's instruction, tuple index
    /// and category: everything but its bytes is theirs, and a program has
    /// many buffers of one instruction (a loop's iterations), each named
    /// alike.
    sites: HashMap<(i64, &'h [i64], &'static str), NamedSite>,
    stacks: HashMap<i32, StackId>,
    /// Where each buffer allocation of this space starts (by position in
    /// `buffer_allocations`), the space's allocations laid end to end in
    /// index order; `None` for other spaces' and thread-local ones.
    bases: Vec<Option<u64>>,
    /// A zero-byte allocation that is never live: the event for trace events
    /// that change nothing, so positions stay aligned with the trace.
    no_op: Option<AllocId>,
    /// Bytes of every allocation so far, against [`MEMORY_CAP`].
    allocated: u64,
    clamped: bool,
}

impl<'m, 'h, 'p> SpaceReader<'m, 'h, 'p> {
    pub(super) fn new(
        module: &'m Module<'h>,
        profile: &'p mut Profile,
        path: &'p str,
        color: i64,
    ) -> SpaceReader<'m, 'h, 'p> {
        let id = if color == 0 {
            module.name.clone()
        } else {
            format!("{}/S({color})", module.name)
        };
        SpaceReader {
            module,
            profile,
            path,
            memory: Memory::new(id, MemoryKind::ProgramSpace, Axis::ProgramOrder),
            info: ProgramInfo {
                module: module.name.clone(),
                memory_space: color,
                signature: module.signature(),
                ..ProgramInfo::default()
            },
            sites: HashMap::default(),
            stacks: HashMap::default(),
            bases: bases(module.allocations, color),
            no_op: None,
            allocated: 0,
            clamped: false,
        }
    }

    pub(super) fn finish(mut self) -> Memory {
        if self.clamped {
            let message = format!(
                "{}: buffer sizes add up to more than 64 PiB; sizes past that are cut to 0",
                self.memory.id
            );
            self.profile.warn(self.path, message);
        }
        self.info
            .buffers
            .resize(self.memory.allocations.len(), None);
        // The space is the program's for its whole run: its buffer
        // allocations laid end to end from offset 0.
        if self.info.total_allocation_bytes > 0 {
            self.memory.held = vec![AddressRange {
                start: 0,
                bytes: self.info.total_allocation_bytes,
            }];
        }
        self.memory.program = Some(Box::new(self.info));
        self.memory
    }

    fn push(
        &mut self,
        bytes: u64,
        requested: u64,
        address: Option<u64>,
        named: Option<(SiteId, ProgramBuffer)>,
    ) -> AllocId {
        let site = match named {
            Some((site, _)) => site,
            None => self.profile.names.site(Site::default()),
        };
        let room = MEMORY_CAP - self.allocated;
        if bytes > room || requested > room {
            self.clamped = true;
        }
        let (bytes, requested) = (bytes.min(room), requested.min(room));
        self.allocated += bytes.max(requested);
        let id = self.memory.push_allocation(Allocation {
            bytes,
            requested,
            count: 1,
            address: address.and_then(crate::model::Address::new),
            site,
        });
        if let Some((_, buffer)) = named {
            self.info.buffers.resize(id.index(), None);
            self.info.buffers.push(Some(buffer));
        }
        id
    }

    /// Allocations of this color that live through the whole program.
    pub(super) fn read_allocations(&mut self) {
        let color = self.info.memory_space;
        let allocations = self.module.allocations.iter().enumerate();
        for (position, allocation) in allocations.filter(|(_, a)| a.color == color) {
            let bytes = size(allocation.size);
            if allocation.is_thread_local {
                // Per-thread scratch of a kernel (small reductions on CPU),
                // not memory of the device: XProf 2.24 leaves it out too.
                self.info.thread_local_bytes = self.info.thread_local_bytes.saturating_add(bytes);
                continue;
            }
            self.info.total_allocation_bytes =
                self.info.total_allocation_bytes.saturating_add(bytes);
            if allocation.is_entry_computation_parameter {
                self.info.parameter_bytes = self.info.parameter_bytes.saturating_add(bytes);
            }
            if allocation.maybe_live_out {
                self.info.output_bytes = self.info.output_bytes.saturating_add(bytes);
            }
            if allocation.is_constant {
                self.info.constant_bytes = self.info.constant_bytes.saturating_add(bytes);
            }
            // Named after its largest logical buffer, the first of equals.
            let mut best: Option<&Buffer<'h>> = None;
            for assigned in &allocation.assigned {
                let Some(buffer) = self.module.buffers.get(assigned.logical_buffer_id) else {
                    continue;
                };
                if buffer.bytes() > best.map_or(0, Buffer::bytes) {
                    best = Some(buffer);
                }
            }
            let named = best.map(|best| self.named(best, category(allocation)));
            if let Some((site, buffer)) = named {
                self.info.allocations.push(ProgramAllocation {
                    index: allocation.index,
                    bytes,
                    site,
                    buffer,
                });
            }
            if !is_indefinite(allocation) {
                self.info.temporary_bytes = self.info.temporary_bytes.saturating_add(bytes);
                if self.module.temporaries_whole {
                    // No trace says when its values live (a text dump): the
                    // allocation is reserved whole for the program's run.
                    let named = self.whole_temporary(allocation);
                    let address = self.base_of(position);
                    let id = self.push(bytes, bytes, address, Some(named));
                    self.memory.live_at_start.push(id);
                }
                continue;
            }
            // XProf counts an allocation only through a named buffer.
            let Some(named) = named else { continue };
            let address = self.base_of(position);
            let id = self.push(bytes, bytes, address, Some(named));
            self.memory.live_at_start.push(id);
        }
    }

    pub(super) fn simulate(&mut self, trace: &Trace<'h>) {
        let buffers = self.module.hlo.logical_buffers.len();
        let mut shares: IdMap<Share> = IdMap::for_entries(buffers);
        // Canonical buffer id → the allocation holding its bytes now.
        let mut holding: IdMap<AllocId> = IdMap::for_entries(buffers);
        let (mut over_freed, mut unknown_kind, mut unknown_buffer) = (0usize, 0usize, 0usize);
        // The trace's names are its steps, in the order they first occur.
        self.info
            .steps
            .extend(trace.names().iter().map(|name| name.to_string()));
        self.info.event_steps.reserve(trace.events().len());
        self.memory.events.reserve(trace.events().len());
        for (i, event) in trace.events().iter().enumerate() {
            self.info.event_steps.push(event.name);
            let applied = match self.module.buffers.get(event.buffer_id) {
                None => {
                    unknown_buffer += 1;
                    None
                }
                Some(buffer) => match event.kind {
                    ALLOC => {
                        increment(&mut shares, buffer.proto.id);
                        let named = self.named(buffer, self.category_of(buffer));
                        let address = self.address_of(buffer);
                        let id = self.push(
                            buffer.bytes(),
                            buffer.unpadded_bytes(),
                            address,
                            Some(named),
                        );
                        holding.insert(buffer.proto.id, id);
                        Some((EventKind::Alloc, id))
                    }
                    FREE => {
                        let root = root(&shares, buffer.proto.id);
                        let share = shares.get_or_default(root);
                        share.count -= 1;
                        match share.count {
                            0 => holding.remove(root).map(|id| (EventKind::Free, id)),
                            c if c < 0 => {
                                over_freed += 1;
                                share.count = 0;
                                None
                            }
                            _ => None,
                        }
                    }
                    SHARE_WITH => self.share(
                        &mut shares,
                        &mut holding,
                        buffer,
                        event.share_with_canonical_id,
                    ),
                    _ => {
                        unknown_kind += 1;
                        None
                    }
                },
            };
            let (kind, alloc) = match applied {
                Some(applied) => applied,
                None => (EventKind::Free, self.no_op()),
            };
            self.memory.events.push(Event::new(i as i64, kind, alloc));
        }
        let name = &self.memory.id;
        let mut notes = Vec::new();
        if over_freed > 0 {
            notes.push(format!("{over_freed} frees of buffers that were not allocated (XProf rejects such a trace)"));
        }
        if unknown_kind > 0 {
            notes.push(format!("{unknown_kind} events of an unknown kind"));
        }
        if unknown_buffer > 0 {
            notes.push(format!(
                "{unknown_buffer} events on buffers the assignment does not place"
            ));
        }
        if !notes.is_empty() {
            let message = format!(
                "{name}: heap simulator trace has {}; they change nothing",
                notes.join(", ")
            );
            self.profile.warn(self.path, message);
        }
    }

    /// `buffer` starts sharing the memory of `canonical_id`. When the
    /// canonical memory was free, this makes it live again.
    fn share(
        &mut self,
        shares: &mut IdMap<Share>,
        holding: &mut IdMap<AllocId>,
        buffer: &Buffer<'h>,
        canonical_id: i64,
    ) -> Option<(EventKind, AllocId)> {
        let canonical = self.module.buffers.get(canonical_id)?;
        let root_id = root(shares, canonical.proto.id);
        if root_id == buffer.proto.id {
            return None;
        }
        shares.get_or_default(buffer.proto.id).canonical = Some(canonical.proto.id);
        let count = increment(shares, root_id);
        if count != 1 {
            return None;
        }
        let root = self.module.buffers.get(root_id)?;
        let named = self.named(buffer, self.category_of(buffer));
        let address = self.address_of(root);
        let id = self.push(root.bytes(), root.unpadded_bytes(), address, Some(named));
        holding.insert(root_id, id);
        Some((EventKind::Alloc, id))
    }

    /// Offset of an allocation in the space, as the address of the model
    /// allocation that stands for all of it.
    fn base_of(&self, position: usize) -> Option<u64> {
        self.bases.get(position).copied().flatten()
    }

    /// Offset of a buffer in the space: its allocation's start plus where
    /// the buffer assignment put it, so the address view shows how the heap
    /// simulator packed the temporary allocation.
    fn address_of(&self, buffer: &Buffer<'h>) -> Option<u64> {
        self.base_of(buffer.allocation)
            .map(|base| base.saturating_add(buffer.offset))
    }

    fn no_op(&mut self) -> AllocId {
        if let Some(id) = self.no_op {
            return id;
        }
        let id = self.push(0, 0, None, None);
        self.no_op = Some(id);
        id
    }

    fn category_of(&self, buffer: &Buffer<'h>) -> &'static str {
        self.module
            .allocations
            .get(buffer.allocation)
            .map_or("Temporary", category)
    }

    /// The site and program description of a buffer, interned once.
    /// A temporary allocation counted whole: `allocation 9 (temporary, 7
    /// values)`, no op or shape of its own.
    fn whole_temporary(&mut self, allocation: &BufferAllocationProto) -> (SiteId, ProgramBuffer) {
        let names = &mut self.profile.names;
        let category = Some(names.string(category(allocation)));
        let site = names.site(Site {
            category,
            ..Site::default()
        });
        let values = allocation.assigned.len();
        let name = format!(
            "allocation {} (temporary, {values} value{})",
            allocation.index,
            if values == 1 { "" } else { "s" }
        );
        let bytes = size(allocation.size);
        let program = ProgramBuffer {
            name: names.string(&name),
            opcode: None,
            own_bytes: bytes,
            own_unpadded_bytes: bytes,
        };
        (site, program)
    }

    fn named(&mut self, buffer: &Buffer<'h>, category: &'static str) -> (SiteId, ProgramBuffer) {
        let key = (buffer.instruction.id, buffer.shape_index(), category);
        let named = match self.sites.get(&key) {
            Some(&named) => named,
            None => {
                let named = self.name_site(buffer, category);
                self.sites.insert(key, named);
                named
            }
        };
        let program = ProgramBuffer {
            name: named.name,
            opcode: named.opcode,
            own_bytes: buffer.bytes(),
            own_unpadded_bytes: named.unpadded_bytes.unwrap_or_else(|| buffer.bytes()),
        };
        (named.site, program)
    }

    /// Interns the site and names of a buffer's instruction and tuple index.
    fn name_site(&mut self, buffer: &Buffer<'h>, category: &'static str) -> NamedSite {
        let instruction = buffer.instruction;
        // Borrowed, not cloned: a program names a site per buffer.
        let no_metadata = OpMetadata::default();
        let metadata = instruction.metadata.as_ref().unwrap_or(&no_metadata);
        let stack = self.stack(
            &metadata.source_file,
            metadata.source_line,
            metadata.stack_frame_id,
        );
        let names = &mut self.profile.names;
        let op = names.optional_string(&metadata.op_name);
        let shape = buffer.shape.map(|s| names.string(&shape::human_string(s)));
        let dtype = buffer.shape.and_then(shape::dtype).map(|d| names.string(d));
        let category_id = Some(names.string(category));
        let site = names.site(Site {
            stack,
            op,
            shape,
            dtype,
            category: category_id,
            phase: phase(&metadata.op_name, self.module.has_backward, category),
            ..Site::default()
        });
        NamedSite {
            site,
            name: names.string(&buffer.name()),
            opcode: names.optional_string(&instruction.opcode),
            unpadded_bytes: buffer.shape.map(shape::unpadded_bytes),
        }
    }

    /// The instruction's Python stack, leaf first: the stack frame index when
    /// the module has one, else the single legacy source file and line.
    fn stack(&mut self, source_file: &str, source_line: i32, frame_id: i32) -> StackId {
        // Frame ids are per module; legacy file/line stacks (id 0) are not cached.
        if let Some(&stack) = self.stacks.get(&frame_id).filter(|_| frame_id != 0) {
            return stack;
        }
        let mut frames: Vec<FrameId> = Vec::new();
        if let Some(index) = self.module.stack_frames() {
            let mut next = frame_id;
            // Parents point anywhere in a hostile file: stop after every frame.
            for _ in 0..index.stack_frames.len() {
                let Some(frame) = one_based(next).and_then(|i| index.stack_frames.get(i)) else {
                    break;
                };
                next = frame.parent_frame_id;
                let location =
                    one_based(frame.file_location_id).and_then(|i| index.file_locations.get(i));
                let Some(location) = location else { continue };
                let lookup = |names: &[String], id: i32| {
                    one_based(id)
                        .and_then(|i| names.get(i))
                        .map_or("", String::as_str)
                        .to_string()
                };
                let file = lookup(&index.file_names, location.file_name_id);
                let function = lookup(&index.function_names, location.function_name_id);
                let names = &mut self.profile.names;
                let frame = Frame {
                    function: names.string(&function),
                    file: names.string(&file),
                    line: u32::try_from(location.line).unwrap_or(0),
                };
                frames.push(names.frame(frame));
            }
        }
        if frames.is_empty() && !source_file.is_empty() {
            let names = &mut self.profile.names;
            let frame = Frame {
                function: StrId(0),
                file: names.string(source_file),
                line: u32::try_from(source_line).unwrap_or(0),
            };
            frames.push(names.frame(frame));
        }
        let stack = self.profile.names.stack_leaf_first(&frames);
        if frame_id != 0 {
            self.stacks.insert(frame_id, stack);
        }
        stack
    }
}

/// Start of each allocation of memory space `color` when the space's
/// allocations (thread-local ones aside) are laid end to end in index order.
fn bases(allocations: &[BufferAllocationProto], color: i64) -> Vec<Option<u64>> {
    let mut next = 0u64;
    allocations
        .iter()
        .map(|a| {
            (a.color == color && !a.is_thread_local).then(|| {
                let base = next;
                next = next.saturating_add(size(a.size));
                base
            })
        })
        .collect()
}

/// A 1-based index of the stack frame index (0 means none) as a position.
fn one_based(id: i32) -> Option<usize> {
    usize::try_from(id).ok()?.checked_sub(1)
}

/// The id whose reference count a buffer uses: the end of its chain of
/// canonical buffers.
fn root(shares: &IdMap<Share>, id: i64) -> i64 {
    let mut current = id;
    // XLA's chains are a few buffers long; a hostile file's could be
    // endless, and each event walks one.
    for _ in 0..MAX_CHAIN {
        match shares.get(current).and_then(|s| s.canonical) {
            Some(next) => current = next,
            None => break,
        }
    }
    current
}

fn increment(shares: &mut IdMap<Share>, id: i64) -> i64 {
    let root = root(shares, id);
    let share = shares.get_or_default(root);
    share.count += 1;
    share.count
}
