//! The series of one target: up and ready, functional probes, credentials, latency histograms,
//! and its connections' series.
//!
//! Latency histograms and session failures by reason are per target, not per connection: at 13
//! and 17 series they were most of the exposition's bytes per connection, the connections of one
//! target measure the same server, and `mcp_probe_connection_up` still tells which connection is
//! down. Session failures are written from their first event (see `super::conn`). Everything a
//! target owns disappears with it: `Telemetry::remove_target` drops this.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use super::conn::{ConnMetrics, ConnSeries};
use crate::probe::functional::ProbeFailure;
use crate::telemetry::families as m;
use crate::telemetry::otlp::{Mirror, OtelHistograms};
use exposition::{self as expo, Exposition, Value};
use exposition::{Cell, Histogram, Lazy};
use mcp_client::listing::list::List;
use mcp_client::mcp::Reason;
use mcp_client::net::refusal::AuthStep;

/// A latency histogram, mirrored to OTLP when the push runs.
#[derive(Default)]
struct Latency {
    h: Histogram,
    otel: Option<Mirror>,
}

impl Latency {
    fn new(otel: Option<&OtelHistograms>, family: &'static str, attrs: &[(&str, &str)]) -> Self {
        Latency {
            h: Histogram::default(),
            otel: otel.and_then(|o| o.mirror(family, attrs)),
        }
    }

    fn record(&self, d: Duration) {
        let v = d.as_secs_f64();
        self.h.record(v);
        if let Some(o) = &self.otel {
            o.record(v);
        }
    }
}

/// The series of one functional probe.
struct ProbeSeries {
    /// `target="…",tool="…"`.
    labels: String,
    success: Cell,
    duration: Cell,
    /// One per [`ProbeFailure::ALL`], all at 0 from the start: an alert on the increase of
    /// one (`reason="unknown_tool"`) must see its first failure, not a series born at 1.
    failures: [Cell; ProbeFailure::ALL.len()],
    ok: AtomicBool,
}

impl ProbeSeries {
    fn set_ok(&self, ok: bool) {
        self.ok.store(ok, Ordering::Relaxed);
        self.success.set_flag(ok);
    }
}

/// Credentials' series: only for targets that have credentials.
struct AuthSeries {
    failures: [Cell; AuthStep::ALL.len()],
}

/// The pins' series of a target with `pins:` (see [`mcp_client::listing::changes::pins`]).
struct PinSeries {
    valid: bool,
    pinned: usize,
    unpinned: usize,
    /// `target="…",tool="…"`, mismatch, description changed: one per pinned tool.
    tools: Vec<(String, bool, bool)>,
}

/// One pinned tool as the pins series show it: name, mismatch, description changed.
pub type PinState<'a> = (&'a str, bool, bool);

/// Another list the pins file pins, judged: its pinned items that differ or are gone, those whose
/// description changed, and its listed items no pin names. Counts, not a series per item: a
/// resource's key is a URI, never a label.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ListPins {
    pub list: List,
    pub mismatches: usize,
    pub description_changes: usize,
    pub unpinned: usize,
}

/// The series of one target.
pub struct TargetMetrics {
    name: String,
    /// `target="…"`, escaped once.
    labels: String,
    up: Cell,
    ready: Cell,
    /// One per [`Reason::ALL`], each written from its first failure: no alert reads them (a
    /// target whose sessions keep failing is `mcp_probe_up` 0), and at 0 they were 17 series
    /// of every target.
    session_failures: [Cell; Reason::ALL.len()],
    conns: Vec<ConnSeries>,
    conn_up: Vec<AtomicBool>,
    /// Per connection: the last walk (any trigger) completed.
    walk_ok: Vec<AtomicBool>,
    /// Per configured probe, in config order.
    probes: Vec<ProbeSeries>,
    auth: OnceLock<AuthSeries>,
    /// success, failure; both appear at the first token request.
    token_requests: OnceLock<[Cell; 2]>,
    token_expiry: Cell,
    /// Label text of `mcp_probe_target_info` (discovered and configured labels).
    info: Mutex<Option<String>>,
    /// Bytes of tool definitions kept to classify changes.
    definitions_bytes: Cell,
    pins: Mutex<Option<PinSeries>>,
    /// The other lists the pins file pins: (list, mismatches, description changes, unpinned).
    list_pins: Mutex<Vec<ListPins>>,
    ping: Latency,
    walk: Latency,
    requests: Lazy<&'static str, Latency>,
    otel: Option<OtelHistograms>,
}

impl TargetMetrics {
    pub(super) fn new(
        name: &str,
        connections: u16,
        probes: &[String],
        otel: Option<OtelHistograms>,
    ) -> Self {
        let flags = || (0..connections).map(|_| AtomicBool::new(false)).collect();
        let target = [("target", name)];
        TargetMetrics {
            name: name.to_string(),
            labels: expo::labels(target),
            up: Cell::default(),
            ready: Cell::default(),
            session_failures: Default::default(),
            conns: (0..connections).map(|i| ConnSeries::new(name, i)).collect(),
            conn_up: flags(),
            walk_ok: flags(),
            probes: probes
                .iter()
                .map(|tool| ProbeSeries {
                    labels: expo::labels([("target", name), ("tool", tool)]),
                    success: Cell::default(),
                    duration: Cell::default(),
                    failures: Default::default(),
                    ok: AtomicBool::new(false),
                })
                .collect(),
            auth: OnceLock::new(),
            token_requests: OnceLock::new(),
            token_expiry: Cell::absent(),
            info: Mutex::new(None),
            definitions_bytes: Cell::default(),
            pins: Mutex::new(None),
            list_pins: Mutex::new(Vec::new()),
            ping: Latency::new(otel.as_ref(), m::PING_DURATION, &target),
            walk: Latency::new(otel.as_ref(), m::WALK_DURATION, &target),
            requests: Lazy::default(),
            otel,
        }
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// Handles for one connection.
    pub fn connection(self: &Arc<Self>, index: u16) -> ConnMetrics {
        assert!(
            usize::from(index) < self.conns.len(),
            "connection {index} of a target with {}",
            self.conns.len()
        );
        ConnMetrics::new(self.clone(), index)
    }

    pub(super) fn conn(&self, index: u16) -> &ConnSeries {
        &self.conns[usize::from(index)]
    }

    pub(super) fn session_failed(&self, reason: Reason) {
        if let Some(i) = Reason::ALL.iter().position(|r| *r == reason) {
            self.session_failures[i].add(1);
        }
    }

    pub(super) fn request_duration(&self, method: &'static str, d: Duration) {
        let otel = self.otel.as_ref();
        let new = || {
            Latency::new(
                otel,
                m::REQUEST_DURATION,
                &[("target", &self.name), ("method", method)],
            )
        };
        self.requests.with_or(method, new, |l| l.record(d));
    }

    pub(super) fn ping_duration(&self, d: Duration) {
        self.ping.record(d);
    }

    pub(super) fn walk_duration(&self, d: Duration) {
        self.walk.record(d);
    }

    pub(super) fn set_connection_up(&self, index: u16, up: bool) {
        if let Some(b) = self.conn_up.get(usize::from(index)) {
            b.store(up, Ordering::Relaxed);
        }
        let any = self.conn_up.iter().any(|b| b.load(Ordering::Relaxed));
        self.up.set_flag(any);
        self.update_ready();
    }

    pub(super) fn set_walk_ok(&self, index: u16, ok: bool) {
        if let Some(b) = self.walk_ok.get(usize::from(index)) {
            b.store(ok, Ordering::Relaxed);
        }
        self.update_ready();
    }

    /// `ready` = some connection is up with a complete last walk, and every probe passes.
    fn update_ready(&self) {
        let conn = self
            .conn_up
            .iter()
            .zip(&self.walk_ok)
            .any(|(up, walk)| up.load(Ordering::Relaxed) && walk.load(Ordering::Relaxed));
        let probes = self.probes.iter().all(|p| p.ok.load(Ordering::Relaxed));
        self.ready.set_flag(conn && probes);
    }

    /// Record a run of the probe at `index` (config order): `Ok(())` or the failure reason.
    pub fn probe_result(&self, index: usize, elapsed: Duration, result: Result<(), &'static str>) {
        let Some(p) = self.probes.get(index) else {
            return;
        };
        p.duration.set(elapsed.as_secs_f64());
        p.set_ok(result.is_ok());
        if let Err(reason) = result
            && let Some(i) = ProbeFailure::ALL.iter().position(|f| f.as_str() == reason)
        {
            p.failures[i].add(1);
        }
        self.update_ready();
    }

    /// `mcp_probe_auth_failures_total` of this target, every reason created at 0 (an alert on
    /// the increase of one must see its first failure): for targets with credentials (an auth
    /// block or a client certificate).
    pub fn auth_failures(self: &Arc<Self>) -> mcp_client::target_http::FailureSink {
        self.auth.get_or_init(|| AuthSeries {
            failures: Default::default(),
        });
        let me = self.clone();
        Arc::new(move |step| {
            if let (Some(auth), Some(i)) =
                (me.auth.get(), AuthStep::ALL.iter().position(|s| *s == step))
            {
                auth.failures[i].add(1);
            }
        })
    }

    /// The session that runs the probes is gone: none of them is passing now.
    pub fn probes_down(&self) {
        for p in &self.probes {
            p.set_ok(false);
        }
        self.update_ready();
    }

    /// The labels `mcp_probe_target_info` carries besides `target` (discovered or configured);
    /// an empty map removes the series.
    pub fn set_labels(&self, labels: &BTreeMap<String, String>) {
        let text = (!labels.is_empty()).then(|| {
            expo::labels(
                std::iter::once(("target", self.name.as_str()))
                    .chain(labels.iter().map(|(k, v)| (k.as_str(), v.as_str()))),
            )
        });
        *self.info.lock().expect("metrics lock poisoned") = text;
    }

    /// Bytes the target's definition store holds now.
    pub fn definitions_bytes(&self, bytes: usize) {
        self.definitions_bytes.set(bytes as f64);
    }

    /// The pins' state: whether the last read of the file succeeded, each pinned tool, and how
    /// many listed tools are unpinned. The tool label is bounded by the pins file (at most
    /// [`mcp_client::listing::changes::pins::MAX_PINNED`]).
    pub fn pins(&self, valid: bool, pinned: &[PinState<'_>], unpinned: usize) {
        let tools = pinned
            .iter()
            .map(|(tool, mismatch, description)| {
                let labels = expo::labels([("target", self.name.as_str()), ("tool", tool)]);
                (labels, *mismatch, *description)
            })
            .collect();
        *self.pins.lock().expect("metrics lock poisoned") = Some(PinSeries {
            valid,
            pinned: pinned.len(),
            unpinned,
            tools,
        });
    }

    /// The other lists' pins, judged (replacing the last judgement).
    pub fn list_pins(&self, lists: Vec<ListPins>) {
        *self.list_pins.lock().expect("metrics lock poisoned") = lists;
    }

    /// The pins file could not be read again: the last good pins stay in force.
    pub fn pins_invalid(&self) {
        let mut pins = self.pins.lock().expect("metrics lock poisoned");
        match pins.as_mut() {
            Some(p) => p.valid = false,
            None => {
                *pins = Some(PinSeries {
                    valid: false,
                    pinned: 0,
                    unpinned: 0,
                    tools: Vec::new(),
                })
            }
        }
    }

    fn write(&self, out: &mut Exposition) {
        let l = &self.labels;
        out.sample(
            m::slot(m::TOOL_DEFINITIONS_BYTES),
            l,
            &[],
            Value::of_gauge(&self.definitions_bytes),
        );
        if let Some(p) = self.pins.lock().expect("metrics lock poisoned").as_ref() {
            let flag = |b: bool| Value::Float(if b { 1.0 } else { 0.0 });
            out.sample(m::slot(m::PINS_FILE_VALID), l, &[], flag(p.valid));
            out.sample(
                m::slot(m::TOOLS_PINNED),
                l,
                &[],
                Value::Float(p.pinned as f64),
            );
            out.sample(
                m::slot(m::TOOLS_UNPINNED),
                l,
                &[],
                Value::Float(p.unpinned as f64),
            );
            let (mismatch, description) = (
                m::slot(m::TOOL_PIN_MISMATCH),
                m::slot(m::TOOL_PIN_DESCRIPTION_CHANGED),
            );
            for (labels, mm, desc) in &p.tools {
                out.sample(mismatch, labels, &[], flag(*mm));
                out.sample(description, labels, &[], flag(*desc));
            }
        }
        for p in self.list_pins.lock().expect("metrics lock poisoned").iter() {
            let list = [("list", p.list.as_str())];
            let n = |v: usize| Value::Float(v as f64);
            out.sample(m::slot(m::LIST_PIN_MISMATCHES), l, &list, n(p.mismatches));
            let changes = n(p.description_changes);
            out.sample(m::slot(m::LIST_PIN_DESCRIPTION_CHANGES), l, &list, changes);
            out.sample(m::slot(m::LIST_UNPINNED), l, &list, n(p.unpinned));
        }
        out.sample(m::slot(m::UP), l, &[], Value::of_gauge(&self.up));
        out.sample(m::slot(m::READY), l, &[], Value::of_gauge(&self.ready));
        if let Some(info) = self.info.lock().expect("metrics lock poisoned").as_deref() {
            out.sample(m::slot(m::TARGET_INFO), info, &[], Value::Float(1.0));
        }
        let slot = m::slot(m::SESSION_FAILURES);
        for (reason, c) in Reason::ALL.iter().zip(&self.session_failures) {
            if let Some(v) = Value::from_first_event(c) {
                out.sample(slot, l, &[("reason", reason.as_str())], v);
            }
        }
        for c in &self.conns {
            c.render(out);
        }
        out.histogram(m::slot(m::PING_DURATION), l, &[], &self.ping.h.snapshot());
        out.histogram(m::slot(m::WALK_DURATION), l, &[], &self.walk.h.snapshot());
        let requests = m::slot(m::REQUEST_DURATION);
        self.requests.each(|method, lat| {
            out.histogram(requests, l, &[("method", method)], &lat.h.snapshot())
        });
        let (success, duration, failures) = (
            m::slot(m::TOOL_PROBE_SUCCESS),
            m::slot(m::TOOL_PROBE_DURATION),
            m::slot(m::TOOL_PROBE_FAILURES),
        );
        for p in &self.probes {
            out.sample(success, &p.labels, &[], Value::of_gauge(&p.success));
            out.sample(duration, &p.labels, &[], Value::of_gauge(&p.duration));
            for (f, c) in ProbeFailure::ALL.iter().zip(&p.failures) {
                let extra = [("reason", f.as_str())];
                out.sample(failures, &p.labels, &extra, Value::Count(c.raw()));
            }
        }
        if let Some(auth) = self.auth.get() {
            let slot = m::slot(m::AUTH_FAILURES);
            for (step, c) in AuthStep::ALL.iter().zip(&auth.failures) {
                let extra = [("reason", step.as_str())];
                out.sample(slot, l, &extra, Value::Count(c.raw()));
            }
        }
        if let Some(cells) = self.token_requests.get() {
            let slot = m::slot(m::AUTH_TOKEN_REQUESTS);
            for (result, c) in ["success", "failure"].into_iter().zip(cells) {
                out.sample(slot, l, &[("result", result)], Value::Count(c.raw()));
            }
        }
        if let Some(v) = Value::of(exposition::Kind::Gauge, self.token_expiry.raw()) {
            out.sample(m::slot(m::AUTH_TOKEN_EXPIRY), l, &[], v);
        }
    }
}

impl crate::telemetry::Series for TargetMetrics {
    fn render(&self, out: &mut Exposition<'_>) {
        self.write(out);
    }
}

impl mcp_client::oauth::TokenEvents for TargetMetrics {
    /// Both `result` series appear at the first request, so a failure rate can be computed from
    /// the start.
    fn token_request(&self, ok: bool) {
        let [success, failure] = self.token_requests.get_or_init(Default::default);
        if ok { success } else { failure }.add(1);
    }

    fn token_expiry(&self, unix_seconds: f64) {
        self.token_expiry.set(unix_seconds);
    }
}

#[cfg(test)]
mod tests {
    use mcp_client::oauth::TokenEvents as _;

    /// An anomaly counter is absent from a fresh connection and appears at its first event; a
    /// counter an alert fires on at its first increase is there at 0 before any.
    #[test]
    fn anomaly_counters_appear_with_their_first_event() {
        let telemetry = crate::telemetry::Telemetry::new();
        let metrics = telemetry.add_target("t", 1, &[]);
        let conn = metrics.connection(0);
        let cursor_errors = "mcp_probe_tools_list_cursor_errors_total{";
        let failures = "mcp_probe_session_failures_total{";
        let text = telemetry.render();
        assert!(!text.contains(cursor_errors), "{text}");
        assert!(!text.contains(failures), "{text}");
        for line in [
            r#"mcp_probe_unannounced_changes_total{target="t",connection="0"} 0"#,
            r#"mcp_probe_ttl_violations_total{target="t",connection="0"} 0"#,
            r#"mcp_probe_tools_list_duplicate_tools_total{target="t",connection="0"} 0"#,
        ] {
            assert!(text.lines().any(|l| l == line), "{line} missing:\n{text}");
        }
        let report = mcp_client::listing::walker::WalkReport {
            result: Err(mcp_client::listing::walker::WalkError::LoopCap),
            requests: 64,
            answered: 64,
            duplicates: 0,
            long_names: 0,
            rejected: 0,
            bytes: 0,
        };
        conn.walk_finished(
            crate::probe::Trigger::Audit,
            &report,
            std::time::Duration::ZERO,
        );
        conn.session_failed(mcp_client::mcp::Reason::Timeout);
        let text = telemetry.render();
        for line in [
            r#"mcp_probe_tools_list_loop_cap_hits_total{target="t",connection="0"} 1"#,
            r#"mcp_probe_tools_list_walks_total{target="t",connection="0",trigger="audit"} 0"#,
            r#"mcp_probe_session_failures_total{target="t",reason="timeout"} 1"#,
        ] {
            let want = !line.ends_with(" 0");
            assert_eq!(text.lines().any(|l| l == line), want, "{line}:\n{text}");
        }
        assert!(
            !text.contains(cursor_errors),
            "a loop cap is no cursor error: {text}"
        );
    }

    #[test]
    fn token_events_become_the_auth_token_series() {
        let telemetry = crate::telemetry::Telemetry::new();
        let metrics = telemetry.add_target("t", 1, &[]);
        metrics.token_request(true);
        metrics.token_expiry(1_900_000_000.0);
        let text = telemetry.render();
        for line in [
            r#"mcp_probe_auth_token_requests_total{target="t",result="success"} 1"#,
            r#"mcp_probe_auth_token_requests_total{target="t",result="failure"} 0"#,
            r#"mcp_probe_auth_token_expiry_timestamp_seconds{target="t"} 1900000000"#,
        ] {
            assert!(text.lines().any(|l| l == line), "{line} missing:\n{text}");
        }
    }
}
