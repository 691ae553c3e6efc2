//! The rules for request headers an operator configures (`headers`, `header_files`, `--header`).
//!
//! Kept apart because three entrances share them: a value must be a legal HTTP header value of
//! bounded size, a name must be a token and not one the MCP client sets itself (a configured
//! `Mcp-Session-Id` would break the protocol), and names are case-insensitive, so repeats are
//! refused rather than silently merged. Values are [`Secret`]s from the moment they are read.

use super::expand::expand_env;
use super::raw::PairList;
use super::validator::Validator;
use super::{ConfigError, HttpClientConfig, Secret};
use std::collections::HashMap;
use std::io::Read;
use std::path::PathBuf;

/// Largest header value accepted, inline (after `${VAR}` expansion), from a `header_files` file
/// or from `--header`: 64 KiB. A header value, not a document; HTTP servers refuse request
/// headers far smaller (8 to 64 KiB in total is common), and every request of every session
/// carries it.
const MAX_HEADER_VALUE_BYTES: u64 = 64 * 1024;

/// Header names the MCP client sets itself; configuring them would break the protocol.
const RESERVED_HEADERS: &[&str] = &[
    "Mcp-Session-Id",
    "MCP-Protocol-Version",
    "Mcp-Method",
    "Mcp-Name",
    "Content-Type",
    "Accept",
    "Host",
    "Content-Length",
    "Last-Event-ID",
    "Transfer-Encoding",
    "Connection",
];

impl Validator<'_> {
    pub(super) fn headers(
        &self,
        p: &str,
        headers: Option<PairList>,
        files: Option<PairList>,
    ) -> Result<Vec<(String, Secret)>, ConfigError> {
        let mut out: Vec<(String, Secret)> = Vec::new();
        // lower-cased name -> field path of its first use
        let mut seen: HashMap<String, String> = HashMap::new();
        let entries = headers
            .map(|h| h.0)
            .unwrap_or_default()
            .into_iter()
            .map(|(n, v)| ("headers", n, v))
            .chain(
                files
                    .map(|f| f.0)
                    .unwrap_or_default()
                    .into_iter()
                    .map(|(n, v)| ("header_files", n, v)),
            );
        for (section, name, raw) in entries {
            let field = format!("{p}.{section}{}", path_key(&name));
            self.header_name(&field, &name)?;
            if let Some(first) = seen.get(&name.to_ascii_lowercase()) {
                return Err(self.err(
                    field,
                    format!("duplicate header {name:?} (already set by {first}; header names are case-insensitive)"),
                ));
            }
            seen.insert(name.to_ascii_lowercase(), field.clone());
            let value = if section == "headers" {
                expand_env(&raw, self.env).map_err(|why| self.err(&field, why))?
            } else {
                self.read_header_file(&field, &raw)?
            };
            check_header_value(&value).map_err(|why| self.err(&field, why))?;
            out.push((name, Secret::new(value)));
        }
        Ok(out)
    }

    fn header_name(&self, field: &str, name: &str) -> Result<(), ConfigError> {
        check_header_name(name).map_err(|why| self.err(field, why))
    }

    /// Reads a `header_files` entry. Messages name the path, never the content.
    fn read_header_file(&self, field: &str, raw_path: &str) -> Result<String, ConfigError> {
        if raw_path.is_empty() {
            return Err(self.err(field, "file path is empty"));
        }
        let mut path = PathBuf::from(raw_path);
        if path.is_relative()
            && let Some(base) = self.base_dir
        {
            path = base.join(path);
        }
        let shown = path.display();
        let file = std::fs::File::open(&path)
            .map_err(|e| self.err(field, format!("cannot read {shown}: {e}")))?;
        let mut bytes = Vec::new();
        file.take(MAX_HEADER_VALUE_BYTES + 1)
            .read_to_end(&mut bytes)
            .map_err(|e| self.err(field, format!("cannot read {shown}: {e}")))?;
        if bytes.len() as u64 > MAX_HEADER_VALUE_BYTES {
            return Err(self.err(
                field,
                format!("{shown} is larger than {MAX_HEADER_VALUE_BYTES} bytes"),
            ));
        }
        let mut text = String::from_utf8(bytes)
            .map_err(|_| self.err(field, format!("{shown} is not valid UTF-8")))?;
        let kept = text.trim_end_matches(['\n', '\r']).len();
        text.truncate(kept);
        if text.is_empty() {
            return Err(self.err(field, format!("{shown} is empty")));
        }
        Ok(text)
    }
}

/// A header name the exporter accepts from an operator: an HTTP token, not one the MCP client
/// sets itself.
fn check_header_name(name: &str) -> Result<(), String> {
    if name.is_empty() || !name.bytes().all(is_token_byte) {
        return Err(format!(
            "{name:?} is not a valid HTTP header name; use letters, digits and !#$%&'*+-.^_`|~"
        ));
    }
    if let Some(reserved) = RESERVED_HEADERS
        .iter()
        .find(|r| r.eq_ignore_ascii_case(name))
    {
        return Err(format!(
            "header {reserved} is set by the exporter's MCP client and cannot be configured"
        ));
    }
    Ok(())
}

/// A header value: not empty, at most [`MAX_HEADER_VALUE_BYTES`], no control characters. The
/// message never contains the value.
fn check_header_value(value: &str) -> Result<(), String> {
    if value.is_empty() {
        return Err("header value is empty".into());
    }
    if value.len() as u64 > MAX_HEADER_VALUE_BYTES {
        return Err(format!(
            "header value is larger than {MAX_HEADER_VALUE_BYTES} bytes"
        ));
    }
    if value.chars().any(|c| c.is_control() && c != '\t') {
        return Err(
            "header value contains a line break or another control character; \
                    these are not allowed in HTTP header values"
                .into(),
        );
    }
    Ok(())
}

/// A `--header 'Name: value'` command-line flag: the value may use `${VAR}` like the
/// configuration file, and is checked by the same rules. Errors never contain the value.
pub fn header_flag(text: &str) -> Result<(String, Secret), String> {
    let Some((name, value)) = text.split_once(':') else {
        return Err("expected 'Name: value'".into());
    };
    let name = name.trim();
    check_header_name(name)?;
    let value = expand_env(value.trim(), &|v| std::env::var(v).ok())
        .map_err(|why| format!("header {name}: {why}"))?;
    check_header_value(&value).map_err(|why| format!("header {name}: {why}"))?;
    Ok((name.to_string(), Secret::new(value)))
}

/// `--header` and `--http-config`: how `check`, `pin` and `proxy` (its catalog session) reach a
/// server, parsed by one code path: each header by [`header_flag`], the file by
/// [`super::load_http_config`] (a target's `http_config` blocks at the top level).
#[derive(Debug, Default, clap::Args)]
pub struct HttpFlags {
    /// Header sent with every request of the exporter's own session, 'Name: value'
    /// (repeatable); ${VAR} in the value is read from the environment. Values are never
    /// printed.
    #[arg(long = "header", value_name = "HEADER")]
    pub headers: Vec<String>,
    /// Credentials, TLS and proxy of the exporter's own session: a YAML file with a target's
    /// http_config blocks at the top level (authorization, basic_auth, oauth2, tls_config,
    /// proxy_url …).
    #[arg(long = "http-config", value_name = "FILE")]
    pub http_config: Option<PathBuf>,
}

impl HttpFlags {
    /// The `--header` flags, checked; an error says why without the value.
    pub fn headers(&self) -> Result<Vec<(String, Secret)>, String> {
        self.headers.iter().map(|h| header_flag(h)).collect()
    }

    /// The `--http-config` file, validated (none: the defaults); errors name file and field.
    pub fn http_config(&self) -> Result<HttpClientConfig, ConfigError> {
        match &self.http_config {
            None => Ok(HttpClientConfig::default()),
            Some(path) => super::load_http_config(path),
        }
    }

    /// Whether either flag is given.
    pub fn is_set(&self) -> bool {
        !self.headers.is_empty() || self.http_config.is_some()
    }
}

/// RFC 9110 `tchar`.
pub(super) fn is_token_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// `.Name` for names that are tokens, `["odd name"]` otherwise: a field path's last step.
pub(super) fn path_key(name: &str) -> String {
    if !name.is_empty() && name.bytes().all(is_token_byte) {
        format!(".{name}")
    } else {
        format!("[{name:?}]")
    }
}

/// The header names of `headers` and `header_files` at `p`, each with its field path.
pub(super) fn header_names<'a>(
    p: &str,
    headers: &'a Option<PairList>,
    files: &'a Option<PairList>,
) -> Vec<(String, &'a str)> {
    [("headers", headers), ("header_files", files)]
        .into_iter()
        .flat_map(|(section, pairs)| {
            pairs
                .iter()
                .flat_map(|l| l.0.iter())
                .map(move |(n, _)| (format!("{p}.{section}.{n}"), n.as_str()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::test_support::*;
    use crate::config::*;

    #[test]
    fn headers_expand_env_and_keep_order() {
        let c = ok(&one_target(
            "    headers:\n      Authorization: \"Bearer ${KB_TOKEN}\"\n      X-Tenant: blue\n      X-Price: \"$$5 $${KB_TOKEN}\"\n",
        ));
        let h: Vec<(&str, &str)> = c.targets[0]
            .headers
            .iter()
            .map(|(n, v)| (n.as_str(), v.expose()))
            .collect();
        assert_eq!(
            h,
            [
                ("Authorization", "Bearer s3cr3t-token"),
                ("X-Tenant", "blue"),
                ("X-Price", "$$5 ${KB_TOKEN}")
            ]
        );
    }

    #[test]
    fn header_value_with_line_break_from_env() {
        let e = err(&one_target(
            "    headers:\n      Authorization: \"Bearer ${WITH_NEWLINE}\"\n",
        ));
        assert_eq!(
            e,
            "test.yml: targets[0].headers.Authorization: header value contains a line break or another control character; these are not allowed in HTTP header values"
        );
    }

    #[test]
    fn header_value_control_characters() {
        let e = err(&one_target(&format!(
            "    headers:\n      X-Key: \"{SENTINEL}\\u0000\"\n"
        )));
        assert_has(
            &e,
            "targets[0].headers.X-Key: header value contains a line break or another control character",
        );
        let e = err(&one_target(&format!(
            "    headers:\n      X-Key: \"{SENTINEL}\\n\"\n"
        )));
        assert_has(&e, "header value contains a line break");
        let e = err(&one_target("    headers:\n      X-Key: \"a\\x7fb\"\n"));
        assert_has(&e, "header value contains a line break");
        // tab, spaces and non-ASCII text are fine
        let c = ok(&one_target("    headers:\n      X-Key: \"a\\tb c é\"\n"));
        assert_eq!(c.targets[0].headers[0].1.expose(), "a\tb c é");
    }

    #[test]
    fn header_value_must_not_be_empty() {
        assert_eq!(
            err(&one_target("    headers:\n      X-Key: ''\n")),
            "test.yml: targets[0].headers.X-Key: header value is empty"
        );
        assert_has(
            &err(&one_target("    headers:\n      X-Key:\n")),
            "targets[0].headers.X-Key: header value is empty",
        );
    }

    #[test]
    fn header_values_may_be_yaml_numbers_and_keep_their_text() {
        let c = ok(&one_target("    headers:\n      X-Api-Key: 0123\n"));
        assert_eq!(c.targets[0].headers[0].1.expose(), "0123");
    }

    #[test]
    fn header_name_must_be_a_token() {
        assert_eq!(
            err(&one_target("    headers:\n      'X Key': v\n")),
            "test.yml: targets[0].headers[\"X Key\"]: \"X Key\" is not a valid HTTP header name; use letters, digits and !#$%&'*+-.^_`|~"
        );
        assert_has(
            &err(&one_target("    headers:\n      'X-Key:': v\n")),
            "is not a valid HTTP header name",
        );
        assert_has(
            &err(&one_target("    headers:\n      '': v\n")),
            "targets[0].headers[\"\"]: \"\" is not a valid HTTP header name",
        );
        assert_has(
            &err(&one_target("    headers:\n      'Schlüssel': v\n")),
            "is not a valid HTTP header name",
        );
        ok(&one_target(
            "    headers:\n      \"X-A_b.c!#$%&'*+^`|~9\": v\n",
        ));
    }

    #[test]
    fn client_owned_headers_are_rejected() {
        for name in [
            "Mcp-Session-Id",
            "mcp-session-id",
            "MCP-Protocol-Version",
            "mcp-protocol-version",
            "Content-Type",
            "content-type",
            "Accept",
            "ACCEPT",
            "Host",
            "Content-Length",
            "Last-Event-ID",
            "Mcp-Method",
            "mcp-name",
        ] {
            let e = err(&one_target(&format!("    headers:\n      {name}: x\n")));
            assert_has(&e, &format!("test.yml: targets[0].headers.{name}: header "));
            assert_has(
                &e,
                " is set by the exporter's MCP client and cannot be configured",
            );
        }
        assert_eq!(
            err(&one_target(
                "    headers:\n      content-type: text/plain\n"
            )),
            "test.yml: targets[0].headers.content-type: header Content-Type is set by the exporter's MCP client and cannot be configured"
        );
    }

    #[test]
    fn duplicate_headers_are_case_insensitive() {
        assert_eq!(
            err(&one_target(
                "    headers:\n      Authorization: a\n      authorization: b\n"
            )),
            "test.yml: targets[0].headers.authorization: duplicate header \"authorization\" (already set by targets[0].headers.Authorization; header names are case-insensitive)"
        );
        assert_has(
            &err(&one_target(
                "    headers:\n      X-Key: a\n      X-Key: b\n",
            )),
            "targets[0].headers.X-Key: duplicate header \"X-Key\"",
        );
    }

    #[test]
    fn header_files_are_read_and_trimmed() {
        let dir = tempfile::tempdir().unwrap();
        let a = write(
            dir.path(),
            "token",
            format!("Bearer {SENTINEL}\n").as_bytes(),
        );
        let b = write(dir.path(), "tenant", b"blue\r\n\n");
        let c = write(dir.path(), "plain", b"  spaced  ");
        let cfg = ok(&one_target(&format!(
            "    headers:\n      X-First: one\n    header_files:\n      Authorization: {}\n      X-Tenant: {}\n      X-Plain: {}\n",
            a.display(),
            b.display(),
            c.display()
        )));
        let h: Vec<(&str, &str)> = cfg.targets[0]
            .headers
            .iter()
            .map(|(n, v)| (n.as_str(), v.expose()))
            .collect();
        assert_eq!(
            h,
            [
                ("X-First", "one"),
                ("Authorization", "Bearer s3cr3t-token"),
                ("X-Tenant", "blue"),
                ("X-Plain", "  spaced  ")
            ]
        );
        assert!(!format!("{cfg:?}").contains(SENTINEL));
    }

    #[test]
    fn missing_header_file() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("nope");
        let e = err(&one_target(&format!(
            "    header_files:\n      Authorization: {}\n",
            missing.display()
        )));
        assert_has(
            &e,
            &format!(
                "test.yml: targets[0].header_files.Authorization: cannot read {}: ",
                missing.display()
            ),
        );
        assert_has(&e, "No such file or directory");
    }

    #[test]
    fn header_file_content_is_validated_but_never_shown() {
        let dir = tempfile::tempdir().unwrap();
        let two_lines = write(
            dir.path(),
            "two",
            format!("{SENTINEL}\nX-Evil: 1\n").as_bytes(),
        );
        let e = err(&one_target(&format!(
            "    header_files:\n      Authorization: {}\n",
            two_lines.display()
        )));
        assert_eq!(
            e,
            "test.yml: targets[0].header_files.Authorization: header value contains a line break or another control character; these are not allowed in HTTP header values"
        );
        let empty = write(dir.path(), "empty", b"\n");
        let e = err(&one_target(&format!(
            "    header_files:\n      Authorization: {}\n",
            empty.display()
        )));
        assert_eq!(
            e,
            format!(
                "test.yml: targets[0].header_files.Authorization: {} is empty",
                empty.display()
            )
        );
        let binary = write(dir.path(), "bin", &[0xff, 0xfe, b'a']);
        let e = err(&one_target(&format!(
            "    header_files:\n      Authorization: {}\n",
            binary.display()
        )));
        assert_eq!(
            e,
            format!(
                "test.yml: targets[0].header_files.Authorization: {} is not valid UTF-8",
                binary.display()
            )
        );
        let big = write(dir.path(), "big", &vec![b'a'; 64 * 1024 + 1]);
        let e = err(&one_target(&format!(
            "    header_files:\n      Authorization: {}\n",
            big.display()
        )));
        assert_eq!(
            e,
            format!(
                "test.yml: targets[0].header_files.Authorization: {} is larger than 65536 bytes",
                big.display()
            )
        );
        let e = err(&one_target("    header_files:\n      Authorization: ''\n"));
        assert_eq!(
            e,
            "test.yml: targets[0].header_files.Authorization: file path is empty"
        );
    }

    #[test]
    fn header_file_paths_are_not_env_expanded() {
        let e = err(&one_target(
            "    header_files:\n      Authorization: /nonexistent/${KB_TOKEN}\n",
        ));
        assert_has(&e, "cannot read /nonexistent/${KB_TOKEN}: ");
    }

    #[test]
    fn header_files_follow_the_header_rules() {
        let dir = tempfile::tempdir().unwrap();
        let f = write(dir.path(), "v", b"value\n");
        assert_eq!(
            err(&one_target(&format!(
                "    headers:\n      Authorization: a\n    header_files:\n      AUTHORIZATION: {}\n",
                f.display()
            ))),
            "test.yml: targets[0].header_files.AUTHORIZATION: duplicate header \"AUTHORIZATION\" (already set by targets[0].headers.Authorization; header names are case-insensitive)"
        );
        assert_has(
            &err(&one_target(&format!(
                "    header_files:\n      Host: {}\n",
                f.display()
            ))),
            "targets[0].header_files.Host: header Host is set by the exporter's MCP client",
        );
        assert_has(
            &err(&one_target(&format!(
                "    header_files:\n      'a b': {}\n",
                f.display()
            ))),
            "targets[0].header_files[\"a b\"]: \"a b\" is not a valid HTTP header name",
        );
    }

    #[test]
    fn load_reads_the_file_and_resolves_relative_header_files() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "token", format!("{SENTINEL}\n").as_bytes());
        let cfg_path = write(
            dir.path(),
            "mcp_exporter.yml",
            b"targets:\n  - name: kb\n    url: https://kb.example.com/mcp\n    header_files:\n      X-Token: token\n",
        );
        let cfg = Config::load(&cfg_path).unwrap();
        assert_eq!(cfg.targets[0].headers[0].1.expose(), SENTINEL);

        // parse() resolves relative paths against the directory of `source`
        let text = std::fs::read_to_string(&cfg_path).unwrap();
        let source = cfg_path.display().to_string();
        let cfg2 = Config::parse(&text, &source, &fake_env).unwrap();
        assert_eq!(cfg, cfg2);
    }

    #[test]
    fn inline_header_values_are_capped_like_header_files() {
        let at_cap = "a".repeat(64 * 1024);
        ok(&one_target(&format!(
            "    headers:\n      X-Key: {at_cap}\n"
        )));
        let over = "a".repeat(64 * 1024 + 1);
        assert_eq!(
            err(&one_target(&format!("    headers:\n      X-Key: {over}\n"))),
            "test.yml: targets[0].headers.X-Key: header value is larger than 65536 bytes"
        );
        // 50 MB from the environment
        let env = |name: &str| (name == "BIG").then(|| "a".repeat(50 << 20));
        let e = Config::parse(
            &one_target("    headers:\n      X-Key: \"${BIG}\"\n"),
            "test.yml",
            &env,
        )
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "test.yml: targets[0].headers.X-Key: header value is larger than 65536 bytes"
        );
        assert_eq!(e.field(), Some("targets[0].headers.X-Key"));
        // and on the command line
        let e = header_flag(&format!("X-Key: {over}")).unwrap_err();
        assert_eq!(e, "header X-Key: header value is larger than 65536 bytes");
    }

    #[test]
    fn header_flags_are_checked_like_config_headers() {
        // SAFETY: a variable only this test reads.
        unsafe { std::env::set_var("MCP_EXPORTER_TEST_FLAG_TOKEN", SENTINEL) };
        let (name, value) = header_flag("Authorization: Bearer ${MCP_EXPORTER_TEST_FLAG_TOKEN}")
            .expect("a valid flag");
        assert_eq!(name, "Authorization");
        assert_eq!(value.expose(), format!("Bearer {SENTINEL}"));
        for (flag, why) in [
            ("no colon", "expected 'Name: value'"),
            ("Bad Name: x", "not a valid HTTP header name"),
            ("Mcp-Session-Id: x", "set by the exporter's MCP client"),
            ("X-Key:", "header value is empty"),
            (
                "X-Key: ${MCP_EXPORTER_TEST_UNSET_VAR}",
                "MCP_EXPORTER_TEST_UNSET_VAR is not set",
            ),
        ] {
            let e = header_flag(flag).unwrap_err();
            assert!(e.contains(why), "{flag}: {e}");
        }
        let e = header_flag(&format!("X-Key: {SENTINEL}\u{7}")).unwrap_err();
        assert!(!e.contains(SENTINEL), "{e}");
    }
}
