//! Where a target is: `url` (with its `transport`), or `command` with `args`, `env` and `cwd`.
//!
//! A target is exactly one of the two, and the keys of the other kind are refused rather than
//! ignored: `headers` on a command target, or `args` on a URL target, is a misunderstanding the
//! operator should hear about at load time. The result is an [`Endpoint`], in which a target
//! with both or neither cannot be expressed. URLs and `env` values may carry secrets, so no
//! message here quotes them; `env` values are [`Secret`]s from the moment they are expanded.
//! A command is a program and its arguments, never a shell command line: nothing is split or
//! interpreted, so a configuration cannot smuggle shell syntax into what the exporter runs.

use std::collections::HashSet;
use std::path::PathBuf;

use super::expand::{expand_env, is_variable_name};
use super::headers::path_key;
use super::limits::{
    MAX_COMMAND_ARG_BYTES, MAX_COMMAND_ARGS, MAX_COMMAND_ENV, MAX_COMMAND_ENV_BYTES,
};
use super::raw::{PairList, RawTarget, VariableNames};
use super::validator::Validator;
use super::{CommandSpec, ConfigError, Endpoint, HttpTransportKind, Secret};

/// Longest `command` and `cwd` accepted, in bytes: Linux's `PATH_MAX`.
const MAX_PATH_BYTES: usize = 4096;

impl Validator<'_> {
    /// The target's endpoint; takes the endpoint keys out of `raw`. `name` is the target's
    /// (validated) name, for messages.
    pub(super) fn endpoint(
        &self,
        p: &str,
        name: &str,
        raw: &mut RawTarget,
    ) -> Result<Endpoint, ConfigError> {
        match (raw.url.take(), raw.command.take()) {
            (Some(_), Some(_)) => Err(self.err(
                format!("{p}.command"),
                format!(
                    "target {name:?} sets both `url` and `command`; a target is either an HTTP \
                     endpoint (`url`) or a local program spoken to over stdio (`command`)"
                ),
            )),
            (None, None) => Err(self.err(
                format!("{p}.url"),
                "required: `url` (the MCP endpoint, for example https://mcp.example.com/mcp) or \
                 `command` (a local MCP server spoken to over stdio)",
            )),
            (Some(url), None) => {
                let only_command = [
                    ("args", raw.args.is_some()),
                    ("env", raw.env.is_some()),
                    ("cwd", raw.cwd.is_some()),
                ];
                if let Some((key, _)) = only_command.iter().find(|(_, set)| *set) {
                    return Err(self.err(
                        format!("{p}.{key}"),
                        format!(
                            "target {name:?} has a `url`: `{key}` applies only to a target with \
                             a `command`"
                        ),
                    ));
                }
                Ok(Endpoint::Http {
                    url: self.url(p, &url)?,
                    transport: self.transport(p, raw.transport.take())?,
                })
            }
            (None, Some(command)) => {
                let only_url = [
                    ("transport", raw.transport.is_some()),
                    ("headers", raw.headers.is_some()),
                    ("header_files", raw.header_files.is_some()),
                    ("authorization", raw.authorization.is_some()),
                    ("basic_auth", raw.basic_auth.is_some()),
                    ("oauth2", raw.oauth2.is_some()),
                    ("tls_config", raw.tls_config.is_some()),
                    ("proxy_url", raw.proxy_url.is_some()),
                    ("no_proxy", raw.no_proxy.is_some()),
                    (
                        "proxy_from_environment",
                        raw.proxy_from_environment.is_some(),
                    ),
                    (
                        "idle_connection_timeout",
                        raw.idle_connection_timeout.is_some(),
                    ),
                ];
                if let Some((key, _)) = only_url.iter().find(|(_, set)| *set) {
                    return Err(self.err(
                        format!("{p}.{key}"),
                        format!(
                            "target {name:?} runs a `command` (stdio): `{key}` applies only to a \
                             target with a `url`"
                        ),
                    ));
                }
                Ok(Endpoint::Command(CommandSpec {
                    command: self.command(p, &command)?,
                    args: self.args(p, raw.args.take())?,
                    env: self.env(p, raw.env.take())?,
                    cwd: raw.cwd.take().map(|c| self.cwd(p, &c)).transpose()?,
                }))
            }
        }
    }

    /// Never puts any part of the URL in a message: it may hold a password or a token.
    pub(super) fn url(&self, p: &str, raw: &str) -> Result<url::Url, ConfigError> {
        let field = format!("{p}.url");
        let text = expand_env(raw, self.env).map_err(|why| self.err(&field, why))?;
        parse_target_url(&text).map_err(|why| self.err(field, why))
    }

    fn transport(&self, p: &str, raw: Option<String>) -> Result<HttpTransportKind, ConfigError> {
        match raw.as_deref() {
            None | Some("auto") => Ok(HttpTransportKind::Auto),
            Some("streamable_http") => Ok(HttpTransportKind::StreamableHttp),
            Some("sse") => Ok(HttpTransportKind::Sse),
            Some(other) => Err(self.err(
                format!("{p}.transport"),
                format!(
                    "unknown transport {:?}; allowed values: auto, streamable_http, sse",
                    mcp_client::mcp::truncate(other, 64)
                ),
            )),
        }
    }

    /// A program's path or name. Not a shell command line: whitespace is refused, with a hint,
    /// because `npx -y some-server` written here is the likely mistake.
    fn command(&self, p: &str, raw: &str) -> Result<PathBuf, ConfigError> {
        let field = format!("{p}.command");
        if raw.is_empty() {
            return Err(self.err(
                field,
                "command is empty; write the program's path or name (its arguments go in `args`)",
            ));
        }
        if raw.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(self.err(
                field,
                "command must not contain whitespace or control characters: it is a program's \
                 path or name, never a shell command line; put the arguments in `args`, a list",
            ));
        }
        self.bounded(&field, raw)?;
        if raw.contains('/') {
            Ok(self.resolve(raw))
        } else {
            // A bare name, looked up in `PATH` when the program is started.
            Ok(PathBuf::from(raw))
        }
    }

    fn cwd(&self, p: &str, raw: &str) -> Result<PathBuf, ConfigError> {
        let field = format!("{p}.cwd");
        if raw.is_empty() {
            return Err(self.err(
                field,
                "cwd is empty; leave it out to keep the exporter's own",
            ));
        }
        if raw.chars().any(char::is_control) {
            return Err(self.err(field, "cwd must not contain control characters"));
        }
        self.bounded(&field, raw)?;
        Ok(self.resolve(raw))
    }

    fn bounded(&self, field: &str, raw: &str) -> Result<(), ConfigError> {
        if raw.len() > MAX_PATH_BYTES {
            return Err(self.err(field, format!("longer than {MAX_PATH_BYTES} bytes")));
        }
        Ok(())
    }

    /// A relative path is resolved against the configuration file's directory, as
    /// `header_files` are: the file means the same wherever the exporter is started.
    fn resolve(&self, raw: &str) -> PathBuf {
        let path = PathBuf::from(raw);
        match self.base_dir {
            Some(base) if path.is_relative() => base.join(path),
            _ => path,
        }
    }

    fn args(&self, p: &str, raw: Option<Vec<String>>) -> Result<Vec<String>, ConfigError> {
        let args = raw.unwrap_or_default();
        if args.len() > MAX_COMMAND_ARGS {
            return Err(self.err(
                format!("{p}.args"),
                format!("{} arguments; at most {MAX_COMMAND_ARGS}", args.len()),
            ));
        }
        let bytes: usize = args.iter().map(String::len).sum();
        if bytes > MAX_COMMAND_ARG_BYTES {
            return Err(self.err(
                format!("{p}.args"),
                format!("{bytes} bytes of arguments; at most {MAX_COMMAND_ARG_BYTES}"),
            ));
        }
        if let Some(i) = args.iter().position(|a| a.contains('\0')) {
            return Err(self.err(
                format!("{p}.args[{i}]"),
                "contains a NUL character, which no program argument can carry",
            ));
        }
        Ok(args)
    }

    /// `env`: names checked, values `${VAR}`-expanded and kept as secrets; no message quotes a
    /// value.
    fn env(
        &self,
        p: &str,
        raw: Option<PairList<VariableNames>>,
    ) -> Result<Vec<(String, Secret)>, ConfigError> {
        let pairs = raw.map(|e| e.0).unwrap_or_default();
        if pairs.len() > MAX_COMMAND_ENV {
            return Err(self.err(
                format!("{p}.env"),
                format!("{} variables; at most {MAX_COMMAND_ENV}", pairs.len()),
            ));
        }
        let mut seen = HashSet::new();
        let mut bytes = 0usize;
        let mut out = Vec::with_capacity(pairs.len());
        for (name, raw) in pairs {
            let field = format!("{p}.env{}", path_key(&name));
            if !is_variable_name(&name) {
                return Err(self.err(
                    field,
                    "not a valid environment variable name; use [A-Za-z_][A-Za-z0-9_]*",
                ));
            }
            if !seen.insert(name.clone()) {
                return Err(self.err(field, format!("duplicate variable {name}")));
            }
            let value = expand_env(&raw, self.env).map_err(|why| self.err(&field, why))?;
            if value.contains('\0') {
                return Err(self.err(
                    field,
                    "value contains a NUL character, which no environment variable can carry",
                ));
            }
            bytes += name.len() + value.len();
            if bytes > MAX_COMMAND_ENV_BYTES {
                return Err(self.err(
                    field,
                    format!("env names and values exceed {MAX_COMMAND_ENV_BYTES} bytes in total"),
                ));
            }
            out.push((name, Secret::new(value)));
        }
        Ok(out)
    }
}

/// The URL of an MCP target (from the file, or from discovery): absolute http(s) with a host,
/// no fragment, no whitespace. The reason never quotes the URL (it may hold a secret).
pub fn parse_target_url(text: &str) -> Result<url::Url, String> {
    if text.is_empty() {
        return Err("required; the MCP endpoint, for example https://mcp.example.com/mcp".into());
    }
    if text.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err("URL must not contain whitespace or control characters".into());
    }
    let url = url::Url::parse(text).map_err(|e| format!("invalid URL: {e}"))?;
    if url.scheme() != "http" && url.scheme() != "https" {
        return Err("URL scheme must be http or https".into());
    }
    if !has_authority_host(text) {
        // The URL parser would accept `http:///mcp` and `http:mcp` as `http://mcp/`.
        return Err(
            "URL has no host: write scheme://host[:port]/path, with a host between '//' \
                    and the path"
                .into(),
        );
    }
    if url.host().is_none() {
        return Err("URL has no host".into());
    }
    if url.fragment().is_some() {
        return Err("URL must not have a fragment (the part after '#')".into());
    }
    Ok(url)
}

/// Whether the URL text has `://` after its scheme and a non-empty host after it (past any
/// `user:password@`). Only the form is checked here; the URL parser checks the rest.
fn has_authority_host(text: &str) -> bool {
    let Some((_, rest)) = text.split_once("://") else {
        return false;
    };
    let authority = rest.split(['/', '?', '#', '\\']).next().unwrap_or_default();
    let host = authority
        .rsplit_once('@')
        .map_or(authority, |(_, host)| host);
    !host.is_empty() && !host.starts_with(':')
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::test_support::*;
    use crate::config::*;
    use std::path::Path;

    #[test]
    fn url_is_required() {
        let e = err("targets:\n  - name: kb\n");
        assert_eq!(
            e,
            "test.yml: targets[0].url: required: `url` (the MCP endpoint, for example \
             https://mcp.example.com/mcp) or `command` (a local MCP server spoken to over stdio)"
        );
        let e = err("targets:\n  - name: kb\n    url: ''\n");
        assert_has(&e, "targets[0].url: required");
    }

    #[test]
    fn url_must_parse() {
        let e = err(&format!(
            "targets:\n  - name: kb\n    url: kb.example.com/mcp?token={SENTINEL}\n"
        ));
        assert_eq!(
            e,
            "test.yml: targets[0].url: invalid URL: relative URL without a base"
        );
        let e = err(&format!(
            "targets:\n  - name: kb\n    url: 'https://u:{SENTINEL}@kb.example.com:99999/?k={SENTINEL}'\n"
        ));
        assert_eq!(
            e,
            "test.yml: targets[0].url: invalid URL: invalid port number"
        );
        let e = err("targets:\n  - name: kb\n    url: 'http://'\n");
        assert_eq!(e, "test.yml: targets[0].url: invalid URL: empty host");
    }

    #[test]
    fn url_scheme_must_be_http_or_https() {
        let e = err(&format!(
            "targets:\n  - name: kb\n    url: 'ftp://user:{SENTINEL}@kb.example.com/?key={SENTINEL}'\n"
        ));
        assert_eq!(
            e,
            "test.yml: targets[0].url: URL scheme must be http or https"
        );
        let e = err("targets:\n  - name: kb\n    url: 'file:///etc/passwd'\n");
        assert_eq!(
            e,
            "test.yml: targets[0].url: URL scheme must be http or https"
        );
        // "user:password" without a scheme parses as scheme "user"; the password stays hidden
        let e = err(&format!(
            "targets:\n  - name: kb\n    url: 'user:{SENTINEL}'\n"
        ));
        assert_eq!(
            e,
            "test.yml: targets[0].url: URL scheme must be http or https"
        );
    }

    #[test]
    fn url_must_not_have_a_fragment() {
        let e = err(&format!(
            "targets:\n  - name: kb\n    url: 'https://u:{SENTINEL}@kb.example.com/mcp?k={SENTINEL}#{SENTINEL}'\n"
        ));
        assert_eq!(
            e,
            "test.yml: targets[0].url: URL must not have a fragment (the part after '#')"
        );
        let e = err("targets:\n  - name: kb\n    url: 'https://kb.example.com/mcp#'\n");
        assert_has(&e, "must not have a fragment");
    }

    #[test]
    fn url_must_not_contain_whitespace() {
        let e = err("targets:\n  - name: kb\n    url: 'https://kb.example.com/a b'\n");
        assert_eq!(
            e,
            "test.yml: targets[0].url: URL must not contain whitespace or control characters"
        );
        let e = err("targets:\n  - name: kb\n    url: \"https://kb.example.com/\\tx\"\n");
        assert_has(&e, "URL must not contain whitespace or control characters");
    }

    #[test]
    fn url_expands_env_variables() {
        let c = ok(
            "targets:\n  - name: t\n    url: https://${HOST}/mcp?key=${QUERY_KEY}&literal=$${X}\n",
        );
        let url = c.targets[0].url().unwrap();
        assert_eq!(url.host_str(), Some("tickets.example.com"));
        assert_eq!(url.query(), Some("key=s3cr3t-token&literal=${X}"));
        let e = err("targets:\n  - name: t\n    url: https://kb.example.com/mcp?key=${NOPE}\n");
        assert_eq!(
            e,
            "test.yml: targets[0].url: environment variable NOPE is not set"
        );
        let e =
            err("targets:\n  - name: t\n    url: https://kb.example.com/mcp?key=${WITH_NEWLINE}\n");
        assert_eq!(
            e,
            "test.yml: targets[0].url: URL must not contain whitespace or control characters"
        );
    }

    #[test]
    fn userinfo_in_url_is_allowed_but_redacted() {
        let c = ok(&format!(
            "targets:\n  - name: kb\n    url: 'https://probe:{SENTINEL}@kb.example.com/mcp'\n"
        ));
        assert_eq!(c.targets[0].url().unwrap().password(), Some(SENTINEL));
        let debug = format!("{c:?}");
        assert!(!debug.contains(SENTINEL), "{debug}");
        assert_has(&debug, "https://probe:<redacted>@kb.example.com/mcp");
    }

    #[test]
    fn url_with_an_empty_host_is_refused() {
        // `http:///mcp` used to run as `http://mcp/`
        for url in ["http:///mcp", "https:///mcp", "http:/mcp", "http:mcp"] {
            assert_eq!(
                err(&format!("targets:\n  - name: kb\n    url: '{url}'\n")),
                "test.yml: targets[0].url: URL has no host: write scheme://host[:port]/path, with a host between '//' and the path",
                "{url}"
            );
        }
        let e = err(&format!(
            "targets:\n  - name: kb\n    url: 'https://u:{SENTINEL}@/mcp?k={SENTINEL}'\n"
        ));
        assert_has(&e, "targets[0].url: ");
        ok("targets:\n  - name: kb\n    url: 'http://u:p@kb.example:8080/mcp?a=b'\n");
        ok("targets:\n  - name: kb\n    url: 'http://[::1]:8080/mcp'\n");
    }

    // --- transport ----------------------------------------------------------------------

    #[test]
    fn transport_defaults_to_auto_and_takes_three_values() {
        let c = ok(&one_target(""));
        assert_eq!(
            c.targets[0].endpoint,
            Endpoint::http(url::Url::parse("https://kb.example.com/mcp").unwrap())
        );
        for (text, kind) in [
            ("auto", HttpTransportKind::Auto),
            ("streamable_http", HttpTransportKind::StreamableHttp),
            ("sse", HttpTransportKind::Sse),
        ] {
            let c = ok(&one_target(&format!("    transport: {text}\n")));
            let Endpoint::Http { transport, .. } = &c.targets[0].endpoint else {
                panic!("not an HTTP target");
            };
            assert_eq!(*transport, kind);
            assert_eq!(transport.as_str(), text);
        }
        let e = err(&one_target("    transport: websocket\n"));
        assert_eq!(
            e,
            "test.yml: targets[0].transport: unknown transport \"websocket\"; allowed values: auto, \
             streamable_http, sse"
        );
    }

    // --- command targets ----------------------------------------------------------------

    fn command_target(extra: &str) -> String {
        format!("targets:\n  - name: local\n    command: kb-server\n{extra}")
    }

    fn command_of(c: &Config) -> &CommandSpec {
        match &c.targets[0].endpoint {
            Endpoint::Command(spec) => spec,
            other => panic!("not a command target: {other:?}"),
        }
    }

    #[test]
    fn a_command_target_is_read_whole() {
        let c = ok(&command_target(
            "    args: [--stdio, '--root=/srv/kb', '']\n    env:\n      KB_TOKEN: 'Bearer ${KB_TOKEN}'\n      MODE: read-only\n    cwd: /srv/kb\n    protocol_version: '2025-06-18'\n    connections: 2\n",
        ));
        let t = &c.targets[0];
        assert_eq!(t.url(), None);
        assert!(t.headers.is_empty());
        assert_eq!(t.settings.connections, 2);
        let spec = command_of(&c);
        assert_eq!(spec.command, Path::new("kb-server"));
        assert_eq!(spec.args, ["--stdio", "--root=/srv/kb", ""]);
        assert_eq!(spec.env.len(), 2);
        assert_eq!(spec.env[0].0, "KB_TOKEN");
        assert_eq!(spec.env[0].1.expose(), format!("Bearer {SENTINEL}"));
        assert_eq!(
            (spec.env[1].0.as_str(), spec.env[1].1.expose()),
            ("MODE", "read-only")
        );
        assert_eq!(spec.cwd.as_deref(), Some(Path::new("/srv/kb")));
        // Defaults: no args, no env, the exporter's own directory.
        let c = ok(&command_target(""));
        let spec = command_of(&c);
        assert!(spec.args.is_empty() && spec.env.is_empty() && spec.cwd.is_none());
    }

    #[test]
    fn env_values_are_secrets() {
        let c = ok(&command_target("    env:\n      KB_TOKEN: '${KB_TOKEN}'\n"));
        let shown = format!("{c:?}");
        assert!(!shown.contains(SENTINEL), "{shown}");
        assert!(shown.contains("KB_TOKEN"), "{shown}");
        let shown = c.targets[0].endpoint.to_string();
        assert_eq!(shown, "command kb-server");
        let e = err(&command_target("    env:\n      KB_TOKEN: '${NOPE}'\n"));
        assert_eq!(
            e,
            "test.yml: targets[0].env.KB_TOKEN: environment variable NOPE is not set"
        );
    }

    #[test]
    fn env_names_are_checked_and_unique() {
        let e = err(&command_target("    env:\n      'BAD NAME': x\n"));
        assert_eq!(
            e,
            "test.yml: targets[0].env[\"BAD NAME\"]: not a valid environment variable name; use \
             [A-Za-z_][A-Za-z0-9_]*"
        );
        let e = err(&command_target("    env:\n      '1X': x\n"));
        assert_has(
            &e,
            "targets[0].env.1X: not a valid environment variable name",
        );
        let e = err(&command_target("    env:\n      A: x\n      A: y\n"));
        assert_eq!(e, "test.yml: targets[0].env.A: duplicate variable A");
        let e = err(&command_target("    env: [A]\n"));
        assert_has(
            &e,
            "expected a mapping of environment variable names to strings",
        );
    }

    #[test]
    fn exactly_one_of_url_and_command() {
        let e = err(
            "targets:\n  - name: kb\n    url: https://kb.example.com/mcp\n    command: kb-server\n",
        );
        assert_eq!(
            e,
            "test.yml: targets[0].command: target \"kb\" sets both `url` and `command`; a target \
             is either an HTTP endpoint (`url`) or a local program spoken to over stdio (`command`)"
        );
    }

    #[test]
    fn url_keys_are_refused_on_a_command_target() {
        for (extra, key) in [
            ("    headers:\n      X-Key: x\n", "headers"),
            ("    header_files:\n      X-Key: key.txt\n", "header_files"),
            ("    transport: sse\n", "transport"),
        ] {
            let e = err(&command_target(extra));
            assert_eq!(
                e,
                format!(
                    "test.yml: targets[0].{key}: target \"local\" runs a `command` (stdio): `{key}` \
                     applies only to a target with a `url`"
                )
            );
        }
    }

    #[test]
    fn command_keys_are_refused_on_a_url_target() {
        for (extra, key) in [
            ("    args: [x]\n", "args"),
            ("    env:\n      A: x\n", "env"),
            ("    cwd: /tmp\n", "cwd"),
        ] {
            let e = err(&one_target(extra));
            assert_eq!(
                e,
                format!(
                    "test.yml: targets[0].{key}: target \"kb\" has a `url`: `{key}` applies only to \
                     a target with a `command`"
                )
            );
        }
    }

    #[test]
    fn a_command_is_a_program_not_a_shell_line() {
        let e = err("targets:\n  - name: local\n    command: ''\n");
        assert_eq!(
            e,
            "test.yml: targets[0].command: command is empty; write the program's path or name \
             (its arguments go in `args`)"
        );
        for line in ["npx -y kb-server", "kb-server\\t--stdio", "kb\\nserver"] {
            let e = err(&format!(
                "targets:\n  - name: local\n    command: \"{line}\"\n"
            ));
            assert_has(
                &e,
                "targets[0].command: command must not contain whitespace",
            );
            assert_has(&e, "put the arguments in `args`");
        }
        let e = err(&format!(
            "targets:\n  - name: local\n    command: /{}\n",
            "x".repeat(4096)
        ));
        assert_eq!(e, "test.yml: targets[0].command: longer than 4096 bytes");
    }

    #[test]
    fn relative_paths_are_resolved_against_the_config_directory() {
        let text = "targets:\n  - name: local\n    command: ./bin/kb-server\n    cwd: data\n";
        let c = Config::parse(text, "/etc/mcp/exporter.yml", &fake_env).unwrap();
        let spec = command_of(&c);
        assert_eq!(spec.command, Path::new("/etc/mcp/./bin/kb-server"));
        assert_eq!(spec.cwd.as_deref(), Some(Path::new("/etc/mcp/data")));
        // A bare name is looked up in PATH when started: left as it is.
        let text = "targets:\n  - name: local\n    command: kb-server\n    cwd: /srv\n";
        let c = Config::parse(text, "/etc/mcp/exporter.yml", &fake_env).unwrap();
        let spec = command_of(&c);
        assert_eq!(spec.command, Path::new("kb-server"));
        assert_eq!(spec.cwd.as_deref(), Some(Path::new("/srv")));
        let e = err(&command_target("    cwd: ''\n"));
        assert_eq!(
            e,
            "test.yml: targets[0].cwd: cwd is empty; leave it out to keep the exporter's own"
        );
    }

    #[test]
    fn args_and_env_are_bounded() {
        let many = vec!["a"; MAX_COMMAND_ARGS + 1].join(", ");
        let e = err(&command_target(&format!("    args: [{many}]\n")));
        assert_eq!(e, "test.yml: targets[0].args: 257 arguments; at most 256");
        let long = "x".repeat(MAX_COMMAND_ARG_BYTES / 2 + 1);
        let e = err(&command_target(&format!("    args: [{long}, {long}]\n")));
        assert_has(
            &e,
            "targets[0].args: 65538 bytes of arguments; at most 65536",
        );
        let e = err(&command_target("    args: [ok, \"a\\0b\"]\n"));
        assert_has(&e, "targets[0].args[1]: contains a NUL character");
        let vars: String = (0..=MAX_COMMAND_ENV)
            .map(|i| format!("      V{i}: x\n"))
            .collect();
        let e = err(&command_target(&format!("    env:\n{vars}")));
        assert_eq!(e, "test.yml: targets[0].env: 65 variables; at most 64");
        let e = err(&command_target(&format!(
            "    env:\n      A: {long}\n      B: {long}\n"
        )));
        assert_has(
            &e,
            "targets[0].env.B: env names and values exceed 65536 bytes in total",
        );
    }

    #[test]
    fn endpoints_show_without_secrets() {
        let c = ok(&one_target("    transport: sse\n"));
        assert_eq!(
            c.targets[0].endpoint.to_string(),
            "https://kb.example.com/mcp (transport sse)"
        );
        let c = ok(
            "targets:\n  - name: kb\n    url: 'https://u:${KB_TOKEN}@kb.example.com/mcp?k=${KB_TOKEN}'\n",
        );
        let shown = c.targets[0].endpoint.to_string();
        assert!(!shown.contains(SENTINEL), "{shown}");
        let c = ok(&command_target("    args: [--stdio, --verbose]\n"));
        assert_eq!(
            c.targets[0].endpoint.to_string(),
            "command kb-server (2 arguments)"
        );
    }
}
