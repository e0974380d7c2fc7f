//! `oom`'s report: the post-mortems of every kind of failure in a profile —
//! an allocator's recorded failures and programs over capacity
//! ([`super::oom`]), XLA's reports read from logs ([`super::xla_report`]) —
//! one after the other. It sits above both, so neither imports the other.

use std::io::Write;

use serde::Serialize;

use crate::model::{Memory, Profile};
use crate::report::{Cell, Report, Table};

use super::oom::{allocator_post_mortem, program_post_mortem, CapacitySource, PostMortem};
use super::{display_id, Options, Provenance};

/// The JSON schema name and version of `oom`'s document.
pub const SCHEMA: &str = "memtool/oom/v1";

/// What `oom` reports: one post-mortem per failed allocation, and per
/// program over capacity.
#[derive(Debug, Serialize)]
pub struct OomReport {
    /// [`SCHEMA`].
    pub schema: &'static str,
    /// The inputs and warnings.
    #[serde(flatten)]
    pub provenance: Provenance,
    /// The post-mortems, in memory order, then failure order.
    pub oom: Vec<PostMortem>,
}

/// The post-mortem of every failed allocation and every program over
/// capacity in `profile`.
pub fn oom(profile: &Profile, options: &Options) -> OomReport {
    oom_with_dump(profile, None, options)
}

/// [`oom`], with the `#allocationN` that XLA's reports list found in the
/// programs of `dump` (`oom LOG --dump DIR`).
pub fn oom_with_dump(profile: &Profile, dump: Option<&Profile>, options: &Options) -> OomReport {
    let mut oom = post_mortems(profile, options);
    let mut provenance = Provenance::of(profile);
    if let Some(dump) = dump {
        super::xla_report::match_in_dump(&mut oom, dump);
        // The dump was read too: its files and what its readers said.
        let read = Provenance::of(dump);
        provenance.inputs.extend(read.inputs);
        provenance.warnings.extend(read.warnings);
    }
    OomReport {
        schema: SCHEMA,
        provenance,
        oom,
    }
}

/// The post-mortems alone, for the reports that open with them (`summary`, the page).
pub fn post_mortems(profile: &Profile, options: &Options) -> Vec<PostMortem> {
    let mut out = Vec::new();
    for memory in options.selected(profile) {
        out.extend(memory_post_mortems(profile, memory, options));
    }
    out.extend(super::xla_report::post_mortems(profile, options));
    out
}

/// The post-mortems of one memory of `profile`: its allocator's failures in
/// order, then its program's, when over capacity.
pub(crate) fn memory_post_mortems(
    profile: &Profile,
    memory: &Memory,
    options: &Options,
) -> Vec<PostMortem> {
    let mut out = Vec::new();
    for failure in &memory.out_of_memory {
        out.push(allocator_post_mortem(profile, memory, failure, options));
    }
    if memory.program.is_some() {
        let capacity = match (options.capacity, memory.capacity) {
            (Some(c), _) => Some((c, CapacitySource::Given)),
            (None, Some(c)) => Some((c, CapacitySource::Profile)),
            (None, None) => None,
        };
        if let Some((capacity, source)) = capacity {
            out.extend(program_post_mortem(
                profile, memory, options, capacity, source,
            ));
        }
    }
    out
}

impl Report for OomReport {
    fn write_json(&self, out: &mut dyn Write) -> serde_json::Result<()> {
        serde_json::to_writer_pretty(out, self)
    }

    fn tables(&self) -> Vec<Table> {
        if self.oom.is_empty() {
            return vec![self.csv_table()];
        }
        self.oom.iter().flat_map(PostMortem::tables).collect()
    }

    fn csv_table(&self) -> Table {
        let mut t = Table::new(
            "Out-of-memory post-mortems",
            vec![
                "memory",
                "verdict",
                "request",
                "capacity",
                "shortfall",
                "reserved",
                "allocated",
                "free_in_reserved",
                "device_free",
                "padding_waste",
            ],
        );
        for p in &self.oom {
            let a = p.allocator.as_ref();
            let opt = |v: Option<u64>| v.map_or(Cell::Empty, Cell::Bytes);
            t.rows.push(vec![
                display_id(&p.header.id).into(),
                p.verdict.name().into(),
                Cell::Bytes(p.request_bytes),
                Cell::Bytes(p.capacity_bytes),
                Cell::Bytes(p.shortfall_bytes),
                opt(a.map(|a| a.reserved_bytes)),
                opt(a.map(|a| a.allocated_bytes)),
                opt(a.map(|a| a.free_in_reserved_bytes)),
                opt(a.and_then(|a| a.device_free_bytes)),
                opt(p.program.as_ref().map(|p| p.padding_waste_bytes)),
            ]);
        }
        t
    }

    fn notes(&self) -> Vec<String> {
        let mut notes: Vec<String> = self.oom.iter().map(PostMortem::note).collect();
        if self.oom.is_empty() {
            notes.push(
                "no out-of-memory failure recorded, and no compiled program over a known capacity \
                 (give --capacity to check programs)"
                    .to_string(),
            );
        }
        notes
    }

    fn warnings(&self) -> Vec<String> {
        super::warning_notes(&self.provenance.warnings)
    }
}
