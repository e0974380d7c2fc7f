//! Where the categories of a memory's allocations came from: the file (a
//! profiler-made snapshot's `category`, an XLA buffer's kind), memtool's
//! inference from lifetimes and phases, or the user's own rules.

use std::collections::BTreeMap;

use serde::Serialize;

use super::Memory;

/// Who named a category.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CategorySource {
    /// The file: the profiler or compiler wrote it.
    Profiler,
    /// memtool, from each allocation's phase and lifetime
    /// (`analysis::category`, the rules in docs/categories.md).
    Inferred,
    /// A rule of the user's (`--category NAME=REGEX`, `--categories FILE`).
    User,
}

impl CategorySource {
    /// The name used in every output (as in JSON).
    pub const fn name(self) -> &'static str {
        match self {
            CategorySource::Profiler => "profiler",
            CategorySource::Inferred => "inferred",
            CategorySource::User => "user",
        }
    }
}

/// The source of each category name a memory's sites carry, once they have
/// been assigned (`analysis::category::assign`); empty before, and for
/// memories whose sites name no category.
pub type CategorySources = BTreeMap<String, CategorySource>;

impl Memory {
    /// Who named the category `name` of this memory's allocations, when
    /// known.
    pub fn category_source(&self, name: &str) -> Option<CategorySource> {
        self.category_sources.get(name).copied()
    }
}
