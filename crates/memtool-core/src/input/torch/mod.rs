//! PyTorch inputs: caching-allocator snapshot pickles, profiler Chrome traces
//! and `export_memory_timeline` outputs.

pub(crate) mod memory_timeline;
mod phase;
pub(crate) mod pickle;
#[cfg(test)]
mod shared_records;
pub(crate) mod snapshot;
pub(crate) mod trace;

use std::fmt;
use std::io;

use serde::de::{Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;

use crate::error::Error;

/// The categories of PyTorch's memory profiler (`torch.profiler.
/// _memory_profiler.Category`, then `unknown`), in the column order of
/// `export_memory_timeline` (`_CATEGORY_TO_INDEX`), spelt as PyTorch writes
/// them into snapshots (`_profile_to_snapshot`: `category.name.lower()`) and
/// MemoryViz shows them: one spelling for every PyTorch input, so a category
/// is one group whichever file it came from.
const CATEGORIES: [&str; 8] = [
    "parameter",
    "optimizer_state",
    "input",
    "temporary",
    "activation",
    "gradient",
    "autograd_detail",
    "unknown",
];

/// A category as [`CATEGORIES`] spells it, whatever its case in the file;
/// other names as written.
fn category_name(name: &str) -> &str {
    CATEGORIES
        .iter()
        .find(|c| c.eq_ignore_ascii_case(name))
        .map_or(name, |c| c)
}

fn corrupt(path: &str, what: &'static str, e: serde_json::Error) -> Error {
    if e.is_io() {
        // The input failed or shrank under the reader: not a JSON problem.
        return crate::input::read_error(path, &io::Error::from(e));
    }
    Error::Corrupt {
        path: path.to_string(),
        format: what,
        message: e.to_string(),
        offset: None,
    }
}

/// A JSON scalar read leniently: profilers disagree on whether ids are
/// numbers or strings, and a field of an unexpected type is not an error.
#[derive(Clone, Debug, Default, PartialEq)]
enum Loose {
    Int(i64),
    Float(f64),
    Str(String),
    #[default]
    Other,
}

impl Loose {
    fn int(&self) -> Option<i64> {
        match self {
            Loose::Int(i) => Some(*i),
            Loose::Float(f) if f.is_finite() && f.fract() == 0.0 && f.abs() < 9.0e18 => {
                Some(*f as i64)
            }
            Loose::Str(s) => s.trim().parse().ok(),
            _ => None,
        }
    }

    fn float(&self) -> Option<f64> {
        match self {
            Loose::Int(i) => Some(*i as f64),
            Loose::Float(f) if f.is_finite() => Some(*f),
            Loose::Str(s) => s.trim().parse().ok().filter(|f: &f64| f.is_finite()),
            _ => None,
        }
    }

    /// A thread or process id as a key (string ids hashed).
    fn key(&self) -> i64 {
        match self {
            Loose::Str(s) => s.trim().parse().unwrap_or_else(|_| {
                s.bytes().fold(0xcbf29ce484222325u64, |h, b| {
                    (h ^ u64::from(b)).wrapping_mul(0x100000001b3)
                }) as i64
            }),
            other => other.int().unwrap_or(0),
        }
    }
}

impl<'de> Deserialize<'de> for Loose {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Loose;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_i64<E>(self, v: i64) -> std::result::Result<Loose, E> {
                Ok(Loose::Int(v))
            }
            fn visit_u64<E>(self, v: u64) -> std::result::Result<Loose, E> {
                Ok(i64::try_from(v).map_or(Loose::Float(v as f64), Loose::Int))
            }
            fn visit_f64<E>(self, v: f64) -> std::result::Result<Loose, E> {
                Ok(Loose::Float(v))
            }
            fn visit_str<E>(self, v: &str) -> std::result::Result<Loose, E> {
                Ok(Loose::Str(v.to_string()))
            }
            fn visit_bool<E>(self, _: bool) -> std::result::Result<Loose, E> {
                Ok(Loose::Other)
            }
            fn visit_unit<E>(self) -> std::result::Result<Loose, E> {
                Ok(Loose::Other)
            }
            fn visit_seq<A: SeqAccess<'de>>(
                self,
                mut a: A,
            ) -> std::result::Result<Loose, A::Error> {
                while a.next_element::<IgnoredAny>()?.is_some() {}
                Ok(Loose::Other)
            }
            fn visit_map<A: MapAccess<'de>>(
                self,
                mut a: A,
            ) -> std::result::Result<Loose, A::Error> {
                while a.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(Loose::Other)
            }
        }
        d.deserialize_any(V)
    }
}

#[cfg(test)]
mod tests;
