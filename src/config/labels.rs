//! Labels an operator attaches to a target (`labels:` of a static target, the labels of a
//! discovered target group), exposed once per target on `mcp_probe_target_info`.
//!
//! They are joined onto other series in PromQL (`* on(target) group_left(team)`), never copied
//! onto them, so their cost is one series per target. The rules keep that series valid and
//! bounded whatever a discovery source sends: Prometheus' label-name syntax, no `__` names (those
//! are Prometheus' reserved meta labels), not `target` (the join key, which the exporter sets),
//! a cap on their number and on each value's bytes, and no control or bidi character in a value
//! (a discovery source's raw NUL, ESC, CR or U+202E would otherwise reach `/metrics`, the status
//! page and the terminal of whoever reads them; the rule is [`mcp_client::text::is_hostile`], refused
//! rather than rewritten so that a label's value is what its source says or nothing).

use std::collections::BTreeMap;

/// A target's labels, sorted by name.
pub type Labels = BTreeMap<String, String>;

/// Most labels one target may carry.
pub const MAX_LABELS: usize = 32;
/// Longest label name, in bytes.
pub const MAX_LABEL_NAME_BYTES: usize = 128;
/// Longest label value, in bytes.
pub const MAX_LABEL_VALUE_BYTES: usize = 1024;

/// Whether `name` may be an exposed label; the error says why not.
pub fn check_name(name: &str) -> Result<(), String> {
    let mut bytes = name.bytes();
    let first_ok = bytes
        .next()
        .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_');
    if !first_ok || !bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_') {
        return Err(format!(
            "label name {:?} is not valid: use letters, digits and '_', not starting with a digit",
            mcp_client::mcp::truncate(name, 64)
        ));
    }
    if name.len() > MAX_LABEL_NAME_BYTES {
        return Err(format!(
            "label name is {} bytes long; at most {MAX_LABEL_NAME_BYTES}",
            name.len()
        ));
    }
    if name.starts_with("__") {
        return Err(format!(
            "label name {name:?} starts with '__', which Prometheus reserves"
        ));
    }
    if name == "target" {
        return Err("label name \"target\" is reserved: it is the target's name".into());
    }
    Ok(())
}

/// Check `pairs` and collect them; an empty value means no label (as in Prometheus), a repeated
/// name or too many labels is an error.
pub fn collect<'a>(pairs: impl IntoIterator<Item = (&'a str, &'a str)>) -> Result<Labels, String> {
    let mut labels = Labels::new();
    for (name, value) in pairs {
        check_name(name)?;
        if value.len() > MAX_LABEL_VALUE_BYTES {
            return Err(format!(
                "label {name:?}: value is {} bytes long; at most {MAX_LABEL_VALUE_BYTES}",
                value.len()
            ));
        }
        if let Some(c) = value.chars().find(|c| mcp_client::text::is_hostile(*c)) {
            return Err(format!(
                "label {name:?}: value contains U+{:04X}, a control or bidi character",
                u32::from(c)
            ));
        }
        if value.is_empty() {
            continue;
        }
        if labels.insert(name.to_string(), value.to_string()).is_some() {
            return Err(format!("label {name:?} is given twice"));
        }
        if labels.len() > MAX_LABELS {
            return Err(format!("more than {MAX_LABELS} labels"));
        }
    }
    Ok(labels)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_prometheus_syntax_and_reserve_target_and_meta() {
        for good in ["team", "_x", "Team_2", "a"] {
            assert_eq!(check_name(good), Ok(()), "{good}");
        }
        for (bad, why) in [
            ("", "not valid"),
            ("2team", "not valid"),
            ("te-am", "not valid"),
            ("tèam", "not valid"),
            ("__meta_x", "reserves"),
            ("target", "reserved"),
        ] {
            let e = check_name(bad).unwrap_err();
            assert!(e.contains(why), "{bad}: {e}");
        }
        assert!(
            check_name(&"a".repeat(129))
                .unwrap_err()
                .contains("at most 128")
        );
    }

    #[test]
    fn values_and_counts_are_bounded() {
        let long = "v".repeat(MAX_LABEL_VALUE_BYTES + 1);
        assert!(
            collect([("team", long.as_str())])
                .unwrap_err()
                .contains("at most 1024")
        );
        let names: Vec<String> = (0..=MAX_LABELS).map(|i| format!("l{i}")).collect();
        let e = collect(names.iter().map(|n| (n.as_str(), "x"))).unwrap_err();
        assert!(e.contains("more than 32"), "{e}");
        assert!(
            collect([("a", "1"), ("a", "2")])
                .unwrap_err()
                .contains("twice")
        );
        let l = collect([("team", "kb"), ("empty", "")]).unwrap();
        assert_eq!(l.len(), 1, "an empty value is no label");
    }
}
