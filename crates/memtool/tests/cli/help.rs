//! `--help`, the bash completion script and the manual pages.

use std::io::Write;

use crate::common::memtool;

#[test]
fn every_subcommand_has_help_with_an_example() {
    for cmd in ["summary", "peak", "leaks", "diff"] {
        let out = memtool().args([cmd, "--help"]).output().unwrap();
        assert!(out.status.success());
        let text = String::from_utf8(out.stdout).unwrap();
        assert!(
            text.contains("Examples:") && text.contains(&format!("memtool {cmd} ")),
            "{cmd}: {text}"
        );
    }
}

/// `--help` leads with the options a user reaches for first and ends with
/// the rare ones under their own heading.
#[test]
fn help_lists_common_options_first_and_rare_ones_last() {
    for cmd in ["summary", "peak", "leaks", "diff", "frag", "oom"] {
        let out = memtool().args([cmd, "-h"]).output().unwrap();
        let text = String::from_utf8(out.stdout).unwrap();
        let at = |needle: &str| {
            text.find(needle)
                .unwrap_or_else(|| panic!("{cmd}: no {needle}: {text}"))
        };
        assert!(at("--format") < at("--output"), "{cmd}: {text}");
        assert!(at("--output") < at("--memory"), "{cmd}: {text}");
        assert!(at("--memory") < at("--top"), "{cmd}: {text}");
        assert!(at("--top") < at("Advanced options:"), "{cmd}: {text}");
        assert!(
            at("Advanced options:") < at("--max-decompressed"),
            "{cmd}: {text}"
        );
    }
    let peak = memtool().args(["peak", "-h"]).output().unwrap();
    let text = String::from_utf8(peak.stdout).unwrap();
    let at = |needle: &str| text.find(needle).unwrap();
    assert!(
        at("--memory") < at("--budget") && at("--by") < at("--top"),
        "{text}"
    );
    assert!(at("Advanced options:") < at("--xprof-compat"), "{text}");
}

/// The bash completion script loads in bash and completes a subcommand and
/// a flag of it.
#[test]
fn bash_completion_completes_subcommands_and_flags() {
    let script = memtool().args(["completions", "bash"]).output().unwrap();
    assert!(script.status.success());
    // bash calls a completion function with the command, the word being
    // completed and the word before it.
    let complete = |words: &str, cword: usize| -> Vec<String> {
        let out = std::process::Command::new("bash")
            .arg("-c")
            .arg(format!(
                "source /dev/stdin; COMP_WORDS=({words}); COMP_CWORD={cword}; \
                 _memtool memtool \"${{COMP_WORDS[COMP_CWORD]}}\" \"${{COMP_WORDS[COMP_CWORD-1]}}\"; \
                 printf '%s\\n' \"${{COMPREPLY[@]}}\""
            ))
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .and_then(|mut bash| {
                bash.stdin.take().unwrap().write_all(&script.stdout)?;
                bash.wait_with_output()
            })
            .expect("bash runs");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .map(String::from)
            .collect()
    };
    assert_eq!(complete("memtool pe", 1), ["peak"]);
    assert!(complete("memtool peak --bu", 2).contains(&"--budget".to_string()));
}

/// Each command's manual page renders with `man -l`, with its options.
#[test]
fn manual_pages_render_with_man() {
    for (args, name, option) in [
        (vec!["man"], "memtool", "summary"),
        (vec!["man", "peak"], "memtool-peak", "--budget"),
        (vec!["man", "diff"], "memtool-diff", "--fail-on-growth"),
    ] {
        let page = memtool().args(&args).output().unwrap();
        assert!(page.status.success());
        let out = std::process::Command::new("man")
            .args(["-l", "-"])
            .env("MANPAGER", "cat")
            .env("MANWIDTH", "100")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .and_then(|mut man| {
                man.stdin.take().unwrap().write_all(&page.stdout)?;
                man.wait_with_output()
            })
            .expect("man is installed (Debian's man-db)");
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.contains(&format!("{name}(1)")), "{text}");
        assert!(text.contains(option), "{name}: {text}");
        // NAME and SYNOPSIS read as one types the command: `memtool peak`,
        // the options one reaches for first leading the synopsis.
        if let [_, command] = args.as_slice() {
            let words: Vec<&str> = text.split_whitespace().collect();
            let at = |word: &str| words.iter().position(|w| *w == word);
            let name_at = at("NAME").unwrap();
            assert_eq!(
                words[name_at + 1..name_at + 3],
                ["memtool", *command],
                "{text}"
            );
            let synopsis_at = at("SYNOPSIS").unwrap();
            assert_eq!(
                words[synopsis_at + 1..synopsis_at + 4],
                ["memtool", *command, "[--format]"],
                "{text}"
            );
        }
    }
    let dir = std::env::temp_dir().join(format!("memtool-man-{}", std::process::id()));
    let out = memtool()
        .args(["man", "--dir", dir.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(out.status.success());
    let mut pages: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    pages.sort();
    assert_eq!(
        pages,
        [
            "memtool-completions.1",
            "memtool-diff.1",
            "memtool-export.1",
            "memtool-frag.1",
            "memtool-leaks.1",
            "memtool-man.1",
            "memtool-mcp.1",
            "memtool-oom.1",
            "memtool-peak.1",
            "memtool-ranks.1",
            "memtool-render.1",
            "memtool-summary.1",
            "memtool.1"
        ]
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
