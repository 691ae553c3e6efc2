//! `docs/metrics.md` against the metric catalog: every metric documented with its type and labels,
//! no documented metric that the exporter does not emit, and every label value explained.

use std::collections::BTreeSet;

use mcp_client::listing::list::List;
use mcp_client::listing::walker::WalkError;
use mcp_client::mcp::Reason;
use mcp_exporter::probe::Trigger;
use mcp_exporter::proxy::metrics::{Ended, Rejected};
use mcp_exporter::telemetry::families::{FAMILIES, family_of};
use mcp_exporter::web::Closed;

const PREFIXES: [&str; 3] = ["mcp_probe_", "mcp_exporter_", "mcp_proxy_"];

fn doc() -> String {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/metrics.md");
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("cannot read {path}: {e}"))
}

/// Inline code spans (text between single backticks), outside fenced code blocks.
fn code_spans(doc: &str) -> BTreeSet<&str> {
    let mut spans = BTreeSet::new();
    let mut fenced = false;
    for line in doc.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        spans.extend(line.split('`').skip(1).step_by(2));
    }
    spans
}

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// Every identifier in the text that starts with a metric prefix, in prose, code spans and
/// PromQL blocks alike. A bare prefix or a name ending in `_` (as in `mcp_probe_…`) is a prefix,
/// not a metric, and is skipped.
fn metric_like_names(doc: &str) -> BTreeSet<&str> {
    let mut names = BTreeSet::new();
    for (start, _) in doc.char_indices() {
        if doc[..start].chars().next_back().is_some_and(is_ident) {
            continue;
        }
        let rest = &doc[start..];
        if !PREFIXES.iter().any(|p| rest.starts_with(p)) {
            continue;
        }
        let end = rest.find(|c: char| !is_ident(c)).unwrap_or(rest.len());
        let name = &rest[..end];
        if !name.ends_with('_') {
            names.insert(name);
        }
    }
    names
}

/// The cells of the summary-table row whose first cell is `` `name` ``.
fn summary_row<'a>(doc: &'a str, name: &str) -> Option<Vec<&'a str>> {
    let first = format!("`{name}`");
    doc.lines()
        .filter(|l| l.trim_start().starts_with('|'))
        .map(|l| {
            l.trim()
                .trim_matches('|')
                .split('|')
                .map(str::trim)
                .collect::<Vec<_>>()
        })
        .find(|cells| cells.first() == Some(&first.as_str()))
}

#[test]
fn every_catalog_metric_is_documented_with_its_type_and_labels() {
    let doc = doc();
    let spans = code_spans(&doc);
    let mut problems = Vec::new();
    for d in FAMILIES {
        if !spans.contains(d.name) {
            problems.push(format!("{}: not in backticks in docs/metrics.md", d.name));
            continue;
        }
        let heading = format!("### `{}`", d.name);
        if !doc.lines().any(|l| l.trim_end() == heading) {
            problems.push(format!("{}: no section `{heading}`", d.name));
        }
        let Some(cells) = summary_row(&doc, d.name) else {
            problems.push(format!("{}: no row in the summary table", d.name));
            continue;
        };
        if cells.len() < 3 {
            problems.push(format!("{}: summary row has {} cells", d.name, cells.len()));
            continue;
        }
        if cells[1] != d.kind.as_str() {
            problems.push(format!(
                "{}: documented as {:?}, catalog says {}",
                d.name,
                cells[1],
                d.kind.as_str()
            ));
        }
        let documented: Vec<&str> = cells[2].split('`').skip(1).step_by(2).collect();
        if documented != d.labels {
            problems.push(format!(
                "{}: documented labels {documented:?}, catalog says {:?}",
                d.name, d.labels
            ));
        }
    }
    assert!(
        problems.is_empty(),
        "docs/metrics.md:\n{}",
        problems.join("\n")
    );
}

#[test]
fn every_documented_metric_is_in_the_catalog() {
    let doc = doc();
    let names = metric_like_names(&doc);
    assert!(
        names.len() >= FAMILIES.len(),
        "the scan found only {} names: {names:?}",
        names.len()
    );
    let unknown: Vec<&str> = names
        .into_iter()
        .filter(|n| family_of(n).is_none())
        .collect();
    assert!(
        unknown.is_empty(),
        "docs/metrics.md names metrics the catalog does not have: {unknown:?}"
    );
}

#[test]
fn every_label_value_is_documented() {
    let doc = doc();
    let spans = code_spans(&doc);
    let walk_reasons = [
        WalkError::RepeatedCursor,
        WalkError::LoopCap,
        WalkError::TooManyItems { list: List::Tools },
        WalkError::TooManyItems {
            list: List::Prompts,
        },
    ];
    let values = Reason::ALL
        .iter()
        .map(|r| r.as_str())
        .chain(walk_reasons.iter().map(WalkError::reason))
        .chain(Trigger::ALL.iter().map(|t| t.as_str()))
        .chain(Closed::ALL.iter().map(|c| c.as_str()))
        .chain(Ended::ALL.iter().map(|e| e.as_str()))
        .chain(Rejected::ALL.iter().map(|r| r.as_str()));
    let missing: Vec<&str> = values.filter(|v| !spans.contains(v)).collect();
    assert!(
        missing.is_empty(),
        "label values not documented in backticks in docs/metrics.md: {missing:?}"
    );
}

#[test]
fn the_scanner_handles_promql_and_prefixes() {
    let text = "`mcp_probe_` and mcp_probe_… \n\
                rate(mcp_probe_ping_duration_seconds_bucket[5m]) / x_mcp_probe_up\n\
                sum(mcp_probe_cache_drift_tools{kind=\"extra\"})";
    let names: Vec<&str> = metric_like_names(text).into_iter().collect();
    assert_eq!(
        names,
        [
            "mcp_probe_cache_drift_tools",
            "mcp_probe_ping_duration_seconds_bucket"
        ]
    );
    assert!(family_of("mcp_probe_ping_duration_seconds_bucket").is_some());
    assert!(family_of("mcp_probe_ping_duration_seconds_total").is_none());
    // `_count` only belongs to a histogram.
    assert!(family_of("mcp_probe_up_count").is_none());
}
