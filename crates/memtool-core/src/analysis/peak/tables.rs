//! `peak`'s tables: what [`PeakReport`] shows as text, Markdown and CSV
//! (its JSON is the serialized report).

use super::*;

impl Report for PeakReport {
    fn write_json(&self, out: &mut dyn Write) -> serde_json::Result<()> {
        serde_json::to_writer_pretty(out, self)
    }

    fn tables(&self) -> Vec<Table> {
        let mut tables = self.budget_tables();
        // At a moment the figures are no peak's: the title names the
        // moment, the columns say bytes and where (JSON keeps its `peak_*`
        // fields, and CSV its `peak_at` column, whatever the moment).
        let counted = MemoryHeader::count_column(
            self.memories.iter().map(|m| &m.header),
            ["buffers", "categories"],
        );
        let mut t = match &self.moment {
            Some(moment) => Table::new(
                format!("Live at {moment}"),
                vec!["memory", "bytes", "requested_bytes", counted, "at"],
            ),
            None => Table::new(
                "Peaks",
                vec![
                    "memory",
                    "peak_bytes",
                    "requested_bytes",
                    counted,
                    "peak_at",
                ],
            ),
        };
        // Biggest peak first; memories trivial beside the largest are one
        // row, and their breakdowns are left out (unless over a budget).
        let peaks: Vec<(&str, u64)> = self
            .memories
            .iter()
            .map(|m| (m.header.id.as_str(), m.peak.peak_bytes))
            .collect();
        let order = crate::analysis::order_by_peak(&peaks);
        let (listed, beyond) = order.listed();
        let fold_trivial = order.trivial.len() > 1;
        let row = |m: &MemoryPeak| -> Vec<Cell> {
            vec![
                display_id(&m.header.id).into(),
                Cell::Bytes(m.peak.peak_bytes),
                Cell::Bytes(m.peak.peak_requested_bytes),
                Cell::Count(m.peak.buffers),
                m.peak.moment(),
            ]
        };
        for &i in listed {
            t.rows.push(row(&self.memories[i]));
        }
        if !beyond.is_empty() {
            let sum = |f: fn(&MemoryPeak) -> u64| {
                crate::analysis::beyond_total(&self.memories, beyond, f)
            };
            t.rows.push(vec![
                crate::analysis::beyond_label(beyond.len()).into(),
                Cell::Bytes(sum(|m| m.peak.peak_bytes)),
                Cell::Bytes(sum(|m| m.peak.peak_requested_bytes)),
                Cell::Count(sum(|m| m.peak.buffers)),
                Cell::Empty,
            ]);
            t.notes.push(crate::analysis::beyond_note(beyond.len()));
        }
        if fold_trivial {
            let sum = |f: fn(&MemoryPeak) -> u64| {
                crate::analysis::beyond_total(&self.memories, &order.trivial, f)
            };
            t.rows.push(vec![
                crate::analysis::trivial_label(order.trivial.len()).into(),
                Cell::Bytes(sum(|m| m.peak.peak_bytes)),
                Cell::Bytes(sum(|m| m.peak.peak_requested_bytes)),
                Cell::Count(sum(|m| m.peak.buffers)),
                Cell::Empty,
            ]);
        } else {
            for &i in &order.trivial {
                t.rows.push(row(&self.memories[i]));
            }
        }
        // Tied peaks are named for the memories with a row of their own.
        let mut folded = vec![false; self.memories.len()];
        for &i in beyond {
            folded[i] = true;
        }
        for (m, _) in self.memories.iter().zip(&folded).filter(|(_, &f)| !f) {
            if let Some(n) = m.peak.peak_moments {
                t.notes.push(format!(
                    "{}: the peak is tied — {n} separate moments reach {}; the table shows \
                     the first (with --xprof-compat, the last, as XProf does)",
                    display_id(&m.header.id),
                    crate::report::units::bytes(m.peak.peak_bytes),
                ));
            }
        }
        tables.push(t);
        // Breakdowns of the memories listed, and of any other over a budget.
        let over_budget = |i: &usize| self.memories[*i].budget.as_ref().is_some_and(|b| !b.fits);
        let shown: Vec<&MemoryPeak> = listed
            .iter()
            .copied()
            .chain(
                beyond
                    .iter()
                    .chain(&order.trivial)
                    .copied()
                    .filter(over_budget),
            )
            .map(|i| &self.memories[i])
            .collect();
        // A memory whose sites name no op, shape or dtype (a memory
        // timeline's categories) has nothing here the breakdowns below do not
        // show.
        let blank = |s: &Option<String>| s.as_deref().is_none_or(str::is_empty);
        // Memory from before the recording is named by its op; the stack
        // tables already show it.
        let no_op = |s: &Option<String>| {
            s.as_deref()
                .is_none_or(|op| op.is_empty() || BeforeRecording::of_name(op).is_some())
        };
        for m in shown.iter().copied().filter(|m| {
            self.only.is_none()
                && !m.at_peak.is_empty()
                && !m
                    .at_peak
                    .iter()
                    .all(|r| no_op(&r.op) && blank(&r.shape) && blank(&r.dtype))
        }) {
            let mut t = Table::ranked(
                format!(
                    "Live {} by op, shape, dtype, region, step — {}",
                    self.at_words(),
                    display_id(&m.header.id)
                ),
                vec![
                    "op",
                    "shape",
                    "dtype",
                    "region",
                    "step",
                    "bytes",
                    "requested",
                    "count",
                ],
            );
            let text = |s: &Option<String>| Cell::Text(s.clone().unwrap_or_default());
            for r in m.at_peak.iter() {
                // A blank first cell would read as the row above's op.
                let op = match r.op.as_deref() {
                    Some(op) if !op.is_empty() => op,
                    _ => NO_OP,
                };
                t.rows.push(vec![
                    op.into(),
                    text(&r.shape),
                    text(&r.dtype),
                    text(&r.region),
                    Cell::Text(r.step.map_or("-".into(), |s| s.to_string())),
                    Cell::Bytes(r.bytes),
                    Cell::Bytes(r.requested_bytes),
                    Cell::Count(r.count),
                ]);
            }
            tables.push(t);
        }
        for m in shown.iter().copied() {
            if let Some(program) = m.program.as_ref().filter(|_| self.only.is_none()) {
                tables.push(self.buffers_table(m, program));
            }
            if matches!(self.only, None | Some(GroupBy::Stream)) {
                tables.extend(crate::analysis::streams::streams_table(
                    &m.header.id,
                    &m.streams,
                ));
            }
            for b in &m.breakdowns {
                if b.omitted == 0 && group::says_nothing(b.groups.iter().map(|g| &*g.group.key)) {
                    continue;
                }
                let aged = b.groups.iter().any(|g| !g.oldest_age.is_unknown());
                // Categories memtool or the user named are said to be so;
                // a file's own need no column.
                let sourced = b.groups.iter().any(|g| {
                    g.category_source
                        .is_some_and(|s| s != CategorySource::Profiler)
                });
                let counted = MemoryHeader::count_column([&m.header], ["buffers", "categories"]);
                let mut columns = vec![b.by.name(), "bytes", "share", counted];
                if aged {
                    columns.push("oldest_age");
                }
                if sourced {
                    columns.push("source");
                }
                let mut t = Table::ranked(
                    format!(
                        "Live {} by {} — {}",
                        self.at_words(),
                        b.by.name().replace('_', " "),
                        display_id(&m.header.id)
                    ),
                    columns,
                );
                for aged_group in b.groups.iter() {
                    let g = &aged_group.group;
                    let share = (m.peak.peak_bytes > 0)
                        .then(|| g.totals.bytes as f64 * 100.0 / m.peak.peak_bytes as f64);
                    let mut row = vec![
                        (&*g.key).into(),
                        Cell::Bytes(g.totals.bytes),
                        Cell::Share(share),
                        Cell::Count(g.totals.count),
                    ];
                    if let Age::Known(age) = aged_group.oldest_age {
                        row.push(age_cell(m.header.axis, age, m.recorded));
                    } else if aged {
                        row.push(Cell::Empty);
                    }
                    if sourced {
                        row.push(match aged_group.category_source {
                            Some(source) => source.name().into(),
                            None => Cell::Empty,
                        });
                    }
                    t.rows.push(row);
                }
                t.omitted = b.omitted;
                // A breakdown of the live allocations misses what the
                // allocator counts but no recorded event explains: say so
                // where the shares are read.
                let listed = b
                    .groups
                    .iter()
                    .fold(0u64, |s, g| s.saturating_add(g.group.totals.bytes));
                if b.omitted == 0 && listed < m.peak.peak_bytes && m.peak.peak_bytes > 0 {
                    t.notes.push(format!(
                        "these rows add up to {:.1}% of the {} live {}: the other {} are in use \
                         by the allocator's count but in no recorded allocation (the row `{}` \
                         of the combined table)",
                        listed as f64 * 100.0 / m.peak.peak_bytes as f64,
                        crate::report::units::bytes(m.peak.peak_bytes),
                        self.at_words(),
                        crate::report::units::bytes(m.peak.peak_bytes - listed),
                        UNEXPLAINED_OP
                    ));
                }
                tables.push(t);
            }
        }
        tables
    }

    fn csv_table(&self) -> Table {
        let mut t = Table::new(
            "Live at peak",
            vec![
                "memory",
                "peak_at",
                "group_by",
                "key",
                "bytes",
                "requested_bytes",
                "count",
                "oldest_age",
            ],
        );
        // Who named each category, where a breakdown by category has any.
        let sourced = self
            .memories
            .iter()
            .flat_map(|m| &m.breakdowns)
            .flat_map(|b| &b.groups)
            .any(|g| g.category_source.is_some());
        if sourced {
            t.columns.push("category_source");
        }
        for m in &self.memories {
            for b in &m.breakdowns {
                for aged in &b.groups {
                    let g = &aged.group;
                    let mut row = vec![
                        m.header.id.clone().into(),
                        m.peak.moment(),
                        b.by.name().into(),
                        (&*g.key).into(),
                        Cell::Bytes(g.totals.bytes),
                        Cell::Bytes(g.totals.requested_bytes),
                        Cell::Count(g.totals.count),
                        match aged.oldest_age {
                            Age::Known(age) => age_cell(m.header.axis, age, m.recorded),
                            Age::Unknown => Cell::Empty,
                        },
                    ];
                    if sourced {
                        row.push(match aged.category_source {
                            Some(source) => source.name().into(),
                            None => Cell::Empty,
                        });
                    }
                    t.rows.push(row);
                }
            }
        }
        t
    }

    fn warnings(&self) -> Vec<String> {
        crate::analysis::warning_notes(&self.provenance.warnings)
    }

    fn notes(&self) -> Vec<String> {
        let mut notes = Vec::new();
        let peaks: Vec<(&str, u64)> = self
            .memories
            .iter()
            .map(|m| (m.header.id.as_str(), m.peak.peak_bytes))
            .collect();
        let trivial: Vec<&str> = crate::analysis::order_by_peak(&peaks)
            .trivial
            .iter()
            .map(|&i| peaks[i].0)
            .collect();
        notes.extend(crate::analysis::trivial_note(&trivial));
        for m in &self.memories {
            if let Some(d) = m.program.as_ref().and_then(|p| p.donation.as_ref()) {
                notes.push(format!(
                    "{}: {} of parameters ({}) come back as outputs of the same shapes, both \
                     live at the peak; donating them (jax.jit(..., donate_argnums=...)) would \
                     save {} there",
                    display_id(&m.header.id),
                    crate::report::units::bytes(d.bytes),
                    d.parameters,
                    crate::report::units::bytes(d.bytes)
                ));
            }
        }
        if let Some(o) = &self.overall {
            if self.memories.len() > 1 || self.memories.iter().any(|m| m.peak.peak_label != o.label)
            {
                notes.push(format!(
                    "overall peak: {} in {} (all memories together)",
                    crate::report::units::bytes(o.bytes),
                    o.label
                ));
            }
        }
        notes
    }
}
