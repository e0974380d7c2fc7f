//! Fitting a table to a width: each text column gets a share of the width,
//! and a label longer than its share is shortened where it says least — in
//! the middle, keeping a frame's function, file name and line, an op's first
//! and last components, a name's distinguishing tail. Rows whose labels
//! differ never look alike: labels that would be shown alike are shown by
//! the part where they differ.

use super::{visible, Cell, Table};

/// What stands for the characters left out.
const CUT: char = '…';
/// Characters of padding and separation a terminal table adds per column.
pub(super) const COLUMN_OVERHEAD: usize = 3;
/// Between the frames of a stack label (`Names::stack_label`).
const CALLER: &str = " <- ";

fn len(text: &str) -> usize {
    text.chars().count()
}

fn head(text: &str, n: usize) -> &str {
    match text.char_indices().nth(n) {
        Some((i, _)) => &text[..i],
        None => text,
    }
}

fn tail(text: &str, n: usize) -> &str {
    let skip = len(text).saturating_sub(n);
    match text.char_indices().nth(skip) {
        Some((i, _)) => &text[i..],
        None => "",
    }
}

/// `text` cut in the middle to `max` characters, more of its end kept than
/// of its start: names that share a prefix (`jit_convert_element_type.12`)
/// differ at the end.
fn middle(text: &str, max: usize) -> String {
    if len(text) <= max {
        return text.to_string();
    }
    if max == 0 {
        return String::new();
    }
    let kept = max - 1;
    let start = kept / 3;
    format!("{}{CUT}{}", head(text, start), tail(text, kept - start))
}

/// A slash-separated name (a path, an op name such as
/// `jit(train_step)/jvp()/dot_general`) in `max` characters: its last
/// component always, its first when there is room, then as many components
/// before the last as fit.
fn path(text: &str, max: usize) -> String {
    if len(text) <= max {
        return text.to_string();
    }
    let parts: Vec<&str> = text.split('/').collect();
    let last = parts[parts.len() - 1];
    if parts.len() < 2 || len(last) + 2 > max {
        return middle(text, max);
    }
    // An absolute path's first component is empty: the directories nearest
    // the file say more than `/`.
    let first = parts[0];
    let mut start = String::new();
    if !first.is_empty() && len(first) + 3 + len(last) <= max {
        start = format!("{first}/");
    }
    let mut end = last.to_string();
    for part in parts[1..parts.len() - 1].iter().rev() {
        if len(&start) + 2 + len(part) + 1 + len(&end) > max {
            break;
        }
        end = format!("{part}/{end}");
    }
    format!("{start}{CUT}/{end}")
}

/// A slash-separated name, spaces (a shape after an op) only in its last
/// component.
fn is_path(text: &str) -> bool {
    text.rsplit_once('/')
        .is_some_and(|(before, _)| !before.contains(' ') && !before.is_empty())
}

/// Distinct slash-separated names, or stacks, that shorten alike, each
/// shown by the components (frames) that vary among them, with the first
/// and, for a name, the last (`replica_6/…/layer_10/…/Cast`,
/// `mm <- … <- forward attention.py:33 <- …`); `None` when that does not
/// fit in `max` (`None`: whatever its length).
fn distinguish_components(texts: &[&str], max: Option<usize>) -> Option<Vec<String>> {
    let (separator, compact): (&str, fn(&str) -> String) = if texts.iter().all(|t| is_path(t)) {
        ("/", str::to_string)
    } else if texts.iter().all(|t| t.contains(CALLER)) {
        (CALLER, caller)
    } else {
        return None;
    };
    let parts: Vec<Vec<&str>> = texts.iter().map(|t| t.split(separator).collect()).collect();
    let count = parts.iter().map(Vec::len).max()?;
    let keep_last = separator == "/" && parts.iter().all(|p| p.len() == count);
    let varies: Vec<bool> = (0..count)
        .map(|i| {
            i == 0
                || (keep_last && i == count - 1)
                || parts.iter().any(|p| p.get(i) != parts[0].get(i))
        })
        .collect();
    parts
        .iter()
        .map(|p| {
            let mut shown: Vec<String> = Vec::new();
            for (i, part) in p.iter().enumerate() {
                if varies[i] {
                    shown.push(if i == 0 {
                        part.to_string()
                    } else {
                        compact(part)
                    });
                } else if shown.last().map(String::as_str) != Some("…") {
                    shown.push("…".to_string());
                }
            }
            let text = shown.join(separator);
            max.is_none_or(|max| len(&text) <= max).then_some(text)
        })
        .collect()
}

/// A frame label, `function file:line`, split at its location; `None` when
/// the text is not one.
fn split_frame(text: &str) -> Option<(&str, &str)> {
    let (function, location) = text.rsplit_once(' ')?;
    let has_line = location
        .rsplit_once(':')
        .is_some_and(|(_, line)| !line.is_empty() && line.bytes().all(|b| b.is_ascii_digit()));
    (!function.is_empty() && (location.contains('/') || has_line)).then_some((function, location))
}

/// A frame in `max` characters: the function, the file name and line
/// always; the directories nearest the file while they fit; then, when the
/// function and file name do not fit whole, the file's stem cut in the
/// middle (a generated file's hash), then the function.
fn frame(function: &str, location: &str, max: usize) -> String {
    let file = location.rsplit('/').next().unwrap_or(location);
    let marked = if file.len() < location.len() {
        len(file) + 2
    } else {
        len(file)
    };
    let function_max = len(function).min((max / 2).max(max.saturating_sub(1 + len(location))));
    let rest = max.saturating_sub(function_max + 1);
    if rest >= marked {
        return format!(
            "{} {}",
            middle(function, function_max),
            path(location, rest)
        );
    }
    let whole = max.saturating_sub(1 + len(file));
    if whole >= len(function).min(function_max) && whole > 0 {
        return format!("{} {file}", middle(function, whole.min(len(function))));
    }
    // The stem is cut before the function, down to a few characters each
    // side of the cut; the extension and line always stay.
    let (stem, suffix) = split_stem(file);
    let room = max.saturating_sub(1 + len(suffix));
    let function_keep = if len(function) + 3 <= room {
        len(function).min(
            room.saturating_sub(STEM_MIN)
                .max(room / 2)
                .max(len(function)),
        )
    } else {
        room / 2
    };
    let stem_room = room.saturating_sub(function_keep);
    if function_keep == 0 || stem_room == 0 {
        return middle(&format!("{function} {file}"), max);
    }
    format!(
        "{} {}{suffix}",
        middle(function, function_keep),
        middle(stem, stem_room)
    )
}

/// Characters a cut file stem keeps before its function is cut.
const STEM_MIN: usize = 9;

/// A file name split before its extension and line (`model.py:53` →
/// `model`, `.py:53`); a name without an extension splits before its line.
fn split_stem(file: &str) -> (&str, &str) {
    let name_end = file
        .rsplit_once(':')
        .filter(|(_, line)| !line.is_empty() && line.bytes().all(|b| b.is_ascii_digit()))
        .map_or(file.len(), |(name, _)| name.len());
    let at = file[..name_end]
        .rfind('.')
        .filter(|&i| i > 0)
        .unwrap_or(name_end);
    file.split_at(at)
}

/// A caller in a stack label, as short as it stays readable: its function
/// and file name with line, no directories.
fn caller(text: &str) -> String {
    match split_frame(text) {
        Some((function, location)) => {
            let file = location.rsplit('/').next().unwrap_or(location);
            format!("{} {file}", middle(function, 24))
        }
        None => middle(text, 24),
    }
}

/// A stack label (frames leaf first, joined by ` <- `) in `max` characters:
/// the leaf frame, then its callers in short form while they fit, and `<- …`
/// for the rest.
fn stack(text: &str, max: usize) -> String {
    let frames: Vec<&str> = text.split(CALLER).collect();
    let more = len(CALLER) + 1;
    if max <= more + 1 {
        return middle(text, max);
    }
    let mut out = shorten(frames[0], max - more);
    for (i, f) in frames.iter().enumerate().skip(1) {
        let next = caller(f);
        let reserve = if i + 1 < frames.len() { more } else { 0 };
        if len(&out) + len(CALLER) + len(&next) + reserve > max {
            out.push_str(CALLER);
            out.push(CUT);
            return out;
        }
        out.push_str(CALLER);
        out.push_str(&next);
    }
    out
}

/// `text` in at most `max` characters, shortened where it says least.
pub fn shorten(text: &str, max: usize) -> String {
    if len(text) <= max {
        return text.to_string();
    }
    if text.contains(CALLER) {
        return stack(text, max);
    }
    if let Some((function, location)) = split_frame(text) {
        return frame(function, location, max);
    }
    if is_path(text) {
        return path(text, max);
    }
    middle(text, max)
}

/// Distinct stacks that shorten alike because they part below their leaf
/// frame, each shown as its leaf and the first caller where they part
/// (`forward …/linear.py:15 <- … <- forward attention.py:33 <- …`); `None`
/// when that does not fit or their leaves differ.
fn distinguish_callers(texts: &[&str], max: usize) -> Option<Vec<String>> {
    let stacks: Vec<Vec<&str>> = texts.iter().map(|t| t.split(CALLER).collect()).collect();
    let parts_at = (1..stacks.iter().map(Vec::len).max()?)
        .find(|&k| stacks.iter().any(|s| s.get(k) != stacks[0].get(k)))?;
    if stacks.iter().any(|s| s[0] != stacks[0][0]) {
        return None;
    }
    let skipped = if parts_at > 1 { " <- …" } else { "" };
    // The leaf in short form first; the caller where they part gets what it
    // leaves, and the leaf whatever the caller does not take.
    let leaf_min = caller(stacks[0][0]);
    stacks
        .iter()
        .map(|frames| {
            let below = match frames.get(parts_at) {
                Some(f) => {
                    let more = if frames.len() > parts_at + 1 {
                        " <- …"
                    } else {
                        ""
                    };
                    let room =
                        max.checked_sub(len(&leaf_min) + len(skipped) + len(CALLER) + len(more))?;
                    if room < 6 {
                        return None;
                    }
                    format!("{skipped}{CALLER}{}{more}", shorten(&caller(f), room))
                }
                None => skipped.to_string(),
            };
            let leaf = shorten(frames[0], max - len(&below));
            Some(format!("{leaf}{below}"))
        })
        .collect()
}

/// Distinct labels that shorten alike, each shown by the part where they
/// differ (between their common start and common end), with as much of the
/// shared parts around it as `max` leaves.
fn distinguish(texts: &[&str], max: usize) -> Vec<String> {
    let chars: Vec<Vec<char>> = texts.iter().map(|t| t.chars().collect()).collect();
    let shortest = chars.iter().map(Vec::len).min().unwrap_or(0);
    let prefix = (0..shortest)
        .take_while(|&i| chars.iter().all(|c| c[i] == chars[0][i]))
        .count();
    let suffix = (0..shortest - prefix)
        .take_while(|&i| {
            let at = |c: &Vec<char>| c[c.len() - 1 - i];
            chars.iter().all(|c| at(c) == at(&chars[0]))
        })
        .count();
    let common_start: String = chars[0][..prefix].iter().collect();
    let common_end: String = chars[0][chars[0].len() - suffix..].iter().collect();
    let widest = chars
        .iter()
        .map(|c| c.len() - prefix - suffix)
        .max()
        .unwrap_or(0);
    let middle_max = widest.min(max.saturating_sub(2)).max(1);
    let room = max.saturating_sub(middle_max);
    let end_room = if suffix == 0 {
        0
    } else {
        suffix.min((room / 3).max(1))
    };
    let start_room = room - end_room.min(room);
    let start = middle(&common_start, start_room);
    let end = if suffix <= end_room {
        common_end
    } else {
        format!("{}{CUT}", head(&common_end, end_room.saturating_sub(1)))
    };
    chars
        .iter()
        .map(|c| {
            let differing: String = c[prefix..c.len() - suffix].iter().collect();
            format!("{start}{}{end}", middle(&differing, middle_max))
        })
        .collect()
}

/// The labels of one column in at most `max` characters each, no two distinct
/// labels shown alike. Where labels can be told apart in no way that fits,
/// they are shown by the components where they differ, else whole: a wider
/// table beats rows that cannot be told apart.
pub(crate) fn fit_column(texts: &[&str], max: usize) -> Vec<String> {
    let mut shown: Vec<String> = texts.iter().map(|t| shorten(t, max)).collect();
    // Each group of clashing rows is told apart on its own first; what that
    // makes clash with other groups is then told apart all together, so the
    // rounds cannot undo each other.
    for round in 0..4 {
        let mut clashes = clashes(texts, &shown);
        if clashes.is_empty() {
            return shown;
        }
        if round > 0 {
            clashes = vec![clashes.concat()];
        }
        for rows in clashes {
            let mut distinct: Vec<&str> = rows.iter().map(|&r| texts[r]).collect();
            distinct.sort_unstable();
            distinct.dedup();
            let fitted = match round {
                0 | 1 => distinguish_callers(&distinct, max)
                    .or_else(|| distinguish_components(&distinct, Some(max)))
                    .unwrap_or_else(|| distinguish(&distinct, max)),
                2 => distinguish(&distinct, max),
                _ => distinguish_components(&distinct, None)
                    .unwrap_or_else(|| distinct.iter().map(|t| t.to_string()).collect()),
            };
            for &r in &rows {
                let at = distinct.binary_search(&texts[r]).unwrap_or(0);
                shown[r] = fitted[at].clone();
            }
        }
    }
    for r in clashes(texts, &shown).concat() {
        shown[r] = texts[r].to_string();
    }
    shown
}

/// Rows shown alike though their labels differ, grouped by what is shown.
fn clashes(texts: &[&str], shown: &[String]) -> Vec<Vec<usize>> {
    let mut by_shown: std::collections::BTreeMap<&str, Vec<usize>> = Default::default();
    for (r, s) in shown.iter().enumerate() {
        by_shown.entry(s.as_str()).or_default().push(r);
    }
    by_shown
        .into_values()
        .filter(|rows| rows.iter().any(|&r| texts[r] != texts[rows[0]]))
        .collect()
}

/// Columns whose text is never shortened, only wrapped: a cut shape reads
/// as another shape, a cut memory id as no memory, and a landmark's name
/// and what it says are prose (`summary`'s "What the timeline shows"), cut
/// in a word they read as other words, and so does an allocator's list of
/// events by kind cut in a number (`alloc 172…` for `alloc 1721`).
const UNBROKEN_COLUMNS: [&str; 5] = ["shape", "memory", "landmark", "what", "events by kind"];

/// Wrapped columns of prose, whose long paths are shortened first: a
/// landmark's `what` (`… in step …/cs336_basics/optimizer.py:78)`).
const PROSE_COLUMNS: [&str; 1] = ["what"];

/// Wrapped columns that are lists (`alloc 662, free_completed 544, …`):
/// broken after a comma where one falls in the line, so an item and its
/// count stay on one line.
const LIST_COLUMNS: [&str; 1] = ["events by kind"];

/// `text` with each word that is a path longer than `width` shortened as a
/// path is (its file name and line kept), the other words as they are.
fn shorten_long_paths(text: &str, width: usize) -> String {
    let words: Vec<String> = text
        .split(' ')
        .map(|w| {
            if len(w) > width && is_path(w) {
                path(w, width)
            } else {
                w.to_string()
            }
        })
        .collect();
    words.join(" ")
}

/// `text` whole, in lines of at most `width` characters: broken after a
/// comma or a space where one falls in the line, else after the last
/// `_`, `.`, `/`, `\` or `-` of a word too long for a line
/// (`(magma27_memory_snapshot.` / `pickle)`, not `….pick` / `le)`), else
/// at the width. A `list` breaks after a comma where one falls in the line.
fn wrap_unbroken(text: &str, width: usize, list: bool) -> String {
    let width = width.max(1);
    let mut lines: Vec<String> = Vec::new();
    let mut rest: Vec<char> = text.chars().collect();
    while rest.len() > width {
        // A space may stand just past the line (a word that ends at the
        // width); a comma stays on its line.
        let space = rest[..=width].iter().rposition(|&c| c == ' ');
        let comma = rest[..width].iter().rposition(|&c| c == ',').map(|i| i + 1);
        let joint = rest[..width]
            .iter()
            .rposition(|&c| matches!(c, '_' | '.' | '/' | '\\' | '-'))
            .map(|i| i + 1)
            .filter(|&cut| cut > 1);
        let preferred = if list && comma.is_some() {
            comma
        } else {
            space.max(comma)
        };
        let cut = match preferred {
            Some(0) | None => joint.unwrap_or(width),
            Some(cut) => cut,
        };
        let line: String = rest[..cut].iter().collect();
        lines.push(line.trim_end().to_string());
        rest.drain(..cut);
        // The next line starts at its word, not at the space before it.
        let spaces = rest.iter().take_while(|&&c| c == ' ').count();
        rest.drain(..spaces);
    }
    lines.push(rest.into_iter().collect());
    lines.join("\n")
}

/// A table laid out for a width: its header lines and the text of each cell.
pub(super) struct Fitted {
    /// Column headings, words split over lines where the table must narrow.
    pub headers: Vec<String>,
    /// Every shown row's cells as they are printed.
    pub cells: Vec<Vec<String>>,
}

/// The heading `words` broken into lines no wider than `width` (or its
/// longest word).
fn wrap(words: &str, width: usize) -> String {
    let mut lines: Vec<String> = Vec::new();
    for word in words.split(' ') {
        match lines.last_mut() {
            Some(line) if len(line) + 1 + len(word) <= width => {
                line.push(' ');
                line.push_str(word);
            }
            _ => lines.push(word.to_string()),
        }
    }
    lines.join("\n")
}

fn widest(lines: &str) -> usize {
    lines.lines().map(len).max().unwrap_or(0)
}

/// `rows` of `table` laid out in `width` columns (`None`: as wide as they
/// are). Numbers are never cut; a heading wider than its numbers wraps
/// before any label is cut; text columns that fit their fair share keep
/// their width and the rest share what is left (water-filling), so a short
/// label is never cut to make room for a long stack.
pub(super) fn fit(table: &Table, rows: &[Vec<Cell>], width: Option<usize>) -> Fitted {
    let numeric = table.numeric_columns();
    let columns = table.columns.len();
    let mut headers: Vec<String> = table.columns.iter().map(|c| c.replace('_', " ")).collect();
    let text: Vec<Vec<String>> = rows
        .iter()
        .map(|row| {
            row.iter()
                .map(|cell| match cell {
                    Cell::Text(s) => visible(s).into_owned(),
                    other => other.human(),
                })
                .collect()
        })
        .collect();
    let Some(width) = width else {
        return Fitted {
            headers,
            cells: text,
        };
    };
    let content = |c: usize| text.iter().map(|r| len(&r[c])).max().unwrap_or(0);
    let natural = |headers: &[String]| -> Vec<usize> {
        (0..columns)
            .map(|c| content(c).max(widest(&headers[c])))
            .collect()
    };
    let total = |widths: &[usize]| widths.iter().sum::<usize>() + COLUMN_OVERHEAD * columns;
    let longest_word = |c: usize| table.columns[c].split('_').map(len).max().unwrap_or(0);
    if total(&natural(&headers)) > width {
        for (c, header) in headers.iter_mut().enumerate() {
            *header = wrap(header, content(c).max(longest_word(c)));
        }
    }
    let natural = natural(&headers);
    // A shape or a memory id is never cut (`f32[1…4,1024]` reads as a
    // range): it keeps its width, up to half the table's, and wraps past it.
    let unbroken: Vec<bool> = (0..columns)
        .map(|c| !numeric[c] && UNBROKEN_COLUMNS.contains(&table.columns[c]))
        .collect();
    let mut budgets = natural.clone();
    // Positions with long labels (`#4 (broadcast_add_fusion.3)`) are
    // figures, never cut: where the figures alone pass the width, the
    // widest of them wrap at their spaces.
    let figures: Vec<bool> = (0..columns)
        .map(|c| numeric[c] && rows.iter().any(|r| matches!(r[c], Cell::Figure { .. })))
        .collect();
    let min_text = |c: usize| longest_word(c).max(3);
    let others: usize = (0..columns)
        .map(|c| COLUMN_OVERHEAD + if numeric[c] { natural[c] } else { min_text(c) })
        .sum();
    let mut over = others.saturating_sub(width);
    while over > 0 {
        let Some(c) = (0..columns)
            .filter(|&c| figures[c] && budgets[c] > longest_word(c).max(8))
            .max_by_key(|&c| budgets[c])
        else {
            break;
        };
        let cut = over.min(budgets[c] - longest_word(c).max(8));
        budgets[c] -= cut;
        over -= cut;
    }
    let mut left = width;
    for c in 0..columns {
        if numeric[c] {
            left = left.saturating_sub(COLUMN_OVERHEAD + budgets[c]);
        }
    }
    // What the text columns other than shapes and ids need at least.
    let unbroken_count = unbroken.iter().filter(|&&u| u).count().max(1);
    let others_min: usize = (0..columns)
        .filter(|&c| !numeric[c] && !unbroken[c])
        .map(|c| COLUMN_OVERHEAD + min_text(c))
        .sum();
    // They share that room water-filled: one narrower than its share keeps
    // its width and leaves the rest to the wider ones.
    let mut room = left.saturating_sub(others_min + COLUMN_OVERHEAD * unbroken_count);
    let mut narrowest_first: Vec<usize> = (0..columns).filter(|&c| unbroken[c]).collect();
    narrowest_first.sort_by_key(|&c| natural[c]);
    for (k, &c) in narrowest_first.iter().enumerate() {
        let share = room / (narrowest_first.len() - k);
        budgets[c] = natural[c].min(share.max(longest_word(c)).max(1));
        room = room.saturating_sub(budgets[c]);
    }
    for c in 0..columns {
        if unbroken[c] {
            left = left.saturating_sub(COLUMN_OVERHEAD + budgets[c]);
        } else if !numeric[c] {
            left = left.saturating_sub(COLUMN_OVERHEAD);
        }
    }
    let mut open: Vec<usize> = (0..columns)
        .filter(|&c| !numeric[c] && !unbroken[c])
        .collect();
    open.sort_by_key(|&c| natural[c]);
    while let Some(&c) = open.first() {
        let share = left / open.len();
        if natural[c] <= share {
            left -= natural[c];
            open.remove(0);
        } else {
            for &c in &open {
                budgets[c] = share.max(longest_word(c)).max(1);
                headers[c] = wrap(&headers[c].replace('\n', " "), budgets[c]);
            }
            break;
        }
    }
    // Whatever the shares left over, shapes and ids give it back, wrapping.
    let mut over =
        (budgets.iter().sum::<usize>() + COLUMN_OVERHEAD * columns).saturating_sub(width);
    while over > 0 {
        let Some(c) = (0..columns)
            .filter(|&c| unbroken[c] && budgets[c] > longest_word(c).max(1))
            .max_by_key(|&c| budgets[c])
        else {
            break;
        };
        let cut = over.min(budgets[c] - longest_word(c).max(1));
        budgets[c] -= cut;
        over -= cut;
    }
    let mut cells = text;
    for c in (0..columns).filter(|&c| figures[c] && natural[c] > budgets[c]) {
        headers[c] = wrap(&headers[c].replace('\n', " "), budgets[c]);
        for row in &mut cells {
            row[c] = wrap_unbroken(&row[c], budgets[c], false);
        }
    }
    for c in (0..columns).filter(|&c| unbroken[c]) {
        if natural[c] > budgets[c] {
            headers[c] = wrap(&headers[c].replace('\n', " "), budgets[c]);
            let prose = PROSE_COLUMNS.contains(&table.columns[c]);
            let list = LIST_COLUMNS.contains(&table.columns[c]);
            for row in &mut cells {
                if prose {
                    row[c] = shorten_long_paths(&row[c], budgets[c]);
                }
                row[c] = wrap_unbroken(&row[c], budgets[c], list);
            }
        }
    }
    for c in (0..columns).filter(|&c| !numeric[c] && !unbroken[c]) {
        let column: Vec<&str> = cells.iter().map(|r| r[c].as_str()).collect();
        let fitted = fit_column(&column, budgets[c]);
        for (row, shown) in cells.iter_mut().zip(fitted) {
            row[c] = shown;
        }
    }
    Fitted { headers, cells }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A memory id too long for its column wraps after a `_` or `.`, never
    /// inside a word, and the list of events by kind wraps at its commas,
    /// whole: `alloc 172…` would read as 172 allocations.
    #[test]
    fn ids_wrap_at_their_joints_and_event_counts_are_never_cut() {
        assert_eq!(
            wrap_unbroken("cuda:0 (magma27_memory_snapshot.pickle)", 29, false),
            "cuda:0\n(magma27_memory_snapshot.\npickle)"
        );
        assert_eq!(wrap_unbroken("abcdefghij", 4, false), "abcd\nefgh\nij");
        // A Windows path breaks after a folder.
        assert_eq!(
            wrap_unbroken(r"D:\Dev\cs336_basics\model.py:39", 20, false),
            "D:\\Dev\\cs336_basics\\\nmodel.py:39"
        );
        let mut t = Table::new("Allocator", vec!["memory", "events by kind"]);
        t.rows.push(vec![
            Cell::Text("cuda:0".into()),
            Cell::Text(
                "alloc 1721, free_completed 1721, free_requested 1721, segment_alloc 11".into(),
            ),
        ]);
        let fitted = fit(&t, &t.rows, Some(40));
        assert_eq!(
            fitted.cells[0][1],
            "alloc 1721,\nfree_completed 1721,\nfree_requested 1721,\nsegment_alloc 11"
        );
    }

    /// "What the timeline shows" at 100 columns: a landmark's name and what
    /// it says are wrapped at their spaces, whole, never cut in a word.
    #[test]
    fn landmark_names_and_what_they_say_wrap_whole() {
        let mut table = Table::new(
            "What the timeline shows",
            vec!["landmark", "at", "bytes", "what"],
        );
        let rows = [
            ("step 0", "forward t+1.222 ms (forward), loss t+20.1 ms (loss), backward t+22.3 ms (backward), optimizer t+24.87 ms (optimizer)"),
            ("cliff after the optimizer step", "453.98 MiB freed by the optimizer step (in step /home/brian/Desktop/cs336_basics/optimizer.py:80)"),
        ];
        for (name, what) in rows {
            table.rows.push(vec![
                name.into(),
                Cell::Figure {
                    value: Some(37_700),
                    label: "t+37.70 ms (optimizer)".into(),
                },
                Cell::Bytes(476_037_939),
                Cell::Text(what.into()),
            ]);
        }
        let fitted = fit(&table, &table.rows, Some(100));
        for (row, (name, what)) in fitted.cells.iter().zip(rows) {
            assert!(!row[0].contains(CUT), "{row:?}");
            let words = |s: &str| s.split_whitespace().map(str::to_string).collect::<Vec<_>>();
            assert_eq!(words(&row[0]), words(name), "{row:?}");
            // Every word whole but a path longer than the column, which
            // keeps its file name and line.
            let shown = words(&row[3]);
            let whole: Vec<String> = words(what)
                .into_iter()
                .filter(|w| !w.contains('/'))
                .collect();
            assert_eq!(
                shown
                    .iter()
                    .filter(|w| !w.contains('/'))
                    .cloned()
                    .collect::<Vec<_>>(),
                whole,
                "{row:?}"
            );
            for w in shown.iter().filter(|w| w.contains('/')) {
                assert!(w.ends_with("/optimizer.py:80)"), "{row:?}");
            }
        }
        let widths: Vec<usize> = (0..4)
            .map(|c| {
                fitted
                    .cells
                    .iter()
                    .map(|r| widest(&r[c]))
                    .chain([widest(&fitted.headers[c])])
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        assert!(
            widths.iter().sum::<usize>() + COLUMN_OVERHEAD * 4 <= 100,
            "{widths:?}"
        );
        // Broken at a space, the long name's words on two lines.
        assert_eq!(fitted.cells[1][0], "cliff after the optimizer\nstep");
    }

    #[test]
    fn frames_keep_function_file_and_line() {
        let step = "step /home/brian/Desktop/assignment2-systems/cs336_basics/optimizer.py:78";
        assert_eq!(shorten(step, 40), "step …/cs336_basics/optimizer.py:78");
        assert_eq!(shorten(step, 24), "step …/optimizer.py:78");
        let shown = shorten(step, 18);
        assert_eq!(shown, "step op…izer.py:78");
        assert_eq!(len(&shown), 18);
    }

    #[test]
    fn frames_of_long_file_names_keep_the_function_and_cut_the_stem() {
        let call = "call /tmp/torchinductor_brian/hw/chwq7ux2iggyu22lv3vwzoxwfp5jw7w3gandpny7kmdlqdksiuib.py:53";
        for max in 14..70 {
            let shown = shorten(call, max);
            assert!(len(&shown) <= max, "{max}: {shown}");
            assert!(
                shown.starts_with("call ") && shown.ends_with(".py:53"),
                "{max}: {shown}"
            );
        }
        assert_eq!(shorten(call, 30), "call chwq7u…kmdlqdksiuib.py:53");
        let long = format!("{} /x/{}.py:7", "f".repeat(40), "s".repeat(40));
        let shown = shorten(&long, 30);
        assert!(
            shown.ends_with(".py:7") && shown.starts_with("ff"),
            "{shown}"
        );
        assert_eq!(split_stem("model.py:53"), ("model", ".py:53"));
        assert_eq!(split_stem("Makefile:3"), ("Makefile", ":3"));
        assert_eq!(split_stem(".bashrc"), (".bashrc", ""));
    }

    #[test]
    fn stack_rows_of_a_real_snapshot_keep_every_leaf_function() {
        let d = "/home/brian/Desktop/assignment2-systems";
        let rows = [
            "<allocated before recording, still live>".to_string(),
            format!("step {d}/cs336_basics/optimizer.py:71 <- fake_train {d}/benchmarking_script.py:54 <- <module> {d}/benchmarking_script.py:67 <- <allocated before recording, freed later>"),
            format!("step {d}/cs336_basics/optimizer.py:72 <- fake_train {d}/benchmarking_script.py:54 <- <module> {d}/benchmarking_script.py:67 <- <allocated before recording, freed later>"),
            format!("step {d}/cs336_basics/optimizer.py:78 <- fake_train {d}/benchmarking_script.py:54 <- <module> {d}/benchmarking_script.py:67"),
            format!("fake_train {d}/benchmarking_script.py:54 <- <module> {d}/benchmarking_script.py:67 <- <allocated before recording, freed later>"),
            format!("call /tmp/torchinductor_brian/hw/chwq7ux2iggyu22lv3vwzoxwfp5jw7w3gandpny7kmdlqdksiuib.py:53 <- forward {d}/cs336_basics/model.py:41 <- fake_train {d}/benchmarking_script.py:51"),
            format!("fake_train {d}/benchmarking_script.py:49 <- <module> {d}/benchmarking_script.py:67"),
        ];
        let texts: Vec<&str> = rows.iter().map(String::as_str).collect();
        for max in [40, 50, 60, 67, 80] {
            let shown = fit_column(&texts, max);
            for (full, shown) in texts.iter().zip(&shown) {
                let leaf = full.split(CALLER).next().unwrap();
                let function = leaf.split(' ').next().unwrap();
                let line = leaf.rsplit(':').next().unwrap();
                assert!(shown.starts_with(function), "{max}: {shown}");
                assert!(
                    shown
                        .split(CALLER)
                        .next()
                        .unwrap()
                        .ends_with(&format!(":{line}"))
                        || !leaf.contains(':'),
                    "{max}: {shown}"
                );
                assert!(len(shown) <= max, "{max}: {shown}");
            }
        }
    }

    #[test]
    fn stacks_keep_the_leaf_and_mark_left_out_callers() {
        let stack = "loss /tmp/gen/jax_model_warm.py:22 <- train_step /tmp/gen/jax_model_warm.py:30 <- <module> /tmp/gen/jax_model_warm.py:40";
        assert_eq!(
            shorten(stack, 60),
            "loss /tmp/gen/jax_model_warm.py:22 <- …"
        );
        assert_eq!(
            shorten(stack, 90),
            "loss /tmp/gen/jax_model_warm.py:22 <- train_step jax_model_warm.py:30 <- …"
        );
        assert_eq!(shorten(stack, 30), "loss jax_model_warm.py:22 <- …");
    }

    #[test]
    fn op_names_keep_their_first_and_last_components() {
        let op = "jit(train_step)/transpose(jvp(jit(log_softmax)))/add_any";
        assert_eq!(shorten(op, 40), "jit(train_step)/…/add_any");
        assert_eq!(shorten(op, 12), "…/add_any");
        assert_eq!(
            shorten("jit_convert_element_type(123)", 16),
            "jit_c…_type(123)"
        );
    }

    #[test]
    fn stacks_that_part_below_the_leaf_show_where() {
        let leaf = "forward /root/a1/cs336_basics/model/linear.py:15";
        let a = format!(
            "{leaf} <- forward /root/a1/cs336_basics/transformer_lm.py:67 <- run /r/b.py:1"
        );
        let b =
            format!("{leaf} <- forward /root/a1/cs336_basics/model/attention.py:33 <- x /x.py:1");
        let c = format!("{leaf} <- forward /root/a1/cs336_basics/model/attention.py:34");
        let shown = fit_column(&[&a, &b, &c], 60);
        assert_eq!(
            shown,
            [
                "forward …/linear.py:15 <- forward transformer_lm.py:67 <- …",
                "forward …/model/linear.py:15 <- forward attention.py:33 <- …",
                "forward …/model/linear.py:15 <- forward attention.py:34",
            ]
        );
    }

    #[test]
    fn labels_that_differ_are_never_shown_alike() {
        let base = "fake_train /home/brian/Desktop/assignment2-systems/benchmarking_script.py:4";
        let a = format!("{base}5 <- main /home/brian/x.py:1");
        let b = format!("{base}5 <- main /home/brian/x.py:2");
        let c = format!("{base}7");
        let texts = [a.as_str(), b.as_str(), c.as_str(), a.as_str()];
        for max in [12, 20, 30, 50] {
            let shown = fit_column(&texts, max);
            assert_eq!(shown[0], shown[3]);
            assert_ne!(shown[0], shown[1], "{max}: {shown:?}");
            assert_ne!(shown[0], shown[2], "{max}: {shown:?}");
            assert_ne!(shown[1], shown[2], "{max}: {shown:?}");
            assert!(shown.iter().all(|s| len(s) <= max), "{max}: {shown:?}");
        }
    }

    #[test]
    fn op_names_that_part_in_the_middle_show_where() {
        let layer = |n: u32, op: &str| {
            format!("replica_6/bert/encoder/layer_{n}/attention/dropout/{op} [4,16,384,384]")
        };
        let (a, b, c) = (layer(1, "Cast"), layer(10, "Cast"), layer(1, "Mul"));
        assert_eq!(
            fit_column(&[&a, &b, &c], 42),
            [
                "replica_6/…/layer_1/…/Cast [4,16,384,384]",
                "replica_6/…/layer_10/…/Cast [4,16,384,384]",
                "replica_6/…/dropout/Mul [4,16,384,384]",
            ]
        );
        let narrow = fit_column(&[&a, &b, &c], 30);
        assert!(narrow.iter().all(|s| len(s) <= 30), "{narrow:?}");
        assert!(narrow[0] != narrow[1] && narrow[1] != narrow[2] && narrow[0] != narrow[2]);
    }

    #[test]
    fn op_names_of_many_layers_are_told_apart_at_any_width() {
        let t = [
            "<allocated before the profile started>",
            "replica_4/bert_span_labeler/bert_encoder_1/word_embeddings/GatherV2/Cast",
            "replica_4/bert_span_labeler/bert_encoder_1/transformer/layer_0/self_attention/dropout_3/dropout/Cast",
            "replica_4/bert_span_labeler/bert_encoder_1/transformer/layer_0/self_attention/dropout_3/dropout/Mul",
            "replica_4/bert_span_labeler/bert_encoder_1/transformer/layer_1/self_attention/dropout_3/dropout/Cast",
            "replica_4/bert_span_labeler/bert_encoder_1/transformer/layer_1/self_attention/dropout_3/dropout/Mul",
            "replica_4/bert_span_labeler/bert_encoder_1/transformer/layer_10/self_attention/dropout_3/dropout/Cast",
            "replica_4/bert_span_labeler/bert_encoder_1/transformer/layer_10/self_attention/dropout_3/dropout/Mul",
            "replica_4/bert_span_labeler/bert_encoder_1/transformer/layer_11/self_attention/dropout_3/dropout/Cast",
            "replica_4/bert_span_labeler/bert_encoder_1/transformer/layer_11/self_attention/dropout_3/dropout/Mul",
        ];
        for max in 4..60 {
            let shown = fit_column(&t, max);
            let mut d = shown.clone();
            d.sort();
            d.dedup();
            assert_eq!(d.len(), t.len(), "{max} {shown:?}");
        }
    }
}
