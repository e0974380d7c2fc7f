//! [`IdMap`]: a map keyed by XLA's logical buffer ids, which XLA numbers
//! 0, 1, 2, … in a module: an index by id into a vector of values where
//! the id is small, a hash map for the rest. A program of 10^6 buffers looked each one up in
//! four hash maps of 10^6 entries (the logical buffers, the placed buffers,
//! the shares and the holders of the heap simulator's replay), a cache miss
//! each; the index is read in nearly the order the trace names them.

use rustc_hash::FxHashMap as HashMap;

/// Ids below `limit` are found through `index`, grown to the largest one
/// seen: 4 bytes an id to a place in `values`, which holds one entry per id
/// ever given (emptied, not removed, when its id is). Other ids (negative,
/// or beyond what the module's size makes plausible, as a hostile file's)
/// are in `sparse`. The limit is set from the number of entries expected,
/// so memory stays proportional to the input: ids need not be dense (the
/// benchmark's generated programs number their copies in strides), only
/// within 16 times the count.
pub(super) struct IdMap<V> {
    index: Vec<u32>,
    values: Vec<Option<V>>,
    limit: usize,
    sparse: HashMap<i64, V>,
}

/// No place in `values` yet.
const ABSENT: u32 = u32::MAX;

impl<V> IdMap<V> {
    /// A map for about `expected` entries: ids up to 16 times that (and
    /// 1,024 more) are indexed.
    pub(super) fn for_entries(expected: usize) -> IdMap<V> {
        IdMap {
            index: Vec::new(),
            values: Vec::new(),
            limit: expected.saturating_mul(16).saturating_add(1024),
            sparse: HashMap::default(),
        }
    }

    fn slot(&self, id: i64) -> Option<usize> {
        usize::try_from(id).ok().filter(|&i| i < self.limit)
    }

    /// The place of indexed id `i` in `values`, made (empty) where it has
    /// none: always below `values.len()`; `None` when `values` holds as
    /// many as a place can count (the id then goes to `sparse`).
    fn place(&mut self, i: usize) -> Option<usize> {
        if i >= self.index.len() {
            self.index.resize(i + 1, ABSENT);
        }
        let at = self.index.get_mut(i)?;
        if *at == ABSENT {
            *at = u32::try_from(self.values.len())
                .ok()
                .filter(|&n| n != ABSENT)?;
            self.values.push(None);
        }
        Some(*at as usize).filter(|&at| at < self.values.len())
    }

    pub(super) fn get(&self, id: i64) -> Option<&V> {
        match self.slot(id) {
            Some(i) => match self.index.get(i).copied().unwrap_or(ABSENT) {
                // Indexed ids go to `sparse` once `values` is full.
                ABSENT => self.sparse.get(&id),
                at => self.values.get(at as usize)?.as_ref(),
            },
            None => self.sparse.get(&id),
        }
    }

    /// Sets `id`'s value, returning the one it replaces (as
    /// `HashMap::insert`: the last value given for an id is kept).
    pub(super) fn insert(&mut self, id: i64, value: V) -> Option<V> {
        match self.slot(id).and_then(|i| self.place(i)) {
            Some(at) => self.values[at].replace(value),
            None => self.sparse.insert(id, value),
        }
    }

    pub(super) fn remove(&mut self, id: i64) -> Option<V> {
        match self.slot(id) {
            Some(i) => match self.index.get(i).copied().unwrap_or(ABSENT) {
                ABSENT => self.sparse.remove(&id),
                at => self.values.get_mut(at as usize)?.take(),
            },
            None => self.sparse.remove(&id),
        }
    }

    /// `id`'s value, made with `V::default()` where there is none.
    pub(super) fn get_or_default(&mut self, id: i64) -> &mut V
    where
        V: Default,
    {
        match self.slot(id).and_then(|i| self.place(i)) {
            Some(at) => self.values[at].get_or_insert_with(V::default),
            None => self.sparse.entry(id).or_default(),
        }
    }
}

impl<V> FromIterator<(i64, V)> for IdMap<V> {
    /// As a hash map collects: the last value given for an id is kept.
    fn from_iter<I: IntoIterator<Item = (i64, V)>>(iter: I) -> Self {
        let iter = iter.into_iter();
        let mut map = IdMap::for_entries(iter.size_hint().0);
        for (id, value) in iter {
            map.insert(id, value);
        }
        map
    }
}

#[cfg(test)]
mod tests {
    use super::IdMap;
    use std::collections::HashMap;

    /// Every operation gives what a hash map gives, for ids in the vector,
    /// beyond it, negative and at the extremes.
    #[test]
    fn an_id_map_answers_as_a_hash_map() {
        let ids = [
            0,
            1,
            5,
            3,
            2047,
            9215,
            9216,
            9217,
            -1,
            i64::MIN,
            i64::MAX,
            1 << 40,
            5,
            0,
        ];
        let mut map: IdMap<u32> = IdMap::for_entries(512);
        let mut want: HashMap<i64, u32> = HashMap::new();
        for (n, &id) in ids.iter().enumerate() {
            assert_eq!(map.insert(id, n as u32), want.insert(id, n as u32), "{id}");
        }
        for &id in &ids {
            assert_eq!(map.get(id), want.get(&id), "{id}");
        }
        *map.get_or_default(7) += 3;
        *want.entry(7).or_default() += 3;
        *map.get_or_default(i64::MAX) += 3;
        *want.entry(i64::MAX).or_default() += 3;
        for id in [7, i64::MAX, 5, -1, 9216, 6, 1 << 41] {
            assert_eq!(map.remove(id), want.remove(&id), "{id}");
            assert_eq!(map.get(id), want.get(&id), "{id}");
        }
        // Ids up to 16 times the expected count, and 1,024 more, are
        // indexed: the index never grows past that, whatever ids a file
        // names; the values are one per id given.
        assert!(map.index.len() <= 512 * 16 + 1024);
        assert!(map.values.len() <= ids.len() + 1);
        let collected: IdMap<u32> = [(4, 1), (4, 2), (-4, 3)].into_iter().collect();
        assert_eq!((collected.get(4), collected.get(-4)), (Some(&2), Some(&3)));
    }
}
