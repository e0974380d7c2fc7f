//! A pprof profile's samples (top-level field 2) walked on the wire, one at
//! a time: in order on the reader's thread, or framed and decoded ahead on
//! a thread of their own in batches while the reader interns the ones
//! before (a million samples: the wire walk is about a fifth of the read,
//! the stacks, sites and allocations the rest, which depend on the order).

use std::sync::mpsc;

use memtool_proto::wire::reader::{self as wire, Fields, Value};

/// One sample as the reader uses it.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct SampleRef<'a> {
    pub(super) location_id: &'a [u64],
    pub(super) value: &'a [i64],
    /// `(key, str)` of each label.
    pub(super) label: &'a [(i64, i64)],
}

/// How [`walk`] goes through the samples.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(in crate::input) enum Walk {
    /// On the reader's thread, one sample after another.
    InOrder,
    /// On a thread of its own, `batch_bytes` of samples at a time, ahead
    /// of the reader; in order where the samples are fewer bytes than that
    /// (a thread would wait for its one batch) or the thread cannot start.
    Ahead { batch_bytes: usize },
}

impl Walk {
    /// Ahead where `jobs` (0: every core) allow a second thread, in
    /// batches of `batch_bytes` of samples (0: 256 KiB, about 10,000
    /// samples of JAX's); else in order.
    pub(in crate::input) fn new(jobs: usize, batch_bytes: u64) -> Walk {
        if crate::parallel::threads(jobs) < 2 {
            return Walk::InOrder;
        }
        Walk::Ahead {
            batch_bytes: match batch_bytes {
                0 => 256 << 10,
                n => usize::try_from(n).unwrap_or(usize::MAX),
            },
        }
    }
}

/// Calls `each` with every sample in order and returns how many there were,
/// or `Err` where the wire walk stops ([`walk_in_order`]), after `each` has
/// seen the samples before that one, however `how` walks.
pub(super) fn walk(
    bytes: &[u8],
    how: Walk,
    each: &mut dyn FnMut(SampleRef<'_>),
) -> Result<usize, ()> {
    match how {
        Walk::Ahead { batch_bytes } if bytes.len() > batch_bytes => {
            walk_ahead(bytes, batch_bytes.max(1), each)
        }
        _ => walk_in_order(bytes, each),
    }
}

/// How many samples there are, counted without reading them: room for the
/// stacks they make is reserved once.
pub(super) fn count(bytes: &[u8]) -> usize {
    Fields::new(bytes)
        .map_while(|field| field.ok())
        .filter(|&(number, _, _)| number == 2)
        .count()
}

/// One sample's vectors, refilled for each sample.
#[derive(Debug, Default)]
struct SampleView {
    location_id: Vec<u64>,
    value: Vec<i64>,
    label: Vec<(i64, i64)>,
}

impl SampleView {
    fn as_ref(&self) -> SampleRef<'_> {
        SampleRef {
            location_id: &self.location_id,
            value: &self.value,
            label: &self.label,
        }
    }
}

/// Every sample in order, on this thread. Fails where prost's decoding of
/// `Sample` and `Label` could fail (and on groups, which prost skips but
/// this walk does not), so that a walk that succeeds sees what prost would
/// have decoded.
pub(super) fn walk_in_order(
    bytes: &[u8],
    each: &mut dyn FnMut(SampleRef<'_>),
) -> Result<usize, ()> {
    let mut view = SampleView::default();
    let mut count = 0;
    for sample in payloads(bytes) {
        let (sample, _) = sample?;
        view.location_id.clear();
        view.value.clear();
        view.label.clear();
        decode(
            sample,
            &mut view.location_id,
            &mut view.value,
            &mut view.label,
        )?;
        each(view.as_ref());
        count += 1;
    }
    Ok(count)
}

/// Each sample's bytes (top-level field 2) and where they end, in order;
/// an `Err` where the walk stops: a field that cannot be framed (the last
/// item), or a sample that is not length-delimited.
fn payloads(bytes: &[u8]) -> impl Iterator<Item = Result<(&[u8], usize), ()>> + '_ {
    Fields::new(bytes).filter_map(|field| match field {
        Ok((2, Value::Bytes(sample), at)) => Some(Ok((sample, at + sample.len()))),
        Ok((2, _, _)) | Err(_) => Some(Err(())),
        Ok(_) => None,
    })
}

/// Appends one sample's location ids, values and labels.
#[inline]
fn decode(
    sample: &[u8],
    location_id: &mut Vec<u64>,
    value: &mut Vec<i64>,
    label: &mut Vec<(i64, i64)>,
) -> Result<(), ()> {
    for field in Fields::new(sample) {
        match field.map_err(drop)? {
            (1, Value::Varint(v), _) => location_id.push(v),
            (1, Value::Bytes(packed), _) => {
                for v in wire::packed_varints(packed, 0) {
                    location_id.push(v.map_err(drop)?);
                }
            }
            (2, Value::Varint(v), _) => value.push(v as i64),
            (2, Value::Bytes(packed), _) => {
                for v in wire::packed_varints(packed, 0) {
                    value.push(v.map_err(drop)? as i64);
                }
            }
            (3, Value::Bytes(bytes), _) => {
                let (mut key, mut str) = (0, 0);
                for field in Fields::new(bytes) {
                    match field.map_err(drop)? {
                        (1, Value::Varint(v), _) => key = v as i64,
                        (2, Value::Varint(v), _) => str = v as i64,
                        (3 | 4, Value::Varint(_), _) => {}
                        (1..=4, _, _) => return Err(()),
                        _ => {}
                    }
                }
                label.push((key, str));
            }
            (1..=3, _, _) => return Err(()),
            _ => {}
        }
    }
    Ok(())
}

/// Samples decoded ahead: each sample's ends in the three lists.
#[derive(Debug, Default)]
struct Batch {
    ends: Vec<(u32, u32, u32)>,
    location_id: Vec<u64>,
    value: Vec<i64>,
    label: Vec<(i64, i64)>,
}

impl Batch {
    fn clear(&mut self) {
        self.ends.clear();
        self.location_id.clear();
        self.value.clear();
        self.label.clear();
    }

    /// Ends as `u32`s: a batch holds at most a few MiB of samples, and
    /// one that would not fit is sent before it grows past them.
    fn fits(&self) -> bool {
        [self.location_id.len(), self.value.len(), self.label.len()]
            .iter()
            .all(|&n| n < u32::MAX as usize / 2)
    }
}

/// What the walking thread sends: a batch of samples, then how the walk
/// ended.
enum Sent {
    Batch(Batch),
    End(Result<usize, ()>),
}

/// Batches in flight between the two threads, besides the one each holds:
/// the walk keeps ahead without holding much (each batch's vectors are
/// given back and filled again, not faulted in anew).
const BATCHES_AHEAD: usize = 2;

/// [`walk_in_order`] with the wire walked on a scoped thread: `each` sees
/// the same samples in the same order, then the same end.
fn walk_ahead(
    bytes: &[u8],
    batch_bytes: usize,
    each: &mut dyn FnMut(SampleRef<'_>),
) -> Result<usize, ()> {
    std::thread::scope(|scope| {
        // Made in the scope: if `each` panics, the receiving ends are
        // dropped as it unwinds, so the walker's next send fails and the
        // scope can join it.
        let (sent, received) = mpsc::sync_channel::<Sent>(BATCHES_AHEAD);
        let (given_back, spare) = mpsc::channel::<Batch>();
        let walker = std::thread::Builder::new()
            .name("pprof-samples".into())
            .spawn_scoped(scope, move || {
                fill_batches(bytes, batch_bytes, &sent, &spare)
            });
        if walker.is_err() {
            // No thread (no memory for its stack): the walk in order.
            return walk_in_order(bytes, each);
        }
        for message in received.iter() {
            let batch = match message {
                Sent::Batch(batch) => batch,
                Sent::End(end) => return end,
            };
            let (mut l, mut v, mut b) = (0, 0, 0);
            for &(le, ve, be) in &batch.ends {
                let (le, ve, be) = (le as usize, ve as usize, be as usize);
                each(SampleRef {
                    location_id: batch.location_id.get(l..le).unwrap_or_default(),
                    value: batch.value.get(v..ve).unwrap_or_default(),
                    label: batch.label.get(b..be).unwrap_or_default(),
                });
                (l, v, b) = (le, ve, be);
            }
            // The walker may have ended: then the batch is dropped.
            let _ = given_back.send(batch);
        }
        // The walker ended without saying how (it panicked): its panic
        // resumes when the scope joins it, so this is never seen.
        Err(())
    })
}

/// The walking thread: every sample decoded into batches of about
/// `batch_bytes` of samples, sent in order, then how the walk ended. Stops
/// early when the reader is gone.
fn fill_batches(
    bytes: &[u8],
    batch_bytes: usize,
    sent: &mpsc::SyncSender<Sent>,
    spare: &mpsc::Receiver<Batch>,
) {
    let mut batch = Batch::default();
    let mut batch_start = 0;
    let mut count = 0;
    let send = |batch: &mut Batch| -> bool {
        let next = spare.try_recv().unwrap_or_default();
        sent.send(Sent::Batch(std::mem::replace(batch, next)))
            .is_ok()
    };
    for sample in payloads(bytes) {
        let end = sample.and_then(|(sample, end)| {
            let Batch {
                ends,
                location_id,
                value,
                label,
            } = &mut batch;
            decode(sample, location_id, value, label)?;
            ends.push((
                location_id.len() as u32,
                value.len() as u32,
                label.len() as u32,
            ));
            count += 1;
            Ok(end)
        });
        match end {
            Ok(end) => {
                if end - batch_start >= batch_bytes || !batch.fits() {
                    batch_start = end;
                    if !send(&mut batch) {
                        return;
                    }
                    batch.clear();
                }
            }
            Err(()) => {
                // The samples before the bad one are the reader's, as in
                // order; the bad one's partial lists are not.
                let whole = batch.ends.last().map_or((0, 0, 0), |&e| e);
                batch.location_id.truncate(whole.0 as usize);
                batch.value.truncate(whole.1 as usize);
                batch.label.truncate(whole.2 as usize);
                if send(&mut batch) {
                    let _ = sent.send(Sent::End(Err(())));
                }
                return;
            }
        }
    }
    if !batch.ends.is_empty() && !send(&mut batch) {
        return;
    }
    let _ = sent.send(Sent::End(Ok(count)));
}
