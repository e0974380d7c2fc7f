use std::path::PathBuf;

use anyhow::Result;
use clap::Args;

use crate::Outcome;

/// Serve the analyses to a coding agent: a Model Context Protocol server on
/// stdin/stdout.
///
/// Tools `summary`, `peak`, `leaks`, `diff`, `frag` and `oom` take the
/// profiles' paths and the command's options, and return the command's JSON
/// document (as structured content) with a Markdown digest of its tables
/// (`top` rows each). Files are read only under --root; nothing is written.
/// Each call runs as its own memtool process, so a profile that does not fit
/// in memory fails that call, not the server. See docs/mcp.md.
#[derive(Args, Debug)]
#[command(after_help = "Examples:
  memtool mcp                      # serve the current directory's profiles
  memtool mcp --root ~/profiles
  claude mcp add memtool -- memtool mcp --root ~/profiles")]
pub struct McpArgs {
    /// The folder whose profiles the tools may read; a path outside it, or
    /// a link leading out of it, is refused.
    #[arg(long, value_name = "DIR", default_value = ".")]
    pub root: PathBuf,
}

pub fn run(args: &McpArgs) -> Result<Outcome> {
    crate::mcp::serve(&args.root)?;
    Ok(Outcome::Success)
}
