//! `render --format perfetto`: the timelines as a Chrome trace-event JSON
//! (the JSON Object Format, `{"traceEvents": [...]}`), which
//! ui.perfetto.dev and chrome://tracing open.
//!
//! Each memory is a process (named by metadata events) with two counter
//! tracks drawn from the page's downsampled timeline ([`timeline::timeline`],
//! at most [`RenderOptions::width`] columns, each at its highest point): the
//! total live bytes, and the bytes of the top [`RenderOptions::bands`] groups
//! plus `other`, which add up to the total at every column (chrome://tracing
//! stacks them). The peak and the profile's steps are instant events.
//!
//! Timestamps are microseconds from the recording's start: a PyTorch time
//! (µs since the epoch) less the profile's first one, an XSpace time (ps
//! since the profile's start) divided by 10^6. Memories measured in positions
//! (events, snapshots, a compiled program's schedule) count one position as
//! one microsecond, and their process name says so.

use serde::ser::{Serialize, SerializeMap, Serializer};
use serde_json::Value;

use crate::analysis::{display_id, PeakFacts};
use crate::model::{Axis, Memory, Profile};
use crate::report::units;

use super::escape::label;
use super::timeline::{self, Timeline};
use super::{Inputs, RenderOptions};

/// The counter track of a memory's total live bytes.
pub const TOTAL_COUNTER: &str = "live bytes";

/// The prefix of the counter track of a memory's bytes by group
/// (`live bytes by op`).
pub const GROUP_COUNTER_PREFIX: &str = "live bytes by ";

/// The thread every event of a memory is on.
const TID: u32 = 1;

/// The trace of every memory's timeline (for `render A B`, base then new).
pub fn perfetto(inputs: Inputs<'_>, options: &RenderOptions) -> String {
    let list: Vec<(&str, &Profile)> = match inputs {
        Inputs::One(p) => vec![("", p)],
        Inputs::Diff { base, new } => vec![("base: ", base), ("new: ", new)],
    };
    let mut events: Vec<TraceEvent> = Vec::new();
    let mut pid = 0u32;
    for (role, profile) in list {
        let clock = Clock::of(profile);
        for memory in options.analysis.selected(profile) {
            let Some(facts) = PeakFacts::of(memory, options.analysis.ties) else {
                continue;
            };
            pid += 1;
            let (by, tl) =
                timeline::of_memory(&profile.names, memory, facts.point().index, options);
            let ts = |at: i64| clock.micros(memory.axis, at);
            metadata(&mut events, pid, &process_name(role, memory));
            counters(&mut events, pid, &tl, by.name(), ts);
            let peak = facts.point();
            events.push(TraceEvent::instant(
                pid,
                format!("peak {}", units::bytes(facts.peak.bytes)),
                ts(peak.at),
                vec![
                    ("bytes".to_string(), Value::from(facts.peak.bytes)),
                    ("replayed_bytes".to_string(), Value::from(peak.bytes)),
                    ("buffers".to_string(), Value::from(peak.buffers)),
                    ("at".to_string(), Value::from(facts.label.clone())),
                    (
                        "step".to_string(),
                        facts.step.map_or(Value::Null, Value::from),
                    ),
                ],
            ));
            step_instants(&mut events, pid, memory, options.width, ts);
        }
    }
    // Serializing our own values cannot fail: every map key is a string and
    // every number finite.
    serde_json::to_string(&Trace { events: &events }).unwrap_or_default()
}

/// What `(axis, position)` is in microseconds from the recording's start.
struct Clock {
    /// The earliest time of the profile's memories on the epoch clock.
    epoch_start_us: i64,
}

impl Clock {
    fn of(profile: &Profile) -> Clock {
        let epoch_start_us = profile
            .memories
            .iter()
            .filter(|m| m.axis == Axis::TimeUs)
            .flat_map(|m| {
                // Events of some formats are not in time order.
                let first_event = m.events.iter().map(|e| e.at).min();
                let first_step = m.steps.first().map(|s| s.start);
                let first_instant = m.instants.first().map(|i| i.at);
                [first_event, first_step, first_instant]
            })
            .flatten()
            .min()
            .unwrap_or(0);
        Clock { epoch_start_us }
    }

    fn micros(&self, axis: Axis, at: i64) -> f64 {
        match axis {
            Axis::TimePs => at as f64 / 1e6,
            // A memory with no events has one point, at 0: the start.
            Axis::TimeUs => at.saturating_sub(self.epoch_start_us).max(0) as f64,
            Axis::EventIndex | Axis::Snapshot | Axis::ProgramOrder => at as f64,
        }
    }
}

/// The process name of a memory: its id, host and, for memories measured in
/// positions, what one microsecond stands for.
fn process_name(role: &str, memory: &Memory) -> String {
    let mut name = format!("{role}{}", display_id(&memory.id));
    if let Some(host) = &memory.host {
        name.push_str(&format!(" on {host}"));
    }
    let unit = match memory.axis {
        Axis::TimePs | Axis::TimeUs => None,
        Axis::EventIndex => Some("event"),
        Axis::Snapshot => Some("snapshot"),
        Axis::ProgramOrder => Some("program position"),
    };
    if let Some(unit) = unit {
        name.push_str(&format!(" (1 µs = 1 {unit})"));
    }
    label(&name)
}

fn metadata(events: &mut Vec<TraceEvent>, pid: u32, name: &str) {
    for (kind, key, value) in [
        ("process_name", "name", Value::from(name)),
        ("process_sort_index", "sort_index", Value::from(pid)),
        ("thread_name", "name", Value::from(name)),
    ] {
        events.push(TraceEvent {
            name: kind.to_string(),
            ph: "M",
            ts: None,
            pid,
            tid: TID,
            scope: None,
            args: Args(vec![(key.to_string(), value)]),
        });
    }
}

/// The total and the groups at each column's highest point, in time order.
/// Columns at one timestamp (events at one time, one per column while they
/// fit) keep the highest: a counter has one value at a time.
fn counters(
    events: &mut Vec<TraceEvent>,
    pid: u32,
    tl: &Timeline,
    key: &str,
    ts: impl Fn(i64) -> f64,
) {
    let group_counter = format!("{GROUP_COUNTER_PREFIX}{}", key.replace('_', " "));
    let band_keys = unique_keys(tl.bands.iter().map(|b| b.key.as_str()));
    let mut columns: Vec<(f64, usize)> =
        tl.x.iter()
            .enumerate()
            .map(|(column, &x)| (ts(tl.x0.wrapping_add(x)), column))
            .collect();
    columns.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut kept: Vec<(f64, usize)> = Vec::with_capacity(columns.len());
    for (at, column) in columns {
        match kept.last_mut() {
            Some(last) if last.0 == at => {
                if tl.hi[column] > tl.hi[last.1] {
                    last.1 = column;
                }
            }
            _ => kept.push((at, column)),
        }
    }
    for (at, column) in kept {
        events.push(TraceEvent::counter(
            pid,
            TOTAL_COUNTER,
            at,
            vec![("total".to_string(), Value::from(tl.hi[column]))],
        ));
        let groups = tl
            .bands
            .iter()
            .zip(&band_keys)
            .map(|(band, key)| (key.clone(), Value::from(band.v[column])))
            .collect();
        events.push(TraceEvent::counter(pid, &group_counter, at, groups));
    }
}

/// Group labels as argument names: a name met again gets ` (2)`, … so no
/// group's series replaces another's.
fn unique_keys<'a>(keys: impl Iterator<Item = &'a str>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for key in keys {
        let mut candidate = key.to_string();
        let mut n = 1;
        while out.contains(&candidate) {
            n += 1;
            candidate = format!("{key} ({n})");
        }
        out.push(candidate);
    }
    out
}

/// An instant where each step begins, and where the last one ends; past
/// `width` steps, every n-th step's, so the trace stays small.
fn step_instants(
    events: &mut Vec<TraceEvent>,
    pid: u32,
    memory: &Memory,
    width: usize,
    ts: impl Fn(i64) -> f64,
) {
    let every = memory.steps.len().div_ceil(width.max(1)).max(1);
    for step in memory.steps.iter().step_by(every) {
        events.push(TraceEvent::instant(
            pid,
            format!("step {} begins", step.id),
            ts(step.start),
            vec![("step".to_string(), Value::from(step.id))],
        ));
    }
    if let Some(last) = memory.steps.last() {
        events.push(TraceEvent::instant(
            pid,
            format!("step {} ends", last.id),
            ts(last.end),
            vec![("step".to_string(), Value::from(last.id))],
        ));
    }
}

/// The JSON Object Format's document.
#[derive(serde::Serialize)]
struct Trace<'a> {
    #[serde(rename = "traceEvents")]
    events: &'a [TraceEvent],
}

/// One trace event.
#[derive(serde::Serialize)]
struct TraceEvent {
    name: String,
    ph: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    ts: Option<f64>,
    pid: u32,
    tid: u32,
    /// An instant's scope: `p`, the whole process (the memory).
    #[serde(rename = "s", skip_serializing_if = "Option::is_none")]
    scope: Option<&'static str>,
    args: Args,
}

impl TraceEvent {
    fn counter(pid: u32, name: &str, ts: f64, args: Vec<(String, Value)>) -> Self {
        TraceEvent {
            name: name.to_string(),
            ph: "C",
            ts: Some(ts),
            pid,
            tid: TID,
            scope: None,
            args: Args(args),
        }
    }

    fn instant(pid: u32, name: String, ts: f64, args: Vec<(String, Value)>) -> Self {
        TraceEvent {
            name,
            ph: "i",
            ts: Some(ts),
            pid,
            tid: TID,
            scope: Some("p"),
            args: Args(args),
        }
    }
}

/// Arguments in the order given (a counter's groups largest first), not
/// sorted by name.
struct Args(Vec<(String, Value)>);

impl Serialize for Args {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.0.len()))?;
        for (key, value) in &self.0 {
            map.serialize_entry(key, value)?;
        }
        map.end()
    }
}
