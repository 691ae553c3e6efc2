//! From the file as written (`raw`) to the validated model (`model`).
//!
//! All checks happen before a configuration is used, so a reload can refuse a bad file and keep
//! the working one. Each check names the field by its path (`targets[1].request_timeout`) and
//! says why, and combinations (a timeout longer than its interval) say where each value came
//! from: set here, inherited from `global`, or the built-in default.

use super::HttpClientConfig;
use super::discovery::MAX_SD_CONFIGS;
use super::error::{ConfigError, ErrorKind};
use super::headers::header_names;
use super::limits::{MAX_CONFIG_BYTES, MAX_TOTAL_CONNECTIONS};
use super::model::{
    Config, Defaults, Endpoint, FileSdConfig, HttpSdConfig, ProtocolChoice, TargetConfig,
};
use super::raw::{RawConfig, RawFileSd, RawGlobal, RawHttp, RawHttpSd, RawTarget};
use super::settings::Origin;
use super::validator::Validator;
use mcp_client::mcp::version::{self, ProtocolVersion};
use std::collections::HashMap;
use std::io::Read;
use std::path::Path;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

impl Config {
    /// Reads and validates the file at `path`, expanding `${VAR}` from the process
    /// environment. Relative `header_files` paths are resolved against the file's directory.
    /// Reads at most [`MAX_CONFIG_BYTES`] (plus one, to tell a larger file).
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let text = read_config_file(path)?;
        let env = |name: &str| std::env::var(name).ok();
        parse_with_base(&text, &path.display().to_string(), path.parent(), &env)
    }

    /// Parses and validates `text`. `source` is the file name used in error messages (and
    /// its directory is the base for relative `header_files` paths); `env` looks up the
    /// variables referenced as `${VAR}`.
    pub fn parse(
        text: &str,
        source: &str,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Config, ConfigError> {
        parse_with_base(text, source, Path::new(source).parent(), env)
    }
}

/// The text of a configuration file, at most [`MAX_CONFIG_BYTES`] (plus one, to tell a larger
/// file), as UTF-8.
fn read_config_file(path: &Path) -> Result<String, ConfigError> {
    let file = path.display().to_string();
    let read_error = |err| ConfigError {
        file: file.clone(),
        kind: ErrorKind::Read(err),
    };
    let mut bytes = Vec::new();
    std::fs::File::open(path)
        .and_then(|f| f.take(MAX_CONFIG_BYTES as u64 + 1).read_to_end(&mut bytes))
        .map_err(read_error)?;
    ConfigError::check_size(&file, bytes.len())?;
    String::from_utf8(bytes).map_err(|_| {
        read_error(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            "stream did not contain valid UTF-8",
        ))
    })
}

/// A `check --http-config` file: the `http_config` blocks of one target at the top level,
/// validated by the same code as a target's (relative paths against the file's folder, `${VAR}`
/// from the process environment). Errors name the file.
pub fn load_http_config(path: &Path) -> Result<HttpClientConfig, ConfigError> {
    let text = read_config_file(path)?;
    let env = |name: &str| std::env::var(name).ok();
    parse_http_config(&text, &path.display().to_string(), path.parent(), &env)
}

/// [`load_http_config`] of `text`; `source` names it in errors.
pub fn parse_http_config(
    text: &str,
    source: &str,
    base_dir: Option<&Path>,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<HttpClientConfig, ConfigError> {
    ConfigError::check_nesting(source, text)?;
    let raw: Option<RawHttp> =
        yaml_serde::from_str(text).map_err(|err| ConfigError::yaml(source, &err))?;
    let v = Validator {
        file: source,
        base_dir,
        env,
    };
    Ok(
        v.http_blocks("", "the http config", raw.unwrap_or_default())?
            .over(&HttpClientConfig::default()),
    )
}

fn parse_with_base(
    text: &str,
    source: &str,
    base_dir: Option<&Path>,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Config, ConfigError> {
    // Bounded before the parser sees the text: its cost grows with the nesting depth.
    ConfigError::check_size(source, text.len())?;
    ConfigError::check_nesting(source, text)?;
    // `Option` so that an empty document (or a bare `null`) is an empty configuration.
    let raw: Option<RawConfig> =
        yaml_serde::from_str(text).map_err(|err| ConfigError::yaml(source, &err))?;
    let Some(raw) = raw else {
        return Ok(Config::default());
    };
    let v = Validator {
        file: source,
        base_dir,
        env,
    };
    let (global, inherited_timeout) = v.global(raw.global)?;
    let mut targets = Vec::new();
    let mut first_use: HashMap<String, usize> = HashMap::new();
    let mut connections: u32 = 0;
    for (index, raw_target) in raw.targets.unwrap_or_default().into_iter().enumerate() {
        let p = format!("targets[{index}]");
        let target = v.target(&p, raw_target, &global, inherited_timeout)?;
        connections += u32::from(target.settings.connections);
        if connections > MAX_TOTAL_CONNECTIONS {
            return Err(v.err(
                format!("targets[{index}].connections"),
                format!(
                    "targets[0] to targets[{index}] open {connections} connections in total; \
                     one exporter runs at most {MAX_TOTAL_CONNECTIONS} (the sum of `connections` \
                     over all targets): split the targets over more exporters"
                ),
            ));
        }
        if let Some(first) = first_use.get(&target.name) {
            return Err(v.err(
                format!("targets[{index}].name"),
                format!(
                    "duplicate target name {:?} (first used by targets[{first}])",
                    target.name
                ),
            ));
        }
        first_use.insert(target.name.clone(), index);
        targets.push(Arc::new(target));
    }
    let (file_sd, http_sd) = v.sd_configs(
        raw.file_sd_configs.unwrap_or_default(),
        raw.http_sd_configs.unwrap_or_default(),
        &global,
        inherited_timeout,
    )?;
    let proxies = super::proxy::validate(&v, raw.proxies.unwrap_or_default())?;
    Ok(Config {
        global,
        targets,
        file_sd,
        http_sd,
        proxies,
    })
}

impl Validator<'_> {
    /// The `global` section, and the request timeout a target inherits when it sets none:
    /// the one written in `global`, else the built-in default (not lowered to the global
    /// intervals, which a target may override).
    fn global(&self, raw: Option<RawGlobal>) -> Result<(Defaults, Duration), ConfigError> {
        let d = Defaults::default();
        let Some(mut raw) = raw else {
            let inherited = d.settings.request_timeout;
            return Ok((d, inherited));
        };
        let p = "global";
        let http = self
            .http_blocks(p, "global", raw.take_http())?
            .over(&HttpClientConfig::default());
        let (settings, inherited) = self.settings(
            p,
            raw.take_settings(),
            &d.settings,
            Origin::Default,
            d.settings.request_timeout,
        )?;
        let g = Defaults { settings, http };
        Ok((g, inherited))
    }

    /// The discovery sources; their names are unique across both kinds (they label the
    /// discovery series).
    fn sd_configs(
        &self,
        file: Vec<RawFileSd>,
        http: Vec<RawHttpSd>,
        global: &Defaults,
        inherited_timeout: Duration,
    ) -> Result<(Vec<FileSdConfig>, Vec<HttpSdConfig>), ConfigError> {
        for (key, n) in [
            ("file_sd_configs", file.len()),
            ("http_sd_configs", http.len()),
        ] {
            if n > MAX_SD_CONFIGS {
                return Err(self.err(key, format!("at most {MAX_SD_CONFIGS} sources")));
            }
        }
        let mut names: HashMap<String, String> = HashMap::new();
        let mut unique = |p: String, name: &str| match names.get(name) {
            Some(first) => Err(self.err(
                format!("{p}.name"),
                format!("duplicate source name {name:?} (first used by {first})"),
            )),
            None => {
                names.insert(name.to_string(), p);
                Ok(())
            }
        };
        let mut files = Vec::with_capacity(file.len());
        for (i, raw) in file.into_iter().enumerate() {
            let f = self.file_sd(i, raw, global, inherited_timeout)?;
            unique(format!("file_sd_configs[{i}]"), &f.name)?;
            files.push(f);
        }
        let mut https = Vec::with_capacity(http.len());
        for (i, raw) in http.into_iter().enumerate() {
            let h = self.http_sd(i, raw, global, inherited_timeout)?;
            unique(format!("http_sd_configs[{i}]"), &h.name)?;
            https.push(h);
        }
        Ok((files, https))
    }

    /// The target at field path `p` (`targets[3]`, or a discovery template).
    pub(super) fn target(
        &self,
        p: &str,
        mut raw: RawTarget,
        global: &Defaults,
        inherited_timeout: Duration,
    ) -> Result<TargetConfig, ConfigError> {
        let name = self.name(p, raw.name.take())?;
        let endpoint = self.endpoint(p, &name, &mut raw)?;
        let http = match &endpoint {
            Endpoint::Http { .. } => {
                let who = format!("target {name:?}");
                let own = self.http_blocks(p, &who, raw.take_http())?;
                let own_auth = own.auth.as_ref().map(|(_, block)| *block);
                let http = own.over(&global.http);
                let names = header_names(p, &raw.headers, &raw.header_files);
                self.no_authorization_header(&who, &names, &http, own_auth)?;
                if let Endpoint::Http { url, .. } = &endpoint {
                    self.no_user_info(&format!("{p}.url"), &who, url, &http)?;
                }
                http
            }
            Endpoint::Command(_) => HttpClientConfig::default(),
        };
        let protocol_version = self.protocol_version(p, raw.protocol_version.take())?;

        let (settings, _) = self.settings(
            p,
            raw.take_settings(),
            &global.settings,
            Origin::Global,
            inherited_timeout,
        )?;
        let headers = self.headers(p, raw.headers, raw.header_files)?;
        let probes = self.probes(p, raw.probes)?;
        let labels = self.labels(p, raw.labels)?;
        let pins = self.pins(p, raw.pins)?;
        Ok(TargetConfig {
            name,
            endpoint,
            protocol_version,
            headers,
            settings,
            probes,
            http,
            labels,
            pins,
        })
    }

    /// `pins:`: a file, resolved against the configuration's folder, that must parse now (a
    /// broken one refuses the load, so a reload keeps the running pins).
    fn pins(&self, p: &str, raw: Option<String>) -> Result<Option<PathBuf>, ConfigError> {
        let Some(raw) = raw else { return Ok(None) };
        if raw.trim().is_empty() {
            return Err(self.err(format!("{p}.pins"), "an empty path"));
        }
        let path = PathBuf::from(raw.trim());
        let path = match self.base_dir {
            Some(base) if path.is_relative() => base.join(path),
            _ => path,
        };
        mcp_client::listing::changes::pins::Pins::load(&path)
            .map_err(|e| self.err(format!("{p}.pins"), e))?;
        Ok(Some(path))
    }

    fn protocol_version(
        &self,
        p: &str,
        raw: Option<String>,
    ) -> Result<ProtocolChoice, ConfigError> {
        let Some(raw) = raw else {
            return Ok(ProtocolChoice::Auto);
        };
        if raw == "auto" {
            return Ok(ProtocolChoice::Auto);
        }
        if let Some(v) = ProtocolVersion::parse(&raw) {
            return Ok(ProtocolChoice::Pinned(v));
        }
        let field = format!("{p}.protocol_version");
        if let Some((_, why)) = version::NOT_YET.iter().find(|(v, _)| *v == raw) {
            return Err(self.err(field, format!("protocol_version {why}")));
        }
        Err(self.err(
            field,
            format!(
                "unknown protocol_version {raw:?}; allowed values: auto, {}",
                ProtocolVersion::list()
            ),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::test_support::*;
    use crate::config::*;
    use mcp_client::listing::list::{List, ListSet};

    #[test]
    fn defaults_match_the_documented_values() {
        let d = Defaults::default();
        assert_eq!(d.settings.audit_interval, s(30));
        assert_eq!(d.settings.ping_interval, s(15));
        assert_eq!(d.settings.request_timeout, s(10));
        assert_eq!(d.settings.notification_grace, s(5));
        assert_eq!(d.settings.max_pages, 64);
        assert_eq!(d.settings.connections, 1);
    }

    #[test]
    fn empty_documents_are_empty_configs() {
        for text in [
            "",
            "\n",
            "# nothing here\n",
            "---\n",
            "null\n",
            "~",
            "targets:\n",
            "targets: []\n",
            "global:\n",
        ] {
            assert_eq!(ok(text), Config::default(), "{text:?}");
        }
    }

    #[test]
    fn zero_targets_with_globals_is_valid() {
        let c = ok("global:\n  max_pages: 5\n  connections: 3\n");
        assert!(c.targets.is_empty());
        assert_eq!(c.global.settings.max_pages, 5);
        assert_eq!(c.global.settings.connections, 3);
        assert_eq!(c.global.settings.audit_interval, s(30));
    }

    #[test]
    fn minimal_target_gets_global_defaults() {
        let c = ok(&one_target(""));
        assert_eq!(c.global, Defaults::default());
        assert_eq!(
            c.targets,
            vec![Arc::new(TargetConfig {
                name: "kb".into(),
                endpoint: Endpoint::http(url::Url::parse("https://kb.example.com/mcp").unwrap()),
                protocol_version: ProtocolChoice::Auto,
                headers: vec![],
                settings: TargetSettings::default(),
                probes: vec![],
                http: HttpClientConfig::default(),
                labels: Default::default(),
                pins: None,
            })]
        );
    }

    #[test]
    fn legacy_clients_is_on_by_default_and_overridable() {
        let c = ok("global:
  legacy_clients: false
targets:
  - name: a
    url: http://a.example/mcp
  - name: b
    url: http://b.example/mcp
    legacy_clients: true
");
        assert!(Defaults::default().settings.legacy_clients);
        assert!(!c.targets[0].settings.legacy_clients, "from global");
        assert!(c.targets[1].settings.legacy_clients, "the target's own");
        let e = err(&one_target("    legacy_clients: sometimes\n"));
        assert!(e.contains("legacy_clients"), "{e}");
    }

    #[test]
    fn lists_default_to_every_list_and_always_hold_the_tools() {
        let c = ok("global:
  lists: [prompts]
targets:
  - name: a
    url: http://a.example/mcp
  - name: b
    url: http://b.example/mcp
    lists: []
  - name: c
    url: http://c.example/mcp
    lists: [resources, resource_templates, tools]
");
        assert_eq!(Defaults::default().settings.lists, ListSet::ALL);
        let lists = |i: usize| c.targets[i].settings.lists.iter().collect::<Vec<_>>();
        assert_eq!(lists(0), [List::Tools, List::Prompts], "from global");
        assert_eq!(lists(1), [List::Tools], "the tool list is always watched");
        assert_eq!(
            lists(2),
            [List::Tools, List::Resources, List::ResourceTemplates]
        );
        let e = err(&one_target("    lists: [tools, templates]\n"));
        assert!(
            e.contains("targets[0].lists[1]: unknown list \"templates\"")
                && e.contains("`resource_templates`"),
            "{e}"
        );
    }

    #[test]
    fn globals_apply_and_targets_override_them() {
        let c = ok("global:
  audit_interval: 1m
  ping_interval: 20s
  request_timeout: 5s
  notification_grace: 2s
  max_pages: 10
  connections: 2
  idle_connection_timeout: 90s
targets:
  - name: a
    url: http://a.example/mcp
  - name: b
    url: http://b.example/mcp
    idle_connection_timeout: 1s
    audit_interval: 2m
    ping_interval: 500ms
    request_timeout: 250ms
    notification_grace: 1m 30s
    max_pages: 10000
    connections: 16
");
        assert_eq!(c.global.settings.audit_interval, s(60));
        let a = &c.targets[0];
        assert_eq!(
            (
                a.settings.audit_interval,
                a.settings.ping_interval,
                a.settings.request_timeout,
                a.settings.notification_grace,
                a.settings.max_pages,
                a.settings.connections
            ),
            (s(60), s(20), s(5), s(2), 10, 2)
        );
        let b = &c.targets[1];
        assert_eq!(
            (
                b.settings.audit_interval,
                b.settings.ping_interval,
                b.settings.request_timeout,
                b.settings.notification_grace,
                b.settings.max_pages,
                b.settings.connections
            ),
            (
                s(120),
                Duration::from_millis(500),
                Duration::from_millis(250),
                s(90),
                10000,
                16
            )
        );
        // An http_config key, overridden like the blocks.
        let idle = |i: usize| c.targets[i].http.idle.get();
        assert_eq!((idle(0), idle(1)), (s(90), s(1)));
    }

    #[test]
    fn idle_connection_timeout_defaults_to_4s_and_is_checked() {
        use crate::config::IdleTimeout;
        assert_eq!(Defaults::default().http.idle, IdleTimeout::DEFAULT);
        assert_eq!(IdleTimeout::DEFAULT.get(), s(4));
        let e = err(&one_target("    idle_connection_timeout: 0s\n"));
        assert!(
            e.contains("targets[0].idle_connection_timeout: must be greater than 0"),
            "{e}"
        );
        let e = err("targets:
  - name: a
    command: server
    idle_connection_timeout: 10s
");
        assert!(
            e.contains("targets[0].idle_connection_timeout") && e.contains("`command`"),
            "{e}"
        );
        // At the top level of a `check --http-config` file the key is named alone.
        let env = |_: &str| None;
        let http = parse_http_config("idle_connection_timeout: 2m\n", "http.yml", None, &env);
        assert_eq!(http.unwrap().idle.get(), s(120));
        let e = parse_http_config("idle_connection_timeout: 25h\n", "http.yml", None, &env)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("http.yml") && e.contains(": idle_connection_timeout: \"25h\" is too long"),
            "{e}"
        );
    }

    #[test]
    fn targets_keep_file_order() {
        let c = ok("targets:
  - {name: z, url: 'http://z.example/'}
  - {name: a, url: 'http://a.example/'}
  - {name: m, url: 'http://m.example/'}
");
        let names: Vec<&str> = c.targets.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["z", "a", "m"]);
    }

    #[test]
    fn unknown_top_level_field() {
        let e = err("global: {}\ntargetz: []\n");
        assert_has(
            &e,
            "test.yml: line 2 column 1: unknown field `targetz`, expected one of `global`, `targets`, `file_sd_configs`, `http_sd_configs`",
        );
    }

    #[test]
    fn unknown_global_field() {
        let e = err("global:\n  audit_intervall: 30s\n");
        assert_has(
            &e,
            "test.yml: line 2 column 3: global: unknown field `audit_intervall`",
        );
    }

    #[test]
    fn unknown_target_field() {
        let e = err(&one_target("    header:\n      X: y\n"));
        assert_has(
            &e,
            "test.yml: line 4 column 5: targets[0]: unknown field `header`, expected one of",
        );
        let parsed = parse(&one_target("    header:\n      X: y\n")).unwrap_err();
        assert_eq!(parsed.location(), Some((4, 5)));
        assert_eq!(parsed.field(), None);
    }

    #[test]
    fn protocol_version_is_not_a_global_key() {
        let e = err("global:\n  protocol_version: auto\n");
        assert_has(
            &e,
            "line 2 column 3: global: unknown field `protocol_version`",
        );
    }

    #[test]
    fn yaml_syntax_error_has_line_and_column() {
        let e = err("targets:\n  - name: kb\n    url: https://x: y\n");
        assert_eq!(
            e,
            "test.yml: line 3 column 19: mapping values are not allowed in this context"
        );
        let e = err("targets:\n  - name: \"kb\n");
        assert_has(
            &e,
            "test.yml: line 3 column 1: found unexpected end of stream",
        );
    }

    #[test]
    fn wrong_types_name_the_field_and_line() {
        let e = err(&one_target("    max_pages: lots\n"));
        assert_has(
            &e,
            "test.yml: line 4 column 16: targets[0].max_pages: invalid type: string \"lots\", expected i64",
        );
        let e = err("targets:\n  name: kb\n");
        assert_has(
            &e,
            "line 2 column 3: targets: invalid type: map, expected a sequence",
        );
        let e = err("- name: kb\n");
        assert_has(
            &e,
            "line 1 column 1: invalid type: sequence, expected a mapping with the keys `global`, `targets`, `file_sd_configs`, `http_sd_configs` and `proxies`",
        );
        let e = err(&one_target("    headers:\n      X-Key: [a, b]\n"));
        assert_has(
            &e,
            "line 5 column 14: targets[0].headers.X-Key: invalid type: sequence, expected a string",
        );
        let e = err(&one_target("    headers: [a]\n"));
        assert_has(
            &e,
            "targets[0].headers: invalid type: sequence, expected a mapping of header names to strings",
        );
    }

    #[test]
    fn more_than_one_document_is_an_error() {
        let e = err("targets: []\n---\ntargets: []\n");
        assert_eq!(
            e,
            "test.yml: deserializing from YAML containing more than one document is not supported"
        );
    }

    #[test]
    fn repeated_key_is_an_error() {
        let e = err(&one_target("    url: https://other.example/mcp\n"));
        assert_has(&e, "targets[0]: duplicate field `url`");
    }

    #[test]
    fn name_is_required() {
        let e = err("targets:\n  - url: https://kb.example.com/mcp\n");
        assert_eq!(
            e,
            "test.yml: targets[0].name: required; every target needs a unique name (it becomes the `target` label)"
        );
        assert_eq!(
            parse("targets:\n  - url: https://kb.example.com/mcp\n")
                .unwrap_err()
                .field(),
            Some("targets[0].name")
        );
    }

    #[test]
    fn name_characters_and_length() {
        let e = err("targets:\n  - name: k b\n    url: https://kb.example.com/mcp\n");
        assert_eq!(
            e,
            "test.yml: targets[0].name: \"k b\" is not a valid target name; use only letters, digits, '_', '.' and '-'"
        );
        let e = err("targets:\n  - name: kb/1\n    url: https://kb.example.com/mcp\n");
        assert_has(&e, "\"kb/1\" is not a valid target name");
        let e = err("targets:\n  - name: ''\n    url: https://kb.example.com/mcp\n");
        assert_eq!(
            e,
            "test.yml: targets[0].name: target name must be 1 to 64 characters long (it is 0)"
        );
        let long = "a".repeat(65);
        let e = err(&format!(
            "targets:\n  - name: {long}\n    url: https://kb.example.com/mcp\n"
        ));
        assert_eq!(
            e,
            "test.yml: targets[0].name: target name must be 1 to 64 characters long (it is 65)"
        );
        let ok64 = "a".repeat(64);
        ok(&format!(
            "targets:\n  - name: {ok64}\n    url: https://kb.example.com/mcp\n"
        ));
        ok("targets:\n  - name: Kb_1.prod-eu\n    url: https://kb.example.com/mcp\n");
        // non-ASCII letters are not allowed
        let e = err("targets:\n  - name: kbé\n    url: https://kb.example.com/mcp\n");
        assert_has(&e, "is not a valid target name");
    }

    #[test]
    fn duplicate_names_name_both_indexes() {
        let e = err("targets:
  - {name: kb, url: 'https://a.example/'}
  - {name: other, url: 'https://b.example/'}
  - {name: kb, url: 'https://c.example/'}
");
        assert_eq!(
            e,
            "test.yml: targets[2].name: duplicate target name \"kb\" (first used by targets[0])"
        );
        // names are case-sensitive, like label values
        ok(
            "targets:\n  - {name: kb, url: 'https://a.example/'}\n  - {name: KB, url: 'https://a.example/'}\n",
        );
    }

    #[test]
    fn durations_use_humantime() {
        let c = ok(&one_target(
            "    audit_interval: 1m\n    ping_interval: 1m\n    request_timeout: 500ms\n    notification_grace: 1h 2m\n",
        ));
        let t = &c.targets[0];
        assert_eq!(t.settings.audit_interval, s(60));
        assert_eq!(t.settings.request_timeout, Duration::from_millis(500));
        assert_eq!(t.settings.notification_grace, s(3720));
    }

    #[test]
    fn invalid_duration() {
        let e = err(&one_target("    ping_interval: soon\n"));
        assert_eq!(
            e,
            "test.yml: targets[0].ping_interval: invalid duration \"soon\": expected number at 0; write a number with a unit, like 30s, 1m or 500ms"
        );
        let e = err("global:\n  audit_interval: 30\n");
        assert_has(
            &e,
            "test.yml: global.audit_interval: invalid duration \"30\": time unit needed",
        );
        let e = err("global:\n  audit_interval: ''\n");
        assert_has(&e, "test.yml: global.audit_interval: invalid duration \"\"");
    }

    #[test]
    fn duration_must_be_positive() {
        let e = err(&one_target("    notification_grace: 0s\n"));
        assert_eq!(
            e,
            "test.yml: targets[0].notification_grace: must be greater than 0"
        );
        let e = err("global:\n  ping_interval: '0'\n");
        assert_eq!(e, "test.yml: global.ping_interval: must be greater than 0");
    }

    #[test]
    fn duration_limits() {
        let e = err(&one_target("    request_timeout: 50ms\n"));
        assert_eq!(
            e,
            "test.yml: targets[0].request_timeout: \"50ms\" is too short; the minimum is 100ms"
        );
        let e = err("global:\n  audit_interval: 25h\n");
        assert_eq!(
            e,
            "test.yml: global.audit_interval: \"25h\" is too long; the maximum is 24h"
        );
        ok(
            "global:\n  audit_interval: 24h\n  ping_interval: 100ms\n  request_timeout: 100ms\n  notification_grace: 24h\n",
        );
    }

    #[test]
    fn request_timeout_must_fit_ping_interval() {
        let e = err("global:\n  request_timeout: 20s\n");
        assert_eq!(
            e,
            "test.yml: global.request_timeout: request_timeout 20s is longer than ping_interval 15s (default); a ping must time out before the next one is due"
        );
        let e = err("global:\n  request_timeout: 20s\n  ping_interval: 15s\n");
        assert_has(
            &e,
            "global.request_timeout: request_timeout 20s is longer than ping_interval 15s;",
        );
        let e = err(&one_target("    request_timeout: 16s\n"));
        assert_has(
            &e,
            "targets[0].request_timeout: request_timeout 16s is longer than ping_interval 15s (from global)",
        );
        let e = err(&one_target(
            "    ping_interval: 5s\n    request_timeout: 10s\n",
        ));
        assert_eq!(
            e,
            "test.yml: targets[0].request_timeout: request_timeout 10s is longer than ping_interval 5s; a ping must time out before the next one is due"
        );
        // equal is fine
        ok(&one_target("    request_timeout: 15s\n"));
    }

    #[test]
    fn request_timeout_must_fit_audit_interval() {
        let e = err(&one_target(
            "    audit_interval: 8s\n    ping_interval: 1m\n    request_timeout: 9s\n",
        ));
        assert_eq!(
            e,
            "test.yml: targets[0].request_timeout: request_timeout 9s is longer than audit_interval 8s; an audit's requests must time out before the next audit is due"
        );
        let e = err("global:\n  audit_interval: 5s\n  request_timeout: 6s\n  ping_interval: 6s\n");
        assert_has(
            &e,
            "global.request_timeout: request_timeout 6s is longer than audit_interval 5s;",
        );
    }

    /// Like Prometheus' `scrape_timeout`: a timeout nobody wrote is lowered to the intervals it
    /// must fit; only a timeout written at that level is checked against them.
    #[test]
    fn a_defaulted_request_timeout_is_lowered_to_fit() {
        // a target's own ping_interval below the default timeout (10s)
        let c = ok(&one_target("    ping_interval: 5s\n"));
        assert_eq!(c.targets[0].settings.request_timeout, s(5));
        let c = ok(&one_target("    audit_interval: 2s\n"));
        assert_eq!(c.targets[0].settings.request_timeout, s(2));
        // in global: the global value is lowered; targets start again from the default
        let c = ok(
            "global:\n  ping_interval: 5s\ntargets:\n  - {name: a, url: 'http://a.example/'}\n  - {name: b, url: 'http://b.example/', ping_interval: 1m}\n",
        );
        assert_eq!(c.global.settings.request_timeout, s(5));
        assert_eq!(c.targets[0].settings.request_timeout, s(5));
        assert_eq!(c.targets[1].settings.request_timeout, s(10));
        let c = ok("global:\n  audit_interval: 3s\n");
        assert_eq!(c.global.settings.request_timeout, s(3));
        // a timeout written in global is inherited, and lowered where a target's interval is shorter
        let c = ok(
            "global:\n  request_timeout: 12s\n  ping_interval: 20s\ntargets:\n  - {name: a, url: 'http://a.example/'}\n  - {name: b, url: 'http://b.example/', ping_interval: 4s}\n",
        );
        assert_eq!(c.targets[0].settings.request_timeout, s(12));
        assert_eq!(c.targets[1].settings.request_timeout, s(4));
        // untouched when it fits
        assert_eq!(
            ok(&one_target("")).targets[0].settings.request_timeout,
            s(10)
        );
    }

    #[test]
    fn a_defaulted_probe_timeout_is_lowered_to_fit() {
        let probe =
            |extra: &str| one_target(&format!("    probes:\n      - tool: kb_stats\n{extra}"));
        let c = ok(&probe("        interval: 2s\n"));
        assert_eq!(c.targets[0].probes[0].timeout, s(2));
        assert_eq!(ok(&probe("")).targets[0].probes[0].timeout, s(5));
        assert_eq!(
            err(&probe("        interval: 2s\n        timeout: 3s\n")),
            "test.yml: targets[0].probes[0].timeout: timeout (3s) must not exceed interval (2s)"
        );
    }

    #[test]
    fn max_pages_range() {
        assert_eq!(
            err(&one_target("    max_pages: 0\n")),
            "test.yml: targets[0].max_pages: 0 is out of range; must be between 1 and 10000"
        );
        assert_eq!(
            err("global:\n  max_pages: 10001\n"),
            "test.yml: global.max_pages: 10001 is out of range; must be between 1 and 10000"
        );
        assert_eq!(
            ok(&one_target("    max_pages: 1\n")).targets[0]
                .settings
                .max_pages,
            1
        );
    }

    #[test]
    fn connections_range() {
        assert_eq!(
            err(&one_target("    connections: 17\n")),
            "test.yml: targets[0].connections: 17 is out of range; must be between 1 and 16"
        );
        assert_eq!(
            err("global:\n  connections: 0\n"),
            "test.yml: global.connections: 0 is out of range; must be between 1 and 16"
        );
        assert_eq!(
            err(&one_target("    connections: -1\n")),
            "test.yml: targets[0].connections: -1 is out of range; must be between 1 and 16"
        );
        assert_eq!(
            ok(&one_target("    connections: 16\n")).targets[0]
                .settings
                .connections,
            16
        );
    }

    #[test]
    fn protocol_versions() {
        for (text, want) in [
            ("auto", ProtocolChoice::Auto),
            (
                "2025-11-25",
                ProtocolChoice::Pinned(ProtocolVersion::V2025_11_25),
            ),
            (
                "2025-06-18",
                ProtocolChoice::Pinned(ProtocolVersion::V2025_06_18),
            ),
            (
                "2025-03-26",
                ProtocolChoice::Pinned(ProtocolVersion::V2025_03_26),
            ),
            (
                "'2025-03-26'",
                ProtocolChoice::Pinned(ProtocolVersion::V2025_03_26),
            ),
        ] {
            let c = ok(&one_target(&format!("    protocol_version: {text}\n")));
            assert_eq!(c.targets[0].protocol_version, want);
        }
        assert_eq!(ProtocolChoice::Auto.as_str(), "auto");
        let pinned = |v| ProtocolChoice::Pinned(v);
        assert_eq!(pinned(ProtocolVersion::V2025_11_25).as_str(), "2025-11-25");
        assert_eq!(pinned(ProtocolVersion::V2025_06_18).as_str(), "2025-06-18");
        assert_eq!(
            pinned(ProtocolVersion::V2025_03_26).to_string(),
            "2025-03-26"
        );
        assert_eq!(ProtocolChoice::Auto.pinned(), None);
        for v in ["2026-07-28", "2024-11-05"] {
            let c = ok(&one_target(&format!("    protocol_version: {v}\n")));
            assert_eq!(c.targets[0].protocol_version.as_str(), v);
        }
    }

    #[test]
    fn unknown_protocol_version_lists_allowed_values() {
        assert_eq!(
            err(&one_target("    protocol_version: 2024-10-07\n")),
            "test.yml: targets[0].protocol_version: unknown protocol_version \"2024-10-07\"; allowed values: auto, 2026-07-28, 2025-11-25, 2025-06-18, 2025-03-26, 2024-11-05"
        );
        assert_has(
            &err(&one_target("    protocol_version: AUTO\n")),
            "unknown protocol_version \"AUTO\"",
        );
    }

    #[test]
    fn load_errors_name_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("missing.yml");
        let e = Config::load(&missing).unwrap_err();
        let shown = e.to_string();
        assert!(
            shown.starts_with(&format!("{}: cannot read config file: ", missing.display())),
            "{shown}"
        );
        assert!(std::error::Error::source(&e).is_some());
        assert_eq!(e.field(), None);

        let bad = write(dir.path(), "bad.yml", b"targets:\n  - nme: kb\n");
        let e = Config::load(&bad).unwrap_err();
        assert_eq!(
            e.to_string().split(", expected").next().unwrap(),
            format!(
                "{}: line 2 column 5: targets[0]: unknown field `nme`",
                bad.display()
            )
        );
    }

    #[test]
    fn errors_after_secrets_do_not_leak_them() {
        // a valid secret-bearing target followed by an invalid one
        let e = err(&format!(
            "targets:\n  - name: kb\n    url: 'https://u:{SENTINEL}@kb.example.com/?k={SENTINEL}'\n    headers:\n      Authorization: Bearer ${{KB_TOKEN}}\n  - name: kb\n    url: 'https://u:{SENTINEL}@kb.example.com/?k={SENTINEL}'\n"
        ));
        assert_eq!(
            e,
            "test.yml: targets[1].name: duplicate target name \"kb\" (first used by targets[0])"
        );
        // a YAML error on the line holding the secret
        let e = err(&format!(
            "targets:\n  - name: kb\n    url: https://kb.example.com/\n    headers:\n      Authorization: Bearer: {SENTINEL}\n"
        ));
        assert_has(
            &e,
            "line 5 column 28: mapping values are not allowed in this context",
        );
        let e = err(&format!(
            "targets:\n  - name: kb\n    url: https://kb.example.com/\n    headerz:\n      Authorization: {SENTINEL}\n"
        ));
        assert_has(&e, "unknown field `headerz`");
    }

    #[test]
    fn semantic_errors_report_their_field() {
        let e = parse("targets:\n  - {name: a, url: 'https://a.example/'}\n  - {name: 'b c', url: 'https://a.example/'}\n").unwrap_err();
        assert_eq!(e.field(), Some("targets[1].name"));
        assert_eq!(e.location(), None);
        let e = parse("global:\n  max_pages: 0\n").unwrap_err();
        assert_eq!(e.field(), Some("global.max_pages"));
        let e = parse("global: [").unwrap_err();
        assert_eq!(e.field(), None);
        assert!(e.location().is_some());
    }

    #[test]
    fn deep_nesting_is_refused_before_parsing() {
        // The file of the report: a flow sequence 100,000 deep (200 KB). The old code handed it
        // to the parser (83 s of CPU) and never produced this message.
        let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
        let e = parse(&deep).unwrap_err();
        assert_eq!(e.location(), Some((1, 65)));
        assert_eq!(e.field(), None);
        assert_eq!(
            e.to_string(),
            "test.yml: line 1 column 65: nested deeper than 64 levels (lists and mappings inside each other); refused before parsing, a configuration needs fewer than 10"
        );
        // inside a target, in block style, and in probe arguments
        let block = one_target(&format!(
            "    headers:\n      X:\n        {}x\n",
            "- ".repeat(100)
        ));
        assert_has(&err(&block), "nested deeper than 64 levels");
        let args = format!("{}1{}", "{a: ".repeat(70), "}".repeat(70));
        let probes = one_target(&format!(
            "    probes:\n      - tool: t\n        arguments: {args}\n"
        ));
        assert_has(&err(&probes), "test.yml: line 6 column ");
        // probe arguments 50 deep are fine
        let args = format!("{}1{}", "{a: ".repeat(50), "}".repeat(50));
        ok(&one_target(&format!(
            "    probes:\n      - tool: t\n        arguments: {args}\n"
        )));
    }

    #[test]
    fn brackets_in_strings_are_not_nesting() {
        let many = "[".repeat(100);
        let c = ok(&one_target(&format!(
            "    # {many}\n    headers:\n      X-A: \"{many}\"\n      X-B: '{many}'\n      X-C: a{many}\n    probes:\n      - tool: t\n        expect:\n          text_contains: |\n            {many}\n",
        )));
        assert_eq!(c.targets[0].headers[0].1.expose(), many);
        assert_eq!(
            c.targets[0].probes[0].expect.text_contains.as_deref(),
            Some(format!("{many}\n").as_str())
        );
    }

    #[test]
    fn files_over_the_size_cap_are_refused() {
        let big = format!("# {}\n", "x".repeat(MAX_CONFIG_BYTES));
        let e = parse(&big).unwrap_err();
        assert_eq!(
            e.to_string(),
            "test.yml: configuration file is larger than 4194304 bytes (4 MiB), the limit; refused before parsing"
        );
        // load reads no more than the cap (plus one byte) and says the same
        let dir = tempfile::tempdir().unwrap();
        let path = write(dir.path(), "big.yml", big.as_bytes());
        let e = Config::load(&path).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!(
                "{}: configuration file is larger than 4194304 bytes (4 MiB), the limit; refused before parsing",
                path.display()
            )
        );
        // just under the cap is parsed
        let fits = format!("# {}\n", "x".repeat(MAX_CONFIG_BYTES - 3));
        assert_eq!(fits.len(), MAX_CONFIG_BYTES);
        assert_eq!(ok(&fits), Config::default());
    }

    #[test]
    fn total_connections_are_capped() {
        // 625 targets of 16 connections: exactly 10,000
        let mut text = String::from("global:\n  connections: 16\ntargets:\n");
        for i in 0..625 {
            text.push_str(&format!(
                "  - {{name: t{i}, url: 'http://t{i}.example/'}}\n"
            ));
        }
        let c = ok(&text);
        let total: u32 = c
            .targets
            .iter()
            .map(|t| u32::from(t.settings.connections))
            .sum();
        assert_eq!(total, MAX_TOTAL_CONNECTIONS);
        text.push_str("  - {name: one-more, url: 'http://x.example/', connections: 1}\n");
        assert_eq!(
            err(&text),
            "test.yml: targets[625].connections: targets[0] to targets[625] open 10001 connections in total; one exporter runs at most 10000 (the sum of `connections` over all targets): split the targets over more exporters"
        );
    }

    #[test]
    fn example_config_parses() {
        // As shipped: valid with no environment at all.
        let c = Config::parse(include_str!("../../example.yml"), "example.yml", &|_| None).unwrap();
        assert_eq!(c.targets.len(), 2);
        let kb = &c.targets[0];
        assert_eq!(kb.name, "kb");
        assert_eq!(kb.headers[0].0, "X-Client-Team");
        let tickets = &c.targets[1];
        assert_eq!(tickets.settings.connections, 2);
        assert_ne!(
            tickets.settings.audit_interval,
            c.global.settings.audit_interval
        );

        // With the token line uncommented, as its comment says: the token is used and redacted.
        let uncommented = include_str!("../../example.yml").replace(
            "# Authorization: \"Bearer ${KB_TOKEN}\"",
            "Authorization: \"Bearer ${KB_TOKEN}\"",
        );
        let env = |name: &str| (name == "KB_TOKEN").then(|| SENTINEL.to_owned());
        let c = Config::parse(&uncommented, "example.yml", &env).unwrap();
        let kb = &c.targets[0];
        assert_eq!(kb.headers[1].0, "Authorization");
        assert_eq!(kb.headers[1].1.expose(), "Bearer s3cr3t-token");
        assert!(!format!("{c:?}").contains(SENTINEL));
        let e = Config::parse(&uncommented, "example.yml", &|_| None).unwrap_err();
        assert_eq!(
            e.to_string(),
            "example.yml: targets[0].headers.Authorization: environment variable KB_TOKEN is not set"
        );
    }
}
