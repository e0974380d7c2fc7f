//! [`Event`]: an allocation or free at a position on a memory's axis, in
//! twelve bytes.

use super::AllocId;

/// Whether an event makes or releases an allocation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventKind {
    /// The allocation becomes live.
    Alloc,
    /// The allocation is released.
    Free,
}

/// An allocation or free at a position on the memory's axis, in 12 bytes:
/// its position, and its allocation with its kind in the top bit. A memory
/// holds one per event, and every replay reads them all: at 16 bytes (an
/// aligned `i64`, the id and a kind byte) they were a third of the model of
/// an XSpace's events, and the kind fits in the id, which an allocation
/// never fills (2^31 allocations are 64 GiB of them); see BENCHMARKS.md
/// Run AA-compare.
#[derive(Clone, Copy, PartialEq, Eq)]
#[repr(C, packed(4))]
pub struct Event {
    /// Position on the memory's [`Axis`](super::Axis) (a packed field:
    /// read it by value, `{ event.at }` where a reference would be taken).
    pub at: i64,
    /// [`Event::alloc`]'s index, with [`FREE_BIT`] set for a free.
    alloc_and_kind: u32,
}

// The size the model is measured by (BENCHMARKS.md), as for `Allocation`.
const _: () = assert!(std::mem::size_of::<Event>() == 12);

/// The bit of [`Event::alloc_and_kind`] that marks a free.
const FREE_BIT: u32 = 1 << 31;

impl Event {
    /// The event at `at` that makes (or releases) `alloc`. An id of 2^31 or
    /// more (a memory of more than 2^31 allocations, 64 GiB of them) is cut
    /// to 31 bits, as ids past `u32::MAX` are cut to 32: a wrong allocation
    /// rather than a panic.
    #[inline]
    pub fn new(at: i64, kind: EventKind, alloc: AllocId) -> Event {
        let free = match kind {
            EventKind::Alloc => 0,
            EventKind::Free => FREE_BIT,
        };
        Event {
            at,
            alloc_and_kind: (alloc.0 & !FREE_BIT) | free,
        }
    }

    /// Allocation or free.
    #[inline]
    pub fn kind(&self) -> EventKind {
        if self.alloc_and_kind & FREE_BIT == 0 {
            EventKind::Alloc
        } else {
            EventKind::Free
        }
    }

    /// The allocation it makes or releases.
    #[inline]
    pub fn alloc(&self) -> AllocId {
        AllocId(self.alloc_and_kind & !FREE_BIT)
    }
}

impl std::fmt::Debug for Event {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Event")
            .field("at", &{ self.at })
            .field("kind", &self.kind())
            .field("alloc", &self.alloc())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An event keeps its position, kind and allocation in twelve bytes;
    /// an id past 31 bits is cut to them and keeps its kind.
    #[test]
    fn an_event_keeps_its_kind_and_allocation_in_twelve_bytes() {
        for (at, kind, id) in [
            (i64::MIN, EventKind::Alloc, 0),
            (-1, EventKind::Free, 1),
            (i64::MAX, EventKind::Free, (1 << 31) - 1),
            (7, EventKind::Alloc, (1 << 31) - 1),
        ] {
            let e = Event::new(at, kind, AllocId(id));
            assert_eq!(({ e.at }, e.kind(), e.alloc()), (at, kind, AllocId(id)));
        }
        let cut = Event::new(3, EventKind::Free, AllocId(u32::MAX));
        assert_eq!(
            (cut.kind(), cut.alloc()),
            (EventKind::Free, AllocId(u32::MAX >> 1))
        );
        let cut = Event::new(3, EventKind::Alloc, AllocId(1 << 31));
        assert_eq!((cut.kind(), cut.alloc()), (EventKind::Alloc, AllocId(0)));
        assert_eq!(std::mem::size_of::<Event>(), 12);
        assert_eq!(
            format!("{:?}", Event::new(5, EventKind::Free, AllocId(2))),
            "Event { at: 5, kind: Free, alloc: AllocId(2) }"
        );
    }
}
