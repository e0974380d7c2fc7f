//! CI gates (`diff --fail-on-growth`, `peak --budget`, `leaks
//! --fail-on-leak`): the result each gated report carries in its JSON, and
//! the one line the binary prints on stderr in every output format.

use serde::Serialize;

use crate::report::units;

use super::group::GroupBy;

/// A gate's threshold, as the user gave it.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
#[serde(rename_all = "snake_case", tag = "unit", content = "value")]
pub enum Limit {
    /// More than this many bytes fails.
    Bytes(u64),
    /// More than this percentage of the base fails.
    Percent(f64),
    /// More than this many groups growing steadily fails (`--fail-on-leak`: 0).
    SteadyGroups(u64),
}

impl Limit {
    /// `5%`, `2.5%`, `10MiB`, `1000000`.
    pub fn parse(text: &str) -> Option<Limit> {
        match text.trim().strip_suffix('%') {
            Some(p) => p
                .trim()
                .parse::<f64>()
                .ok()
                .filter(|p| p.is_finite() && *p >= 0.0)
                .map(Limit::Percent),
            None => units::parse_bytes(text).map(Limit::Bytes),
        }
    }

    /// The threshold in words, exactly.
    pub fn describe(self) -> String {
        match self {
            Limit::Bytes(b) => units::exact_bytes(b),
            Limit::Percent(p) => format!("{p}%"),
            Limit::SteadyGroups(0) => "no steady growth".into(),
            Limit::SteadyGroups(n) => format!("{n} steadily growing groups"),
        }
    }
}

/// What a gate measured, against what, and whether it passed.
#[derive(Debug, Serialize)]
pub struct GateResult {
    /// Which gate: `fail_on_growth`, `budget` or `fail_on_leak`.
    pub gate: &'static str,
    /// Whether the measured figure stayed within the limit.
    pub passed: bool,
    /// The threshold.
    pub limit: Limit,
    /// The figure compared with it, in bytes: total growth (`diff`), the
    /// highest peak (`peak`), net steady growth (`leaks`).
    pub measured_bytes: i64,
    /// For a percentage limit: the measured growth in percent of the base,
    /// unrounded (`null` when the base is 0 or the limit is in bytes).
    pub measured_percent: Option<f64>,
    /// The memories that failed it.
    pub failed_memories: Vec<String>,
    /// For a gate on one kind of memory (`activation:5%`): the group it
    /// judged; absent for a gate on the whole.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub group: Option<GatedGroup>,
    /// The verdict in one line with the measured figure and the threshold,
    /// as printed on stderr.
    pub message: String,
}

/// `actual` in percent with as many decimals as it takes to read apart from
/// `limit` when the two differ (`+0.97%` beside `1%`, `+1.0004%` beside `1%`),
/// two at least.
pub fn percent_beside(actual: f64, limit: f64) -> String {
    let mut decimals = 2;
    while decimals < 12
        && actual != limit
        && format!("{actual:.decimals$}") == format!("{limit:.decimals$}")
    {
        decimals += 1;
    }
    format!("{actual:+.decimals$}%")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_sizes_and_percentages() {
        assert_eq!(Limit::parse("5%"), Some(Limit::Percent(5.0)));
        assert_eq!(Limit::parse("10MiB"), Some(Limit::Bytes(10 << 20)));
        assert_eq!(Limit::parse("1000"), Some(Limit::Bytes(1000)));
        assert_eq!(Limit::parse("-5%"), None);
        assert_eq!(Limit::parse("lots"), None);
    }

    #[test]
    fn a_percentage_beside_its_limit_never_reads_as_the_limit() {
        assert_eq!(percent_beside(0.97, 1.0), "+0.97%");
        assert_eq!(percent_beside(0.9999, 1.0), "+0.9999%");
        assert_eq!(percent_beside(1.004, 1.0), "+1.004%");
        assert_eq!(percent_beside(1.0, 1.0), "+1.00%");
        assert_eq!(percent_beside(-3.5, 1.0), "-3.50%");
    }
}

/// The group a gate judges (`diff --fail-on-growth activation:5%`,
/// `peak --budget optimizer_state:2GiB`): here, beside the result that
/// names it, so the gates of `diff` and `group_gate` import it one way.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct GatedGroup {
    /// The grouping it belongs to (`category`, `op`, ...).
    pub by: GroupBy,
    /// The group's key, as the grouping's rows name it (`activation`).
    pub key: String,
}

impl GatedGroup {
    /// The group in words: `category activation`.
    pub fn describe(&self) -> String {
        format!("{} {}", self.by.name().replace('_', " "), self.key)
    }
}
