//! The snapshot's `external_annotations` (`{stage: START|END, name, device,
//! time_us}`): `ProfilerStep#N` pairs are the device's steps, every other
//! pair (`record_function` ranges, an optimizer's `Optimizer.step#AdamW.step`)
//! one of its annotations.

use std::collections::{BTreeMap, HashMap};

use crate::model::{Annotation, Step};

use super::Value;

/// What a device's annotations say.
#[derive(Default)]
pub(super) struct Annotated {
    /// `ProfilerStep#N` ranges, in order of their start.
    pub(super) steps: Vec<Step>,
    /// Every other range, in order of their start.
    pub(super) ranges: Vec<Annotation>,
}

/// The steps and annotated ranges of each device. A START is paired with
/// the next END of its name on its device (ranges of one name nest or
/// repeat: the innermost open one ends first); an END without a START, or a
/// START never ended, is no range.
pub(super) fn annotated(root: &Value) -> BTreeMap<i64, Annotated> {
    let mut open: HashMap<(i64, String), Vec<i64>> = HashMap::new();
    let mut out: BTreeMap<i64, Annotated> = BTreeMap::new();
    let Some(annotations) = root.get("external_annotations").and_then(|a| a.items()) else {
        return out;
    };
    for a in annotations {
        let Some(name) = a
            .get("name")
            .as_ref()
            .and_then(Value::as_str)
            .map(str::to_string)
        else {
            continue;
        };
        let (Some(at), device) = (
            a.get("time_us").and_then(|t| t.as_i64()),
            a.get("device").and_then(|d| d.as_i64()).unwrap_or(0),
        ) else {
            continue;
        };
        match a.get("stage").as_ref().and_then(Value::as_str) {
            Some("START") => open.entry((device, name)).or_default().push(at),
            Some("END") => {
                let Some(start) = open.get_mut(&(device, name.clone())).and_then(Vec::pop) else {
                    continue;
                };
                let end = at.max(start);
                let device = out.entry(device).or_default();
                match step_number(&name) {
                    Some(id) => device.steps.push(Step { id, start, end }),
                    None => device.ranges.push(Annotation { name, start, end }),
                }
            }
            _ => {}
        }
    }
    for device in out.values_mut() {
        device.steps.sort_by_key(|s| (s.start, s.id));
        device
            .ranges
            .sort_by(|a, b| (a.start, a.end, &a.name).cmp(&(b.start, b.end, &b.name)));
    }
    out
}

/// The number of a `ProfilerStep#N` range.
fn step_number(name: &str) -> Option<i64> {
    name.strip_prefix("ProfilerStep#")?.trim().parse().ok()
}
