//! Target groups, as Prometheus' file and HTTP discovery write them, made into targets.
//!
//! A group is `{targets: [...], labels: {...}}`. Prometheus' targets are `host:port`; an MCP
//! target is an endpoint URL, so here each entry is a URL. The rest of a target's settings come
//! from the source's template, so a group only ever decides *where* and *how it is labelled*.
//!
//! A target's name (the `target` label of all its series) is the group's `__target__` label when
//! set — meant for one-target groups, or for names that must survive a URL change — else derived
//! from the URL: host, port and path, with every other character `_` (the query is left out: it
//! may hold a token). A derived name longer than 64 characters keeps its start and ends in a hash
//! of the whole, so it stays unique and stable. Other `__` labels are Prometheus' meta labels and
//! are dropped; the remaining labels are checked and exposed on `mcp_probe_target_info`.
//!
//! Anything invalid (bad JSON/YAML, a URL that is not one, a bad label name) fails the whole
//! refresh, with the group and entry it is in: a source that is half right is treated as wrong,
//! and keeps its last good targets, rather than silently losing some of them.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use serde::Deserialize;
use sha2::{Digest, Sha256};

use crate::config::{Labels, TargetConfig, TargetTemplate, parse_target_url};

/// Most targets one source may list (all its files, or one HTTP answer).
pub const MAX_TARGETS_PER_SOURCE: usize = 100_000;
/// The label that names a discovered target.
pub const NAME_LABEL: &str = "__target__";
/// Longest target name (as for static targets).
const MAX_NAME: usize = 64;

/// How a document is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Json,
    Yaml,
}

#[derive(Deserialize)]
#[serde(
    deny_unknown_fields,
    expecting = "a target group: a mapping with `targets` and optional `labels`"
)]
struct RawGroup {
    #[serde(default)]
    targets: Vec<String>,
    #[serde(default)]
    labels: BTreeMap<String, String>,
}

/// What one source found.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Found {
    /// In the order listed, first of each name only.
    pub targets: Vec<Arc<TargetConfig>>,
    /// Entries left out because an earlier one of the source had their name.
    pub duplicates: usize,
}

impl Found {
    /// Add the targets of `text` (one file or answer). `what` names it in errors.
    pub fn add(
        &mut self,
        text: &str,
        format: Format,
        template: &TargetTemplate,
        seen: &mut HashSet<String>,
        what: &str,
    ) -> Result<(), String> {
        let groups: Option<Vec<RawGroup>> = match format {
            Format::Json => serde_json::from_str(text).map_err(|e| e.to_string()),
            Format::Yaml => yaml_serde::from_str(text).map_err(|e| e.to_string()),
        }
        .map_err(|e| format!("{what}: not a list of target groups: {e}"))?;
        for (g, group) in groups.unwrap_or_default().into_iter().enumerate() {
            let at = |why: String| format!("{what}: group {g}: {why}");
            let mut name = None;
            let mut shown = Vec::new();
            for (k, v) in &group.labels {
                if k == NAME_LABEL {
                    name = Some(v.as_str());
                } else if !k.starts_with("__") {
                    shown.push((k.as_str(), v.as_str()));
                }
            }
            let labels: Labels = crate::config::collect_labels(shown).map_err(at)?;
            if name.is_some() && group.targets.len() > 1 {
                return Err(at(format!(
                    "{NAME_LABEL} names one target, and the group has {}",
                    group.targets.len()
                )));
            }
            for (i, entry) in group.targets.iter().enumerate() {
                let at = |why: String| format!("{what}: group {g} target {i}: {why}");
                let url = parse_target_url(entry.trim()).map_err(at)?;
                if !url.username().is_empty() || url.password().is_some() {
                    return Err(at("the URL carries user info; put credentials in the \
                                   source's target template (basic_auth, authorization …)"
                        .into()));
                }
                let name = match name {
                    Some(n) => checked_name(n).map_err(at)?,
                    None => derive_name(&url),
                };
                if self.targets.len() + self.duplicates >= MAX_TARGETS_PER_SOURCE {
                    return Err(format!(
                        "{what}: more than {MAX_TARGETS_PER_SOURCE} targets in one source; split it"
                    ));
                }
                if !seen.insert(name.clone()) {
                    self.duplicates += 1;
                    continue;
                }
                self.targets
                    .push(Arc::new(template.instantiate(name, url, labels.clone())));
            }
        }
        Ok(())
    }
}

/// A `__target__` value: the rules of a static target's name.
fn checked_name(name: &str) -> Result<String, String> {
    let ok = !name.is_empty()
        && name.len() <= MAX_NAME
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'));
    if ok {
        Ok(name.to_string())
    } else {
        Err(format!(
            "{NAME_LABEL} {:?} is not a valid target name: 1 to {MAX_NAME} of letters, digits, '_', '.' and '-'",
            mcp_client::mcp::truncate(name, 80)
        ))
    }
}

/// The name of a target whose group does not name it: host, port and path of its URL.
pub fn derive_name(url: &url::Url) -> String {
    let mut raw = url.host_str().unwrap_or("").to_string();
    if let Some(port) = url.port() {
        raw.push('_');
        raw.push_str(&port.to_string());
    }
    raw.push_str(url.path());
    let mut name = String::with_capacity(raw.len());
    for c in raw.chars() {
        let keep = c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_');
        let c = if keep { c } else { '_' };
        if !(c == '_' && name.ends_with('_')) {
            name.push(c);
        }
    }
    let name = name.trim_matches('_');
    if name.len() <= MAX_NAME {
        return name.to_string();
    }
    let digest = Sha256::digest(name.as_bytes());
    let hash: String = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
    format!("{}-{hash}", &name[..MAX_NAME - 17])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

    fn template() -> TargetTemplate {
        let c = Config::parse(
            "file_sd_configs:\n  - files: [x.json]\n    target: {connections: 2, labels: {tier: gold}}\n",
            "t.yml",
            &|_| None,
        )
        .unwrap();
        c.file_sd[0].template.clone()
    }

    fn found(text: &str, format: Format) -> Result<Found, String> {
        let mut f = Found::default();
        f.add(text, format, &template(), &mut HashSet::new(), "f.json")?;
        Ok(f)
    }

    fn u(s: &str) -> url::Url {
        url::Url::parse(s).unwrap()
    }

    #[test]
    fn names_are_derived_from_host_port_and_path() {
        assert_eq!(
            derive_name(&u("https://kb.example.com/mcp")),
            "kb.example.com_mcp"
        );
        assert_eq!(
            derive_name(&u("http://127.0.0.1:4000/a/mcp?token=s3cret")),
            "127.0.0.1_4000_a_mcp"
        );
        assert_eq!(derive_name(&u("http://[::1]:80/")), "1");
        let long = derive_name(&u(&format!("https://kb.example.com/{}", "x".repeat(100))));
        assert_eq!(long.len(), 64);
        let other = derive_name(&u(&format!("https://kb.example.com/{}y", "x".repeat(100))));
        assert_ne!(long, other, "the hash keeps long names apart");
        assert_eq!(
            long,
            derive_name(&u(&format!("https://kb.example.com/{}", "x".repeat(100))))
        );
    }

    #[test]
    fn groups_become_targets_with_the_template_and_labels() {
        let f = found(
            r#"[{"targets": ["http://a.example/mcp", "http://b.example/mcp"], "labels": {"team": "search", "__meta_x": "dropped"}},
                {"targets": ["http://c.example/mcp"], "labels": {"__target__": "cee", "tier": "silver"}}]"#,
            Format::Json,
        )
        .unwrap();
        let names: Vec<&str> = f.targets.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["a.example_mcp", "b.example_mcp", "cee"]);
        assert_eq!(f.targets[0].settings.connections, 2);
        let l = &f.targets[0].labels;
        assert_eq!(
            (l["team"].as_str(), l["tier"].as_str(), l.len()),
            ("search", "gold", 2)
        );
        assert_eq!(
            f.targets[2].labels["tier"], "silver",
            "a group's label wins"
        );
        let y = found(
            "- targets: ['http://a.example/mcp']\n  labels: {team: x}\n",
            Format::Yaml,
        )
        .unwrap();
        assert_eq!(y.targets[0].labels["team"], "x");
    }

    #[test]
    fn duplicates_keep_the_first_and_are_counted() {
        let f = found(
            r#"[{"targets": ["http://a.example/mcp", "http://a.example/mcp?x=1"]}]"#,
            Format::Json,
        )
        .unwrap();
        assert_eq!((f.targets.len(), f.duplicates), (1, 1));
    }

    #[test]
    fn errors_name_the_place_and_why() {
        for (text, want) in [
            ("{", "f.json: not a list of target groups"),
            (r#"[{"targetz": []}]"#, "unknown field `targetz`"),
            (
                r#"[{"targets": ["ftp://x/"]}]"#,
                "group 0 target 0: URL scheme must be http or https",
            ),
            (
                r#"[{"targets": ["x.example:80"]}]"#,
                "group 0 target 0: URL scheme",
            ),
            (r#"[{"targets": ["http://u:p@x/"]}]"#, "user info"),
            (
                r#"[{"targets": ["http://x/"], "labels": {"bad-name": "1"}}]"#,
                "group 0: label name",
            ),
            (
                r#"[{"targets": ["http://x/"], "labels": {"target": "1"}}]"#,
                "reserved",
            ),
            (
                r#"[{"targets": ["http://x/", "http://y/"], "labels": {"__target__": "n"}}]"#,
                "names one target",
            ),
            (
                r#"[{"targets": ["http://x/"], "labels": {"__target__": "a b"}}]"#,
                "not a valid target name",
            ),
            (
                r#"[{"targets": ["http://x/"], "labels": {"n": 1}}]"#,
                "not a list of target groups",
            ),
            // Raw control and bidi characters never reach /metrics (JSON's escapes make them).
            (
                r#"[{"targets": ["http://x/"], "labels": {"team": "a\u0000b"}}]"#,
                "label \"team\": value contains U+0000, a control or bidi character",
            ),
            (
                r#"[{"targets": ["http://x/"], "labels": {"team": "\u001b[31mred"}}]"#,
                "U+001B",
            ),
            (
                r#"[{"targets": ["http://x/"], "labels": {"team": "a\rb"}}]"#,
                "U+000D",
            ),
            (
                r#"[{"targets": ["http://x/"], "labels": {"team": "evil\u202egnp.exe"}}]"#,
                "U+202E",
            ),
        ] {
            let e = found(text, Format::Json).unwrap_err();
            assert!(e.contains(want), "{text}: {e}");
        }
        assert!(found("null", Format::Json).unwrap().targets.is_empty());
    }

    #[test]
    fn a_source_is_capped() {
        let urls: Vec<String> = (0..=MAX_TARGETS_PER_SOURCE)
            .map(|_| "\"http://h/mcp\"".to_string())
            .collect();
        let e = found(
            &format!("[{{\"targets\": [{}]}}]", urls.join(",")),
            Format::Json,
        )
        .unwrap_err();
        assert!(e.contains("more than 100000 targets"), "{e}");
    }
}
