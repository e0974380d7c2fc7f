//! Gates on one kind of memory: `diff --fail-on-growth activation:5%` and
//! `peak --budget optimizer_state:2GiB` judge the bytes of one group (a
//! category, or a group of the `--by` grouping) live at each memory's peak —
//! the figures of `peak --by` and `diff --by` — with the same pass/fail line
//! and exit codes as the gates on the whole.

use std::collections::{BTreeMap, BTreeSet};

use crate::model::Profile;
use crate::report::units;

use super::diff::{growth_gate, memory_peak_groups, DeltaTotals, SiteLabels};
pub use super::gate::GatedGroup;
use super::gate::{GateResult, Limit};
use super::group::{self, GroupBy};
use super::{display_id, Options};

/// Splits a gate's `GROUP:LIMIT` (`activation:5%`, `optimizer_state:2GiB`)
/// into the group and the limit's text; a bare limit has no group.
pub fn split(text: &str) -> (Option<&str>, &str) {
    if Limit::parse(text).is_some() {
        return (None, text);
    }
    match text.rsplit_once(':') {
        Some((group, limit)) if !group.trim().is_empty() => (Some(group.trim()), limit),
        _ => (None, text),
    }
}

/// The grouping a gated group is looked up in: the command's `--by`, but
/// categories where it groups by stack (the default, whose keys are whole
/// stacks) or names none.
pub fn grouping(by: Option<GroupBy>) -> GroupBy {
    match by {
        None | Some(GroupBy::Stack) => GroupBy::Category,
        Some(by) => by,
    }
}

/// Every key of `by` some allocation of `profile`'s selected memories has.
fn keys(profile: &Profile, options: &Options, by: GroupBy) -> BTreeSet<String> {
    let mut sites = BTreeSet::new();
    for memory in options.selected(profile) {
        sites.extend(memory.allocations.iter().map(|a| a.site));
    }
    sites
        .into_iter()
        .map(|site| group::label(&profile.names, site, by, &options.frames))
        .collect()
}

/// An error naming the keys there are, when no profile has `key`: a typo
/// must not pass a gate by measuring nothing.
fn check_known(profiles: &[&Profile], options: &Options, gated: &GatedGroup) -> Result<(), String> {
    let mut known = BTreeSet::new();
    for profile in profiles {
        known.extend(keys(profile, options, gated.by));
    }
    if known.contains(&gated.key) {
        return Ok(());
    }
    let list: Vec<&str> = known.iter().map(String::as_str).take(20).collect();
    Err(format!(
        "no allocation has {} `{}` (there are: {}{})",
        gated.by.name().replace('_', " "),
        gated.key,
        list.join(", "),
        if known.len() > list.len() {
            ", ..."
        } else {
            ""
        }
    ))
}

/// Bytes of `gated` live at each selected memory's peak, by memory id, in
/// the order of the memories.
fn at_peaks(profile: &Profile, options: &Options, gated: &GatedGroup) -> Vec<(String, u64)> {
    let mut out = Vec::new();
    let mut labels = SiteLabels::default();
    for memory in options.selected(profile) {
        let mut groups = BTreeMap::new();
        if memory_peak_groups(profile, memory, options, gated.by, &mut labels, &mut groups)
            .is_none()
        {
            continue;
        }
        let bytes = groups.get(&gated.key).map_or(0, |t| t.bytes);
        out.push((memory.id.clone(), bytes));
    }
    out
}

/// `diff --fail-on-growth GROUP:LIMIT`: the growth of `gated`'s bytes at the
/// memories' peaks from `base` to `new`.
pub fn growth(
    base: &Profile,
    new: &Profile,
    options: &Options,
    gated: GatedGroup,
    limit: Limit,
) -> Result<GateResult, String> {
    check_known(&[base, new], options, &gated)?;
    let sum = |p: &Profile| {
        at_peaks(p, options, &gated)
            .iter()
            .fold(0u64, |t, (_, b)| t.saturating_add(*b))
    };
    let totals = DeltaTotals::new(sum(base), sum(new));
    let mut gate = growth_gate(&totals, limit, &format!("{} growth", gated.describe()));
    gate.group = Some(gated);
    Ok(gate)
}

/// `peak --budget GROUP:BYTES`: `gated`'s bytes at each memory's peak
/// against the budget.
pub fn budget(
    profile: &Profile,
    options: &Options,
    gated: GatedGroup,
    budget: u64,
) -> Result<GateResult, String> {
    check_known(&[profile], options, &gated)?;
    let each = at_peaks(profile, options, &gated);
    let over: Vec<&(String, u64)> = each.iter().filter(|(_, b)| *b > budget).collect();
    let highest = each.iter().max_by(|a, b| a.1.cmp(&b.1).then(b.0.cmp(&a.0)));
    let limit = Limit::Bytes(budget);
    let what = gated.describe();
    let message = if over.is_empty() {
        match highest {
            Some((id, bytes)) => format!(
                "budget gate passed: {what} at {}'s peak, {}, is within the budget {}",
                display_id(id),
                units::exact_bytes(*bytes),
                limit.describe()
            ),
            None => format!(
                "budget gate passed: no memory has a peak to check {what} against the budget {}",
                limit.describe()
            ),
        }
    } else {
        let each: Vec<String> = over
            .iter()
            .map(|(id, bytes)| {
                format!(
                    "{} holds {} of {what} at its peak, {} over",
                    display_id(id),
                    units::exact_bytes(*bytes),
                    units::exact_bytes(bytes - budget)
                )
            })
            .collect();
        format!(
            "budget gate FAILED: {} the budget {}",
            each.join("; "),
            limit.describe()
        )
    };
    Ok(GateResult {
        gate: "budget",
        passed: over.is_empty(),
        limit,
        measured_bytes: highest.map_or(0, |(_, b)| i64::try_from(*b).unwrap_or(i64::MAX)),
        measured_percent: None,
        failed_memories: over.iter().map(|(id, _)| id.clone()).collect(),
        group: Some(gated),
        message,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_group_is_split_from_its_limit() {
        assert_eq!(split("5%"), (None, "5%"));
        assert_eq!(split("64MiB"), (None, "64MiB"));
        assert_eq!(split("activation:5%"), (Some("activation"), "5%"));
        assert_eq!(
            split("optimizer_state:2GiB"),
            (Some("optimizer_state"), "2GiB")
        );
        // A key with colons (a user frame) keeps them.
        assert_eq!(split("train.py:12:1MiB"), (Some("train.py:12"), "1MiB"));
        assert_eq!(split(":5%"), (None, ":5%"));
        assert_eq!(grouping(None), GroupBy::Category);
        assert_eq!(grouping(Some(GroupBy::Stack)), GroupBy::Category);
        assert_eq!(grouping(Some(GroupBy::Op)), GroupBy::Op);
    }
}
