//! Read samples back out of a text exposition.
//!
//! For a bridge that must export the very numbers a scrape shows from a writer that keeps its
//! state private and only renders text (`metrics-exporter-prometheus`): parsing its exposition
//! keeps one place where the values come from.

/// One sample line: `name{label="value",...} 1.5`.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample<'a> {
    pub name: &'a str,
    pub labels: Vec<(&'a str, String)>,
    pub value: f64,
}

/// Every sample line of an exposition; comments, blank lines and lines that do not parse are
/// skipped (the renderer is ours, so the last case does not happen in practice).
pub fn parse(text: &str) -> Vec<Sample<'_>> {
    text.lines()
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .filter_map(line)
        .collect()
}

fn line(l: &str) -> Option<Sample<'_>> {
    let name_end = l.find(['{', ' '])?;
    let name = &l[..name_end];
    let (labels, rest) = if l[name_end..].starts_with('{') {
        labels(&l[name_end + 1..])?
    } else {
        (Vec::new(), &l[name_end..])
    };
    // A timestamp may follow the value; the renderer writes none, but tolerate it.
    let value = rest.split_whitespace().next()?;
    let value = match value {
        "+Inf" => f64::INFINITY,
        "-Inf" => f64::NEG_INFINITY,
        "NaN" => f64::NAN,
        v => v.parse().ok()?,
    };
    Some(Sample {
        name,
        labels,
        value,
    })
}

/// `k="v",k2="v2"} rest` → the pairs (unescaped) and `rest`.
fn labels(mut s: &str) -> Option<(Vec<(&str, String)>, &str)> {
    let mut out = Vec::new();
    loop {
        s = s.trim_start_matches([',', ' ']);
        if let Some(rest) = s.strip_prefix('}') {
            return Some((out, rest));
        }
        let eq = s.find('=')?;
        let key = s[..eq].trim();
        let mut chars = s[eq + 1..].strip_prefix('"')?.char_indices();
        let mut value = String::new();
        let end = loop {
            match chars.next()? {
                (i, '"') => break i,
                (_, '\\') => match chars.next()?.1 {
                    'n' => value.push('\n'),
                    other => value.push(other),
                },
                (_, c) => value.push(c),
            }
        };
        out.push((key, value));
        s = &s[eq + 1..][1 + end + 1..];
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_names_labels_and_values() {
        let text = "# HELP x help\n# TYPE x gauge\nx 3\n\nmcp_probe_up{target=\"a\"} 1\n\
                    y{a=\"1\",b=\"two, \\\"quoted\\\" \\\\ and\\nline\"} -2.5e3\nz{le=\"+Inf\"} +Inf\n";
        let s = parse(text);
        assert_eq!(s.len(), 4);
        assert_eq!((s[0].name, s[0].labels.len(), s[0].value), ("x", 0, 3.0));
        assert_eq!(s[1].labels, vec![("target", "a".to_string())]);
        assert_eq!(
            s[2].labels,
            vec![
                ("a", "1".to_string()),
                ("b", "two, \"quoted\" \\ and\nline".to_string())
            ]
        );
        assert_eq!(s[2].value, -2500.0);
        assert_eq!(s[3].value, f64::INFINITY);
    }

    #[test]
    fn skips_what_does_not_parse() {
        assert!(parse("garbage\nx{a=\"unterminated 1\nx{a=1} 2\n").is_empty());
    }
}
