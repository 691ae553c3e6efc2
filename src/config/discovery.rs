//! `file_sd_configs` and `http_sd_configs`: where discovered targets come from, and the settings
//! every target they find gets.
//!
//! A discovered target is only a URL and labels; everything else a static target sets
//! (connections, intervals, headers, `http_config` blocks, probes …) comes from the source's
//! `target:` template, validated here once with the same code as a static target. So a discovery
//! refresh never meets a configuration error it could only report late: instantiating the
//! template with a checked URL and checked labels cannot fail.

use super::HttpClientConfig;
use super::error::ConfigError;
use super::labels::{self, Labels};
use super::model::{Defaults, FileSdConfig, HttpSdConfig, TargetTemplate};
use super::raw::{RawBytes, RawFileSd, RawHttpSd, RawTarget, parse_bytes};
use super::validator::Validator;
use std::path::PathBuf;
use std::time::Duration;

/// `refresh_interval` of a file source when not set: a full re-read this often, besides the
/// change check (Prometheus' default).
pub const DEFAULT_FILE_REFRESH: Duration = Duration::from_secs(300);
/// `refresh_interval` of an HTTP source when not set (Prometheus' default).
pub const DEFAULT_HTTP_REFRESH: Duration = Duration::from_secs(60);
/// `timeout` of an HTTP source's request when not set.
pub const DEFAULT_HTTP_TIMEOUT: Duration = Duration::from_secs(10);
/// `max_response_bytes` of an HTTP source when not set.
pub const DEFAULT_MAX_RESPONSE_BYTES: usize = 8 * 1024 * 1024;
const MIN_RESPONSE_BYTES: u64 = 1024;
const MAX_RESPONSE_BYTES: u64 = 64 * 1024 * 1024;
/// Most `files` patterns of one file source.
pub const MAX_FILE_PATTERNS: usize = 64;
/// Most sources of each kind.
pub const MAX_SD_CONFIGS: usize = 64;
/// The name a template is validated under (it has none of its own).
const TEMPLATE_NAME: &str = "discovered";
/// The URL a template is validated with; each discovered target brings its own.
const TEMPLATE_URL: &str = "http://discovered.invalid/mcp";

impl Validator<'_> {
    pub(super) fn file_sd(
        &self,
        index: usize,
        raw: RawFileSd,
        global: &Defaults,
        inherited_timeout: Duration,
    ) -> Result<FileSdConfig, ConfigError> {
        let p = format!("file_sd_configs[{index}]");
        let name = self.sd_name(&p, raw.name)?;
        let field = format!("{p}.files");
        let patterns = raw.files.unwrap_or_default();
        if patterns.is_empty() {
            return Err(self.err(
                field,
                "required: at least one file (.json, .yml or .yaml; '*' allowed in the file name)",
            ));
        }
        if patterns.len() > MAX_FILE_PATTERNS {
            return Err(self.err(field, format!("at most {MAX_FILE_PATTERNS} patterns")));
        }
        let files = patterns
            .iter()
            .enumerate()
            .map(|(i, f)| self.sd_file(&format!("{field}[{i}]"), f))
            .collect::<Result<_, _>>()?;
        Ok(FileSdConfig {
            name,
            files,
            refresh_interval: self
                .duration(&p, "refresh_interval", raw.refresh_interval)?
                .unwrap_or(DEFAULT_FILE_REFRESH),
            template: self.template(&p, raw.target, global, inherited_timeout)?,
        })
    }

    pub(super) fn http_sd(
        &self,
        index: usize,
        mut raw: RawHttpSd,
        global: &Defaults,
        inherited_timeout: Duration,
    ) -> Result<HttpSdConfig, ConfigError> {
        let p = format!("http_sd_configs[{index}]");
        let name = self.sd_name(&p, raw.name.take())?;
        let Some(url) = raw.url.take() else {
            return Err(self.err(
                format!("{p}.url"),
                "required: the URL that returns the target groups as JSON",
            ));
        };
        let url = self.url(&p, &url)?;
        let refresh_interval = self
            .duration(&p, "refresh_interval", raw.refresh_interval.take())?
            .unwrap_or(DEFAULT_HTTP_REFRESH);
        let timeout = self
            .duration(&p, "timeout", raw.timeout.take())?
            .unwrap_or(DEFAULT_HTTP_TIMEOUT.min(refresh_interval));
        if timeout > refresh_interval {
            return Err(self.err(
                format!("{p}.timeout"),
                "longer than refresh_interval: a request must end before the next is due",
            ));
        }
        let max_response_bytes = match raw.max_response_bytes.take() {
            None => DEFAULT_MAX_RESPONSE_BYTES,
            Some(b) => self.response_bytes(&p, b)?,
        };
        let who = format!("http_sd_configs {name:?}");
        let http = self
            .http_blocks(&p, &who, raw.take_http())?
            .over(&HttpClientConfig::default());
        Ok(HttpSdConfig {
            name,
            url,
            refresh_interval,
            timeout,
            max_response_bytes,
            http,
            template: self.template(&p, raw.target.take(), global, inherited_timeout)?,
        })
    }

    fn response_bytes(&self, p: &str, raw: RawBytes) -> Result<usize, ConfigError> {
        let field = format!("{p}.max_response_bytes");
        let n = match raw {
            RawBytes::Number(n) => u64::try_from(n).ok(),
            RawBytes::Text(t) => parse_bytes(&t),
        }
        .filter(|n| (MIN_RESPONSE_BYTES..=MAX_RESPONSE_BYTES).contains(n))
        .ok_or_else(|| self.err(field, "must be a size between 1KiB and 64MiB"))?;
        Ok(usize::try_from(n).expect("checked range"))
    }

    /// A source's `name`, default its place in the file.
    fn sd_name(&self, p: &str, raw: Option<String>) -> Result<String, ConfigError> {
        match raw {
            None => Ok(p.to_string()),
            Some(n) => self.name(p, Some(n)),
        }
    }

    /// One `files` pattern: a .json, .yml or .yaml name; wildcards only in the last component
    /// (the directory is watched, not searched).
    fn sd_file(&self, field: &str, raw: &str) -> Result<PathBuf, ConfigError> {
        let path = PathBuf::from(raw);
        let file = path.file_name().and_then(|f| f.to_str()).unwrap_or("");
        if !(file.ends_with(".json") || file.ends_with(".yml") || file.ends_with(".yaml")) {
            return Err(self.err(
                field,
                "the file name must end in .json, .yml or .yaml (it says how the file is read)",
            ));
        }
        let dir = path
            .parent()
            .map(|d| d.to_string_lossy())
            .unwrap_or_default();
        if dir.contains(['*', '?', '[']) {
            return Err(self.err(
                field,
                "wildcards ('*', '?') are allowed in the file name only, not in directories",
            ));
        }
        if file.contains('[') {
            return Err(self.err(field, "'[' classes are not supported; use '*' or '?'"));
        }
        Ok(match self.base_dir {
            Some(base) if path.is_relative() => base.join(path),
            _ => path,
        })
    }

    /// The `target:` template of a source: a static target's keys without `name` and `url`
    /// (which discovery provides) and without the `command` keys (only URLs are discovered).
    fn template(
        &self,
        p: &str,
        raw: Option<RawTarget>,
        global: &Defaults,
        inherited_timeout: Duration,
    ) -> Result<TargetTemplate, ConfigError> {
        let p = format!("{p}.target");
        let mut raw = raw.unwrap_or_default();
        let set = [
            ("name", raw.name.is_some(), "discovery names each target"),
            (
                "url",
                raw.url.is_some(),
                "discovery gives each target's URL",
            ),
            (
                "command",
                raw.command.is_some(),
                "only URL targets are discovered",
            ),
            (
                "args",
                raw.args.is_some(),
                "only URL targets are discovered",
            ),
            ("env", raw.env.is_some(), "only URL targets are discovered"),
            ("cwd", raw.cwd.is_some(), "only URL targets are discovered"),
        ];
        if let Some((key, _, why)) = set.iter().find(|(_, on, _)| *on) {
            return Err(self.err(
                format!("{p}.{key}"),
                format!("not allowed in a discovery template: {why}"),
            ));
        }
        raw.name = Some(TEMPLATE_NAME.into());
        raw.url = Some(TEMPLATE_URL.into());
        self.target(&p, raw, global, inherited_timeout)
            .map(TargetTemplate)
    }

    /// `labels` of a target (static or template).
    pub(super) fn labels(
        &self,
        p: &str,
        raw: Option<super::raw::PairList<super::raw::LabelNames>>,
    ) -> Result<Labels, ConfigError> {
        let Some(raw) = raw else {
            return Ok(Labels::new());
        };
        labels::collect(raw.0.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .map_err(|why| self.err(format!("{p}.labels"), why))
    }
}

#[cfg(test)]
mod tests {
    use crate::config::test_support::*;

    #[test]
    fn a_file_source_gets_defaults_and_a_template() {
        let c = ok("file_sd_configs:
  - files: [targets/*.yml, /etc/mcp/fleet.json]
    target:
      connections: 2
      audit_interval: 1m
      labels: {tier: gold}
");
        let f = &c.file_sd[0];
        assert_eq!(f.name, "file_sd_configs[0]");
        assert_eq!(f.refresh_interval, s(300));
        assert_eq!(f.files[0], std::path::Path::new("targets/*.yml"));
        assert_eq!(f.files[1], std::path::Path::new("/etc/mcp/fleet.json"));
        let t = f.template.instantiate(
            "kb".into(),
            url::Url::parse("http://kb.example/mcp").unwrap(),
            [("team".to_string(), "x".to_string())].into(),
        );
        assert_eq!((t.name.as_str(), t.settings.connections), ("kb", 2));
        assert_eq!(t.settings.audit_interval, s(60));
        assert_eq!(t.url().unwrap().as_str(), "http://kb.example/mcp");
        assert_eq!(t.labels.len(), 2);
    }

    #[test]
    fn an_http_source_has_its_own_http_blocks_and_bounds() {
        let c = ok("http_sd_configs:
  - name: registry
    url: https://registry.example/mcp-targets
    authorization: {credentials: abc}
    max_response_bytes: 64KiB
    target:
      basic_auth: {username: u, password: p}
");
        let h = &c.http_sd[0];
        assert_eq!(h.name, "registry");
        assert_eq!(h.refresh_interval, s(60));
        assert_eq!(h.timeout, s(10));
        assert_eq!(h.max_response_bytes, 64 * 1024);
        assert_ne!(h.http.auth, crate::config::TargetAuth::None);
        assert!(!format!("{h:?}").is_empty());
    }

    #[test]
    fn mistakes_name_the_field() {
        for (text, want) in [
            (
                "file_sd_configs:\n  - refresh_interval: 1m\n",
                "file_sd_configs[0].files: required",
            ),
            (
                "file_sd_configs:\n  - files: [a.txt]\n",
                "file_sd_configs[0].files[0]: the file name must end in .json",
            ),
            (
                "file_sd_configs:\n  - files: ['*/a.yml']\n",
                "file_sd_configs[0].files[0]: wildcards",
            ),
            (
                "file_sd_configs:\n  - files: [a.yml]\n    target: {url: 'http://x/'}\n",
                "file_sd_configs[0].target.url: not allowed in a discovery template",
            ),
            (
                "file_sd_configs:\n  - files: [a.yml]\n    target: {command: x}\n",
                "file_sd_configs[0].target.command: not allowed",
            ),
            (
                "file_sd_configs:\n  - files: [a.yml]\n    target: {labels: {target: x}}\n",
                "file_sd_configs[0].target.labels: label name \"target\" is reserved",
            ),
            (
                "http_sd_configs:\n  - refresh_interval: 1m\n",
                "http_sd_configs[0].url: required",
            ),
            (
                "http_sd_configs:\n  - url: 'http://r/'\n    refresh_interval: 5s\n    timeout: 10s\n",
                "http_sd_configs[0].timeout: longer than refresh_interval",
            ),
            (
                "http_sd_configs:\n  - url: 'http://r/'\n    max_response_bytes: 10\n",
                "http_sd_configs[0].max_response_bytes: must be a size",
            ),
            (
                "file_sd_configs:\n  - {name: a, files: [a.yml]}\nhttp_sd_configs:\n  - {name: a, url: 'http://r/'}\n",
                "http_sd_configs[0].name: duplicate source name \"a\"",
            ),
            (
                "targets:\n  - {name: a, url: 'http://r/', labels: {__x: y}}\n",
                "targets[0].labels: label name \"__x\" starts with '__'",
            ),
        ] {
            assert_has(&err(text), want);
        }
    }

    #[test]
    fn static_targets_carry_labels() {
        let c = ok("targets:\n  - {name: a, url: 'http://r/', labels: {team: search, tier: ''}}\n");
        assert_eq!(
            c.targets[0].labels,
            [("team".to_string(), "search".to_string())].into()
        );
    }
}
