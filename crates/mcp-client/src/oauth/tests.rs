//! `TokenSource` against an authorization server and protected resource of our own, serving
//! what the MCP authorization spec and RFC 9728 / RFC 8414 describe, with switches for the
//! failures we must survive.

use super::*;
use crate::net::http_config::{ClientAuth, ProxyConfig, SecretSource, TlsConfig};
use crate::secret::Secret;
use axum::Router;
use axum::extract::State as AxState;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

const SECRET: &str = "s3cret-value";

#[derive(Default)]
struct Mock {
    base: Mutex<String>,
    token_requests: AtomicU64,
    forms: Mutex<Vec<HashMap<String, String>>>,
    basic: Mutex<Vec<Option<String>>>,
    expires_in: AtomicU64,
    /// Token requests wait for a permit when set.
    gate: Option<tokio::sync::Semaphore>,
    fail: AtomicBool,
    html: AtomicBool,
    huge: AtomicBool,
    no_metadata: AtomicBool,
    /// The path-based protected resource metadata location answers with a web page.
    spa: AtomicBool,
    prm_resource: Mutex<Option<String>>,
    issuer: Mutex<Option<String>>,
    /// The protected resource metadata's `authorization_servers` (default: its own `/as`).
    authorization_servers: Mutex<Option<Vec<String>>>,
    /// Metadata documents served (every GET).
    gets: AtomicU64,
}

impl Mock {
    fn base(&self) -> String {
        self.base.lock().unwrap().clone()
    }
    fn count(&self) -> u64 {
        self.token_requests.load(Ordering::SeqCst)
    }
    /// Every request this server was sent: metadata GETs and token requests.
    fn requests(&self) -> u64 {
        self.gets.load(Ordering::SeqCst) + self.count()
    }
    fn last_form(&self) -> HashMap<String, String> {
        self.forms
            .lock()
            .unwrap()
            .last()
            .cloned()
            .unwrap_or_default()
    }
}

/// A metadata document, or 404 when the mock publishes none; `field` is the overridable value.
fn metadata(
    m: &Mock,
    field: &Mutex<Option<String>>,
    default: &str,
    doc: impl FnOnce(&str, String) -> serde_json::Value,
) -> Response {
    m.gets.fetch_add(1, Ordering::SeqCst);
    if m.no_metadata.load(Ordering::SeqCst) {
        return StatusCode::NOT_FOUND.into_response();
    }
    let base = m.base();
    let value = field.lock().unwrap().clone();
    let value = value.unwrap_or_else(|| format!("{base}{default}"));
    axum::Json(doc(&base, value)).into_response()
}

async fn prm(AxState(m): AxState<Arc<Mock>>) -> Response {
    if m.spa.load(Ordering::SeqCst) {
        m.gets.fetch_add(1, Ordering::SeqCst);
        return ([(header::CONTENT_TYPE, "text/html")], "<html>app</html>").into_response();
    }
    root_prm(AxState(m)).await
}

async fn root_prm(AxState(m): AxState<Arc<Mock>>) -> Response {
    let servers = m.authorization_servers.lock().unwrap().clone();
    metadata(&m, &m.prm_resource, "/mcp", |base, resource| {
        serde_json::json!({
            "resource": resource,
            "authorization_servers": servers.unwrap_or_else(|| vec![format!("{base}/as")]),
            "scopes_supported": ["mcp:read"],
        })
    })
}

async fn as_meta(AxState(m): AxState<Arc<Mock>>) -> Response {
    metadata(&m, &m.issuer, "/as", |base, issuer| {
        serde_json::json!({
            "issuer": issuer,
            "token_endpoint": format!("{base}/as/token"),
            "token_endpoint_auth_methods_supported": ["client_secret_post"],
        })
    })
}

async fn token_endpoint(
    AxState(m): AxState<Arc<Mock>>,
    headers: HeaderMap,
    body: String,
) -> Response {
    let n = m.token_requests.fetch_add(1, Ordering::SeqCst) + 1;
    let form: HashMap<String, String> = url::form_urlencoded::parse(body.as_bytes())
        .into_owned()
        .collect();
    m.forms.lock().unwrap().push(form);
    m.basic.lock().unwrap().push(
        headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned),
    );
    if let Some(gate) = &m.gate {
        let _permit = gate.acquire().await;
    }
    if m.fail.load(Ordering::SeqCst) {
        return (
            StatusCode::INTERNAL_SERVER_ERROR,
            axum::Json(serde_json::json!({"error": "server_error", "error_description": SECRET})),
        )
            .into_response();
    }
    if m.html.load(Ordering::SeqCst) {
        return ([(header::CONTENT_TYPE, "text/html")], "<html>login</html>").into_response();
    }
    if m.huge.load(Ordering::SeqCst) {
        let chunks = futures_util::stream::iter(
            (0..160).map(|_| Ok::<_, std::io::Error>(vec![b' '; 64 * 1024])),
        );
        return (
            [(header::CONTENT_TYPE, "application/json")],
            axum::body::Body::from_stream(chunks),
        )
            .into_response();
    }
    let mut doc = serde_json::json!({"access_token": format!("tok-{n}"), "token_type": "Bearer"});
    let e = m.expires_in.load(Ordering::SeqCst);
    if e > 0 {
        doc["expires_in"] = e.into();
    }
    axum::Json(doc).into_response()
}

async fn start(mock: Mock) -> Arc<Mock> {
    let m = Arc::new(mock);
    let app = Router::new()
        .route("/.well-known/oauth-protected-resource/mcp", get(prm))
        .route("/.well-known/oauth-protected-resource", get(root_prm))
        .route("/.well-known/oauth-authorization-server/as", get(as_meta))
        .route("/as/token", post(token_endpoint))
        .route("/token", post(token_endpoint))
        .with_state(m.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    *m.base.lock().unwrap() = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    m
}

fn config(token_url: Option<String>, auth: ClientAuth) -> OAuth2Config {
    OAuth2Config {
        client_id: "probe".into(),
        client_auth: auth,
        scopes: Vec::new(),
        token_url: token_url.map(|u| Url::parse(&u).unwrap()),
        issuer: None,
        metadata_origins: Vec::new(),
        endpoint_params: vec![
            ("audience".into(), "api".into()),
            ("grant_type".into(), "x".into()),
        ],
        tls: TlsConfig::default(),
        proxy: ProxyConfig::Direct,
    }
}

fn secret() -> SecretSource {
    SecretSource::Inline(Secret::new(SECRET))
}

fn source(m: &Mock, token_url: bool, auth: ClientAuth) -> Arc<TokenSource> {
    let base = m.base();
    let cfg = config(token_url.then(|| format!("{base}/token")), auth);
    TokenSource::new(
        "t",
        &cfg,
        &Url::parse(&format!("{base}/mcp")).unwrap(),
        reqwest::Client::new(),
    )
}

async fn bearer(ts: &TokenSource) -> HeaderValue {
    ts.bearer().await.unwrap().expect("a token")
}

fn refusal<'a>(status: u16, www: &'a str, sent: Option<&'a HeaderValue>) -> Refusal<'a> {
    Refusal {
        status,
        www_authenticate: Some(www),
        sent,
    }
}

/// Waits (bounded) until `cond` holds.
async fn until(mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !cond() {
        assert!(Instant::now() < deadline, "condition not met in time");
        tokio::task::yield_now().await;
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Moves the tokio clock forward by `d` without waiting.
async fn skip(d: Duration) {
    tokio::time::pause();
    tokio::time::advance(d).await;
    tokio::time::resume();
}

#[tokio::test]
async fn many_callers_share_one_token_request() {
    let m = start(Mock {
        gate: Some(tokio::sync::Semaphore::new(0)),
        ..Mock::default()
    })
    .await;
    let ts = source(&m, true, ClientAuth::SecretBasic(secret()));
    let tasks: Vec<_> = (0..8)
        .map(|_| {
            let ts = ts.clone();
            tokio::spawn(async move { bearer(&ts).await })
        })
        .collect();
    until(|| m.count() == 1).await;
    m.gate.as_ref().unwrap().add_permits(100);
    for t in tasks {
        assert_eq!(t.await.unwrap().to_str().unwrap(), "Bearer tok-1");
    }
    assert_eq!(m.count(), 1);
    // client_secret_basic: the id and secret in the header, not the form; our own keys are not
    // replaced by endpoint_params, which are sent too.
    let form = m.last_form();
    assert_eq!(form["grant_type"], "client_credentials");
    assert_eq!(form["audience"], "api");
    assert_eq!(form["resource"], format!("{}/mcp", m.base()));
    assert!(!form.contains_key("client_secret"));
    assert!(
        m.basic.lock().unwrap()[0]
            .as_deref()
            .unwrap()
            .starts_with("Basic ")
    );
}

#[tokio::test]
async fn tokens_are_renewed_before_they_expire() {
    let m = start(Mock::default()).await;
    m.expires_in.store(100, Ordering::SeqCst);
    let ts = source(&m, true, ClientAuth::SecretPost(secret()));
    assert_eq!(bearer(&ts).await.to_str().unwrap(), "Bearer tok-1");
    assert_eq!(m.last_form()["client_secret"], SECRET);
    skip(Duration::from_secs(70)).await;
    assert_eq!(bearer(&ts).await.to_str().unwrap(), "Bearer tok-1");
    skip(Duration::from_secs(10)).await; // past 3/4 of the lifetime
    assert_eq!(bearer(&ts).await.to_str().unwrap(), "Bearer tok-2");
    assert_eq!(m.count(), 2);
}

#[tokio::test]
async fn a_refused_token_is_replaced_once_for_all_connections() {
    let m = start(Mock::default()).await;
    let ts = source(&m, true, ClientAuth::None);
    let old = bearer(&ts).await;
    let www = r#"Bearer error="invalid_token""#;
    // Two connections were refused with the same token: one new token.
    assert_eq!(
        ts.challenged(&refusal(401, www, Some(&old))).await,
        Ok(Retry::Once)
    );
    assert_eq!(
        ts.challenged(&refusal(401, www, Some(&old))).await,
        Ok(Retry::Once)
    );
    assert_eq!(m.count(), 2);
    let new = bearer(&ts).await;
    assert_eq!(new.to_str().unwrap(), "Bearer tok-2");
    assert_eq!(m.last_form()["client_id"], "probe");
    // The new token refused at once: not another token now, and the failure backs off.
    let e = ts
        .challenged(&refusal(401, www, Some(&new)))
        .await
        .unwrap_err();
    assert_eq!(e.step, AuthStep::Unauthorized);
    assert_eq!(m.count(), 2);
    assert!(ts.bearer().await.is_err());
    assert_eq!(m.count(), 2, "no token request while backing off");
    // One failure in a streak of one refused token: at most 1 s.
    skip(Duration::from_secs(1)).await;
    let third = bearer(&ts).await;
    assert_eq!(third.to_str().unwrap(), "Bearer tok-3");
    // Refused again at once: the streak makes the wait longer (2 s, at least 1 s with jitter).
    let e = ts
        .challenged(&refusal(401, www, Some(&third)))
        .await
        .unwrap_err();
    assert_eq!(e.step, AuthStep::Unauthorized);
    skip(BACKOFF_START).await;
    assert!(ts.bearer().await.is_err());
    assert_eq!(m.count(), 3);
    skip(Duration::from_secs(2)).await;
    assert_eq!(bearer(&ts).await.to_str().unwrap(), "Bearer tok-4");
    // A token that outlived the window is refused: a new one at once.
    skip(REFUSAL_WINDOW).await;
    let fourth = HeaderValue::from_static("Bearer tok-4");
    assert_eq!(
        ts.challenged(&refusal(401, www, Some(&fourth))).await,
        Ok(Retry::Once)
    );
    assert_eq!(m.count(), 5);
}

#[tokio::test]
async fn failures_back_off_and_report_the_error_code_only() {
    let m = start(Mock::default()).await;
    m.fail.store(true, Ordering::SeqCst);
    let ts = source(&m, true, ClientAuth::SecretBasic(secret()));
    let e = ts.bearer().await.unwrap_err();
    assert_eq!(e.step, AuthStep::TokenEndpoint);
    assert_eq!(e.detail, "token endpoint refused (HTTP 500): server_error");
    assert_eq!(ts.bearer().await.unwrap_err(), e);
    assert_eq!(m.count(), 1);
    skip(BACKOFF_START).await;
    assert!(ts.bearer().await.is_err());
    assert_eq!(m.count(), 2);
    // Second failure: at least 0.5 s (half of 1 s) before the next request.
    skip(BACKOFF_START / 2 - Duration::from_millis(1)).await;
    assert!(ts.bearer().await.is_err());
    assert_eq!(m.count(), 2);
    m.fail.store(false, Ordering::SeqCst);
    skip(BACKOFF_START * 2).await;
    assert!(
        bearer(&ts)
            .await
            .to_str()
            .unwrap()
            .starts_with("Bearer tok-")
    );
    let shown = format!("{e} {e:?} {ts:?}");
    assert!(
        !shown.contains(SECRET) && !shown.contains("tok-"),
        "{shown}"
    );
}

#[tokio::test]
async fn discovery_follows_the_challenge_and_binds_the_token_to_the_resource() {
    let m = start(Mock::default()).await;
    let ts = source(&m, false, ClientAuth::SecretAuto(secret()));
    // Nothing to discover from before the server's first challenge.
    assert_eq!(ts.bearer().await, Ok(None));
    let base = m.base();
    let www = format!(
        r#"Bearer resource_metadata="{base}/.well-known/oauth-protected-resource/mcp", scope="mcp:basic""#
    );
    assert_eq!(
        ts.challenged(&refusal(401, &www, None)).await,
        Ok(Retry::Once)
    );
    let form = m.last_form();
    assert_eq!(form["resource"], format!("{base}/mcp"));
    assert_eq!(
        form["scope"], "mcp:basic",
        "the challenge's scope comes first"
    );
    // SecretAuto: the AS lists only client_secret_post.
    assert_eq!(form["client_secret"], SECRET);
    let tok = bearer(&ts).await;
    // Step-up: the union of what we had and what the challenge asks, at most MAX_STEP_UPS times.
    let www403 = r#"Bearer error="insufficient_scope", scope="mcp:write""#;
    let mut sent = tok;
    for _ in 0..MAX_STEP_UPS {
        assert_eq!(
            ts.challenged(&refusal(403, www403, Some(&sent))).await,
            Ok(Retry::Once)
        );
        assert_eq!(m.last_form()["scope"], "mcp:basic mcp:write");
        sent = bearer(&ts).await;
    }
    let e = ts
        .challenged(&refusal(403, www403, Some(&sent)))
        .await
        .unwrap_err();
    assert_eq!(e.step, AuthStep::InsufficientScope);
    let other = ts.challenged(&refusal(403, "Bearer", Some(&sent))).await;
    assert_eq!(other.unwrap_err().step, AuthStep::Forbidden);
    assert_eq!(
        ts.challenged(&refusal(500, "", Some(&sent))).await,
        Ok(Retry::No)
    );
}

#[tokio::test]
async fn scopes_supported_are_used_when_the_challenge_has_none() {
    let m = start(Mock::default()).await;
    let ts = source(&m, false, ClientAuth::None);
    assert_eq!(
        ts.challenged(&refusal(401, "Bearer", None)).await,
        Ok(Retry::Once)
    );
    assert_eq!(m.last_form()["scope"], "mcp:read");
}

#[tokio::test]
async fn a_resource_or_issuer_that_is_not_ours_is_refused() {
    let evil = "https://evil.example.com";
    fn resource(m: &Mock) -> &Mutex<Option<String>> {
        &m.prm_resource
    }
    fn issuer(m: &Mock) -> &Mutex<Option<String>> {
        &m.issuer
    }
    for field in [resource as fn(&Mock) -> &Mutex<Option<String>>, issuer] {
        let m = start(Mock::default()).await;
        *field(&m).lock().unwrap() = Some(format!("{evil}/mcp"));
        let ts = source(&m, false, ClientAuth::None);
        let e = ts
            .challenged(&refusal(401, "Bearer", None))
            .await
            .unwrap_err();
        assert_eq!(e.step, AuthStep::Discovery);
        assert!(e.detail.contains(evil), "{}", e.detail);
        assert_eq!(m.count(), 0, "no token request");
    }
}

/// A web page at the path-based resource metadata location counts as absent (the root one is
/// used); no metadata anywhere: the 2025-03-26 default token endpoint. Either way the token is
/// for this server.
#[tokio::test]
async fn missing_metadata_falls_back() {
    for spa in [true, false] {
        let m = start(Mock::default()).await;
        let flag = if spa { &m.spa } else { &m.no_metadata };
        flag.store(true, Ordering::SeqCst);
        let ts = source(&m, false, ClientAuth::None);
        assert_eq!(
            ts.challenged(&refusal(401, "Bearer", None)).await,
            Ok(Retry::Once)
        );
        assert_eq!(m.count(), 1);
        assert_eq!(m.last_form()["resource"], format!("{}/mcp", m.base()));
    }
}

#[tokio::test]
async fn html_and_oversized_answers_are_clear_errors() {
    let m = start(Mock::default()).await;
    m.html.store(true, Ordering::SeqCst);
    let ts = source(&m, true, ClientAuth::None);
    let e = ts.bearer().await.unwrap_err();
    assert_eq!(e.detail, "token endpoint answered text/html, not JSON");

    let m = start(Mock::default()).await;
    m.huge.store(true, Ordering::SeqCst);
    let ts = source(&m, true, ClientAuth::None);
    let e = ts.bearer().await.unwrap_err();
    assert_eq!(e.step, AuthStep::TokenEndpoint);
    assert!(e.detail.contains("larger than 64 KiB"), "{}", e.detail);
}

/// What a [`TokenSource`] reported, as the exporter's metrics would hear it.
#[derive(Default)]
struct Heard {
    requests: Mutex<Vec<bool>>,
    expiry: Mutex<Option<f64>>,
}

impl TokenEvents for Heard {
    fn token_request(&self, ok: bool) {
        self.requests.lock().unwrap().push(ok);
    }
    fn token_expiry(&self, unix_seconds: f64) {
        *self.expiry.lock().unwrap() = Some(unix_seconds);
    }
}

#[tokio::test]
async fn token_requests_and_expiry_are_reported() {
    let m = start(Mock::default()).await;
    m.expires_in.store(300, Ordering::SeqCst);
    let heard = Arc::new(Heard::default());
    let ts = source(&m, true, ClientAuth::None);
    ts.set_metrics(heard.clone());
    bearer(&ts).await;
    assert_eq!(*heard.requests.lock().unwrap(), [true]);
    let expiry = heard.expiry.lock().unwrap().expect("expiry reported");
    let now = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    assert!(
        expiry > now + 200.0 && expiry <= now + 301.0,
        "{expiry} vs {now}"
    );
}

#[test]
fn refresh_points() {
    assert_eq!(
        refresh_after(Duration::from_secs(3600)),
        Duration::from_secs(2700)
    );
    assert_eq!(
        refresh_after(Duration::from_secs(30)),
        Duration::from_secs(20)
    );
    assert_eq!(
        refresh_after(Duration::from_secs(12)),
        Duration::from_secs(6)
    );
}

#[test]
fn backoff_doubles_to_a_minute_with_jitter_in_the_upper_half() {
    assert_eq!(crate::backoff::delay_after(1, 1.0), BACKOFF_START);
    assert_eq!(crate::backoff::delay_after(1, 0.0), BACKOFF_START / 2);
    assert_eq!(crate::backoff::delay_after(3, 1.0), Duration::from_secs(2));
    assert_eq!(crate::backoff::delay_after(20, 1.0), BACKOFF_MAX);
    assert_eq!(crate::backoff::delay_after(u32::MAX, 0.0), BACKOFF_MAX / 2);
}

#[test]
fn scope_selection() {
    let s = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    // Configured scopes win, challenges add to them.
    assert_eq!(
        select_scopes(&s(&["a"]), None, &s(&["b"]), &s(&["c"])),
        s(&["a", "b"])
    );
    // Else the challenge, else scopes_supported, else none.
    assert_eq!(select_scopes(&[], None, &s(&["b"]), &s(&["c"])), s(&["b"]));
    assert_eq!(
        select_scopes(&[], None, &[], &s(&["c", "d"])),
        s(&["c", "d"])
    );
    assert!(select_scopes(&[], None, &[], &[]).is_empty());
    // Step-up: previous ∪ challenged, without duplicates.
    assert_eq!(
        select_scopes(&[], Some(&s(&["a", "b"])), &s(&["b", "c"]), &s(&["x"])),
        s(&["a", "b", "c"])
    );
    // A renewal keeps what was asked for before (not scopes_supported).
    assert!(select_scopes(&[], Some(&[]), &[], &s(&["x"])).is_empty());
}

/// A token source for `m`'s `/mcp` with `cfg`.
fn source_for(m: &Mock, cfg: &OAuth2Config) -> Arc<TokenSource> {
    let url = Url::parse(&format!("{}/mcp", m.base())).unwrap();
    TokenSource::new("t", cfg, &url, reqwest::Client::new())
}

/// The issue-22 case: a server whose resource metadata names an authorization server on another
/// host received `client_id:client_secret` at the first token request. Now nothing is sent
/// there unless `oauth2.issuer` names it; a trusted one listed beside it is used instead.
#[tokio::test]
async fn credentials_go_only_to_an_authorization_server_the_configuration_trusts() {
    let foreign = start(Mock::default()).await;
    let m = start(Mock::default()).await;
    let foreign_as = format!("{}/as", foreign.base());
    *m.authorization_servers.lock().unwrap() = Some(vec![foreign_as.clone()]);
    let cfg = config(None, ClientAuth::SecretBasic(secret()));
    let ts = source_for(&m, &cfg);
    let e = ts
        .challenged(&refusal(401, "Bearer", None))
        .await
        .unwrap_err();
    assert_eq!(e.step, AuthStep::UntrustedAuthorizationServer);
    assert_eq!(e.step.as_str(), "untrusted_authorization_server");
    assert!(e.detail.contains(&foreign_as), "{}", e.detail);
    assert!(e.detail.contains("oauth2.issuer"), "{}", e.detail);
    assert!(!e.detail.contains(SECRET));
    assert_eq!(foreign.requests(), 0, "not even its metadata is fetched");
    assert_eq!(m.count(), 0);

    // Listed after the foreign one, the server's own authorization server is the one used.
    *m.authorization_servers.lock().unwrap() =
        Some(vec![foreign_as.clone(), format!("{}/as", m.base())]);
    let ts = source_for(&m, &cfg);
    assert_eq!(
        ts.challenged(&refusal(401, "Bearer", None)).await,
        Ok(Retry::Once)
    );
    assert_eq!((m.count(), foreign.requests()), (1, 0));

    // Named by the configuration, the foreign one gets the credentials.
    *m.authorization_servers.lock().unwrap() = Some(vec![foreign_as.clone()]);
    let mut named = cfg.clone();
    named.issuer = Some(Url::parse(&foreign_as).unwrap());
    let ts = source_for(&m, &named);
    assert_eq!(
        ts.challenged(&refusal(401, "Bearer", None)).await,
        Ok(Retry::Once)
    );
    assert_eq!(foreign.count(), 1);
    assert!(foreign.basic.lock().unwrap()[0].is_some());

    // A configured issuer is the only one: the server's own origin is no longer trusted.
    *m.authorization_servers.lock().unwrap() = Some(vec![format!("{}/as", m.base())]);
    let before = m.count();
    let ts = source_for(&m, &named);
    let e = ts
        .challenged(&refusal(401, "Bearer", None))
        .await
        .unwrap_err();
    assert_eq!(e.step, AuthStep::UntrustedAuthorizationServer);
    assert!(e.detail.contains(&foreign_as), "{}", e.detail);
    assert_eq!(m.count(), before);
}

/// The issue-22 SSRF case: a 401 whose `resource_metadata` names another host was fetched. Now
/// it is refused unless `oauth2.metadata_origins` names that origin.
#[tokio::test]
async fn metadata_is_fetched_only_from_origins_the_configuration_allows() {
    let foreign = start(Mock::default()).await;
    let m = start(Mock::default()).await;
    let www = format!(
        r#"Bearer resource_metadata="{}/.well-known/oauth-protected-resource/mcp""#,
        foreign.base()
    );
    let cfg = config(None, ClientAuth::SecretPost(secret()));
    let ts = source_for(&m, &cfg);
    let e = ts.challenged(&refusal(401, &www, None)).await.unwrap_err();
    assert_eq!(e.step, AuthStep::UntrustedMetadataOrigin);
    assert_eq!(e.step.as_str(), "untrusted_metadata_origin");
    assert!(e.detail.contains(&foreign.base()), "{}", e.detail);
    assert!(e.detail.contains("metadata_origins"), "{}", e.detail);
    assert!(
        !e.detail.contains("oauth-protected-resource"),
        "only the origin is shown"
    );
    assert_eq!(
        (foreign.requests(), m.requests()),
        (0, 0),
        "nothing fetched"
    );

    // Allowed: the foreign document is read; it names this server and its authorization server.
    *foreign.prm_resource.lock().unwrap() = Some(format!("{}/mcp", m.base()));
    *foreign.authorization_servers.lock().unwrap() = Some(vec![format!("{}/as", m.base())]);
    let mut allowed = cfg.clone();
    allowed.metadata_origins = vec![Url::parse(&foreign.base()).unwrap()];
    let ts = source_for(&m, &allowed);
    assert_eq!(
        ts.challenged(&refusal(401, &www, None)).await,
        Ok(Retry::Once)
    );
    assert_eq!(
        (foreign.gets.load(Ordering::SeqCst), foreign.count()),
        (1, 0)
    );
    assert_eq!(m.count(), 1);
}

/// A configured issuer is used even when the server publishes no resource metadata (rather
/// than the 2025-03-26 default of the server's own `/token`).
#[tokio::test]
async fn a_configured_issuer_replaces_the_legacy_default() {
    let foreign = start(Mock::default()).await;
    let m = start(Mock::default()).await;
    m.no_metadata.store(true, Ordering::SeqCst);
    let mut cfg = config(None, ClientAuth::SecretPost(secret()));
    cfg.issuer = Some(Url::parse(&format!("{}/as", foreign.base())).unwrap());
    let ts = source_for(&m, &cfg);
    assert_eq!(
        ts.challenged(&refusal(401, "Bearer", None)).await,
        Ok(Retry::Once)
    );
    assert_eq!((foreign.count(), m.count()), (1, 0));
    assert_eq!(foreign.last_form()["resource"], format!("{}/mcp", m.base()));
}

#[test]
fn trust_is_the_configuration_s_choice() {
    let u = |s: &str| Url::parse(s).unwrap();
    let server = u("https://mcp.example.com/api/mcp");
    let default = metadata::Trust::new(&server, None, &[]);
    assert!(default.issuer(&u("https://mcp.example.com")));
    assert!(default.issuer(&u("https://mcp.example.com/as")));
    assert!(!default.issuer(&u("https://auth.example.com")));
    assert!(!default.issuer(&u("http://mcp.example.com")));
    let named = metadata::Trust::new(&server, Some(&u("https://auth.example.com")), &[]);
    assert!(
        named.issuer(&u("https://auth.example.com/")),
        "a bare origin with its slash"
    );
    assert!(named.issuer(&u("https://AUTH.example.com")));
    assert!(!named.issuer(&u("https://auth.example.com/tenant")));
    assert!(
        !named.issuer(&u("https://mcp.example.com")),
        "only the named one"
    );
}
