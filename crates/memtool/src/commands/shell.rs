//! `memtool completions SHELL` and `memtool man`: shell completion scripts
//! and manual pages, generated from the same clap definitions as `--help`.

use std::path::PathBuf;

use anyhow::Context;
use clap::{Args, CommandFactory};
use clap_complete::Shell;

use crate::{output, Cli, Outcome};

#[derive(Args, Debug)]
#[command(after_help = "Examples:
  memtool completions bash > ~/.local/share/bash-completion/completions/memtool
  memtool completions zsh > \"${fpath[1]}/_memtool\"
  memtool completions fish > ~/.config/fish/completions/memtool.fish")]
pub struct CompletionsArgs {
    /// The shell to complete in.
    #[arg(value_enum)]
    pub shell: Shell,
}

/// Writes the completion script for `args.shell` to stdout.
pub fn completions(args: &CompletionsArgs) -> anyhow::Result<Outcome> {
    let mut script = Vec::new();
    clap_complete::generate(args.shell, &mut Cli::command(), "memtool", &mut script);
    output::write_to(None, |out| out.write_all(&script))?;
    Ok(Outcome::Success)
}

#[derive(Args, Debug)]
#[command(after_help = "Examples:
  memtool man | man -l -              # read memtool(1)
  memtool man peak | man -l -         # read memtool-peak(1)
  memtool man --dir /usr/local/share/man/man1   # install every page")]
pub struct ManArgs {
    /// The command whose page to print (default: memtool's own).
    pub command: Option<String>,
    /// Write every page (memtool.1, memtool-summary.1, ...) into DIR instead.
    #[arg(long, value_name = "DIR", conflicts_with = "command")]
    pub dir: Option<PathBuf>,
}

/// Prints one manual page in roff, or writes all of them into a folder.
pub fn man(args: &ManArgs) -> anyhow::Result<Outcome> {
    let memtool = Cli::command().name("memtool");
    if let Some(dir) = &args.dir {
        std::fs::create_dir_all(dir).with_context(|| format!("{}", dir.display()))?;
        for (name, command) in pages(&memtool) {
            let path = dir.join(format!("{name}.1"));
            std::fs::write(&path, render(command)?)
                .with_context(|| format!("{}", path.display()))?;
        }
        return Ok(Outcome::Success);
    }
    let page = match &args.command {
        None => render(memtool)?,
        Some(name) => {
            let Some(command) = memtool.find_subcommand(name).cloned() else {
                let names: Vec<String> = memtool
                    .get_subcommands()
                    .map(|c| c.get_name().to_string())
                    .collect();
                anyhow::bail!("no command `{name}` (there are: {})", names.join(", "));
            };
            render(page(command))?
        }
    };
    output::write_to(None, |out| out.write_all(&page))?;
    Ok(Outcome::Success)
}

/// memtool's page and one per subcommand (`memtool-peak`), with their names.
fn pages(memtool: &clap::Command) -> Vec<(String, clap::Command)> {
    let mut pages = vec![("memtool".to_string(), memtool.clone())];
    for sub in memtool.get_subcommands() {
        pages.push((format!("memtool-{}", sub.get_name()), page(sub.clone())));
    }
    pages
}

/// A subcommand's page: filed as `memtool-peak(1)`, as man(1) names pages,
/// while its NAME and SYNOPSIS read `memtool peak`, what one types.
fn page(sub: clap::Command) -> clap::Command {
    let typed = format!("memtool {}", sub.get_name());
    let filed = format!("memtool-{}", sub.get_name());
    sub.name(filed).display_name(typed.clone()).bin_name(typed)
}

fn render(command: clap::Command) -> anyhow::Result<Vec<u8>> {
    let mut page = Vec::new();
    // The page's title is the name it is filed under (`memtool-peak`).
    let title = command.get_name().to_string();
    clap_mangen::Man::new(command)
        .title(title)
        .render(&mut page)?;
    Ok(page)
}
