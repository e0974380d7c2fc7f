//! The TPU compiler's out-of-memory report, a line at a time, and the
//! one-line `Allocation (size=…) would exceed memory (size=…)`.

use super::{after, figure, layout, whole_figure};
use crate::model::{ReportedAllocation, UsageLine, XlaOomReport, XlaReportKind};

/// Which part of the report the next line belongs to.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Section {
    Head,
    Usage,
    Program,
    Allocations,
}

/// A compile-time report being read.
pub(super) struct Open {
    report: XlaOomReport,
    section: Section,
    allocation: Option<ReportedAllocation>,
}

impl Open {
    /// The report that `Ran out of memory in memory space {rest}` starts:
    /// `hbm. Used 17.60G of 16.00G hbm. Exceeded hbm capacity by 1.60G.`
    pub(super) fn start(line: u64, rest: &str) -> Option<Open> {
        let (space, rest) = rest.split_once('.')?;
        let space = space.trim();
        if space.is_empty() || space.contains(char::is_whitespace) {
            return None;
        }
        let mut report = XlaOomReport::new(XlaReportKind::CompileTime, line);
        report.memory_space = Some(space.to_string());
        if let Some(used) = after(rest, "Used ") {
            if let Some((used, rest)) = figure(used) {
                report.used = Some(used);
                report.capacity = after(rest, " of ").and_then(|c| figure(c)).map(|(c, _)| c);
            }
        }
        report.over = after(rest, "capacity by ")
            .and_then(|o| figure(o))
            .map(|(o, _)| o);
        Some(Open {
            report,
            section: Section::Head,
            allocation: None,
        })
    }

    /// Reads one line of the report; `false` when the line is not part of
    /// it (the report ended before it).
    pub(super) fn line(&mut self, text: &str) -> bool {
        let text = text.trim();
        if text.is_empty() || text.chars().all(|c| c == '=') {
            return true;
        }
        if let Some(rest) = text.strip_prefix("Total ") {
            if rest.contains(" usage >= ") || rest.contains(" usage > ") {
                self.section = Section::Usage;
                return true;
            }
        }
        if text.starts_with("Program ") && text.contains(" requirement ") {
            self.section = Section::Program;
            return true;
        }
        if text.starts_with("Largest program allocations in ") {
            self.section = Section::Allocations;
            return true;
        }
        if let Some(rest) = text.strip_prefix("Output size ") {
            let rest = rest.trim_end_matches('.');
            let (size, detail) = match rest.split_once(';') {
                Some((size, detail)) => (size, Some(detail.trim().to_string())),
                None => (rest, None),
            };
            self.report.usage.push(UsageLine {
                name: "output".to_string(),
                size: whole_figure(size.trim()),
                detail,
            });
            return true;
        }
        match self.section {
            Section::Head => false,
            Section::Usage | Section::Program => match usage_line(text) {
                Some(line) => {
                    let into = if self.section == Section::Usage {
                        &mut self.report.usage
                    } else {
                        &mut self.report.program
                    };
                    into.push(line);
                    true
                }
                None => false,
            },
            Section::Allocations => self.allocation_line(text),
        }
    }

    fn allocation_line(&mut self, text: &str) -> bool {
        if let Some((rank, rest)) = text.split_once(". Size: ") {
            if let Ok(rank) = rank.parse() {
                self.close_allocation();
                self.allocation = Some(ReportedAllocation {
                    rank: Some(rank),
                    size: whole_figure(rest.trim()),
                    ..ReportedAllocation::default()
                });
                return true;
            }
        }
        let Some(a) = &mut self.allocation else {
            return false;
        };
        let (key, value) = match text.split_once(": ") {
            Some((key, value)) => (key, value.trim()),
            None => match text.strip_suffix(':') {
                Some(key) => (key, ""),
                None => return false,
            },
        };
        match key {
            "Operator" => operator(a, value),
            "Shape" => a.shape = Some(value.to_string()),
            "Unpadded size" => a.unpadded_size = whole_figure(value),
            "Extra memory due to padding" => {
                a.padding = figure(value).map(|(f, _)| f);
            }
            "XLA label" => label(a, value),
            "Allocation type" => a.allocation_type = Some(value.to_string()),
            _ => return false,
        }
        true
    }

    fn close_allocation(&mut self) {
        if let Some(mut a) = self.allocation.take() {
            a.layout = a.shape.as_deref().and_then(layout::sizes);
            self.report.allocations.push(a);
        }
    }

    /// The report as read.
    pub(super) fn finish(mut self) -> XlaOomReport {
        self.close_allocation();
        let report = &mut self.report;
        // `HLO temp 19.46G (33.1% utilization: Unpadded (6.40G) Padded (19.32G), …)`.
        let detail = report
            .program
            .iter()
            .find(|u| u.name == "HLO temp")
            .and_then(|u| u.detail.as_deref());
        let figure_in = |detail: &str, marker: &str| {
            after(detail, marker)
                .and_then(|f| figure(f))
                .map(|(f, _)| f)
        };
        report.hlo_temp_unpadded_padded =
            detail.and_then(|d| Some((figure_in(d, "Unpadded (")?, figure_in(d, " Padded (")?)));
        // `Total hbm usage >= X` is the used figure when the first line
        // did not give one.
        if report.used.is_none() {
            report.used = report
                .usage
                .iter()
                .filter_map(|u| u.size.as_ref())
                .max_by_key(|s| s.bytes)
                .cloned();
        }
        self.report
    }
}

/// `reserved        528.00M`, `arguments       unknown size`, `HLO temp
/// 17.08G (92.8% utilization, 0.3% fragmentation (53.61M))`.
fn usage_line(text: &str) -> Option<UsageLine> {
    let tokens: Vec<&str> = text.split_whitespace().collect();
    let (at, size) = tokens
        .iter()
        .enumerate()
        .find_map(|(i, t)| match whole_figure(t) {
            Some(f) => Some((i, Some(f))),
            None if *t == "unknown" => Some((i, None)),
            None => None,
        })?;
    if at == 0
        || !tokens[..at]
            .iter()
            .all(|t| t.chars().all(char::is_alphabetic))
    {
        return None;
    }
    let name = tokens[..at].join(" ");
    let rest: Vec<&str> = tokens[at + 1..]
        .iter()
        .copied()
        .skip_while(|t| size.is_none() && *t == "size")
        .collect();
    let detail = rest.join(" ");
    let detail = detail
        .strip_prefix('(')
        .and_then(|d| d.strip_suffix(')'))
        .unwrap_or(&detail);
    Some(UsageLine {
        name,
        size,
        detail: (!detail.is_empty()).then(|| detail.to_string()),
    })
}

/// `op_type="OneHot" op_name="one_hot" source_file="train.py" source_line=42`.
fn operator(a: &mut ReportedAllocation, value: &str) {
    let mut file = None;
    let mut line = None;
    let mut rest = value;
    while let Some((key, after_eq)) = rest.split_once('=') {
        let key = key.trim();
        let (v, next) = match after_eq.strip_prefix('"') {
            Some(quoted) => match quoted.find('"') {
                Some(end) => (&quoted[..end], &quoted[end + 1..]),
                None => (quoted, ""),
            },
            None => match after_eq.find(char::is_whitespace) {
                Some(end) => (&after_eq[..end], &after_eq[end..]),
                None => (after_eq, ""),
            },
        };
        match key {
            "op_type" => a.op_type = Some(v.to_string()),
            "op_name" => a.op_name = Some(v.to_string()),
            "source_file" => file = Some(v.to_string()),
            "source_line" => line = Some(v.to_string()),
            _ => {}
        }
        rest = next;
    }
    a.source = match (file, line) {
        (Some(f), Some(l)) => Some(format!("{f}:{l}")),
        (Some(f), None) => Some(f),
        _ => None,
    };
}

/// `%fusion.1668 = f32[4,128]{1,0:T(8,128)} fusion(…), kind=kLoop, …`:
/// the instruction's name and opcode.
fn label(a: &mut ReportedAllocation, value: &str) {
    let Some((name, rest)) = value.split_once(" = ") else {
        a.instruction = Some(value.trim_start_matches('%').to_string());
        return;
    };
    a.instruction = Some(name.trim().trim_start_matches('%').to_string());
    let rest = rest.trim_start();
    // Skip the shape: a tuple in parentheses, else one token.
    let after_shape = if rest.starts_with('(') {
        let mut depth = 0usize;
        let end = rest.char_indices().find_map(|(i, c)| {
            match c {
                '(' => depth += 1,
                ')' => {
                    depth = depth.saturating_sub(1);
                    if depth == 0 {
                        return Some(i + 1);
                    }
                }
                _ => {}
            }
            None
        });
        end.map_or("", |e| &rest[e..])
    } else {
        rest.find(' ').map_or("", |e| &rest[e..])
    };
    let opcode = after_shape
        .trim_start()
        .split(['(', ' ', ','])
        .next()
        .unwrap_or("");
    if !opcode.is_empty() {
        a.opcode = Some(opcode.to_string());
    }
}

/// The one-line report: `Allocation (size=107374182400) would exceed memory
/// (size=17179869184) :: #allocation7 [shape = 'u8[327680,327680]{1,0:T(8,128)(4,1)}',
/// space=hbm, size = 0xffffffffffffffff, tag = 'output of xor_convert_fusion@{}']
/// :: <no-hlo-instruction>`.
pub(super) fn one_line(line: u64, text: &str) -> Option<XlaOomReport> {
    let size = after(text, "Allocation (size=")?;
    let (request, rest) = figure(size)?;
    let rest = rest.strip_prefix(')')?;
    let capacity = after(rest, "would exceed memory (size=").and_then(|c| figure(c));
    let (capacity, rest) = match capacity {
        Some((c, rest)) => (Some(c), rest),
        None if rest.trim_start().starts_with("would exceed memory") => (None, rest),
        None => return None,
    };
    let mut report = XlaOomReport::new(XlaReportKind::Allocation, line);
    report.request = Some(request.clone());
    report.capacity = capacity;
    let mut allocation = ReportedAllocation {
        size: Some(request),
        ..ReportedAllocation::default()
    };
    let details = rest.split_once("::").map_or("", |(_, d)| d);
    let (details, instruction) = match details.rsplit_once("::") {
        Some((d, i)) => (d, Some(i.trim())),
        None => (details, None),
    };
    report.instruction = instruction
        .filter(|i| !i.is_empty() && *i != "<no-hlo-instruction>")
        .map(str::to_string);
    if let Some(at) = details.find("#allocation") {
        let name: String = details[at..]
            .chars()
            .take_while(|c| *c == '#' || c.is_ascii_alphanumeric())
            .collect();
        allocation.allocation = Some(name);
    }
    allocation.shape = quoted_or_bare(details, "shape = ");
    allocation.allocation_type = quoted_or_bare(details, "tag = ");
    report.memory_space = after(details, "space=").map(|s| {
        s.split([',', ']', ' '])
            .next()
            .unwrap_or_default()
            .to_string()
    });
    allocation.layout = allocation.shape.as_deref().and_then(layout::sizes);
    report.allocations.push(allocation);
    Some(report)
}

/// The value after `key`: up to the closing quote when quoted (the last
/// `'` before `]` or the end, as tags hold quotes), else up to a comma.
fn quoted_or_bare(text: &str, key: &str) -> Option<String> {
    let value = after(text, key)?;
    if let Some(quoted) = value.strip_prefix('\'') {
        let end = quoted
            .match_indices('\'')
            .map(|(i, _)| i)
            .find(|&i| {
                let next = quoted[i + 1..].trim_start();
                next.is_empty() || next.starts_with(']') || next.starts_with(',')
            })
            .unwrap_or(quoted.len());
        return Some(quoted[..end].to_string());
    }
    let end = value.find([',', ']']).unwrap_or(value.len());
    let v = value[..end].trim();
    (!v.is_empty()).then(|| v.to_string())
}
