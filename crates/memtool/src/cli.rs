//! Arguments shared by every subcommand.

use std::path::PathBuf;

use clap::{Args, ValueEnum};
use memtool_core::analysis::{FrameFilter, Options};
use memtool_core::report::OutputFormat;

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum FormatArg {
    /// Tables for the terminal, sizes in KiB/MiB/GiB.
    Table,
    /// One JSON document (schema memtool/<command>/v1, see docs/json/).
    Json,
    /// The detail rows with a header row, exact bytes.
    Csv,
    /// Markdown tables, for CI summaries and tickets.
    Md,
}

impl FormatArg {
    /// Whether the output shows `--top` rows per table, not every row.
    pub fn shows_top_rows(self) -> bool {
        matches!(self, FormatArg::Table | FormatArg::Md)
    }
}

impl From<FormatArg> for OutputFormat {
    fn from(f: FormatArg) -> Self {
        match f {
            FormatArg::Table => OutputFormat::Table,
            FormatArg::Json => OutputFormat::Json,
            FormatArg::Csv => OutputFormat::Csv,
            FormatArg::Md => OutputFormat::Md,
        }
    }
}

#[derive(Args, Debug)]
pub struct OutputArgs {
    /// Output format.
    #[arg(long, value_enum, default_value = "table")]
    pub format: FormatArg,
    /// Write to FILE instead of stdout (atomically: never a partial file).
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<PathBuf>,
}

#[derive(Args, Debug)]
pub struct ReadArgs {
    /// Refuse to decompress an input past this size (default: 100× the file,
    /// at least 256 MiB, at most 16 GiB). Accepts units: 2GiB, 500MB.
    #[arg(long, value_name = "BYTES", value_parser = parse_size)]
    pub max_decompressed: Option<u64>,
    /// For a run directory or logdir holding several hosts' `.xplane.pb`:
    /// read only this host's (the file name without `.xplane.pb`).
    #[arg(long, value_name = "HOST")]
    pub host: Option<String>,
}

#[derive(Args, Debug)]
pub struct AnalysisArgs {
    /// Rows per table in table and md output (json and csv keep every row).
    #[arg(long, default_value_t = 10, value_name = "N")]
    pub top: usize,
    /// Show every frame of each stack. By default library frames (files under
    /// site-packages or dist-packages, and native C++ frames) are hidden so
    /// bytes land on your code; a stack with no frame of yours is named by its
    /// op and autograd node.
    #[arg(long)]
    pub all_frames: bool,
    /// Treat files whose path contains PATTERN as library code (repeatable;
    /// replaces the default site-packages, dist-packages).
    #[arg(
        long = "library",
        value_name = "PATTERN",
        conflicts_with = "all_frames"
    )]
    pub library: Vec<String>,
    /// Only this memory (device or allocator id, e.g. cpu:0, or a compiled
    /// program's module, e.g. jit_step or jit_step(10)); repeatable.
    #[arg(long = "memory", visible_alias = "module", value_name = "ID")]
    pub memories: Vec<String>,
}

impl AnalysisArgs {
    /// [`AnalysisArgs::options`] for a report written as `format`: output
    /// that shows `--top` rows keeps only that many groups per breakdown.
    pub fn report_options(&self, format: FormatArg) -> Options {
        let mut options = self.options();
        if format.shows_top_rows() {
            options.keep_groups = Some(options.top);
        }
        options
    }

    pub fn options(&self) -> Options {
        let frames = if self.all_frames {
            FrameFilter::All
        } else if self.library.is_empty() {
            FrameFilter::default()
        } else {
            FrameFilter::User {
                library_patterns: self.library.clone(),
            }
        };
        Options {
            frames,
            top: self.top,
            memories: self.memories.clone(),
            ..Options::default()
        }
    }
}

pub fn parse_size(text: &str) -> Result<u64, String> {
    memtool_core::report::units::parse_bytes(text)
        .ok_or_else(|| format!("`{text}` is not a size (examples: 1000, 64KiB, 2GiB, 500MB)"))
}

/// Fails when a `--memory` / `--module` name selects nothing, listing what
/// there is, rather than printing empty tables.
pub fn check_selection(
    profile: &memtool_core::model::Profile,
    options: &Options,
) -> anyhow::Result<()> {
    let unmatched = options.unmatched(profile);
    if unmatched.is_empty() {
        return Ok(());
    }
    let available: Vec<&str> = profile.memories.iter().map(|m| m.id.as_str()).collect();
    anyhow::bail!(
        "no memory or module named {} (there are: {})",
        unmatched
            .iter()
            .map(|n| format!("`{n}`"))
            .collect::<Vec<_>>()
            .join(", "),
        if available.is_empty() {
            "none".to_string()
        } else {
            available.join(", ")
        }
    )
}
