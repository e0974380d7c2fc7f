//! A moment of a recording other than the peak, as a person names it
//! (`peak --at t+25ms`, `--at-entry N`, `--at annotation:NAME[:start|end]`),
//! and the timeline point it is on each memory: `peak` then shows the live
//! set there, grouped as at the peak.

use crate::model::{Axis, Memory};

use super::stages::point_at_position;

/// A moment asked for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Moment {
    /// Picoseconds since the recording started (`t+25ms`): the state after
    /// every event up to that time.
    SinceStart(i64),
    /// After the memory's first N allocation events (allocations and frees,
    /// counted from 1; 0 is before the first): the point numbered N.
    Entry(usize),
    /// The START (or END) of the first range annotated with this name (the
    /// whole name, or what follows its `#`: `AdamW.step` names
    /// `Optimizer.step#AdamW.step`).
    Annotation {
        /// The name.
        name: String,
        /// The range's END rather than its START.
        end: bool,
    },
}

impl Moment {
    /// Parses `--at`'s text: `t+25ms` (`t+` optional; `ps`, `ns`, `us`,
    /// `ms`, `s`) or `annotation:NAME[:start|end]`.
    pub fn parse(text: &str) -> Result<Moment, String> {
        if let Some(rest) = text.strip_prefix("annotation:") {
            let (name, end) = match rest.rsplit_once(':') {
                Some((name, "start")) => (name, false),
                Some((name, "end")) => (name, true),
                _ => (rest, false),
            };
            if name.is_empty() {
                return Err(format!(
                    "{text:?} names no annotation: annotation:NAME[:start|end]"
                ));
            }
            return Ok(Moment::Annotation {
                name: name.to_string(),
                end,
            });
        }
        let time = text.trim().strip_prefix("t+").unwrap_or(text.trim());
        parse_duration_ps(time).map(Moment::SinceStart).ok_or_else(|| {
            format!(
                "{text:?} is no moment: a time since the recording started (t+25ms, t+1.5s, t+300us) or annotation:NAME[:start|end]"
            )
        })
    }

    /// The timeline point (as [`super::replay::for_each_point`] numbers
    /// them) this moment is on `memory`, and its position on the axis (the
    /// time asked for, the annotation's mark, the entry's event); `None`
    /// where the memory has no such moment (no annotation of that name, no
    /// time axis, past its last event).
    pub fn point(&self, memory: &Memory) -> Option<(usize, i64)> {
        if super::replay::uses_instants(memory) {
            return None;
        }
        match self {
            Moment::Entry(n) => {
                let at = match n.checked_sub(1) {
                    Some(i) => memory.events.get(i)?.at,
                    None => memory.events.first()?.at,
                };
                Some((*n, at))
            }
            Moment::SinceStart(ps) => {
                let start = memory.recording_start()?;
                let at = match memory.axis {
                    Axis::TimeUs => start.saturating_add(ps / 1_000_000),
                    Axis::TimePs => start.saturating_add(*ps),
                    _ => return None,
                };
                let last = memory.events.last()?.at;
                (at <= last).then(|| (point_at_position(memory, at, true), at))
            }
            Moment::Annotation { name, end } => {
                let range = memory.annotations.iter().find(|a| {
                    a.name == *name
                        || a.name
                            .rsplit_once('#')
                            .is_some_and(|(_, short)| short == name)
                })?;
                Some(if *end {
                    (point_at_position(memory, range.end, true), range.end)
                } else {
                    (point_at_position(memory, range.start, false), range.start)
                })
            }
        }
    }
}

/// `25ms`, `1.5 s`, `300us` as picoseconds.
fn parse_duration_ps(text: &str) -> Option<i64> {
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let value: f64 = number.parse().ok()?;
    let scale = match unit.trim() {
        "ps" => 1.0,
        "ns" => 1e3,
        "us" | "µs" => 1e6,
        "ms" => 1e9,
        "s" => 1e12,
        _ => return None,
    };
    let ps = (value * scale).round();
    (ps.is_finite() && ps >= 0.0 && ps < i64::MAX as f64).then_some(ps as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn moments_parse_as_people_write_them() {
        assert_eq!(
            Moment::parse("t+25ms"),
            Ok(Moment::SinceStart(25_000_000_000))
        );
        assert_eq!(
            Moment::parse("1.5s"),
            Ok(Moment::SinceStart(1_500_000_000_000))
        );
        assert_eq!(
            Moment::parse("t+300us"),
            Ok(Moment::SinceStart(300_000_000))
        );
        assert_eq!(
            Moment::parse("annotation:AdamW.step:end"),
            Ok(Moment::Annotation {
                name: "AdamW.step".into(),
                end: true
            })
        );
        assert_eq!(
            Moment::parse("annotation:a:b"),
            Ok(Moment::Annotation {
                name: "a:b".into(),
                end: false
            })
        );
        assert!(Moment::parse("t+25").is_err());
        assert!(Moment::parse("t+ms").is_err());
        assert!(Moment::parse("annotation:").is_err());
        assert!(Moment::parse("t+1e300s").is_err());
    }
}
