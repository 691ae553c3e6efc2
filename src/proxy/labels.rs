//! The `client` label: a client's self-reported name (or a configured header), made safe and
//! bounded.
//!
//! Any client can call itself anything, so the label is both untrusted text and a cardinality
//! risk: values are cut to a safe charset and [`MAX_LABEL_BYTES`], and only the first
//! `max_clients` distinct values get their own series; later ones share `other`. A client that
//! says nothing is `unknown`. Both reserved values are always available, whatever the cap.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::telemetry::proxy::{ClientSeries, ProxyMetrics};

/// Longest `client` label value.
pub const MAX_LABEL_BYTES: usize = 64;
/// The label of clients past `max_clients`.
pub const OTHER: &str = "other";
/// The label of clients that gave no name.
pub const UNKNOWN: &str = "unknown";

/// One `client` label value and its series.
pub struct Client {
    pub label: Box<str>,
    pub series: Arc<ClientSeries>,
    /// Its `tools/list` answers are flattened (`flatten_pages`).
    pub flatten: bool,
}

/// The label values handed out so far.
pub struct ClientLabels {
    max: usize,
    flatten: Vec<String>,
    metrics: Arc<ProxyMetrics>,
    known: Mutex<HashMap<Box<str>, Arc<Client>>>,
}

impl ClientLabels {
    pub fn new(max: usize, flatten: Vec<String>, metrics: Arc<ProxyMetrics>) -> Self {
        ClientLabels {
            max,
            flatten,
            metrics,
            known: Mutex::new(HashMap::new()),
        }
    }

    /// The client for a reported name (`None`: the client gave none).
    pub fn get(&self, name: Option<&str>) -> Arc<Client> {
        let label = match name.map(safe) {
            Some(l) if !l.is_empty() => l,
            _ => UNKNOWN.to_string(),
        };
        let mut known = self.known.lock().expect("labels lock");
        if let Some(c) = known.get(label.as_str()) {
            return c.clone();
        }
        let reserved = label == UNKNOWN || label == OTHER;
        let admitted = known
            .keys()
            .filter(|k| &***k != UNKNOWN && &***k != OTHER)
            .count();
        let label = if reserved || admitted < self.max {
            label
        } else {
            OTHER.to_string()
        };
        if let Some(c) = known.get(label.as_str()) {
            return c.clone();
        }
        let flatten = self.flatten.contains(&label);
        let client = Arc::new(Client {
            series: self.metrics.client(&label, flatten),
            label: label.clone().into(),
            flatten,
        });
        known.insert(label.into(), client.clone());
        client
    }
}

/// `name` in a safe charset (letters, digits, `._-/@+:` and space; anything else becomes `_`),
/// at most [`MAX_LABEL_BYTES`].
pub fn safe(name: &str) -> String {
    let mut out = String::new();
    for c in name.trim().chars() {
        if out.len() >= MAX_LABEL_BYTES {
            break;
        }
        let ok =
            c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | '/' | '@' | '+' | ':' | ' ');
        out.push(if ok { c } else { '_' });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::telemetry::Telemetry;

    #[test]
    fn labels_are_safe_and_capped_with_other_and_unknown_reserved() {
        let t = Telemetry::new();
        let labels = ClientLabels::new(2, vec!["b".into()], t.add_proxy("p"));
        assert_eq!(&*labels.get(Some("a\n\u{202e}evil\"")).label, "a__evil_");
        assert_eq!(&*labels.get(Some("b")).label, "b");
        assert!(labels.get(Some("b")).flatten);
        assert_eq!(&*labels.get(Some("c")).label, OTHER);
        assert_eq!(&*labels.get(None).label, UNKNOWN);
        assert_eq!(&*labels.get(Some("  ")).label, UNKNOWN);
        assert_eq!(&*labels.get(Some(&"x".repeat(500))).label, OTHER);
        assert_eq!(safe(&"y".repeat(500)).len(), MAX_LABEL_BYTES);
    }
}
