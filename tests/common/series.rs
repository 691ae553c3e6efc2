//! Reading one target's series from a scrape: the label pairs and counters the end-to-end
//! suites ask about again and again, written once so every suite reads them the same way.

use super::Scrape;

/// The label of the first (and in these tests only) connection.
pub const C0: (&str, &str) = ("connection", "0");

/// The `target` label pair.
pub fn t(name: &str) -> (&str, &str) {
    ("target", name)
}

/// A series of `name`'s connection 0 that has no other labels. A counter (`_total`) reads 0
/// while it is absent (many are written from their first event); a gauge must exist.
pub fn counter(s: &Scrape, metric: &str, name: &str) -> f64 {
    s.value(metric, &[t(name), C0])
}

/// Consistency checks (audits) run on `name`.
pub fn checks(s: &Scrape, name: &str) -> f64 {
    counter(s, "mcp_probe_cache_consistency_checks_total", name)
}

/// `tools/list` walks of `name` for `trigger` (0 before the first).
pub fn walks(s: &Scrape, name: &str, trigger: &str) -> f64 {
    s.count(
        "mcp_probe_tools_list_walks_total",
        &[t(name), C0, ("trigger", trigger)],
    )
}

/// Tools by which `name`'s cache differs from the server, of `kind` (missing, extra, changed).
pub fn drift(s: &Scrape, name: &str, kind: &str) -> f64 {
    s.v(
        "mcp_probe_cache_drift_tools",
        &[t(name), C0, ("kind", kind)],
    )
}
