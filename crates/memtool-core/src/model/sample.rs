//! What an allocator reported about itself over time: one
//! [`AllocatorSample`] per report, held compactly in [`AllocatorSamples`].

/// The allocator's own view of its state at a position, as the profile
/// recorded it (XSpace allocator stats, PyTorch segment events). Every figure
/// is optional: formats report different subsets.
///
/// The figures are stored bare with one presence bit each (56 bytes, not the
/// 88 of five `Option`s); read them through the accessors, set them with the
/// `with_*` builders. A memory holds its samples in [`AllocatorSamples`],
/// which stores them in far less.
#[derive(Clone, Copy)]
pub struct AllocatorSample {
    /// Position on the memory's [`Axis`](crate::model::Axis).
    pub at: i64,
    /// Reserved, allocated, free bytes and the largest free block, by
    /// [`FIGURES`]' bits; 0 where absent.
    figures: [u64; 4],
    /// 0.0 where absent.
    fragmentation: f64,
    present: u8,
}

const RESERVED: usize = 0;
const ALLOCATED: usize = 1;
const FREE: usize = 2;
const LARGEST_FREE: usize = 3;
/// The presence bit of each of `figures`, then of the fragmentation.
const FIGURE_BITS: [u8; 4] = [1, 2, 4, 8];
const FRAGMENTATION: u8 = 16;

impl AllocatorSample {
    /// A sample at `at` with no figure known yet.
    pub fn new(at: i64) -> AllocatorSample {
        AllocatorSample {
            at,
            figures: [0; 4],
            fragmentation: 0.0,
            present: 0,
        }
    }

    fn figure(&self, which: usize) -> Option<u64> {
        (self.present & FIGURE_BITS[which] != 0).then_some(self.figures[which])
    }

    fn with_figure(mut self, which: usize, value: Option<u64>) -> Self {
        self.figures[which] = value.unwrap_or(0);
        match value {
            Some(_) => self.present |= FIGURE_BITS[which],
            None => self.present &= !FIGURE_BITS[which],
        }
        self
    }

    /// Memory the allocator holds from the device (PyTorch "reserved").
    pub fn reserved_bytes(&self) -> Option<u64> {
        self.figure(RESERVED)
    }

    /// Memory handed out to the program.
    pub fn allocated_bytes(&self) -> Option<u64> {
        self.figure(ALLOCATED)
    }

    /// Memory still available to the allocator (device capacity left).
    pub fn free_bytes(&self) -> Option<u64> {
        self.figure(FREE)
    }

    /// Largest contiguous free block, when known.
    pub fn largest_free_block(&self) -> Option<u64> {
        self.figure(LARGEST_FREE)
    }

    /// The allocator's own fragmentation figure in [0, 1], when it reports one.
    pub fn fragmentation(&self) -> Option<f64> {
        (self.present & FRAGMENTATION != 0).then_some(self.fragmentation)
    }

    /// The sample with [`AllocatorSample::reserved_bytes`] set (or cleared).
    pub fn with_reserved_bytes(self, v: Option<u64>) -> Self {
        self.with_figure(RESERVED, v)
    }

    /// The sample with [`AllocatorSample::allocated_bytes`] set (or cleared).
    pub fn with_allocated_bytes(self, v: Option<u64>) -> Self {
        self.with_figure(ALLOCATED, v)
    }

    /// The sample with [`AllocatorSample::free_bytes`] set (or cleared).
    pub fn with_free_bytes(self, v: Option<u64>) -> Self {
        self.with_figure(FREE, v)
    }

    /// The sample with [`AllocatorSample::largest_free_block`] set (or cleared).
    pub fn with_largest_free_block(self, v: Option<u64>) -> Self {
        self.with_figure(LARGEST_FREE, v)
    }

    /// The sample with [`AllocatorSample::fragmentation`] set (or cleared).
    pub fn with_fragmentation(mut self, v: Option<f64>) -> Self {
        self.fragmentation = v.unwrap_or(0.0);
        match v {
            Some(_) => self.present |= FRAGMENTATION,
            None => self.present &= !FRAGMENTATION,
        }
        self
    }
}

impl Default for AllocatorSample {
    fn default() -> Self {
        AllocatorSample::new(0)
    }
}

impl PartialEq for AllocatorSample {
    fn eq(&self, other: &Self) -> bool {
        self.at == other.at
            && self.reserved_bytes() == other.reserved_bytes()
            && self.allocated_bytes() == other.allocated_bytes()
            && self.free_bytes() == other.free_bytes()
            && self.largest_free_block() == other.largest_free_block()
            && self.fragmentation() == other.fragmentation()
    }
}

impl std::fmt::Debug for AllocatorSample {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AllocatorSample")
            .field("at", &self.at)
            .field("reserved_bytes", &self.reserved_bytes())
            .field("allocated_bytes", &self.allocated_bytes())
            .field("free_bytes", &self.free_bytes())
            .field("largest_free_block", &self.largest_free_block())
            .field("fragmentation", &self.fragmentation())
            .finish()
    }
}

/// Samples per block of [`AllocatorSamples`].
const BLOCK: usize = 64;
const BLOCK_SHIFT: u32 = BLOCK.trailing_zeros();
/// No index: the block is stored narrow, or its presence is uniform.
const NONE: u32 = u32::MAX;
/// Fragmentation figures are stored as billionths when that is exact: the
/// profilers write them as decimals of six significant digits (TSL's
/// `TraceMe` prints them), and `n / 10^9` is the double nearest the decimal,
/// as parsing it gives.
const FRAGMENTATION_SCALE: f64 = 1e9;

/// A memory's allocator samples, in order, as a vector of them would hold
/// them — [`AllocatorSamples::get`], [`AllocatorSamples::iter`] and the
/// like hand out [`AllocatorSample`]s by value — in about 17 bytes a sample
/// rather than 56: an XSpace holds one sample per event, 10^8 of them in a
/// large profile.
///
/// Samples come in blocks of 64. A block stores each figure as 32 bits from
/// a base (the block's first value of it; `at` likewise, in thousands where
/// it can), the free bytes not at all where they are a limit less the
/// allocated bytes, the fragmentation
/// as billionths, and the figures' presence once when every sample of the
/// block has the same. A block with a value that does not fit (a jump of
/// more than 2 GiB, a fragmentation that is not a short decimal) keeps its
/// samples whole instead; a block whose presence varies keeps it per sample.
/// Columns of figures no sample has are never made. Every sample reads back
/// exactly as it was pushed.
#[derive(Clone, Default)]
pub struct AllocatorSamples {
    len: usize,
    blocks: Vec<Block>,
    /// `at - base` of every sample.
    at: Vec<u32>,
    /// Per figure (reserved, allocated, free, largest free block), `value -
    /// base` of every sample; empty until a sample has the figure.
    figures: [Vec<u32>; 4],
    /// Billionths, of every sample; empty until a sample has one.
    fragmentation: Vec<u32>,
    /// The samples of blocks that are not stored narrow, `BLOCK` each (the
    /// last one as many as it has).
    whole: Vec<AllocatorSample>,
    /// The presence bits of blocks whose presence varies, `BLOCK` each.
    presence: Vec<u8>,
}

/// One block of [`AllocatorSamples`].
#[derive(Clone, Copy)]
struct Block {
    at_base: i64,
    /// Per figure, the block's first value of it.
    figure_base: [u64; 4],
    /// Where the block's samples are in `whole`, or `NONE` when they are
    /// stored narrow.
    whole: u32,
    /// Where the block's presence bits are in `presence`, or `NONE` when
    /// every sample has `present`.
    mixed: u32,
    present: u8,
    /// Which of `figure_base` are set.
    based: u8,
    /// Whether the block's free figures are `free_complement` less the
    /// allocated ones, and stored nowhere: allocators report what is free
    /// as their limit less what is in use.
    free_derived: bool,
    free_complement: u64,
    /// What `at` counts in from `at_base`: 1000 when the block's first
    /// position apart from its base is a multiple of 1000 (XSpace times are
    /// nanoseconds in picoseconds: 32 bits of them span 2 s, not 2 ms), else
    /// 1; 0 until then.
    at_unit: u32,
}

impl AllocatorSamples {
    /// No samples.
    pub fn new() -> AllocatorSamples {
        AllocatorSamples::default()
    }

    /// How many samples there are.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Removes every sample.
    pub fn clear(&mut self) {
        *self = AllocatorSamples::default();
    }

    /// The first sample.
    #[inline]
    pub fn first(&self) -> Option<AllocatorSample> {
        self.get(0)
    }

    /// The last sample.
    #[inline]
    pub fn last(&self) -> Option<AllocatorSample> {
        self.len.checked_sub(1).and_then(|i| self.get(i))
    }

    /// Sample `index`, if there is one. A caller that reads one figure
    /// reads it with [`AllocatorSamples::allocated_bytes`] or
    /// [`AllocatorSamples::reserved_bytes`] instead.
    #[inline]
    pub fn get(&self, index: usize) -> Option<AllocatorSample> {
        let (block, present) = match self.locate(index)? {
            Stored::Whole(sample) => return Some(*sample),
            Stored::Narrow { block, present } => (block, present),
        };
        let at = i64::from(self.at.get(index).copied().unwrap_or(0) as i32)
            .wrapping_mul(i64::from(block.at_unit));
        let mut sample = AllocatorSample::new(block.at_base.wrapping_add(at));
        sample.present = present;
        for which in [RESERVED, ALLOCATED, FREE, LARGEST_FREE] {
            sample.figures[which] = self.narrow_figure(block, present, index, which);
        }
        if present & FRAGMENTATION != 0 {
            let billionths = self.fragmentation.get(index).copied().unwrap_or(0);
            sample.fragmentation = f64::from(billionths) / FRAGMENTATION_SCALE;
        }
        Some(sample)
    }

    /// Sample `index`'s allocated bytes: `get(index)` and
    /// [`AllocatorSample::allocated_bytes`], without decoding the sample's
    /// other figures (a walk of an XSpace's samples reads this one alone:
    /// ~20 instructions a sample where `get` costs ~77).
    #[inline]
    pub fn allocated_bytes(&self, index: usize) -> Option<u64> {
        self.figure_at(index, ALLOCATED)
    }

    /// Sample `index`'s reserved bytes, as [`AllocatorSamples::allocated_bytes`]
    /// reads its allocated bytes.
    #[inline]
    pub fn reserved_bytes(&self, index: usize) -> Option<u64> {
        self.figure_at(index, RESERVED)
    }

    /// Calls `visit(i, allocated_bytes(i))` for every sample `i`, in order:
    /// a walk of every sample's allocated bytes (the peak, the per-step
    /// peaks), a block at a time. A narrow block with one presence for all
    /// its samples (an XSpace's, nearly all) is its base plus a run of
    /// deltas: ~6 instructions a sample where locating each costs ~20.
    pub fn for_each_allocated(&self, mut visit: impl FnMut(usize, Option<u64>)) {
        let column = &self.figures[ALLOCATED];
        for (b, block) in self.blocks.iter().enumerate() {
            let first = b * BLOCK;
            let end = (first + BLOCK).min(self.len);
            let uniform = block.whole == NONE && block.mixed == NONE;
            match column.get(first..end) {
                Some(deltas) if uniform && block.present & FIGURE_BITS[ALLOCATED] != 0 => {
                    let base = block.figure_base[ALLOCATED];
                    for (i, &delta) in (first..end).zip(deltas) {
                        visit(i, Some(widen(base, delta)));
                    }
                }
                _ if uniform && block.present & FIGURE_BITS[ALLOCATED] == 0 => {
                    (first..end).for_each(|i| visit(i, None));
                }
                _ => (first..end).for_each(|i| visit(i, self.allocated_bytes(i))),
            }
        }
    }

    /// Whether every sample has its allocated bytes: asked of each block
    /// whose samples share one presence (an XSpace's, nearly all), of each
    /// sample of the others.
    pub fn allocated_in_every_sample(&self) -> bool {
        self.blocks.iter().enumerate().all(|(b, block)| {
            if block.whole == NONE && block.mixed == NONE {
                return block.present & FIGURE_BITS[ALLOCATED] != 0;
            }
            let first = b * BLOCK;
            (first..(first + BLOCK).min(self.len)).all(|i| self.allocated_bytes(i).is_some())
        })
    }

    /// The reserved bytes of the last sample that has them: blocks whose
    /// samples all lack them (every block of an XSpace) are passed over
    /// whole.
    pub fn last_reserved_bytes(&self) -> Option<u64> {
        for (b, block) in self.blocks.iter().enumerate().rev() {
            if block.whole == NONE
                && block.mixed == NONE
                && block.present & FIGURE_BITS[RESERVED] == 0
            {
                continue;
            }
            let first = b * BLOCK;
            let end = (first + BLOCK).min(self.len);
            if let Some(reserved) = (first..end).rev().find_map(|i| self.reserved_bytes(i)) {
                return Some(reserved);
            }
        }
        None
    }

    /// One figure of sample `index`, as `get` decodes it.
    #[inline]
    fn figure_at(&self, index: usize, which: usize) -> Option<u64> {
        match self.locate(index)? {
            Stored::Whole(sample) => sample.figure(which),
            Stored::Narrow { block, present } => (present & FIGURE_BITS[which] != 0)
                .then(|| self.narrow_figure(block, present, index, which)),
        }
    }

    /// Where sample `index` is stored: whole, or narrow in `block` with
    /// these presence bits.
    #[inline]
    fn locate(&self, index: usize) -> Option<Stored<'_>> {
        if index >= self.len {
            return None;
        }
        let block = self.blocks.get(index >> BLOCK_SHIFT)?;
        let offset = index & (BLOCK - 1);
        if block.whole != NONE {
            let sample = self.whole.get(block.whole as usize * BLOCK + offset)?;
            return Some(Stored::Whole(sample));
        }
        let present = match block.mixed {
            NONE => block.present,
            mixed => *self.presence.get(mixed as usize * BLOCK + offset)?,
        };
        Some(Stored::Narrow { block, present })
    }

    /// Figure `which` of narrow sample `index` (0 where absent): its base
    /// plus its delta, the free bytes derived where the block derives them.
    #[inline]
    fn narrow_figure(&self, block: &Block, present: u8, index: usize, which: usize) -> u64 {
        let stored = |which: usize| {
            if present & FIGURE_BITS[which] == 0 {
                return 0;
            }
            widen(
                block.figure_base[which],
                self.figures[which].get(index).copied().unwrap_or(0),
            )
        };
        if which == FREE && block.free_derived && present & FIGURE_BITS[FREE] != 0 {
            return block.free_complement.wrapping_sub(stored(ALLOCATED));
        }
        stored(which)
    }

    /// Bytes the samples take on the heap (capacity included): what the
    /// compact form saves is measured by it.
    pub fn heap_bytes(&self) -> usize {
        use std::mem::size_of;
        self.blocks.capacity() * size_of::<Block>()
            + self.at.capacity() * 4
            + self.figures.iter().map(|c| c.capacity() * 4).sum::<usize>()
            + self.fragmentation.capacity() * 4
            + self.whole.capacity() * size_of::<AllocatorSample>()
            + self.presence.capacity()
    }

    /// The samples in order.
    pub fn iter(&self) -> Iter<'_> {
        Iter {
            samples: self,
            front: 0,
            back: self.len,
        }
    }

    /// Makes room for `additional` more samples (their columns included,
    /// and those made later, which take `at`'s room), so that a caller who
    /// knows about how many will come has them stored without the columns
    /// growing by copy. Room that cannot be had is not made: the columns
    /// then grow as they fill, as without it.
    pub fn reserve(&mut self, additional: usize) {
        let _ = self.blocks.try_reserve_exact(additional / BLOCK + 1);
        let _ = self.at.try_reserve_exact(additional);
        for column in self.figures.iter_mut().filter(|c| !c.is_empty()) {
            let _ = column.try_reserve_exact(additional);
        }
        if !self.fragmentation.is_empty() {
            let _ = self.fragmentation.try_reserve_exact(additional);
        }
    }

    /// Adds a sample at the end.
    #[inline]
    pub fn push(&mut self, sample: AllocatorSample) {
        match self.settled(&sample) {
            Some(n) => self.push_settled(&n),
            None => self.push_any(sample),
        }
    }

    /// `sample` as the last block stores it, where that block is narrow
    /// with one presence for all its samples, the sample's, and is not the
    /// sample's first (so its bases and unit are set): every XSpace sample
    /// but a block's first. `narrow`'s outcome with fewer checks (~60
    /// instructions a sample less); `None` where this does not hold or
    /// `narrow` is needed.
    #[inline(always)]
    fn settled(&self, sample: &AllocatorSample) -> Option<Narrow> {
        if self.len & (BLOCK - 1) == 0 {
            return None;
        }
        let block = self.blocks.last()?;
        if block.whole != NONE || block.mixed != NONE || block.present != sample.present {
            return None;
        }
        let since_base = sample.at.wrapping_sub(block.at_base);
        let at = match block.at_unit {
            1000 if since_base % 1000 == 0 => since_base / 1000,
            1 => since_base,
            _ => return None,
        };
        let mut n = Narrow {
            at: delta(at)?,
            ..Narrow::default()
        };
        let present = sample.present;
        // Same presence as the block's first sample: it made the free
        // figures derived if they are, which both figures are present for.
        if block.free_derived
            && sample.figures[ALLOCATED].wrapping_add(sample.figures[FREE]) != block.free_complement
        {
            return None;
        }
        for (which, &bit) in FIGURE_BITS.iter().enumerate() {
            if present & bit == 0 || (which == FREE && block.free_derived) {
                continue;
            }
            n.stored |= bit;
            let base = block.figure_base[which];
            n.figures[which] = delta(sample.figures[which].wrapping_sub(base) as i64)?;
        }
        if present & FRAGMENTATION != 0 {
            n.fragmentation = billionths(sample.fragmentation)?;
            n.stored |= FRAGMENTATION;
        }
        Some(n)
    }

    /// Adds a sample `settled` gave: every column its block's first sample
    /// made or found has an entry per sample so far, and takes one more.
    #[inline(always)]
    fn push_settled(&mut self, n: &Narrow) {
        self.at.push(n.at);
        for (which, column) in self.figures.iter_mut().enumerate() {
            if !column.is_empty() {
                column.push(n.figures[which]);
            }
        }
        if !self.fragmentation.is_empty() {
            self.fragmentation.push(n.fragmentation);
        }
        self.len += 1;
    }

    /// Adds any sample.
    fn push_any(&mut self, sample: AllocatorSample) {
        let index = self.len;
        let offset = index & (BLOCK - 1);
        if offset == 0 {
            self.blocks.push(Block {
                at_base: sample.at,
                figure_base: [0; 4],
                whole: NONE,
                mixed: NONE,
                present: sample.present,
                based: 0,
                free_derived: false,
                free_complement: 0,
                at_unit: 0,
            });
        }
        let Some(block) = self.blocks.last_mut() else {
            return;
        };
        let Some(n) = narrow(block, &sample) else {
            return self.push_whole(sample, index - offset);
        };
        if block.mixed == NONE && block.present != sample.present {
            block.mixed = (self.presence.len() / BLOCK) as u32;
            self.presence
                .extend(std::iter::repeat_n(block.present, offset));
        }
        if block.mixed != NONE {
            self.presence.push(sample.present);
        }
        // Every column keeps one entry per sample from its first on,
        // whichever way its block is stored, so sample `i` is at `i` in each.
        self.at.push(n.at);
        // A column made now is given `at`'s room: what `reserve` made for
        // every sample, or what growing `at` has.
        let room = self.at.capacity();
        for (which, column) in self.figures.iter_mut().enumerate() {
            if n.stored & FIGURE_BITS[which] != 0 || !column.is_empty() {
                if column.len() < index || column.is_empty() {
                    make_column(column, index, room);
                }
                column.push(n.figures[which]);
            }
        }
        if n.stored & FRAGMENTATION != 0 || !self.fragmentation.is_empty() {
            if self.fragmentation.len() < index || self.fragmentation.is_empty() {
                make_column(&mut self.fragmentation, index, room);
            }
            self.fragmentation.push(n.fragmentation);
        }
        self.len += 1;
    }

    /// Adds a sample its block cannot store narrow: the block, from
    /// `start` on, is stored whole from here on.
    fn push_whole(&mut self, sample: AllocatorSample, start: usize) {
        if self.blocks.last().is_some_and(|b| b.whole == NONE) {
            self.store_whole(start);
        }
        self.at.push(0);
        for column in self.figures.iter_mut().filter(|c| !c.is_empty()) {
            column.push(0);
        }
        if !self.fragmentation.is_empty() {
            self.fragmentation.push(0);
        }
        self.whole.push(sample);
        self.len += 1;
    }

    /// Moves the samples of the last block so far (from `start` on) to
    /// `whole`, where the block's next ones will go too.
    fn store_whole(&mut self, start: usize) {
        let moved: Vec<AllocatorSample> = (start..self.len).filter_map(|i| self.get(i)).collect();
        let whole = (self.whole.len() / BLOCK) as u32;
        self.whole.extend(moved);
        if let Some(block) = self.blocks.last_mut() {
            if block.mixed != NONE {
                // Its presence bits were the block's last: they go too.
                self.presence.truncate(block.mixed as usize * BLOCK);
                block.mixed = NONE;
            }
            block.whole = whole;
        }
    }
}

/// Where [`AllocatorSamples::locate`] finds a sample.
enum Stored<'a> {
    Whole(&'a AllocatorSample),
    Narrow { block: &'a Block, present: u8 },
}

/// A sample as its narrow block stores it.
#[derive(Clone, Copy, Default)]
struct Narrow {
    at: u32,
    figures: [u32; 4],
    fragmentation: u32,
    /// The presence bits of the figures it has an entry for.
    stored: u8,
}

/// `sample` as `block` can store it narrow (setting the block's base of a
/// figure it is the first to have), or `None` where a value does not fit.
fn narrow(block: &mut Block, sample: &AllocatorSample) -> Option<Narrow> {
    if block.whole != NONE {
        return None;
    }
    let since_base = sample.at.wrapping_sub(block.at_base);
    if block.at_unit == 0 && since_base != 0 {
        block.at_unit = if since_base % 1000 == 0 { 1000 } else { 1 };
    }
    // The unit is 1 or 1000: divided by constants, not by a variable (a
    // 64-bit division per sample).
    let at = match block.at_unit {
        1000 if since_base % 1000 != 0 => return None,
        1000 => since_base / 1000,
        _ => since_base,
    };
    let mut n = Narrow {
        at: delta(at)?,
        ..Narrow::default()
    };
    let present = |which: usize| sample.present & FIGURE_BITS[which] != 0;
    if present(FREE) {
        // The first free figure of a block with an allocated one beside
        // it makes the block's free figures derived; a later one that is
        // not what that gives makes the block whole.
        let complement = sample.figures[ALLOCATED].wrapping_add(sample.figures[FREE]);
        if block.based & FIGURE_BITS[FREE] == 0 && present(ALLOCATED) {
            block.based |= FIGURE_BITS[FREE];
            block.free_derived = true;
            block.free_complement = complement;
        } else if block.free_derived && (!present(ALLOCATED) || complement != block.free_complement)
        {
            return None;
        }
    }
    for (which, &bit) in FIGURE_BITS.iter().enumerate() {
        if sample.present & bit == 0 || (which == FREE && block.free_derived) {
            continue;
        }
        n.stored |= bit;
        let value = sample.figures[which];
        if block.based & bit == 0 {
            block.figure_base[which] = value;
            block.based |= bit;
        }
        n.figures[which] = delta(value.wrapping_sub(block.figure_base[which]) as i64)?;
    }
    if sample.present & FRAGMENTATION != 0 {
        n.fragmentation = billionths(sample.fragmentation)?;
        n.stored |= FRAGMENTATION;
    }
    Some(n)
}

/// A fragmentation as the billionths that read back as it bit for bit, if
/// there are such.
#[inline(always)]
fn billionths(f: f64) -> Option<u32> {
    // Rounded by the cast (which saturates, and takes NaN to 0): any count
    // that reads back as `f` bit for bit will do.
    let billionths = (f * FRAGMENTATION_SCALE + 0.5) as u32;
    ((f64::from(billionths) / FRAGMENTATION_SCALE).to_bits() == f.to_bits()).then_some(billionths)
}

/// A column first needed at sample `index`: zeros for the samples before,
/// in room for `room` samples.
#[cold]
fn make_column(column: &mut Vec<u32>, index: usize, room: usize) {
    // Room that cannot be had is left to growing.
    let _ = column.try_reserve_exact(room.max(index + 1) - column.len());
    column.resize(index, 0);
}

/// A difference from a block's base as 32 bits, if it fits.
fn delta(d: i64) -> Option<u32> {
    i32::try_from(d).ok().map(|d| d as u32)
}

impl std::fmt::Debug for AllocatorSamples {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl PartialEq for AllocatorSamples {
    fn eq(&self, other: &Self) -> bool {
        self.len == other.len && self.iter().eq(other.iter())
    }
}

impl From<Vec<AllocatorSample>> for AllocatorSamples {
    fn from(samples: Vec<AllocatorSample>) -> Self {
        samples.into_iter().collect()
    }
}

impl FromIterator<AllocatorSample> for AllocatorSamples {
    fn from_iter<I: IntoIterator<Item = AllocatorSample>>(iter: I) -> Self {
        let mut samples = AllocatorSamples::new();
        samples.extend(iter);
        samples
    }
}

impl Extend<AllocatorSample> for AllocatorSamples {
    fn extend<I: IntoIterator<Item = AllocatorSample>>(&mut self, iter: I) {
        for sample in iter {
            self.push(sample);
        }
    }
}

impl<'a> IntoIterator for &'a AllocatorSamples {
    type Item = AllocatorSample;
    type IntoIter = Iter<'a>;

    fn into_iter(self) -> Iter<'a> {
        self.iter()
    }
}

/// [`AllocatorSamples::iter`]: the samples by value, in order.
#[derive(Clone)]
pub struct Iter<'a> {
    samples: &'a AllocatorSamples,
    front: usize,
    back: usize,
}

impl Iterator for Iter<'_> {
    type Item = AllocatorSample;

    #[inline]
    fn next(&mut self) -> Option<AllocatorSample> {
        if self.front >= self.back {
            return None;
        }
        self.front += 1;
        self.samples.get(self.front - 1)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let left = self.back - self.front;
        (left, Some(left))
    }

    fn nth(&mut self, n: usize) -> Option<AllocatorSample> {
        self.front = self.front.saturating_add(n).min(self.back);
        self.next()
    }
}

impl DoubleEndedIterator for Iter<'_> {
    #[inline]
    fn next_back(&mut self) -> Option<AllocatorSample> {
        if self.front >= self.back {
            return None;
        }
        self.back -= 1;
        self.samples.get(self.back)
    }
}

impl ExactSizeIterator for Iter<'_> {}

impl std::iter::FusedIterator for Iter<'_> {}

/// A narrow figure: its block's base plus its stored delta (a signed 32-bit
/// step, wrapping as the figures were narrowed).
#[inline]
fn widen(base: u64, delta: u32) -> u64 {
    base.wrapping_add(i64::from(delta as i32) as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A deterministic stream of numbers (xorshift64).
    struct Numbers(u64);

    impl Numbers {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
    }

    /// What an XSpace allocator reports after each event: time in ps (whole
    /// ns, 300 µs apart on average, as in `tf_cnn.xplane.pb`), in use
    /// and free bytes moving by an allocation's size, fragmentation as a
    /// six-digit decimal; now and then a stack change's sample without
    /// figures.
    fn xspace_like(n: usize) -> Vec<AllocatorSample> {
        let mut numbers = Numbers(0x9e37_79b9_7f4a_7c15);
        let (mut at, mut in_use) = (5_000_000_000_000i64, 17u64 << 30);
        (0..n)
            .map(|i| {
                at += (numbers.next() % 600_000) as i64 * 1000;
                let size = (numbers.next() % (64 << 20)) & !255;
                in_use = if numbers.next().is_multiple_of(2) {
                    in_use + size
                } else {
                    in_use.saturating_sub(size)
                };
                if i % 1000 == 999 {
                    return AllocatorSample::new(at);
                }
                let fragmentation = (numbers.next() % 1_000_000) as f64 / 1e6;
                AllocatorSample::new(at)
                    .with_allocated_bytes(Some(in_use))
                    .with_free_bytes(Some((80u64 << 30) - in_use))
                    .with_fragmentation(Some(fragmentation))
            })
            .collect()
    }

    fn check(samples: &[AllocatorSample]) -> AllocatorSamples {
        let stored: AllocatorSamples = samples.iter().copied().collect();
        assert_eq!(stored.len(), samples.len());
        let back: Vec<AllocatorSample> = stored.iter().collect();
        assert_eq!(back.len(), samples.len());
        for (i, (got, want)) in back.iter().zip(samples).enumerate() {
            assert_eq!(format!("{got:?}"), format!("{want:?}"), "sample {i}");
            assert_eq!(
                got.fragmentation().map(f64::to_bits),
                want.fragmentation().map(f64::to_bits),
                "sample {i}"
            );
            assert_eq!(
                stored.get(i).map(|s| format!("{s:?}")),
                Some(format!("{want:?}"))
            );
            assert_eq!(
                stored.allocated_bytes(i),
                want.allocated_bytes(),
                "sample {i}"
            );
            assert_eq!(
                stored.reserved_bytes(i),
                want.reserved_bytes(),
                "sample {i}"
            );
            for which in [RESERVED, ALLOCATED, FREE, LARGEST_FREE] {
                assert_eq!(stored.figure_at(i, which), want.figure(which), "sample {i}");
            }
        }
        let mut reversed: Vec<AllocatorSample> = stored.iter().rev().collect();
        // NaN is not equal to itself: samples are compared as they print.
        let printed = |s: &[AllocatorSample]| format!("{s:?}");
        reversed.reverse();
        assert_eq!(printed(&reversed), printed(&back));
        assert!(stored.get(samples.len()).is_none());
        assert!(stored.allocated_bytes(samples.len()).is_none());
        assert_eq!(
            format!("{:?}", stored.last()),
            format!("{:?}", samples.last())
        );
        assert_eq!(format!("{stored:?}"), format!("{samples:?}"));
        // The block-wise walks read what the samples read.
        let mut allocated = Vec::new();
        stored.for_each_allocated(|i, bytes| allocated.push((i, bytes)));
        let want: Vec<(usize, Option<u64>)> = samples
            .iter()
            .map(AllocatorSample::allocated_bytes)
            .enumerate()
            .collect();
        assert_eq!(allocated, want);
        assert_eq!(
            stored.last_reserved_bytes(),
            samples
                .iter()
                .rev()
                .find_map(AllocatorSample::reserved_bytes)
        );
        stored
    }

    /// An XSpace allocator's samples take a quarter of what a vector of
    /// them takes (56 bytes a sample), and read back exactly.
    #[test]
    fn xspace_samples_are_stored_in_a_quarter_and_read_back_exactly() {
        let samples = xspace_like(1 << 17);
        let stored = check(&samples);
        let per_sample = stored.heap_bytes() as f64 / samples.len() as f64;
        assert!(per_sample < 14.0, "{per_sample} bytes per sample");
        assert!(std::mem::size_of::<AllocatorSample>() >= 56);
    }

    /// Values that do not fit a narrow block (jumps over 2 GiB and over
    /// 2^31 ps, the ends of the ranges, fragmentation figures that are no
    /// short decimal, NaN, -0.0) and presence that varies read back as
    /// they were pushed.
    #[test]
    fn anything_that_does_not_fit_reads_back_exactly() {
        let mut numbers = Numbers(7);
        let mut samples = Vec::new();
        for i in 0..5_000u64 {
            let pick = numbers.next();
            let value = match pick % 6 {
                0 => u64::MAX - pick % 3,
                1 => pick,
                2 => 1 << 40,
                _ => i * 256,
            };
            let at = match pick % 5 {
                0 => i64::MIN + (pick % 7) as i64,
                1 => i64::MAX - (pick % 7) as i64,
                2 => pick as i64,
                _ => i as i64 * 1000,
            };
            let fragmentation = match pick % 7 {
                0 => f64::NAN,
                1 => -0.0,
                2 => 1.0 / 3.0,
                3 => 1e-12,
                4 => 5.0e9,
                _ => (pick % 1000) as f64 / 1000.0,
            };
            let bits = (pick >> 8) as u8;
            let figure = |bit: u8, v: u64| (bits & bit != 0).then_some(v);
            samples.push(
                AllocatorSample::new(at)
                    .with_reserved_bytes(figure(1, value))
                    .with_allocated_bytes(figure(2, value / 3))
                    .with_free_bytes(figure(4, i))
                    .with_largest_free_block(figure(8, pick))
                    .with_fragmentation((bits & 16 != 0).then_some(fragmentation)),
            );
        }
        check(&samples);
        // Blocks narrow but for their presence; a block whole from its last
        // sample on.
        let mut mixed = xspace_like(300);
        mixed[10] = AllocatorSample::new(mixed[10].at).with_reserved_bytes(Some(1));
        mixed[127] = mixed[127].with_allocated_bytes(Some(u64::MAX));
        check(&mixed);
        check(&[]);
    }

    /// Samples pushed into reserved room read back as without it, and no
    /// column grows past the room: the figures' columns made at the first
    /// sample take `at`'s.
    #[test]
    fn reserved_samples_fill_their_room_without_growing() {
        let samples = xspace_like(10_000);
        let mut stored = AllocatorSamples::new();
        stored.reserve(samples.len());
        samples.iter().for_each(|&s| stored.push(s));
        let grown: AllocatorSamples = samples.iter().copied().collect();
        assert_eq!(format!("{stored:?}"), format!("{grown:?}"));
        assert_eq!(stored.at.capacity(), 10_000);
        assert_eq!(stored.figures[ALLOCATED].capacity(), 10_000);
        assert_eq!(stored.fragmentation.capacity(), 10_000);
        assert!(stored.figures[RESERVED].is_empty());
        assert_eq!(stored.blocks.capacity(), 10_000 / BLOCK + 1);
        // Room for fewer: grown as it fills, the same samples.
        let mut short = AllocatorSamples::new();
        short.reserve(100);
        samples.iter().for_each(|&s| short.push(s));
        assert_eq!(format!("{short:?}"), format!("{grown:?}"));
    }

    #[test]
    fn cleared_samples_are_none() {
        let mut stored: AllocatorSamples = xspace_like(100).into_iter().collect();
        stored.clear();
        assert!(stored.is_empty());
        assert_eq!(stored.first(), None);
        stored.push(AllocatorSample::new(3).with_free_bytes(Some(9)));
        assert_eq!(
            stored.iter().collect::<Vec<_>>(),
            [AllocatorSample::new(3).with_free_bytes(Some(9))]
        );
    }
}
