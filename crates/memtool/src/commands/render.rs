use anyhow::{bail, Result};
use clap::{Args, ValueEnum};
use memtool_core::analysis::warning_notes;
use memtool_core::render::{self, Inputs, RenderOptions};

use crate::cli::{AnalysisArgs, CapacityArgs, GroupKeyArg, InputArgs};
use crate::{inputs, output, Outcome};

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum RenderFormat {
    /// One self-contained HTML page (no network requests; opens from file://).
    Html,
    /// A static image of the timelines, for READMEs and tickets that strip HTML.
    Svg,
    /// Collapsed stacks at the peak (`frame;frame;frame bytes`) for other
    /// flame-graph tools.
    Folded,
    /// A Chrome trace-event JSON of counter tracks (live bytes per memory and
    /// per top group, downsampled as the page's timeline is) with the peak
    /// and steps as instants, for ui.perfetto.dev and chrome://tracing.
    Perfetto,
}

/// An HTML report to open offline or attach to a ticket: timeline, breakdown
/// at peak, call tree, leaks, addresses.
#[derive(Args, Debug)]
#[command(after_help = "Examples:
  memtool render memory.prof -o report.html
  memtool render memory1.prof memory2.prof memory3.prof -o series.html   # one timeline
  memtool render base.prof new.prof -o diff.html     # two files: what changed
  memtool render memory.prof --format svg -o timeline.svg
  memtool render memory.prof --format folded > stacks.folded
  memtool render snapshot.pickle --format perfetto -o trace.json   # open in ui.perfetto.dev

Two files are compared (base, new); pass --series to read them as one series instead.")]
#[command(mut_arg("files", |a| a.help("Profile files (`-` for stdin). One file or a series; exactly two are compared unless --series is given")))]
pub struct RenderArgs {
    #[command(flatten)]
    pub input: InputArgs,
    /// Read two files as one series of snapshots rather than comparing them.
    #[arg(long)]
    pub series: bool,
    /// Output format.
    #[arg(long, value_enum, default_value = "html")]
    pub format: RenderFormat,
    /// Write to FILE instead of stdout (atomically: never a partial file;
    /// a device or FIFO is written in place; `-` is stdout).
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<std::path::PathBuf>,
    /// Stack the timeline by this key (default: category when the memory has
    /// several, else your own frame when there are call stacks, else op).
    #[arg(long, value_enum, value_name = "KEY")]
    pub group_by: Option<GroupKeyArg>,
    /// Groups drawn on their own in the timeline; the rest are "other".
    #[arg(long, default_value_t = 12, value_name = "N")]
    pub bands: usize,
    #[command(flatten)]
    pub analysis: AnalysisArgs,
    #[command(flatten)]
    pub capacity: CapacityArgs,
}

pub fn run(args: &RenderArgs) -> Result<Outcome> {
    if args.bands == 0 || args.bands > 50 {
        bail!("--bands must be between 1 and 50");
    }
    // A page of markup scrolling through the terminal helps no one.
    let refused = match args.format {
        RenderFormat::Html => Some(("an HTML page", "report.html")),
        RenderFormat::Svg => Some(("an SVG image", "timeline.svg")),
        RenderFormat::Perfetto => Some(("a Perfetto trace", "trace.json")),
        RenderFormat::Folded => None,
    };
    if let Some((what, file)) = refused {
        output::refuse_terminal("render", args.output.as_deref(), what, file)?;
    }
    let mut analysis = args.analysis.options();
    args.capacity.apply(&mut analysis);
    let options = RenderOptions {
        analysis,
        group_by: args.group_by.map(Into::into),
        bands: args.bands,
        ..RenderOptions::default()
    };
    let text = if args.input.files.len() == 2 && !args.series {
        let (mut base, mut new) =
            inputs::load_pair(&args.input, &args.analysis, args.output.as_deref())?;
        inputs::group_by(&mut base, options.group_by);
        inputs::group_by(&mut new, options.group_by);
        output::warn(&warning_notes(&base.warnings));
        output::warn(&warning_notes(&new.warnings));
        produce(
            Inputs::Diff {
                base: &base,
                new: &new,
            },
            args.format,
            &options,
        )
    } else {
        let mut profile = inputs::load(&args.input, &args.analysis, args.output.as_deref())?;
        inputs::group_by(&mut profile, options.group_by);
        output::warn(&warning_notes(&profile.warnings));
        let text = produce(Inputs::One(&profile), args.format, &options);
        inputs::free_at_exit(profile);
        text
    };
    output::write_to(args.output.as_deref(), |out| out.write_all(text.as_bytes()))?;
    Ok(Outcome::Success)
}

fn produce(inputs: Inputs<'_>, format: RenderFormat, options: &RenderOptions) -> String {
    match format {
        RenderFormat::Html => render::html(inputs, options),
        RenderFormat::Svg => render::svg(inputs, options),
        RenderFormat::Folded => render::folded(inputs, options),
        RenderFormat::Perfetto => render::perfetto(inputs, options),
    }
}
