//! The serde plumbing of the trace reader: each element of `traceEvents`
//! deserialized into a reused [`RawEvent`] and kept as compact records, other
//! arguments skipped without being stored.

use std::borrow::Cow;
use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;

use super::TraceState;
use crate::input::torch::Loose;

/// The arguments of a `[memory]` event; every other argument is skipped.
#[derive(Debug, Default, Deserialize)]
pub(super) struct MemoryArgs {
    #[serde(rename = "Addr", default)]
    pub(super) addr: Loose,
    #[serde(rename = "Bytes", default)]
    pub(super) bytes: Loose,
    #[serde(rename = "Total Allocated", default)]
    pub(super) total_allocated: Loose,
    #[serde(rename = "Total Reserved", default)]
    pub(super) total_reserved: Loose,
    #[serde(rename = "Device Type", default)]
    pub(super) device_type: Loose,
    #[serde(rename = "Device Id", default)]
    pub(super) device_id: Loose,
}

/// `args`, or defaults when it is not an object.
#[derive(Debug, Default)]
struct LooseArgs(MemoryArgs);

impl<'de> Deserialize<'de> for LooseArgs {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = LooseArgs;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an args object")
            }
            fn visit_map<A: MapAccess<'de>>(
                self,
                a: A,
            ) -> std::result::Result<LooseArgs, A::Error> {
                MemoryArgs::deserialize(de::value::MapAccessDeserializer::new(a)).map(LooseArgs)
            }
            fn visit_seq<A: SeqAccess<'de>>(
                self,
                mut a: A,
            ) -> std::result::Result<LooseArgs, A::Error> {
                while a.next_element::<IgnoredAny>()?.is_some() {}
                Ok(LooseArgs::default())
            }
            fn visit_str<E>(self, _: &str) -> std::result::Result<LooseArgs, E> {
                Ok(LooseArgs::default())
            }
            fn visit_i64<E>(self, _: i64) -> std::result::Result<LooseArgs, E> {
                Ok(LooseArgs::default())
            }
            fn visit_u64<E>(self, _: u64) -> std::result::Result<LooseArgs, E> {
                Ok(LooseArgs::default())
            }
            fn visit_f64<E>(self, _: f64) -> std::result::Result<LooseArgs, E> {
                Ok(LooseArgs::default())
            }
            fn visit_bool<E>(self, _: bool) -> std::result::Result<LooseArgs, E> {
                Ok(LooseArgs::default())
            }
            fn visit_unit<E>(self) -> std::result::Result<LooseArgs, E> {
                Ok(LooseArgs::default())
            }
        }
        d.deserialize_any(V)
    }
}

#[derive(Debug, Default, Deserialize)]
pub(super) struct DeviceProperty {
    #[serde(default)]
    pub(super) id: Loose,
    #[serde(rename = "totalGlobalMem", default)]
    pub(super) total_global_mem: Loose,
}

/// A string field read into a buffer kept from one event to the next; any
/// other JSON value reads as absent.
#[derive(Default)]
pub(super) struct TextField {
    pub(super) text: String,
    pub(super) present: bool,
}

impl TextField {
    pub(super) fn get(&self) -> Option<&str> {
        self.present.then_some(self.text.as_str())
    }
}

impl<'de> DeserializeSeed<'de> for &mut TextField {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> std::result::Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for &mut TextField {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a string")
    }
    fn visit_str<E>(self, v: &str) -> std::result::Result<(), E> {
        self.text.clear();
        self.text.push_str(v);
        self.present = true;
        Ok(())
    }
    fn visit_i64<E>(self, _: i64) -> std::result::Result<(), E> {
        self.present = false;
        Ok(())
    }
    fn visit_u64<E>(self, _: u64) -> std::result::Result<(), E> {
        self.present = false;
        Ok(())
    }
    fn visit_f64<E>(self, _: f64) -> std::result::Result<(), E> {
        self.present = false;
        Ok(())
    }
    fn visit_bool<E>(self, _: bool) -> std::result::Result<(), E> {
        self.present = false;
        Ok(())
    }
    fn visit_unit<E>(self) -> std::result::Result<(), E> {
        self.present = false;
        Ok(())
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut a: A) -> std::result::Result<(), A::Error> {
        while a.next_element::<IgnoredAny>()?.is_some() {}
        self.present = false;
        Ok(())
    }
    fn visit_map<A: MapAccess<'de>>(self, mut a: A) -> std::result::Result<(), A::Error> {
        while a.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        self.present = false;
        Ok(())
    }
}

/// One element of `traceEvents`, with only what memtool uses. One value is
/// refilled for every event, so its string buffers are allocated once.
#[derive(Default)]
pub(super) struct RawEvent {
    pub(super) name: TextField,
    pub(super) ph: TextField,
    pub(super) cat: TextField,
    pub(super) pid: Loose,
    pub(super) tid: Loose,
    pub(super) ts: Loose,
    pub(super) dur: Loose,
    pub(super) args: MemoryArgs,
}

/// The fields of [`RawEvent`] in their positional order (an event written
/// as an array is read by position, as a derived `Deserialize` would).
const EVENT_FIELDS: [&str; 8] = ["name", "ph", "cat", "pid", "tid", "ts", "dur", "args"];

/// A key of an event object: the index of a field in [`EVENT_FIELDS`], or
/// `None` for a key memtool skips. Keys are matched in place, not stored.
struct EventKey(Option<usize>);

impl<'de> Deserialize<'de> for EventKey {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = EventKey;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("field identifier")
            }
            fn visit_str<E>(self, v: &str) -> std::result::Result<EventKey, E> {
                Ok(EventKey(EVENT_FIELDS.iter().position(|&f| f == v)))
            }
            fn visit_bytes<E>(self, v: &[u8]) -> std::result::Result<EventKey, E> {
                Ok(EventKey(
                    EVENT_FIELDS.iter().position(|&f| f.as_bytes() == v),
                ))
            }
            fn visit_u64<E>(self, v: u64) -> std::result::Result<EventKey, E> {
                Ok(EventKey(
                    usize::try_from(v).ok().filter(|&i| i < EVENT_FIELDS.len()),
                ))
            }
        }
        d.deserialize_identifier(V)
    }
}

impl RawEvent {
    /// Reads field `index` of [`EVENT_FIELDS`] from `d`.
    fn field<'de, D: Deserializer<'de>>(
        &mut self,
        index: usize,
        d: D,
    ) -> std::result::Result<(), D::Error> {
        match index {
            0 => (&mut self.name).deserialize(d),
            1 => (&mut self.ph).deserialize(d),
            2 => (&mut self.cat).deserialize(d),
            3 => Loose::deserialize(d).map(|v| self.pid = v),
            4 => Loose::deserialize(d).map(|v| self.tid = v),
            5 => Loose::deserialize(d).map(|v| self.ts = v),
            6 => Loose::deserialize(d).map(|v| self.dur = v),
            _ => LooseArgs::deserialize(d).map(|v| self.args = v.0),
        }
    }
}

/// Field `index` of an event as a seed, for `next_value_seed` /
/// `next_element_seed`.
struct FieldSeed<'e>(&'e mut RawEvent, usize);

impl<'de> DeserializeSeed<'de> for FieldSeed<'_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> std::result::Result<(), D::Error> {
        self.0.field(self.1, d)
    }
}

/// Fills a [`RawEvent`] from one element of `traceEvents`; `filled` says
/// whether there was an event (a `null` element is none).
pub(super) struct EventSeed<'e> {
    pub(super) event: &'e mut RawEvent,
    pub(super) filled: &'e mut bool,
}

impl<'de> DeserializeSeed<'de> for EventSeed<'_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> std::result::Result<(), D::Error> {
        d.deserialize_option(self)
    }
}

impl<'de> Visitor<'de> for EventSeed<'_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("option")
    }
    fn visit_none<E>(self) -> std::result::Result<(), E> {
        *self.filled = false;
        Ok(())
    }
    fn visit_unit<E>(self) -> std::result::Result<(), E> {
        *self.filled = false;
        Ok(())
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> std::result::Result<(), D::Error> {
        let event = self.event;
        event.name.present = false;
        event.ph.present = false;
        event.cat.present = false;
        event.pid = Loose::Other;
        event.tid = Loose::Other;
        event.ts = Loose::Other;
        event.dur = Loose::Other;
        event.args = MemoryArgs::default();
        d.deserialize_struct("RawEvent", &EVENT_FIELDS, EventFields(event))?;
        *self.filled = true;
        Ok(())
    }
}

struct EventFields<'e>(&'e mut RawEvent);

impl<'de> Visitor<'de> for EventFields<'_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("struct RawEvent")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut a: A) -> std::result::Result<(), A::Error> {
        let mut seen = [false; EVENT_FIELDS.len()];
        while let Some(EventKey(key)) = a.next_key()? {
            let Some(index) = key else {
                a.next_value::<IgnoredAny>()?;
                continue;
            };
            if let Some(seen) = seen.get_mut(index) {
                if *seen {
                    return Err(de::Error::duplicate_field(EVENT_FIELDS[index]));
                }
                *seen = true;
            }
            a.next_value_seed(FieldSeed(self.0, index))?;
        }
        Ok(())
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut a: A) -> std::result::Result<(), A::Error> {
        for index in 0..EVENT_FIELDS.len() {
            if a.next_element_seed(FieldSeed(self.0, index))?.is_none() {
                break;
            }
        }
        Ok(())
    }
}

struct EventsSeed<'s>(&'s mut TraceState);

impl<'de> DeserializeSeed<'de> for EventsSeed<'_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> std::result::Result<(), D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for EventsSeed<'_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a list of trace events")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut a: A) -> std::result::Result<(), A::Error> {
        let mut event = RawEvent::default();
        let mut filled = false;
        while a
            .next_element_seed(EventSeed {
                event: &mut event,
                filled: &mut filled,
            })?
            .is_some()
        {
            if filled {
                self.0.event(&event)?;
            }
        }
        Ok(())
    }
}

struct TopSeed<'s>(&'s mut TraceState);

impl<'de> DeserializeSeed<'de> for TopSeed<'_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> std::result::Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for TopSeed<'_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a Chrome trace object with traceEvents")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut a: A) -> std::result::Result<(), A::Error> {
        while let Some(key) = a.next_key::<Cow<'de, str>>()? {
            match key.as_ref() {
                "traceEvents" => a.next_value_seed(EventsSeed(self.0))?,
                "deviceProperties" => {
                    let devices: Option<Vec<DeviceProperty>> = a.next_value()?;
                    self.0.device_properties = devices.unwrap_or_default();
                }
                _ => {
                    a.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(())
    }
    fn visit_seq<A: SeqAccess<'de>>(self, a: A) -> std::result::Result<(), A::Error> {
        EventsSeed(self.0).visit_seq(a)
    }
    fn visit_unit<E: de::Error>(self) -> std::result::Result<(), E> {
        Err(E::custom("expected a trace object"))
    }
}

pub(super) fn parse_with_serde<'de, R: serde_json::de::Read<'de>>(
    de: &mut serde_json::Deserializer<R>,
) -> serde_json::Result<TraceState> {
    let mut state = TraceState::default();
    TopSeed(&mut state).deserialize(de)?;
    Ok(state)
}
