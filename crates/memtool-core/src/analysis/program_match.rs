//! Memories of two runs paired by what they are. A compiled program's id
//! carries a per-process compile counter (`jit_train_step(38)`): one more
//! `jax.jit` compiled earlier in a run moves every later counter, so ids do
//! not pair programs across runs. Programs pair by module name (without the
//! counter) and memory space first; several modules of one name pair by
//! their signature (the entry computation's parameter and result shapes),
//! then by their order among the modules of that name. The counter is shown,
//! never used to pair. Other memories pair by id.

use std::collections::HashMap;

use crate::model::Memory;

/// One memory of either side, or both paired.
#[derive(Debug)]
pub struct Paired<'a> {
    /// A key that names the pair the same way in every run: the id for a
    /// memory that is no program; for a program, its module name without
    /// the counter (with `/S(n)` for memory space n), then `#2`, `#3` for
    /// later modules of the same name.
    pub key: String,
    /// The memory of the base run.
    pub base: Option<&'a Memory>,
    /// The memory of the new run.
    pub new: Option<&'a Memory>,
}

/// A program's name without its compile counter, with its memory space:
/// `jit_train_step(38)` → `jit_train_step`, `…/S(1)` for space 1.
fn program_name(memory: &Memory) -> Option<String> {
    let program = memory.program.as_ref()?;
    let module = program.module.as_str();
    let name = module
        .rsplit_once('(')
        .filter(|(_, counter)| {
            counter
                .strip_suffix(')')
                .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
        })
        .map_or(module, |(name, _)| name);
    Some(match program.memory_space {
        0 => name.to_string(),
        space => format!("{name}/S({space})"),
    })
}

fn signature(memory: &Memory) -> Option<&str> {
    memory.program.as_ref()?.signature.as_deref()
}

/// Pairs `base` with `new`: in base order, then the new memories left.
/// Memories are found by key through a hash map, so the cost grows with the
/// number of memories, not its square (10^5 devices of a pprof).
pub fn pair<'a>(base: &[&'a Memory], new: &[&'a Memory]) -> Vec<Paired<'a>> {
    let key_of = |m: &Memory| program_name(m).unwrap_or_else(|| m.id.clone());
    let base_keys: Vec<String> = base.iter().map(|m| key_of(m)).collect();
    let new_keys: Vec<String> = new.iter().map(|m| key_of(m)).collect();
    // Each key's memories on either side, keys in base order.
    let mut names: Vec<&str> = Vec::new();
    let mut sides: HashMap<&str, (Vec<usize>, Vec<usize>)> = HashMap::new();
    for (i, key) in base_keys.iter().enumerate() {
        let entry = sides.entry(key.as_str()).or_insert_with(|| {
            names.push(key.as_str());
            (Vec::new(), Vec::new())
        });
        entry.0.push(i);
    }
    for (j, key) in new_keys.iter().enumerate() {
        if let Some(entry) = sides.get_mut(key.as_str()) {
            entry.1.push(j);
        }
    }
    let mut taken = vec![false; new.len()];
    // For each base memory, the new one it pairs with.
    let mut partner: Vec<Option<usize>> = vec![None; base.len()];
    for name in &names {
        let (bases, news) = &sides[name];
        if base[bases[0]].program.is_none() {
            // Not a program: the id pairs.
            if let Some(&j) = news.first() {
                partner[bases[0]] = Some(j);
                taken[j] = true;
            }
            continue;
        }
        // One module of the name on each side: the name pairs them.
        if let ([i], [j]) = (&bases[..], &news[..]) {
            partner[*i] = Some(*j);
            taken[*j] = true;
            continue;
        }
        // Then the signature, in order (among the modules of one name).
        for &i in bases {
            let Some(sig) = signature(base[i]) else {
                continue;
            };
            if let Some(&j) = news
                .iter()
                .find(|&&j| !taken[j] && signature(new[j]) == Some(sig))
            {
                partner[i] = Some(j);
                taken[j] = true;
            }
        }
        // Then the order among the modules of the name.
        let mut rest = news
            .iter()
            .copied()
            .filter(|&j| !taken[j])
            .collect::<Vec<_>>()
            .into_iter();
        for &i in bases {
            if partner[i].is_none() {
                if let Some(j) = rest.next() {
                    partner[i] = Some(j);
                    taken[j] = true;
                }
            }
        }
    }
    // Keys name each pair alike in every run: the second memory of a key
    // is `key#2`, and so on.
    let mut seen: HashMap<String, usize> = HashMap::new();
    let mut keyed = |name: &str| {
        let count = seen.entry(name.to_string()).or_insert(0);
        *count += 1;
        match *count {
            1 => name.to_string(),
            n => format!("{name}#{n}"),
        }
    };
    let mut out: Vec<Paired<'a>> = base
        .iter()
        .zip(&partner)
        .zip(&base_keys)
        .map(|((b, p), key)| Paired {
            key: keyed(key),
            base: Some(*b),
            new: p.map(|j| new[j]),
        })
        .collect();
    for (j, n) in new.iter().enumerate() {
        if !taken[j] {
            out.push(Paired {
                key: keyed(&new_keys[j]),
                base: None,
                new: Some(*n),
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Axis, MemoryKind, ProgramInfo};

    fn program(module: &str, signature: &str) -> Memory {
        let mut m = Memory::new(module, MemoryKind::ProgramSpace, Axis::ProgramOrder);
        m.program = Some(Box::new(ProgramInfo {
            module: module.to_string(),
            signature: Some(signature.to_string()),
            ..ProgramInfo::default()
        }));
        m
    }

    fn pairs(base: &[Memory], new: &[Memory]) -> Vec<(String, Option<String>, Option<String>)> {
        let base: Vec<&Memory> = base.iter().collect();
        let new: Vec<&Memory> = new.iter().collect();
        pair(&base, &new)
            .into_iter()
            .map(|p| {
                (
                    p.key,
                    p.base.map(|m| m.id.clone()),
                    p.new.map(|m| m.id.clone()),
                )
            })
            .collect()
    }

    fn row(
        key: &str,
        base: Option<&str>,
        new: Option<&str>,
    ) -> (String, Option<String>, Option<String>) {
        (key.into(), base.map(Into::into), new.map(Into::into))
    }

    #[test]
    fn programs_pair_by_name_then_signature_then_order_never_by_counter() {
        let base = [
            program("jit__normal(8)", "(u32[2]) -> f32[128,256]"),
            program("jit__normal(12)", "(u32[2]) -> f32[256,256]"),
            program("jit_train_step(26)", "(f32[2]) -> f32[2]"),
            program("jit_f(30)", "a"),
            program("jit_f(31)", "a"),
        ];
        let new = [
            program("jit__lambda(2)", "x"),
            // Counters moved, and the order of the two _normal swapped.
            program("jit__normal(12)", "(u32[2]) -> f32[256,256]"),
            program("jit__normal(16)", "(u32[2]) -> f32[128,256]"),
            program("jit_train_step(30)", "(f32[4]) -> f32[4]"),
            program("jit_f(34)", "a"),
            program("jit_f(35)", "a"),
        ];
        assert_eq!(
            pairs(&base, &new),
            [
                row(
                    "jit__normal",
                    Some("jit__normal(8)"),
                    Some("jit__normal(16)")
                ),
                row(
                    "jit__normal#2",
                    Some("jit__normal(12)"),
                    Some("jit__normal(12)")
                ),
                // One of the name on each side: paired though the shapes changed.
                row(
                    "jit_train_step",
                    Some("jit_train_step(26)"),
                    Some("jit_train_step(30)")
                ),
                row("jit_f", Some("jit_f(30)"), Some("jit_f(34)")),
                row("jit_f#2", Some("jit_f(31)"), Some("jit_f(35)")),
                row("jit__lambda", None, Some("jit__lambda(2)")),
            ]
        );
    }

    #[test]
    fn other_memories_pair_by_id() {
        let a = Memory::new("cuda:0", MemoryKind::Allocator, Axis::TimeUs);
        let b = Memory::new("cuda:1", MemoryKind::Allocator, Axis::TimeUs);
        let c = Memory::new("cuda:0", MemoryKind::Allocator, Axis::TimeUs);
        assert_eq!(
            pairs(&[a, b], &[c]),
            [
                row("cuda:0", Some("cuda:0"), Some("cuda:0")),
                row("cuda:1", Some("cuda:1"), None)
            ]
        );
    }
}
