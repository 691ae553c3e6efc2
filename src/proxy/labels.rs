//! The `client` label: a client's self-reported name (or a configured header), made safe and
//! bounded.
//!
//! Any client can call itself anything, so the label is both untrusted text and a cardinality
//! risk: values are cut to a safe charset and [`MAX_LABEL_BYTES`], and at most `max_clients`
//! distinct values have their own series at any time; past that, a new value shares `other`. A
//! client that says nothing is `unknown`. Both reserved values are always available, whatever
//! the cap.
//!
//! The slots follow the live clients, not the first ones ever seen: a value unused for
//! `client_idle_timeout` (default 24 h) with no tracked session left is forgotten, its series
//! are removed, and its slot goes to the next new value. Without that, the first 20 names held
//! their slots for the life of the process (after 10,000 names, 9,984 sessions were `other`).
//! The bound is unchanged: never more than `max_clients` + 2 values at once. Time is passed in
//! (`*_at`), so the expiry is tested without waiting a day.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::proxy::metrics::{ClientSeries, ProxyMetrics};

pub use crate::config::{MAX_CLIENT_LABEL_BYTES as MAX_LABEL_BYTES, safe_label as safe};
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
    /// When an exchange last came from this client.
    last_used: Mutex<Instant>,
}

impl Client {
    /// An exchange came from this client at `now`.
    pub fn touch(&self, now: Instant) {
        let mut last = self.last_used.lock().expect("client lock");
        *last = (*last).max(now);
    }
}

/// The label values handed out and still live.
pub struct ClientLabels {
    max: usize,
    flatten: Vec<String>,
    metrics: Arc<ProxyMetrics>,
    /// `client_idle_timeout`.
    idle: Duration,
    known: Mutex<HashMap<Box<str>, Arc<Client>>>,
}

impl ClientLabels {
    pub fn new(
        max: usize,
        flatten: Vec<String>,
        metrics: Arc<ProxyMetrics>,
        idle: Duration,
    ) -> Self {
        ClientLabels {
            max,
            flatten,
            metrics,
            idle,
            known: Mutex::new(HashMap::new()),
        }
    }

    /// The client for a reported name (`None`: the client gave none).
    pub fn get(&self, name: Option<&str>) -> Arc<Client> {
        self.get_at(name, Instant::now())
    }

    /// [`Self::get`], used at `now`.
    pub fn get_at(&self, name: Option<&str>, now: Instant) -> Arc<Client> {
        let label = match name.map(safe) {
            Some(l) if !l.is_empty() => l,
            _ => UNKNOWN.to_string(),
        };
        let mut known = self.known.lock().expect("labels lock");
        if let Some(c) = known.get(label.as_str()) {
            c.touch(now);
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
            c.touch(now);
            return c.clone();
        }
        let flatten = self.flatten.contains(&label);
        let client = Arc::new(Client {
            series: self.metrics.client(&label, flatten),
            label: label.clone().into(),
            flatten,
            last_used: Mutex::new(now),
        });
        known.insert(label.into(), client.clone());
        client
    }

    /// Forget the values unused for `client_idle_timeout` at `now` that track no session: their
    /// series go, their slots are free. Returns how many were forgotten.
    pub fn expire(&self, now: Instant) -> usize {
        let mut known = self.known.lock().expect("labels lock");
        let before = known.len();
        known.retain(|_, c| {
            let last = *c.last_used.lock().expect("client lock");
            let live =
                now.saturating_duration_since(last) < self.idle || c.series.tracked_sessions() > 0;
            if !live {
                self.metrics.remove_client(&c.series);
            }
            live
        });
        before - known.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::telemetry::Telemetry;

    #[test]
    fn labels_are_safe_and_capped_with_other_and_unknown_reserved() {
        let t = Telemetry::new();
        let labels = ClientLabels::new(2, vec!["b".into()], t.add_proxy("p"), DAY);
        assert_eq!(&*labels.get(Some("a\n\u{202e}evil\"")).label, "a__evil_");
        assert_eq!(&*labels.get(Some("b")).label, "b");
        assert!(labels.get(Some("b")).flatten);
        assert_eq!(&*labels.get(Some("c")).label, OTHER);
        assert_eq!(&*labels.get(None).label, UNKNOWN);
        assert_eq!(&*labels.get(Some("  ")).label, UNKNOWN);
        assert_eq!(&*labels.get(Some(&"x".repeat(500))).label, OTHER);
        assert_eq!(safe(&"y".repeat(500)).len(), MAX_LABEL_BYTES);
    }

    const DAY: Duration = Duration::from_secs(24 * 60 * 60);

    #[test]
    fn a_label_idle_for_a_day_frees_its_slot_and_its_series() {
        let t = Telemetry::new();
        let labels = ClientLabels::new(2, vec![], t.add_proxy("p"), DAY);
        let t0 = Instant::now();
        let hour = Duration::from_secs(3600);
        labels.get_at(Some("a"), t0).series.request("ping");
        labels.get_at(Some("b"), t0).series.request("ping");
        assert_eq!(&*labels.get_at(Some("c"), t0).label, OTHER, "the cap holds");
        // `b` is used again, `a` keeps a tracked session: neither is idle.
        labels.get_at(Some("b"), t0 + 12 * hour);
        labels.get_at(Some("a"), t0).series.sessions(1);
        assert_eq!(labels.expire(t0 + 25 * hour), 1, "only `other` went");
        assert_eq!(&*labels.get_at(Some("c"), t0 + 25 * hour).label, OTHER);
        // `a`'s session is forgotten: a day after its last use it goes, `b` too a day after its.
        labels.get_at(Some("a"), t0).series.sessions(-1);
        assert_eq!(labels.expire(t0 + 25 * hour), 1, "`a`");
        assert_eq!(
            &*labels.get_at(Some("c"), t0 + 25 * hour).label,
            "c",
            "the freed slot goes to the next new client"
        );
        assert_eq!(&*labels.get_at(Some("d"), t0 + 25 * hour).label, OTHER);
        let text = t.render();
        assert!(!text.contains("client=\"a\""), "{text}");
        assert!(text.contains("client=\"b\""), "{text}");
        assert!(text.contains("client=\"c\""), "{text}");
        assert_eq!(
            labels.expire(t0 + 37 * hour),
            1,
            "`b`, a day after its last use"
        );
        assert!(!t.render().contains("client=\"b\""));
    }
}
