//! The validated configuration: the only form the rest of the exporter reads.
//!
//! Every value here is resolved (defaults applied, `${VAR}` expanded, files read) and checked,
//! so consumers never re-validate or look at the file's shape. `Debug` redacts secrets, so a
//! configuration can be logged whole.

use super::labels::Labels;
use super::{HttpClientConfig, ProbeConfig, Secret, redact_url};
use mcp_client::listing::list::ListSet;
use mcp_client::mcp::version::ProtocolVersion;
use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// Default `max_listing_bytes`: some twenty times the demo's 14-tool listing (~10 KiB) and above
/// the large public servers' listings, yet small enough that 10,000 connections at this worst
/// case fit in memory (docs/reliability.md).
pub const DEFAULT_MAX_LISTING_BYTES: usize = 256 * 1024;

/// A complete, validated configuration.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Config {
    /// The `global` section with defaults applied.
    pub global: Defaults,
    /// The targets in file order, every value resolved. May be empty. Shared with the
    /// supervisor, which runs each (one copy of a target's configuration, not two).
    pub targets: Vec<Arc<TargetConfig>>,
    /// `file_sd_configs`: files of target groups, watched.
    pub file_sd: Vec<FileSdConfig>,
    /// `http_sd_configs`: URLs of target groups, polled.
    pub http_sd: Vec<HttpSdConfig>,
    /// `proxies`: the passive mode's reverse proxies (see `crate::proxy`).
    pub proxies: Vec<super::McpProxyConfig>,
}

/// Settings of the `global` section; each is the default for every target.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Defaults {
    /// The settings a target may override; those it does not are these.
    pub settings: TargetSettings,
    /// The `http_config` blocks of `global` (each replaced by a target's block of the same kind).
    pub http: HttpClientConfig,
}

/// The settings `global` gives every target and a target may override, resolved (each by one
/// rule, in `settings.rs`). `Default` is the built-in defaults.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TargetSettings {
    pub connections: u16,
    pub audit_interval: Duration,
    pub ping_interval: Duration,
    pub request_timeout: Duration,
    pub notification_grace: Duration,
    pub max_pages: u32,
    /// Most bytes of `tools/list` answers one walk may read across its pages.
    pub max_listing_bytes: usize,
    /// `legacy_clients`: for a target spoken to in the 2026-07-28 era, connection 0 keeps a
    /// legacy (2025-11-25) session on the same URL and measures what 2025-era clients hear (see
    /// `crate::probe::legacy_watch`). One session and one idle GET stream per target.
    pub legacy_clients: bool,
    /// `lists`: the lists the target's connections cache and audit, each where the server
    /// declares it (the tool list always). Default: every list.
    pub lists: ListSet,
}

impl Default for TargetSettings {
    fn default() -> TargetSettings {
        TargetSettings {
            connections: 1,
            audit_interval: Duration::from_secs(30),
            ping_interval: Duration::from_secs(15),
            request_timeout: Duration::from_secs(10),
            notification_grace: Duration::from_secs(5),
            max_pages: 64,
            max_listing_bytes: DEFAULT_MAX_LISTING_BYTES,
            legacy_clients: true,
            lists: ListSet::ALL,
        }
    }
}

/// One target with every value resolved: global defaults applied, `${VAR}` expanded,
/// `header_files` read. `Debug` redacts header values and the URL's password and query.
#[derive(Clone, PartialEq, Eq)]
pub struct TargetConfig {
    /// Unique name; the value of the `target` label.
    pub name: String,
    /// Where the MCP server is and how to reach it: a URL or a local command.
    pub endpoint: Endpoint,
    pub protocol_version: ProtocolChoice,
    /// Extra request headers in file order: `headers` first, then `header_files`. Always empty
    /// for a command target (the validator refuses headers there).
    pub headers: Vec<(String, Secret)>,
    /// `global`'s settings where the target sets none.
    pub settings: TargetSettings,
    /// Functional probes (`tools/call`), run on connection 0.
    pub probes: Vec<ProbeConfig>,
    /// Credentials, TLS and proxy (the `http_config` blocks, `global`'s where the target sets
    /// none). Always the default for a command target.
    pub http: HttpClientConfig,
    /// Exposed once on `mcp_probe_target_info` (static `labels:`, or discovered); a change of
    /// labels alone does not restart the target.
    pub labels: Labels,
    /// `pins:`: the pinned baseline of the target's tools (see docs/changes.md), resolved
    /// against the configuration file's folder. Its content is re-read on change, not part of
    /// the configuration: editing the file does not restart the target.
    pub pins: Option<PathBuf>,
}

impl fmt::Debug for TargetConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TargetConfig")
            .field("name", &self.name)
            .field("endpoint", &self.endpoint)
            .field("protocol_version", &self.protocol_version)
            .field("headers", &self.headers)
            .field("settings", &self.settings)
            .field("probes", &self.probes)
            .field("http", &self.http)
            .field("labels", &self.labels)
            .field("pins", &self.pins)
            .finish()
    }
}

impl TargetConfig {
    /// The URL of an HTTP target; `None` for a command (stdio) target. May carry secrets: log
    /// it with [`redact_url`].
    pub fn url(&self) -> Option<&url::Url> {
        match &self.endpoint {
            Endpoint::Http { url, .. } => Some(url),
            Endpoint::Command(_) => None,
        }
    }

    /// Whether `other` differs from this target in its labels at most: such a change updates
    /// the info series and keeps the running sessions.
    pub fn same_but_labels(&self, other: &TargetConfig) -> bool {
        let strip = |t: &TargetConfig| TargetConfig {
            labels: Labels::new(),
            ..t.clone()
        };
        strip(self) == strip(other)
    }
}

/// Where a target's MCP server is: exactly one of a URL and a local command, so a target with
/// both, or with neither, cannot be built.
#[derive(Clone, PartialEq, Eq)]
pub enum Endpoint {
    /// `url:` (http or https, no fragment; may carry secrets: log it with [`redact_url`]), and
    /// the HTTP transport to speak there.
    Http {
        url: url::Url,
        transport: HttpTransportKind,
    },
    /// `command:`: a program started by the exporter, spoken to over its stdin and stdout.
    Command(CommandSpec),
}

impl Endpoint {
    /// An HTTP endpoint with the default transport (`auto`).
    pub fn http(url: url::Url) -> Endpoint {
        Endpoint::Http {
            url,
            transport: HttpTransportKind::Auto,
        }
    }
}

/// Without secrets, for logs, the status page and `--config.check`: the URL through
/// [`redact_url`] and its transport unless `auto`; for a command, the program and how many
/// arguments it gets (not the arguments, nor the environment).
impl fmt::Display for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Endpoint::Http { url, transport } => {
                f.write_str(&redact_url(url))?;
                if *transport != HttpTransportKind::Auto {
                    write!(f, " (transport {transport})")?;
                }
                Ok(())
            }
            Endpoint::Command(c) => {
                write!(f, "command {}", c.command.display())?;
                match c.args.len() {
                    0 => Ok(()),
                    1 => f.write_str(" (1 argument)"),
                    n => write!(f, " ({n} arguments)"),
                }
            }
        }
    }
}

impl fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Endpoint::Http { url, transport } => f
                .debug_struct("Http")
                .field("url", &redact_url(url))
                .field("transport", transport)
                .finish(),
            Endpoint::Command(c) => f.debug_tuple("Command").field(c).finish(),
        }
    }
}

/// The `transport` setting of a URL target (also `check --transport`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, clap::ValueEnum)]
#[value(rename_all = "snake_case")]
pub enum HttpTransportKind {
    /// Streamable HTTP first; the HTTP+SSE transport of 2024-11-05 where the spec's
    /// backwards-compatibility rule says the server speaks only that.
    #[default]
    Auto,
    /// Streamable HTTP only.
    StreamableHttp,
    /// The HTTP+SSE transport (2024-11-05): the URL is the SSE (GET) endpoint.
    Sse,
}

impl HttpTransportKind {
    /// The spelling used in the configuration file.
    pub fn as_str(self) -> &'static str {
        match self {
            HttpTransportKind::Auto => "auto",
            HttpTransportKind::StreamableHttp => "streamable_http",
            HttpTransportKind::Sse => "sse",
        }
    }
}

impl fmt::Display for HttpTransportKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A local MCP server started by the exporter (the stdio transport). No shell is involved:
/// `command` is executed with `args` as they are. `Debug` redacts the `env` values.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandSpec {
    /// The program: a path (relative ones resolved against the configuration file's directory),
    /// or a bare name looked up in `PATH` when it is started.
    pub command: PathBuf,
    /// Arguments, passed as they are (no `${VAR}` expansion, no shell splitting).
    pub args: Vec<String>,
    /// Variables set for the program in addition to the exporter's own environment, in file
    /// order; values may come from `${VAR}` and are secrets.
    pub env: Vec<(String, Secret)>,
    /// The working directory (absolute: a relative one is resolved against the configuration
    /// file's directory); `None`: the exporter's own.
    pub cwd: Option<PathBuf>,
}

/// The `protocol_version` setting of a target.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum ProtocolChoice {
    /// Offer the newest version this build supports and accept what the server answers.
    #[default]
    Auto,
    /// Offer this version.
    Pinned(ProtocolVersion),
}

impl ProtocolChoice {
    /// The spelling used in the configuration file: `auto`, `2025-11-25`, ...
    pub fn as_str(&self) -> &'static str {
        match self {
            ProtocolChoice::Auto => "auto",
            ProtocolChoice::Pinned(v) => v.as_str(),
        }
    }

    /// The pinned version; `None` for `auto` (the newest era the server serves, detected).
    pub fn pinned(&self) -> Option<ProtocolVersion> {
        match self {
            ProtocolChoice::Auto => None,
            ProtocolChoice::Pinned(v) => Some(*v),
        }
    }
}

impl fmt::Display for ProtocolChoice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use crate::config::test_support::*;

    #[test]
    fn debug_output_redacts_secrets() {
        let c = ok(&format!(
            "targets:\n  - name: kb\n    url: 'https://probe:{SENTINEL}@kb.example.com/mcp?key=${{QUERY_KEY}}'\n    headers:\n      Authorization: Bearer ${{KB_TOKEN}}\n      X-Literal: {SENTINEL}\n"
        ));
        let t = &c.targets[0];
        assert_eq!(t.url().unwrap().query(), Some("key=s3cr3t-token"));
        for shown in [format!("{t:?}"), format!("{c:?}"), format!("{t:#?}")] {
            assert!(!shown.contains(SENTINEL), "{shown}");
            assert_has(&shown, "<redacted>");
            assert_has(
                &shown,
                "https://probe:<redacted>@kb.example.com/mcp?<redacted>",
            );
            assert_has(&shown, "Authorization");
        }
    }
}

/// The settings every target of one source gets: a [`TargetConfig`] whose name and URL are
/// placeholders, replaced by [`TargetTemplate::instantiate`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TargetTemplate(pub(super) TargetConfig);

impl TargetTemplate {
    /// The target called `name` at `url` (checked by the caller with
    /// [`crate::config::parse_target_url`]) with `labels` over the template's own `labels`.
    pub fn instantiate(&self, name: String, url: url::Url, labels: Labels) -> TargetConfig {
        let mut t = self.0.clone();
        t.name = name;
        if let Endpoint::Http { url: u, .. } = &mut t.endpoint {
            *u = url;
        }
        t.labels.extend(labels);
        t
    }

    /// The template's own labels (a discovered label of the same name replaces one).
    pub fn labels(&self) -> &Labels {
        &self.0.labels
    }
}

/// One `file_sd_configs` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileSdConfig {
    /// Unique among all sources; the `config` label of the discovery series.
    pub name: String,
    /// Paths, absolute; `*` and `?` may appear in the last component.
    pub files: Vec<PathBuf>,
    pub refresh_interval: Duration,
    pub template: TargetTemplate,
}

/// One `http_sd_configs` entry. `Debug` redacts the URL.
#[derive(Clone, PartialEq, Eq)]
pub struct HttpSdConfig {
    pub name: String,
    /// Returns JSON target groups; may carry secrets: log it with [`redact_url`].
    pub url: url::Url,
    pub refresh_interval: Duration,
    /// Deadline of one request, answer included.
    pub timeout: Duration,
    /// Larger answers are refused (and the last good targets kept).
    pub max_response_bytes: usize,
    /// Credentials, TLS and proxy of the discovery request.
    pub http: HttpClientConfig,
    pub template: TargetTemplate,
}

impl fmt::Debug for HttpSdConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HttpSdConfig")
            .field("name", &self.name)
            .field("url", &redact_url(&self.url))
            .field("refresh_interval", &self.refresh_interval)
            .field("timeout", &self.timeout)
            .field("max_response_bytes", &self.max_response_bytes)
            .field("http", &self.http)
            .field("template", &self.template)
            .finish()
    }
}
