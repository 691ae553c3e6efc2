//! Another writer's exposition, regrouped with HELP and TYPE from the catalog.
//!
//! `metrics-exporter-prometheus` renders `# TYPE` (and `# HELP` only for described families)
//! followed by samples; families it was not told to describe get their HELP from the catalog
//! here, under one HELP/TYPE header per family.

use std::collections::BTreeMap;

use crate::Catalog;

#[derive(Default)]
struct Family<'a> {
    help: Option<&'a str>,
    kind: Option<&'a str>,
    samples: Vec<&'a str>,
}

/// Merge expositions; families come out sorted by name, with HELP and TYPE from `catalog` where
/// it has the family.
pub fn merge(catalog: &Catalog, parts: &[String]) -> String {
    let mut families: BTreeMap<&str, Family<'_>> = BTreeMap::new();
    let mut total = 0;
    for part in parts {
        total += part.len();
        let mut current: Option<&str> = None;
        for line in part.lines() {
            if line.is_empty() {
                continue;
            }
            if let Some(rest) = line.strip_prefix("# HELP ") {
                let (name, help) = rest.split_once(' ').unwrap_or((rest, ""));
                families.entry(name).or_default().help.get_or_insert(help);
                current = Some(name);
            } else if let Some(rest) = line.strip_prefix("# TYPE ") {
                let (name, kind) = rest.split_once(' ').unwrap_or((rest, "untyped"));
                families.entry(name).or_default().kind.get_or_insert(kind);
                current = Some(name);
            } else if line.starts_with('#') {
                continue;
            } else if let Some(name) = current {
                families.entry(name).or_default().samples.push(line);
            }
        }
    }
    let mut out = String::with_capacity(total + families.len() * 96);
    for (name, fam) in &families {
        if fam.samples.is_empty() {
            continue;
        }
        let def = catalog.find(name);
        let help = def.map(|d| d.help).or(fam.help).unwrap_or("");
        let kind = def
            .map(|d| d.kind.as_str())
            .or(fam.kind)
            .unwrap_or("untyped");
        out.push_str("# HELP ");
        out.push_str(name);
        out.push(' ');
        out.push_str(help);
        out.push_str("\n# TYPE ");
        out.push_str(name);
        out.push(' ');
        out.push_str(kind);
        out.push('\n');
        for s in &fam.samples {
            out.push_str(s);
            out.push('\n');
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    static CATALOG: Catalog = Catalog::new(&[crate::MetricDef {
        name: "mcp_probe_up",
        kind: crate::Kind::Gauge,
        labels: &["target"],
        help: "1 when up.",
    }]);

    #[test]
    fn families_are_merged_under_one_header() {
        let a = "# TYPE mcp_probe_up gauge\nmcp_probe_up{target=\"a\"} 1\n\n".to_string();
        let b = "# TYPE mcp_probe_up gauge\nmcp_probe_up{target=\"b\"} 0\n\n# HELP process_x help x\n# TYPE process_x gauge\nprocess_x 3\n".to_string();
        let out = merge(&CATALOG, &[a, b]);
        assert_eq!(out.matches("# TYPE mcp_probe_up gauge").count(), 1);
        assert!(out.contains("# HELP mcp_probe_up 1 when up."));
        assert!(out.contains("mcp_probe_up{target=\"a\"} 1\nmcp_probe_up{target=\"b\"} 0\n"));
        assert!(out.contains("# HELP process_x help x\n# TYPE process_x gauge\nprocess_x 3\n"));
    }

    #[test]
    fn families_without_samples_are_left_out() {
        let out = merge(&CATALOG, &["# TYPE x counter\n\n".to_string()]);
        assert_eq!(out, "");
    }
}
