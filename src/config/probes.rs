//! The `probes` of a target: read-only functional checks (`tools/call`) on top of liveness.
//!
//! A probe's tool name becomes the `tool` label, so the list is capped and names follow the
//! spec's tool-naming rules; arguments and expectations are checked here so that a typo fails the
//! load instead of failing every probe run.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Deserialize;
use serde_json::Value;

use super::ConfigError;
use super::validator::Validator;

/// At most this many probes per target: each adds series labelled by its tool.
pub const MAX_PROBES: usize = 16;
const DEFAULT_INTERVAL: Duration = Duration::from_secs(60);
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(5);
/// Longest `text_contains` accepted.
const MAX_EXPECT_TEXT: usize = 1024;

/// One functional probe, resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProbeConfig {
    /// The tool to call (and the `tool` label value).
    pub tool: String,
    /// `arguments` of `tools/call`.
    pub arguments: serde_json::Map<String, Value>,
    pub interval: Duration,
    pub timeout: Duration,
    pub expect: Expect,
    /// Call the tool even when the server does not hint it read-only.
    pub allow_side_effects: bool,
}

/// What a successful result must contain. Empty: any result without `isError` passes.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Expect {
    /// A text content block must contain this string.
    pub text_contains: Option<String>,
    /// JSON pointer (RFC 6901) into `structuredContent` → the value it must equal.
    pub structured: BTreeMap<String, Value>,
}

#[derive(Deserialize)]
#[serde(
    deny_unknown_fields,
    expecting = "a probe: a mapping with at least `tool`"
)]
pub(super) struct RawProbe {
    tool: Option<String>,
    arguments: Option<Value>,
    interval: Option<String>,
    timeout: Option<String>,
    expect: Option<RawExpect>,
    allow_side_effects: Option<bool>,
}

#[derive(Deserialize)]
#[serde(
    deny_unknown_fields,
    expecting = "a mapping with `text_contains` and/or `structured`"
)]
struct RawExpect {
    text_contains: Option<String>,
    structured: Option<BTreeMap<String, Value>>,
}

/// Whether `name` follows the tool-name rules of the 2025-11-25 specification: 1–128 characters
/// from `A–Z a–z 0–9 _ - .`.
pub fn valid_tool_name(name: &str) -> bool {
    (1..=128).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
}

impl Validator<'_> {
    pub(super) fn probes(
        &self,
        p: &str,
        raw: Option<Vec<RawProbe>>,
    ) -> Result<Vec<ProbeConfig>, ConfigError> {
        let raw = raw.unwrap_or_default();
        if raw.len() > MAX_PROBES {
            return Err(self.err(
                format!("{p}.probes"),
                format!(
                    "{} probes; at most {MAX_PROBES} per target (each adds series labelled by its tool)",
                    raw.len()
                ),
            ));
        }
        let mut out: Vec<ProbeConfig> = Vec::with_capacity(raw.len());
        for (i, r) in raw.into_iter().enumerate() {
            let q = format!("{p}.probes[{i}]");
            let probe = self.probe(&q, r)?;
            if let Some(j) = out.iter().position(|o| o.tool == probe.tool) {
                return Err(self.err(
                    format!("{q}.tool"),
                    format!(
                        "tool {:?} is already probed by {p}.probes[{j}]; one probe per tool",
                        probe.tool
                    ),
                ));
            }
            out.push(probe);
        }
        Ok(out)
    }

    fn probe(&self, q: &str, r: RawProbe) -> Result<ProbeConfig, ConfigError> {
        let Some(tool) = r.tool else {
            return Err(self.err(
                format!("{q}.tool"),
                "required; the name of the tool to call",
            ));
        };
        if !valid_tool_name(&tool) {
            return Err(self.err(
                format!("{q}.tool"),
                format!(
                    "{tool:?} is not a valid tool name; names are 1 to 128 characters of A-Z a-z 0-9 _ - ."
                ),
            ));
        }
        let arguments = match r.arguments {
            None | Some(Value::Null) => serde_json::Map::new(),
            Some(Value::Object(m)) => m,
            Some(_) => {
                return Err(self.err(
                    format!("{q}.arguments"),
                    "must be a mapping (the tool's arguments object); use {} for none",
                ));
            }
        };
        let interval = self
            .duration(q, "interval", r.interval)?
            .unwrap_or(DEFAULT_INTERVAL);
        // As for request_timeout: a timeout written here must fit the interval, the default is
        // lowered to fit.
        let timeout = match self.duration(q, "timeout", r.timeout)? {
            None => DEFAULT_TIMEOUT.min(interval),
            Some(timeout) if timeout > interval => {
                return Err(self.err(
                    format!("{q}.timeout"),
                    format!(
                        "timeout ({}) must not exceed interval ({})",
                        humantime::format_duration(timeout),
                        humantime::format_duration(interval)
                    ),
                ));
            }
            Some(timeout) => timeout,
        };
        let expect = match r.expect {
            None => Expect::default(),
            Some(e) => self.expect(q, e)?,
        };
        Ok(ProbeConfig {
            tool,
            arguments,
            interval,
            timeout,
            expect,
            allow_side_effects: r.allow_side_effects.unwrap_or(false),
        })
    }

    fn expect(&self, q: &str, e: RawExpect) -> Result<Expect, ConfigError> {
        if let Some(t) = &e.text_contains
            && (t.is_empty() || t.len() > MAX_EXPECT_TEXT)
        {
            return Err(self.err(
                format!("{q}.expect.text_contains"),
                format!("must be 1 to {MAX_EXPECT_TEXT} bytes long"),
            ));
        }
        let structured = e.structured.unwrap_or_default();
        for pointer in structured.keys() {
            if !pointer.is_empty() && !pointer.starts_with('/') {
                return Err(self.err(
                    format!("{q}.expect.structured"),
                    format!(
                        "{pointer:?} is not a JSON pointer; pointers start with '/', like /status"
                    ),
                ));
            }
        }
        Ok(Expect {
            text_contains: e.text_contains,
            structured,
        })
    }
}
