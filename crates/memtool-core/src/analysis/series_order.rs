//! Series that cannot be silently misordered or mixed.
//!
//! Several files given together are a series in the order given, and the
//! leak verdict is computed on that order. A shell glob sorts names as text,
//! so `memory*.prof` puts `memory10.prof` before `memory2.prof`; and a glob
//! picks up whatever matches, such as the JAX documentation's `memory.prof`
//! (another program) beside `memory1.prof … memory9.prof`. Both are warned
//! of when the profile is loaded; `--sort natural` orders the files by the
//! numbers in their names ([`natural_cmp`]).

use std::cmp::Ordering;
use std::collections::{HashMap, HashSet};
use std::hash::Hash;

use crate::model::{Format, InputInfo, Memory, Profile, StackId, Warning};

use crate::input::file_name;

/// Compares two names as a person orders numbered files: runs of digits by
/// their value (`memory2` before `memory10`), the rest as text; names equal
/// so far (`memory02`, `memory2`) by their text.
pub fn natural_cmp(a: &str, b: &str) -> Ordering {
    let (mut x, mut y) = (a.as_bytes(), b.as_bytes());
    loop {
        match (x.first(), y.first()) {
            (None, None) => return a.cmp(b),
            (None, Some(_)) => return Ordering::Less,
            (Some(_), None) => return Ordering::Greater,
            (Some(c), Some(d)) if c.is_ascii_digit() && d.is_ascii_digit() => {
                let run = |s: &[u8]| s.iter().take_while(|c| c.is_ascii_digit()).count();
                let (n, m) = (run(x), run(y));
                let strip = |s: &[u8]| {
                    let zeros = s.iter().take_while(|&&c| c == b'0').count();
                    s[zeros.min(s.len().saturating_sub(1))..].to_vec()
                };
                let (p, q) = (strip(&x[..n]), strip(&y[..m]));
                // More significant digits is the larger number.
                let order = p.len().cmp(&q.len()).then_with(|| p.cmp(&q));
                if order != Ordering::Equal {
                    return order;
                }
                x = &x[n..];
                y = &y[m..];
            }
            (Some(c), Some(d)) => {
                if c != d {
                    return c.cmp(d);
                }
                x = &x[1..];
                y = &y[1..];
            }
        }
    }
}

/// Warns when a series' files are out of the order of the numbers in their
/// names, and when one of them shares no call stack with the others (a file
/// of another program).
pub(crate) fn warn_of_misordered_series(profile: &mut Profile) {
    let warnings = series_warnings(&profile.inputs, || held_by_file(profile));
    profile.warnings.extend(warnings);
}

/// What each point of `profile`'s series holds, labelled with its file's
/// name: a pprof series' instants are labelled with their file's name; a
/// series of snapshot pickles is one memory per file.
fn held_by_file(profile: &Profile) -> Vec<(String, Vec<(StackId, u64)>)> {
    let mut held = Vec::new();
    for memory in &profile.memories {
        let stacks = |ids: &mut dyn Iterator<Item = crate::model::AllocId>| {
            ids.map(|id| memory.allocation(id))
                .map(|a| (profile.names.site_of(a.site).stack, a.bytes))
                .filter(|&(stack, _)| stack.0 != 0)
                .collect::<Vec<_>>()
        };
        if memory.instants.len() > 1 {
            for instant in &memory.instants {
                held.push((
                    instant.label.clone(),
                    stacks(&mut instant.live.iter().copied()),
                ));
            }
        } else if let Some(part) = &memory.series {
            held.push((part.file.clone(), held_at_end(profile, memory)));
        }
    }
    held
}

/// The (call stack, bytes) of each allocation live at the end of `memory`
/// that has a stack.
pub(crate) fn held_at_end(profile: &Profile, memory: &Memory) -> Vec<(StackId, u64)> {
    super::replay::live_at(memory, memory.events.len())
        .into_iter()
        .map(|id| memory.allocation(id))
        .map(|a| (profile.names.site_of(a.site).stack, a.bytes))
        .filter(|&(stack, _)| stack.0 != 0)
        .collect()
}

/// The warnings of a series read from `inputs`, the inputs in order: files
/// out of the order of the numbers in their names, outside the numbering
/// the others share, or holding their bytes at stacks no other file holds.
/// `held` gives what each point of the series holds, by stack (any key
/// that is equal where the stacks are), labelled with its file's name; it
/// is asked only when the inputs are a series. The one judgement of a
/// profile read whole and of a summary of many files read one at a time.
pub(crate) fn series_warnings<K: Eq + Hash + Copy>(
    inputs: &[InputInfo],
    held: impl FnOnce() -> Vec<(String, Vec<(K, u64)>)>,
) -> Vec<Warning> {
    // Only files that each record one point of a series: pprof snapshots
    // and PyTorch snapshot pickles (several XSpace files are hosts of a run).
    let series = |f: Format| matches!(f, Format::Pprof | Format::TorchSnapshot);
    if inputs.len() < 2 || !inputs.iter().all(|i| series(i.format)) {
        return Vec::new();
    }
    let mut warnings = Vec::new();
    let names: Vec<String> = inputs.iter().map(|i| file_name(&i.path)).collect();
    let numbered = names.iter().any(|n| n.bytes().any(|c| c.is_ascii_digit()));
    if numbered {
        if let Some(w) = names
            .windows(2)
            .find(|w| natural_cmp(&w[0], &w[1]) == Ordering::Greater)
        {
            warnings.push(warning(
                &inputs[0].path,
                format!(
                    "the files are not in the order of the numbers in their names ({} is given \
                     before {}): a series is read in the order given, and a shell glob sorts \
                     names as text; give --sort natural to order them by those numbers",
                    w[0], w[1]
                ),
            ));
        }
    }
    warn_of_names_outside_the_numbering(&mut warnings, inputs, &names);
    warn_of_foreign_files(&mut warnings, inputs, &names, held());
    warnings
}

fn warning(path: &str, message: String) -> Warning {
    Warning {
        path: path.to_string(),
        message,
        note: false,
    }
}

/// A name as (text before its last number, the number, text after it).
fn numbered(name: &str) -> Option<(&str, &str, &str)> {
    // `memory3.prof.gz` is numbered like `memory2.prof`.
    let name = name.strip_suffix(".gz").unwrap_or(name);
    let end = name.rfind(|c: char| c.is_ascii_digit())? + 1;
    let start = name[..end]
        .rfind(|c: char| !c.is_ascii_digit())
        .map_or(0, |i| i + 1);
    Some((&name[..start], &name[start..end], &name[end..]))
}

/// Warns of the files whose names are outside the numbering most of the
/// series shares (`memory.prof` beside `memory1.prof … memory9.prof`): a
/// glob (`memory*.prof`) picks them up, and the leak verdict then compares
/// a file that is likely no snapshot of the same loop.
fn warn_of_names_outside_the_numbering(
    warnings: &mut Vec<Warning>,
    inputs: &[InputInfo],
    names: &[String],
) {
    let mut patterns: Vec<((&str, &str), usize)> = Vec::new();
    for (prefix, _, suffix) in names.iter().filter_map(|n| numbered(n)) {
        match patterns.iter_mut().find(|(p, _)| *p == (prefix, suffix)) {
            Some((_, n)) => *n += 1,
            None => patterns.push(((prefix, suffix), 1)),
        }
    }
    let Some(&((prefix, suffix), count)) = patterns.iter().max_by_key(|(_, n)| *n) else {
        return;
    };
    // Most of the files, and at least two, are numbered alike.
    if count < 2 || count * 2 <= names.len() || count == names.len() {
        return;
    }
    let in_pattern = |n: &str| numbered(n).is_some_and(|(p, _, s)| (p, s) == (prefix, suffix));
    let first = names
        .iter()
        .find(|n| in_pattern(n))
        .cloned()
        .unwrap_or_default();
    let last = names
        .iter()
        .rev()
        .find(|n| in_pattern(n))
        .cloned()
        .unwrap_or_default();
    let outside: Vec<usize> = (0..names.len())
        .filter(|&i| !in_pattern(&names[i]))
        .collect();
    for i in outside {
        warnings.push(warning(
            &inputs[i].path,
            format!(
                "{} is not numbered like the other files of the series ({first} … {last}): a \
                 glob picks it up, and the verdict compares it with them; leave it out unless \
                 it is a snapshot of the same loop",
                names[i]
            ),
        ));
    }
}

/// The files of a series that hold most of their bytes at call stacks no
/// other file of it holds: the snapshots of one program share their stacks
/// from one to the next (its parameters, its state), while another
/// program's — even one run from a script of the same name, as the JAX
/// documentation's `memory.prof` beside `memory1.prof … memory9.prof` — at
/// most a line or two.
fn warn_of_foreign_files<K: Eq + Hash + Copy>(
    warnings: &mut Vec<Warning>,
    inputs: &[InputInfo],
    names: &[String],
    points: Vec<(String, Vec<(K, u64)>)>,
) {
    // (stack, bytes) per file; a point whose label is no file's name (a
    // pprof instant's, renamed) counts for none. Two files of one name are
    // the first's.
    let mut held: Vec<Vec<(K, u64)>> = vec![Vec::new(); names.len()];
    let positions: HashMap<&str, usize> = names
        .iter()
        .enumerate()
        .rev()
        .map(|(i, n)| (n.as_str(), i))
        .collect();
    for (label, stacks) in points {
        if let Some(&i) = positions.get(label.as_str()) {
            held[i].extend(stacks);
        }
    }
    let stacks: Vec<HashSet<K>> = held
        .iter()
        .map(|h| h.iter().map(|&(s, _)| s).collect())
        .collect();
    let with_stacks = stacks.iter().filter(|s| !s.is_empty()).count();
    if with_stacks < 3 {
        // Two files that differ: neither is the odd one out.
        return;
    }
    // How many files hold each stack: a file's stack is shared when another
    // holds it too (counted once per file, so a thousand files cost a
    // thousand sets, not a million comparisons of them).
    let mut files_holding: HashMap<K, usize> = HashMap::new();
    for set in &stacks {
        for &s in set {
            *files_holding.entry(s).or_default() += 1;
        }
    }
    let foreign: Vec<(usize, u64, u64)> = (0..names.len())
        .filter_map(|i| {
            let total = held[i].iter().fold(0u64, |t, &(_, b)| t.saturating_add(b));
            let shared = held[i]
                .iter()
                .filter(|(s, _)| files_holding.get(s).is_some_and(|&n| n > 1))
                .fold(0u64, |t, &(_, b)| t.saturating_add(b));
            (total > 0 && shared.saturating_mul(2) < total).then_some((i, shared, total))
        })
        .collect();
    // When most files are apart, none is the odd one out.
    if foreign.len() * 2 >= with_stacks {
        return;
    }
    for (i, shared, total) in foreign {
        warnings.push(warning(
            &inputs[i].path,
            format!(
                "{} holds {:.1}% of its bytes at call stacks the other files of the series \
                 hold: it looks like another program's, and a leak verdict that compares it \
                 with them says nothing; leave it out",
                names[i],
                shared as f64 * 100.0 / total as f64
            ),
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::natural_cmp;
    use std::cmp::Ordering;

    #[test]
    fn numbers_in_names_order_by_value() {
        let mut names = vec![
            "memory10.prof",
            "memory2.prof",
            "memory.prof",
            "memory1.prof",
            "memory02.prof",
            "step_9.pickle",
            "step_10.pickle",
        ];
        names.sort_by(|a, b| natural_cmp(a, b));
        assert_eq!(
            names,
            [
                "memory.prof",
                "memory1.prof",
                "memory02.prof",
                "memory2.prof",
                "memory10.prof",
                "step_9.pickle",
                "step_10.pickle"
            ]
        );
        assert_eq!(natural_cmp("a0", "a00"), "a0".cmp("a00"));
        assert_eq!(natural_cmp("x", "x"), Ordering::Equal);
    }
}
