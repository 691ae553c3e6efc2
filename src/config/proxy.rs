//! `proxies:`: the passive mode's reverse proxies, each in front of one MCP server.
//!
//! Parsed as strictly as targets (unknown keys are errors, every error names the field by its
//! path, `proxies[0].listen`), because a reload replaces proxies that carry real clients' traffic:
//! a typo must fail the reload, not silently open a proxy with a default.

use std::net::SocketAddr;
use std::time::Duration;

use super::raw::{RawBytes, RawClientLabel, RawProxy, parse_bytes};
use super::validator::Validator;
use super::{ConfigError, HttpClientConfig, Secret};

/// Default `listen` of the `proxy` subcommand and of the demo's `kb_proxy`.
pub const DEFAULT_PROXY_LISTEN: &str = "127.0.0.1:10119";

/// Most distinct `client` label values one proxy may be configured to keep.
const MAX_CLIENTS_LIMIT: i64 = 1000;
/// Most client sessions one proxy may be configured to track: at the cap each new session scans
/// the table for the idlest, under the table's lock, so the cap bounds that scan too.
const MAX_SESSIONS_LIMIT: i64 = 100_000;
/// Most connections one proxy's listener may be configured to hold. Each costs up to two file
/// descriptors (the client's socket and its upstream connection); the cap actually used is also
/// bounded by the process's file limit at start (see `crate::proxy::budget`).
const MAX_CONNECTIONS_LIMIT: i64 = 1_000_000;

/// Where a client's `client` label value comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClientLabel {
    /// `clientInfo.name` (legacy: `initialize` params; modern: each request's `_meta`).
    ClientInfo,
    /// A request header set by the client or a gateway in front (e.g. `X-Client-Id`).
    Header(String),
}

/// One validated proxy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpProxyConfig {
    /// The `proxy` label.
    pub name: String,
    /// Where clients connect.
    pub listen: SocketAddr,
    /// The MCP server's endpoint; its path is served as-is on `listen`.
    pub upstream: url::Url,
    pub client_label: ClientLabel,
    pub max_clients: usize,
    pub max_sessions: usize,
    pub session_idle_timeout: Duration,
    pub cursor_grace: Duration,
    pub relist_grace: Duration,
    /// Time a 2026-07-28 client may take between a listing and a call made from it beyond the
    /// listing's `ttlMs` (the host's own turn: a model's answer) before the call counts as made
    /// with an expired listing.
    pub ttl_grace: Duration,
    pub catalog_refresh_interval: Duration,
    /// Client label values whose `tools/list` is answered as one page.
    pub flatten_pages: Vec<String>,
    pub max_request_bytes: usize,
    /// Connections the listener holds at once (before the file-limit check lowers it).
    pub max_connections: usize,
    /// Time an upstream has to answer a request that is not a stream: its head, and for a JSON
    /// answer its whole body.
    pub upstream_timeout: Duration,
    /// Time a stream (an SSE answer) may go without a byte from the upstream, or without the
    /// client taking one, before the proxy ends it.
    pub stream_idle_timeout: Duration,
    /// Time a `client` label value may go unused before its slot and its series are freed.
    pub client_idle_timeout: Duration,
    /// Forward `/.well-known/oauth-protected-resource[/path]` to the upstream (RFC 9728).
    pub forward_oauth_metadata: bool,
    /// Active healing (off by default): the proxy sends stale sessions a `list_changed` of its
    /// own and answers calls of removed tools itself (see `crate::proxy::heal`).
    pub heal: bool,
    /// `headers` and `header_files`: sent by the catalog session only, never added to clients'
    /// forwarded requests.
    pub headers: Vec<(String, Secret)>,
    /// The `http_config` blocks (credentials, TLS, proxy) of the catalog session, validated as
    /// a target's; not inherited from `global` (credentials go only where a proxy names them).
    pub http: HttpClientConfig,
}

impl McpProxyConfig {
    /// A proxy with every default, as the `proxy` subcommand and the demo make it.
    pub fn new(name: &str, listen: SocketAddr, upstream: url::Url) -> Self {
        McpProxyConfig {
            name: name.to_string(),
            listen,
            upstream,
            client_label: ClientLabel::ClientInfo,
            max_clients: 20,
            max_sessions: 10_000,
            session_idle_timeout: Duration::from_secs(30 * 60),
            cursor_grace: Duration::from_secs(30),
            relist_grace: Duration::from_secs(60),
            ttl_grace: Duration::from_secs(30),
            catalog_refresh_interval: Duration::from_secs(5 * 60),
            flatten_pages: Vec::new(),
            max_request_bytes: 4 * 1024 * 1024,
            max_connections: 4096,
            upstream_timeout: Duration::from_secs(120),
            stream_idle_timeout: Duration::from_secs(600),
            client_idle_timeout: Duration::from_secs(24 * 60 * 60),
            forward_oauth_metadata: false,
            heal: false,
            headers: Vec::new(),
            http: HttpClientConfig::default(),
        }
    }
}

/// Validate `proxies:`: names and listen addresses unique.
pub(super) fn validate(
    v: &Validator<'_>,
    raw: Vec<RawProxy>,
) -> Result<Vec<McpProxyConfig>, ConfigError> {
    let mut out: Vec<McpProxyConfig> = Vec::new();
    for (i, r) in raw.into_iter().enumerate() {
        let p = format!("proxies[{i}]");
        let proxy = one(v, &p, r)?;
        let clashes = [
            (
                "name",
                out.iter().position(|o| o.name == proxy.name),
                format!("duplicate proxy name {:?}", proxy.name),
            ),
            (
                "listen",
                out.iter().position(|o| o.listen == proxy.listen),
                format!(
                    "{} is already the listen address of another proxy",
                    proxy.listen
                ),
            ),
        ];
        for (field, first, what) in clashes {
            if let Some(j) = first {
                return Err(v.err(
                    format!("{p}.{field}"),
                    format!("{what} (first used by proxies[{j}])"),
                ));
            }
        }
        out.push(proxy);
    }
    Ok(out)
}

fn one(v: &Validator<'_>, p: &str, mut r: RawProxy) -> Result<McpProxyConfig, ConfigError> {
    let raw_http = r.take_http();
    let name = r.name.ok_or_else(|| {
        v.err(
            format!("{p}.name"),
            "required (it becomes the `proxy` label)",
        )
    })?;
    let valid_name = name.len() <= 64
        && name
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if !valid_name {
        return Err(v.err(
            format!("{p}.name"),
            format!("{name:?} is not a valid proxy name; use [a-zA-Z_][a-zA-Z0-9_-]*, at most 64 characters"),
        ));
    }
    let listen = r.listen.ok_or_else(|| {
        v.err(
            format!("{p}.listen"),
            "required: host:port where clients connect",
        )
    })?;
    let listen = parse_listen(&listen).ok_or_else(|| {
        v.err(
            format!("{p}.listen"),
            format!("{listen:?} is not host:port"),
        )
    })?;
    let upstream = r
        .upstream
        .ok_or_else(|| v.err(format!("{p}.upstream"), "required: the MCP server's URL"))?;
    // The targets' one URL rule (scheme, host, no fragment, no whitespace); its errors never
    // echo the URL, which may carry credentials.
    let upstream = super::endpoint::parse_target_url(upstream.trim())
        .map_err(|why| v.err(format!("{p}.upstream"), why))?;
    // The catalog's credentials: the target's blocks and header rules, by the target's code.
    let who = format!("proxy {name:?}");
    let http = v.http_blocks(p, &who, raw_http)?;
    let own_auth = http.auth.as_ref().map(|(_, block)| *block);
    let http = http.over(&HttpClientConfig::default());
    let names = super::headers::header_names(p, &r.headers, &r.header_files);
    v.no_authorization_header(&who, &names, &http, own_auth)?;
    v.no_user_info(&format!("{p}.upstream"), &who, &upstream, &http)?;
    let headers = v.headers(p, r.headers.take(), r.header_files.take())?;
    let mut c = McpProxyConfig::new(&name, listen, upstream);
    c.headers = headers;
    c.http = http;
    c.client_label = match r.client_label {
        None => ClientLabel::ClientInfo,
        Some(RawClientLabel::Named(n)) if n == "clientInfo" => ClientLabel::ClientInfo,
        Some(RawClientLabel::Named(n)) => {
            return Err(v.err(
                format!("{p}.client_label"),
                format!("{n:?}: write `clientInfo` or `{{header: NAME}}`"),
            ));
        }
        Some(RawClientLabel::Header(h)) => {
            if axum::http::HeaderName::from_bytes(h.header.as_bytes()).is_err() {
                return Err(v.err(
                    format!("{p}.client_label.header"),
                    format!("{:?} is not a header name", h.header),
                ));
            }
            ClientLabel::Header(h.header.to_ascii_lowercase())
        }
    };
    let range = |key: &str, raw: Option<i64>, max: i64| -> Result<Option<usize>, ConfigError> {
        match raw {
            None => Ok(None),
            Some(n) if (1..=max).contains(&n) => Ok(Some(n as usize)),
            Some(n) => Err(v.err(
                format!("{p}.{key}"),
                format!("{n} is out of range; must be between 1 and {max}"),
            )),
        }
    };
    if let Some(n) = range("max_clients", r.max_clients, MAX_CLIENTS_LIMIT)? {
        c.max_clients = n;
    }
    if let Some(n) = range("max_sessions", r.max_sessions, MAX_SESSIONS_LIMIT)? {
        c.max_sessions = n;
    }
    if let Some(n) = range("max_connections", r.max_connections, MAX_CONNECTIONS_LIMIT)? {
        c.max_connections = n;
    }
    if let Some(on) = r.forward_oauth_metadata {
        c.forward_oauth_metadata = on;
    }
    if let Some(on) = r.heal {
        c.heal = on;
    }
    for (key, raw, slot) in [
        (
            "session_idle_timeout",
            r.session_idle_timeout,
            &mut c.session_idle_timeout,
        ),
        ("cursor_grace", r.cursor_grace, &mut c.cursor_grace),
        ("relist_grace", r.relist_grace, &mut c.relist_grace),
        ("ttl_grace", r.ttl_grace, &mut c.ttl_grace),
        (
            "catalog_refresh_interval",
            r.catalog_refresh_interval,
            &mut c.catalog_refresh_interval,
        ),
        (
            "upstream_timeout",
            r.upstream_timeout,
            &mut c.upstream_timeout,
        ),
        (
            "stream_idle_timeout",
            r.stream_idle_timeout,
            &mut c.stream_idle_timeout,
        ),
        (
            "client_idle_timeout",
            r.client_idle_timeout,
            &mut c.client_idle_timeout,
        ),
    ] {
        if let Some(d) = v.duration(p, key, raw)? {
            *slot = d;
        }
    }
    if let Some(list) = r.flatten_pages {
        // Matched against `client` label values, which are made safe first: a name that would
        // change on the way could never match.
        if let Some((i, n)) = list
            .iter()
            .enumerate()
            .find(|(_, n)| n.is_empty() || safe_label(n) != **n)
        {
            return Err(v.err(
                format!("{p}.flatten_pages[{i}]"),
                format!(
                    "{n:?} is not a client label value (letters, digits, `._-/@+:` and space, at most 64 bytes)"
                ),
            ));
        }
        c.flatten_pages = list;
    }
    if let Some(raw) = r.max_request_bytes {
        let field = format!("{p}.max_request_bytes");
        let n = match raw {
            RawBytes::Number(n) => u64::try_from(n).ok(),
            RawBytes::Text(t) => parse_bytes(&t),
        }
        .filter(|n| (1024..=64 * 1024 * 1024).contains(n))
        .ok_or_else(|| {
            v.err(
                field,
                "a size between 1KiB and 64MiB: a number of bytes or 4MiB",
            )
        })?;
        c.max_request_bytes = n as usize;
    }
    Ok(c)
}

/// The `proxy` subcommand's tuning flags: the keys of a `proxies:` entry, checked by the same
/// rules (an error names the key as `proxy.KEY`).
#[derive(Debug, Default, clap::Args)]
pub struct ProxyFlags {
    /// Connections the proxy holds at once (each costs up to 2 file descriptors; lowered at
    /// start to fit the open-files limit, see docs/proxy.md). Default 4096.
    #[arg(long = "max-connections", value_name = "N")]
    pub max_connections: Option<i64>,
    /// Time the upstream has for an answer's head and, unless it is a stream, its body.
    /// Default 2m.
    #[arg(long = "upstream-timeout", value_name = "DURATION")]
    pub upstream_timeout: Option<String>,
    /// Time a stream may go without a byte before the proxy ends it. Default 10m.
    #[arg(long = "stream-idle-timeout", value_name = "DURATION")]
    pub stream_idle_timeout: Option<String>,
    /// Time a `client` label value may go unused before its slot and series are freed.
    /// Default 24h.
    #[arg(long = "client-idle-timeout", value_name = "DURATION")]
    pub client_idle_timeout: Option<String>,
    /// Also forward /.well-known/oauth-protected-resource[/path] to the upstream.
    #[arg(long = "forward-oauth-metadata")]
    pub forward_oauth_metadata: bool,
    /// ACTIVE healing, off by default (the proxy is passive without it): send a session whose
    /// tool list is older than the upstream's a notifications/tools/list_changed of the proxy's
    /// own on its open stream, and answer a tools/call of a tool the upstream no longer lists
    /// with -32602 itself instead of forwarding it. See docs/proxy.md#healing-active-opt-in.
    #[arg(long = "heal")]
    pub heal: bool,
    /// `--header` and `--http-config`, as `check` takes them: the catalog session's credentials
    /// (clients' own requests are forwarded with their own headers, untouched).
    #[command(flatten)]
    pub http: super::HttpFlags,
}

/// The proxy of the `proxy` subcommand: `name`, `listen`, `upstream` and the tuning flags, as if
/// written in a `proxies:` entry.
pub fn from_flags(
    name: &str,
    listen: SocketAddr,
    upstream: &str,
    flags: ProxyFlags,
) -> Result<McpProxyConfig, ConfigError> {
    let v = Validator {
        file: "command line",
        base_dir: None,
        env: &|_| None,
    };
    let headers = flags.http.headers().map_err(|why| v.err("--header", why))?;
    let http = flags.http.http_config()?;
    let raw = RawProxy {
        name: Some(name.to_string()),
        listen: Some(listen.to_string()),
        upstream: Some(upstream.to_string()),
        client_label: None,
        max_clients: None,
        max_sessions: None,
        session_idle_timeout: None,
        cursor_grace: None,
        relist_grace: None,
        ttl_grace: None,
        catalog_refresh_interval: None,
        flatten_pages: None,
        max_request_bytes: None,
        max_connections: flags.max_connections,
        upstream_timeout: flags.upstream_timeout,
        stream_idle_timeout: flags.stream_idle_timeout,
        client_idle_timeout: flags.client_idle_timeout,
        forward_oauth_metadata: Some(flags.forward_oauth_metadata),
        heal: Some(flags.heal),
        ..RawProxy::default()
    };
    let mut c = one(&v, "proxy", raw)?;
    let own_auth = super::http_blocks::auth_block(&http.auth);
    let names: Vec<(String, &str)> = headers
        .iter()
        .map(|(n, _)| ("--header".to_owned(), n.as_str()))
        .collect();
    v.no_authorization_header("--http-config", &names, &http, own_auth)?;
    v.no_user_info("--upstream", "--http-config", &c.upstream, &http)?;
    c.headers = headers;
    c.http = http;
    Ok(c)
}

/// `host:port`, `:port` (every interface) or `localhost:port`.
pub fn parse_listen(addr: &str) -> Option<SocketAddr> {
    let full = if addr.starts_with(':') {
        format!("0.0.0.0{addr}")
    } else {
        addr.replace("localhost:", "127.0.0.1:")
    };
    full.parse().ok()
}

/// Longest `client` label value.
pub const MAX_CLIENT_LABEL_BYTES: usize = 64;

/// `name` in a safe charset (letters, digits, `._-/@+:` and space; anything else becomes `_`),
/// at most [`MAX_CLIENT_LABEL_BYTES`].
pub fn safe_label(name: &str) -> String {
    let mut out = String::new();
    for c in name.trim().chars() {
        if out.len() >= MAX_CLIENT_LABEL_BYTES {
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
    use super::super::test_support::ok;
    use super::*;

    fn err(text: &str) -> String {
        super::super::test_support::err(text)
    }

    #[test]
    fn a_proxy_gets_defaults_and_overrides() {
        let c = ok(
            "proxies:\n  - name: kb\n    listen: 127.0.0.1:10119\n    upstream: http://127.0.0.1:10118/mcp\n    client_label: {header: X-Client-Id}\n    flatten_pages: [claude-code]\n    max_request_bytes: 1MiB\n    cursor_grace: 5s\n    max_connections: 300\n    upstream_timeout: 20s\n    client_idle_timeout: 1h\n    forward_oauth_metadata: true\n    heal: true\n",
        );
        let p = &c.proxies[0];
        assert_eq!(p.name, "kb");
        assert_eq!(p.client_label, ClientLabel::Header("x-client-id".into()));
        assert_eq!(p.max_request_bytes, 1024 * 1024);
        assert_eq!(p.cursor_grace, Duration::from_secs(5));
        assert_eq!(p.max_sessions, 10_000);
        assert_eq!(p.flatten_pages, vec!["claude-code".to_string()]);
        assert_eq!(p.max_connections, 300);
        assert_eq!(p.upstream_timeout, Duration::from_secs(20));
        assert_eq!(p.stream_idle_timeout, Duration::from_secs(600));
        assert_eq!(p.client_idle_timeout, Duration::from_secs(3600));
        assert!(p.forward_oauth_metadata);
        assert!(p.heal);
        assert!(
            !McpProxyConfig::new(
                "x",
                "127.0.0.1:1".parse().expect("address"),
                url::Url::parse("http://h/mcp").expect("url")
            )
            .heal,
            "off by default"
        );
    }

    #[test]
    fn subcommand_flags_follow_the_same_rules() {
        let up = "http://h/mcp";
        let addr: SocketAddr = "127.0.0.1:1".parse().expect("address");
        let flags = ProxyFlags {
            max_connections: Some(10),
            upstream_timeout: Some("5s".into()),
            forward_oauth_metadata: true,
            heal: true,
            ..ProxyFlags::default()
        };
        let c = from_flags("default", addr, up, flags).expect("valid");
        assert_eq!(c.max_connections, 10);
        assert_eq!(c.upstream_timeout, Duration::from_secs(5));
        assert!(c.forward_oauth_metadata);
        assert!(c.heal);
        assert_eq!(c.client_idle_timeout, Duration::from_secs(24 * 3600));
        let bad = ProxyFlags {
            stream_idle_timeout: Some("0s".into()),
            ..ProxyFlags::default()
        };
        let e = from_flags("default", addr, up, bad)
            .expect_err("refused")
            .to_string();
        assert!(e.contains("proxy.stream_idle_timeout"), "{e}");
    }

    #[test]
    fn the_catalog_session_takes_a_targets_headers_and_http_blocks() {
        use super::super::test_support::{SENTINEL, assert_has, write};
        use super::super::{SecretSource, TargetAuth};
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "token", format!("{SENTINEL}\n").as_bytes());
        let base = "proxies:\n  - name: kb\n    listen: 127.0.0.1:10119\n    upstream: https://kb.example.com/mcp\n";
        let text = format!(
            "{base}    headers:\n      X-Tenant: blue\n      X-Key: ${{KB_TOKEN}}\n    authorization:\n      credentials_file: token\n    tls_config:\n      insecure_skip_verify: true\n    proxy_url: http://proxy.example:3128\n"
        );
        let c = crate::config::Config::parse(
            &text,
            &dir.path().join("c.yml").display().to_string(),
            &super::super::test_support::fake_env,
        )
        .unwrap();
        let p = &c.proxies[0];
        let headers: Vec<(&str, &str)> = p
            .headers
            .iter()
            .map(|(n, v)| (n.as_str(), v.expose()))
            .collect();
        assert_eq!(headers, [("X-Tenant", "blue"), ("X-Key", SENTINEL)]);
        assert_eq!(
            p.http.auth,
            TargetAuth::Authorization {
                scheme: "Bearer".into(),
                credentials: SecretSource::File(dir.path().join("token")),
            }
        );
        assert!(p.http.tls.insecure_skip_verify);
        assert!(!format!("{c:?}").contains(SENTINEL), "secret in Debug");
        // oauth2 with discovery and its trust keys, by the target's validator
        let c = ok(&format!(
            "{base}    oauth2:\n      client_id: c\n      client_secret: ${{KB_TOKEN}}\n      issuer: https://auth.example.com\n"
        ));
        let TargetAuth::OAuth2(o) = &c.proxies[0].http.auth else {
            panic!("oauth2")
        };
        assert_eq!(
            o.issuer.as_ref().map(url::Url::as_str),
            Some("https://auth.example.com/")
        );
        assert!(!format!("{c:?}").contains(SENTINEL));
        // Not inherited from global: a proxy's credentials are only its own.
        let c = ok(&format!("global:\n  basic_auth: {{username: u}}\n{base}"));
        assert_eq!(c.proxies[0].http, HttpClientConfig::default());
        // Errors name file, field and why, never the value.
        let e = err(&format!(
            "{base}    authorization:\n      credentials_file: /nonexistent/token\n"
        ));
        assert_has(
            &e,
            "test.yml: proxies[0].authorization.credentials_file: cannot read /nonexistent/token",
        );
        let e = err(&format!(
            "{base}    oauth2:\n      client_id: c\n      client_secret: x\n      issuers: [https://a]\n"
        ));
        assert_has(&e, "unknown field `issuers`");
        let e = err(&format!("{base}    tls_confg: {{}}\n"));
        assert_has(&e, "unknown field `tls_confg`");
        let e = err(&format!(
            "{base}    header_files:\n      X-Key: /nonexistent/key\n"
        ));
        assert_has(
            &e,
            "test.yml: proxies[0].header_files.X-Key: cannot read /nonexistent/key",
        );
        let e = err(&format!("{base}    headers:\n      Mcp-Session-Id: x\n"));
        assert_has(
            &e,
            "proxies[0].headers.Mcp-Session-Id: header Mcp-Session-Id is set by the exporter's MCP client",
        );
        let e = err(&format!(
            "{base}    headers:\n      Authorization: Bearer ${{KB_TOKEN}}\n    basic_auth: {{username: u}}\n"
        ));
        assert_eq!(
            e,
            "test.yml: proxies[0].headers.Authorization: proxy \"kb\" authenticates with `basic_auth`: an Authorization header would conflict with it; remove one of the two"
        );
        let e = err(&format!(
            "{base}    basic_auth: {{username: u}}\n    oauth2: {{client_id: c}}\n"
        ));
        assert_has(
            &e,
            "test.yml: proxies[0].oauth2: proxy \"kb\" sets both `basic_auth` and `oauth2`",
        );
        let e = err(
            "proxies:\n  - name: kb\n    listen: 127.0.0.1:1\n    upstream: https://u:p@kb.example.com/mcp\n    authorization: {credentials: x}\n",
        );
        assert_has(
            &e,
            "proxies[0].upstream: proxy \"kb\" authenticates with `authorization`, and its URL carries user info",
        );
    }

    #[test]
    fn subcommand_header_and_http_config_flags_are_checks_own() {
        use super::super::test_support::{SENTINEL, write};
        let dir = tempfile::tempdir().unwrap();
        let up = "http://h/mcp";
        let addr: SocketAddr = "127.0.0.1:1".parse().expect("address");
        let file = write(
            dir.path(),
            "http.yml",
            format!("basic_auth:\n  username: u\n  password: {SENTINEL}\n").as_bytes(),
        );
        let flags = |headers: &[&str], http: Option<&std::path::Path>| ProxyFlags {
            http: super::super::HttpFlags {
                headers: headers.iter().map(|h| h.to_string()).collect(),
                http_config: http.map(Into::into),
            },
            ..ProxyFlags::default()
        };
        let c = from_flags("default", addr, up, flags(&["X-Tenant: blue"], Some(&file))).unwrap();
        assert_eq!(c.headers.len(), 1);
        assert!(matches!(
            c.http.auth,
            super::super::TargetAuth::Basic { .. }
        ));
        assert!(!format!("{c:?}").contains(SENTINEL));
        let e = from_flags("default", addr, up, flags(&["X-Key:"], None))
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "command line: --header: header X-Key: header value is empty"
        );
        let e = from_flags(
            "default",
            addr,
            up,
            flags(&[&format!("Authorization: Bearer {SENTINEL}")], Some(&file)),
        )
        .unwrap_err()
        .to_string();
        assert_eq!(
            e,
            "command line: --header: --http-config authenticates with `basic_auth`: an Authorization header would conflict with it; remove one of the two"
        );
        let typo = write(dir.path(), "typo.yml", b"tls_confg: {}\n");
        let e = from_flags("default", addr, up, flags(&[], Some(&typo)))
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with(&typo.display().to_string()) && e.contains("unknown field `tls_confg`"),
            "{e}"
        );
    }

    #[test]
    fn errors_name_the_file_and_field() {
        let base =
            "proxies:\n  - name: kb\n    listen: 127.0.0.1:10119\n    upstream: http://h/mcp\n";
        let e = err(&format!("{base}    max_sessions: 0\n"));
        assert!(
            e.contains("test.yml") && e.contains("proxies[0].max_sessions"),
            "{e}"
        );
        let e = err(&format!("{base}    flatten_pages: [ok, \"a<b\"]\n"));
        assert!(
            e.contains("test.yml") && e.contains("proxies[0].flatten_pages[1]"),
            "{e}"
        );
        let e = err(&format!("{base}    max_connections: 0\n"));
        assert!(e.contains("proxies[0].max_connections"), "{e}");
        let e = err(&format!("{base}    upstream_timeout: soon\n"));
        assert!(e.contains("proxies[0].upstream_timeout"), "{e}");
        let e = err(&format!("{base}    bogus: 1\n"));
        assert!(e.contains("bogus"), "{e}");
        let e = err("proxies:\n  - name: 9kb\n    listen: 127.0.0.1:1\n    upstream: http://h/\n");
        assert!(e.contains("proxies[0].name"), "{e}");
        let e = err(&format!(
            "{base}  - name: kb\n    listen: 127.0.0.1:2\n    upstream: http://h/\n"
        ));
        assert!(
            e.contains("proxies[1].name") && e.contains("duplicate"),
            "{e}"
        );
        let e = err(&format!(
            "{base}  - name: kb2\n    listen: 127.0.0.1:10119\n    upstream: http://h/\n"
        ));
        assert!(e.contains("proxies[1].listen"), "{e}");
        let e = err("proxies:\n  - name: kb\n    listen: 127.0.0.1:1\n    upstream: ftp://h/\n");
        assert!(e.contains("proxies[0].upstream"), "{e}");
    }

    /// An upstream is held to the targets' one URL rule, and the subcommand's `--upstream` to
    /// the same: no host, a fragment or whitespace are refused with why, never echoing the URL
    /// (it may carry credentials).
    #[test]
    fn the_upstream_follows_the_targets_url_rule_and_is_never_echoed() {
        let addr: SocketAddr = "127.0.0.1:1".parse().expect("address");
        for (upstream, why) in [
            ("http:///mcp", "no host"),
            ("https://u:hunter2@h/mcp#frag", "fragment"),
            ("http://u:hunter2@h/m cp", "whitespace"),
            ("ftp://u:hunter2@h/", "scheme"),
        ] {
            let e = err(&format!(
                "proxies:\n  - name: kb\n    listen: 127.0.0.1:1\n    upstream: \"{upstream}\"\n"
            ));
            assert!(e.contains("proxies[0].upstream") && e.contains(why), "{e}");
            assert!(!e.contains("hunter2"), "{e}");
            let e = from_flags("default", addr, upstream, ProxyFlags::default())
                .expect_err("refused")
                .to_string();
            assert!(e.contains("upstream") && e.contains(why), "{e}");
            assert!(!e.contains("hunter2"), "{e}");
        }
    }
}
