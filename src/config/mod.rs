//! The exporter's configuration file: parsing, validation and defaults.
//!
//! The configuration is deliberately strict. A reload (`POST /-/reload`, SIGHUP) replaces a
//! configuration that is working *now*, so a mistake in the new file — a misspelt key, a
//! target name used twice, a token variable that is not set in this environment, a timeout
//! longer than the interval it belongs to — must be caught here, before the swap, and not
//! show up later as a silently ignored setting or a probe that can never succeed. Hence:
//!
//! * unknown keys anywhere are errors, reported with file, line and column;
//! * every value is checked against its limits, and every error names the field by its
//!   path (`targets[1].headers.Authorization`) so `--config.check` output is actionable;
//! * everything is resolved up front: global defaults are applied to every target,
//!   `${VAR}` references are expanded and `header_files` are read, so the rest of the
//!   exporter only ever sees complete, valid [`TargetConfig`]s;
//! * secrets (header values, URL passwords and query strings) never appear in an error
//!   message or in `Debug` output; see [`Secret`] and [`redact_url`].
//!
//! The file format is documented in `docs/configuration.md`; `example.yml` is a full example.
//!
//! One job a module:
//!
//! * `model`: the validated types the rest of the exporter reads (`Config`, `TargetConfig` …);
//! * `raw`: the file as written, as serde reads it;
//! * `validate`: raw → model, every error naming file, field and why;
//! * `settings`: the settings a target may override from `global`, one rule each for both levels;
//! * `endpoint`: where a target is: `url` (and its `transport`) or `command`, `args`, `env`, `cwd`;
//! * `http_blocks`: validates the `http_config` blocks (credentials, TLS, proxy) in Prometheus'
//!   shape into `net::http_config`'s types, reading every file they name;
//! * `headers`: the rules for configured request headers (also `--header`);
//! * `expand`: `${VAR}` expansion;
//! * `discovery`: `file_sd_configs` and `http_sd_configs`, and the template of their targets;
//! * `labels`: the rules for a target's `labels` (static or discovered);
//! * `proxy`: `proxies:`, the passive mode's reverse proxies;
//! * `probes`, `limits`, `error`: functional probes, bounds checked before parsing, and the error
//!   type. Values kept out of logs are `mcp_client::secret`'s.

mod discovery;
mod endpoint;
mod error;
mod expand;
mod headers;
mod http_blocks;
mod labels;
mod limits;
mod model;
mod probes;
mod proxy;
mod raw;
mod settings;
#[cfg(test)]
mod test_support;
mod validate;
mod validator;

pub use discovery::{DEFAULT_FILE_REFRESH, DEFAULT_HTTP_REFRESH};
pub use endpoint::parse_target_url;
pub use error::ConfigError;
pub use headers::{HttpFlags, header_flag};
pub use labels::{Labels, MAX_LABEL_VALUE_BYTES, MAX_LABELS, collect as collect_labels};
pub use limits::{
    MAX_COMMAND_ARG_BYTES, MAX_COMMAND_ARGS, MAX_COMMAND_ENV, MAX_COMMAND_ENV_BYTES,
    MAX_CONFIG_BYTES, MAX_NESTING_DEPTH, MAX_TOTAL_CONNECTIONS,
};
pub use mcp_client::net::http_config::{
    ClientAuth, ClientCert, HttpClientConfig, IdleTimeout, JwtAlgorithm, JwtKey, OAuth2Config,
    PemSource, ProxyConfig, SecretSource, TargetAuth, TlsConfig, TlsVersion,
};
pub use mcp_client::secret::{Secret, redact_url};
pub use model::{
    CommandSpec, Config, DEFAULT_MAX_LISTING_BYTES, Defaults, Endpoint, FileSdConfig, HttpSdConfig,
    HttpTransportKind, ProtocolChoice, TargetConfig, TargetSettings, TargetTemplate,
};
pub use probes::{Expect, MAX_PROBES, ProbeConfig, valid_tool_name};
pub use proxy::{
    ClientLabel, DEFAULT_PROXY_LISTEN, MAX_CLIENT_LABEL_BYTES, McpProxyConfig, ProxyFlags,
    from_flags as proxy_from_flags, parse_listen as parse_proxy_listen, safe_label,
};
pub use raw::parse_bytes;
pub use settings::listing_bytes;
pub use validate::{load_http_config, parse_http_config};
