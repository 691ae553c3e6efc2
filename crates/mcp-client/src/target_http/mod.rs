//! [`TargetHttp`]: one per target, shared by all its connections and by `check`. It owns the
//! target's reqwest clients (TLS and proxy) and its credentials, and is the one place a request
//! gets its `Authorization` header and a 401/403 gets its second chance.
//!
//! Shared so that N connections hold one token (one refresh, not N). The client is rebuilt when
//! a TLS file changes (checked at most once a second), so a renewed client certificate or CA
//! bundle is used by the next connection without a restart; a rebuild that fails keeps the
//! working client and is reported (log, `credentials` auth failure).
//!
//! Connection pools: a target with `connections: N > 1` has one pool per probe connection
//! ([`TargetHttp::connection`]). Those connections exist to tell instances behind a balancer
//! apart, and a layer-4 balancer pins a TCP connection to an instance: on a shared pool a
//! connection's requests (even the pages of one walk) would ride whichever socket is idle and
//! land on either instance. A target with one connection needs no pool of its own; when its TLS
//! and proxy settings are the defaults it uses the one process-wide client, so a thousand such
//! targets share one pool (sockets per origin, not per target) and load the platform's roots
//! once. The platform roots (a rustls configuration with the platform verifier, ~100 KB and a
//! few ms of CPU to load) are loaded once per process and shared by every default-TLS client.
//!
//! Notification streams (read for hours, never reused) do not ride the pool: a target that goes
//! direct opens each on a socket of its own ([`Route::OwnSocket`], `net::stream_socket`),
//! with the same TLS configuration and credentials; behind an egress proxy they keep the pool.
//!
//! `auth`: what goes in `Authorization` (static credentials, re-read from files; OAuth 2.0
//! tokens from `crate::oauth`). Above `net` and `oauth`, which know nothing of it.

use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use reqwest::header::{AUTHORIZATION, HeaderValue, WWW_AUTHENTICATE};

mod credentials;

use crate::net::files::{self, Stamp};
use crate::net::http_config::{
    HttpClientConfig, IdleTimeout, PemSource, ProxyConfig, SecretSource, TlsConfig,
};
use crate::net::refusal::{AuthError, AuthStep, Refusal, Retry};
use crate::net::stream_socket::{StreamConnector, StreamFault};
use crate::net::{TCP_KEEPALIVE, egress_proxy, tls};
use credentials::Auth;

/// How often TLS files are looked at (one `stat` each) for a change.
const RECHECK: Duration = Duration::from_secs(1);

/// Where auth failures are counted (`mcp_probe_auth_failures_total{reason}`).
pub type FailureSink = Arc<dyn Fn(AuthStep) + Send + Sync>;

/// Why a request could not be sent or was refused for good.
#[derive(Debug)]
pub enum SendError {
    Http(reqwest::Error),
    /// A notification stream's own socket could not be opened, or its answer was not HTTP.
    Stream(StreamFault),
    /// Credentials could not be had, or the target refused them (`status`: its 401/403).
    Auth {
        error: AuthError,
        status: Option<u16>,
    },
}

/// One target's HTTP client and credentials, as seen by one of its connections (its pool).
pub struct TargetHttp {
    shared: Arc<Shared>,
    /// The pool this handle's requests go through.
    pool: usize,
}

/// What all connections of a target share.
struct Shared {
    target: String,
    tls: TlsConfig,
    proxy: ProxyConfig,
    idle: IdleTimeout,
    auth: Auth,
    tls_files: Vec<PathBuf>,
    state: Mutex<ClientState>,
    failures: OnceLock<FailureSink>,
}

struct ClientState {
    /// One client (one connection pool) per pool; clones share the pool.
    clients: Vec<reqwest::Client>,
    /// How notification streams get sockets of their own; `None` behind an egress proxy.
    streams: Option<StreamConnector>,
    stamps: Vec<Option<Stamp>>,
    checked: Instant,
}

impl std::fmt::Debug for TargetHttp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TargetHttp")
            .field("target", &self.shared.target)
            .field("pool", &self.pool)
            .finish_non_exhaustive()
    }
}

impl TargetHttp {
    /// The client and credentials of `target` (`resource`: its MCP endpoint, the OAuth
    /// resource). Fails when key material cannot be loaded (checked at load, so only when a
    /// file changed since).
    pub fn new(
        target: &str,
        cfg: &HttpClientConfig,
        resource: &url::Url,
    ) -> Result<Arc<TargetHttp>, AuthError> {
        TargetHttp::with_pools(target, cfg, resource, 1)
    }

    /// [`TargetHttp::new`] with `pools` connection pools (one per probe connection of a target
    /// with several; see the module docs). Handles on the others: [`TargetHttp::connection`].
    pub fn with_pools(
        target: &str,
        cfg: &HttpClientConfig,
        resource: &url::Url,
        pools: usize,
    ) -> Result<Arc<TargetHttp>, AuthError> {
        let credentials = |why: String| AuthError::new(AuthStep::Credentials, why);
        warn_insecure(target, "tls_config", &cfg.tls);
        let (clients, streams) =
            transport(&cfg.tls, &cfg.proxy, cfg.idle, pools.max(1)).map_err(credentials)?;
        let auth = Auth::new(target, &cfg.auth, resource, |o| {
            warn_insecure(target, "oauth2.tls_config", &o.tls);
            build_client(&o.tls, &o.proxy).map_err(credentials)
        })?;
        let tls_files = tls_files(&cfg.tls);
        let stamps = tls_files.iter().map(|p| files::stamp(p)).collect();
        Ok(Arc::new(TargetHttp {
            shared: Arc::new(Shared {
                target: target.to_owned(),
                tls: cfg.tls.clone(),
                proxy: cfg.proxy.clone(),
                idle: cfg.idle,
                auth,
                tls_files,
                state: Mutex::new(ClientState {
                    clients,
                    streams,
                    stamps,
                    checked: Instant::now(),
                }),
                failures: OnceLock::new(),
            }),
            pool: 0,
        }))
    }

    /// The handle probe connection `index` sends through: same credentials, its own pool when
    /// the target has one per connection (else the shared one).
    pub fn connection(&self, index: u16) -> Arc<TargetHttp> {
        let pools = self.shared.state.lock().expect("client lock").clients.len();
        Arc::new(TargetHttp {
            shared: self.shared.clone(),
            pool: usize::from(index) % pools,
        })
    }

    /// No credentials, the platform's roots, no proxy: for endpoints given without an
    /// `http_config` (tests, `check` without `--http-config`).
    pub fn plain() -> Arc<TargetHttp> {
        let url = url::Url::parse("http://localhost/").expect("static URL");
        TargetHttp::new("", &HttpClientConfig::default(), &url)
            .expect("a client without TLS files or credentials builds")
    }

    /// Report the OAuth token requests and expiry of this target to `metrics` (set once).
    pub fn token_metrics(&self, metrics: Arc<dyn crate::oauth::TokenEvents>) {
        if let credentials::Auth::OAuth2(tokens) = &self.shared.auth {
            tokens.set_metrics(metrics);
        }
    }

    /// Count auth failures through `sink` from now on (set once; later calls are ignored).
    pub fn count_failures(&self, sink: FailureSink) {
        let _ = self.shared.failures.set(sink);
    }

    /// Whether the target has an auth block (`authorization`, `basic_auth`, `oauth2`).
    pub fn has_auth(&self) -> bool {
        !self.shared.auth.is_none()
    }

    /// Whether the target has credentials that can fail: an auth block or a client certificate.
    pub fn has_credentials(&self) -> bool {
        self.has_auth() || self.shared.tls.client_cert.is_some()
    }

    /// The current client of this handle's pool: rebuilt when a TLS file changed since the
    /// last look.
    pub fn client(&self) -> reqwest::Client {
        self.current().0
    }

    /// The current client of this handle's pool and how streams get sockets, rebuilt together
    /// when a TLS file changed since the last look.
    fn current(&self) -> (reqwest::Client, Option<StreamConnector>) {
        let shared = &self.shared;
        let mut s = shared.state.lock().expect("client lock");
        if !shared.tls_files.is_empty() && s.checked.elapsed() >= RECHECK {
            s.checked = Instant::now();
            let stamps: Vec<_> = shared.tls_files.iter().map(|p| files::stamp(p)).collect();
            if stamps != s.stamps {
                s.stamps = stamps;
                match transport(&shared.tls, &shared.proxy, shared.idle, s.clients.len()) {
                    Ok((clients, streams)) => {
                        tracing::info!(target = %shared.target, "TLS files changed; new connections use them");
                        s.clients = clients;
                        s.streams = streams;
                    }
                    Err(why) => {
                        tracing::warn!(target = %shared.target, error = %why, "TLS files changed but cannot be used; keeping the previous ones");
                        self.failed(AuthStep::Credentials);
                    }
                }
            }
        }
        (s.clients[self.pool].clone(), s.streams.clone())
    }

    /// The `Authorization` value for the next request (`None`: the target has no auth block).
    pub async fn authorization(&self) -> Result<Option<HeaderValue>, AuthError> {
        self.shared
            .auth
            .header()
            .await
            .inspect_err(|e| self.failed(e.step))
    }

    /// A request carrying `refusal.sent` was refused: whether a retry can do better.
    pub async fn refused(&self, refusal: &Refusal<'_>) -> Result<Retry, AuthError> {
        self.shared
            .auth
            .refused(refusal)
            .await
            .inspect_err(|e| self.failed(e.step))
    }

    /// Send the request `build` makes (called again for the one retry, so it must be
    /// repeatable) with the current client and credentials. A 401/403 of a target with an auth
    /// block goes to the credentials; when they have something new the request is sent once
    /// more, else it fails as [`SendError::Auth`]. Without an auth block the answer is returned
    /// as it is.
    pub async fn send(
        &self,
        build: impl Fn(&reqwest::Client) -> reqwest::RequestBuilder,
    ) -> Result<reqwest::Response, SendError> {
        self.send_by(build, Route::Pool).await
    }

    /// [`TargetHttp::send`] the way `route` says: [`Route::OwnSocket`] for a response read for
    /// as long as the server keeps it open (a notification stream), which gets a socket of its
    /// own when the target goes direct (see the module docs) and the pool otherwise.
    pub(crate) async fn send_by(
        &self,
        build: impl Fn(&reqwest::Client) -> reqwest::RequestBuilder,
        route: Route,
    ) -> Result<reqwest::Response, SendError> {
        let auth_error = |error, status| SendError::Auth { error, status };
        let mut retried = false;
        loop {
            let sent = self
                .authorization()
                .await
                .map_err(|e| auth_error(e, None))?;
            let (client, streams) = self.current();
            let mut request = build(&client);
            if let Some(value) = &sent {
                request = request.header(AUTHORIZATION, value.clone());
            }
            let resp = match (route, streams) {
                (Route::OwnSocket, Some(streams)) => {
                    let request = request.build().map_err(SendError::Http)?;
                    streams.execute(request).await.map_err(SendError::Stream)?
                }
                _ => request.send().await.map_err(SendError::Http)?,
            };
            let status = resp.status().as_u16();
            if !matches!(status, 401 | 403) || self.shared.auth.is_none() {
                return Ok(resp);
            }
            let challenge = resp
                .headers()
                .get(WWW_AUTHENTICATE)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned);
            let refusal = Refusal {
                status,
                www_authenticate: challenge.as_deref(),
                sent: sent.as_ref(),
            };
            if !retried {
                match self.refused(&refusal).await {
                    Ok(Retry::Once) => {
                        retried = true;
                        continue;
                    }
                    Ok(Retry::No) => {}
                    Err(e) => return Err(auth_error(e, Some(status))),
                }
            }
            let step = refused_step(&refusal);
            self.failed(step);
            let e = AuthError::new(
                step,
                format!("HTTP {status}: the target refused the configured credentials"),
            );
            return Err(auth_error(e, Some(status)));
        }
    }

    fn failed(&self, step: AuthStep) {
        if let Some(sink) = self.shared.failures.get() {
            sink(step);
        }
    }
}

/// Which way a request goes: through the pool, or on a socket of its own.
#[derive(Clone, Copy)]
pub(crate) enum Route {
    /// An answer read to its end; the connection goes back to the pool.
    Pool,
    /// A notification stream, read for as long as the server keeps it open.
    OwnSocket,
}

/// The step a final refusal is counted as.
fn refused_step(r: &Refusal<'_>) -> AuthStep {
    let scope = r
        .www_authenticate
        .is_some_and(|c| c.contains("insufficient_scope"));
    match r.status {
        401 => AuthStep::Unauthorized,
        _ if scope => AuthStep::InsufficientScope,
        _ => AuthStep::Forbidden,
    }
}

fn warn_insecure(target: &str, field: &str, tls: &TlsConfig) {
    if tls.insecure_skip_verify {
        tracing::warn!(target = %target, field, "insecure_skip_verify: the server's certificate is not verified; anyone on the path can impersonate it");
    }
}

/// The files a TLS configuration reads (watched for changes).
fn tls_files(tls: &TlsConfig) -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Some(PemSource::File(p)) = &tls.ca {
        out.push(p.clone());
    }
    if let Some(cc) = &tls.client_cert {
        if let PemSource::File(p) = &cc.cert {
            out.push(p.clone());
        }
        if let SecretSource::File(p) = &cc.key {
            out.push(p.clone());
        }
    }
    out
}

/// `pools` clients for `tls`, `proxy` and `idle`, and how notification streams get sockets of
/// their own (`None` behind an egress proxy), from one load of the TLS material: the
/// process-wide client when a single pool with the default settings will do, else clients of
/// their own; every target with the default TLS settings shares the platform roots and one
/// stream connector.
fn transport(
    tls: &TlsConfig,
    proxy: &ProxyConfig,
    idle: IdleTimeout,
    pools: usize,
) -> Result<(Vec<reqwest::Client>, Option<StreamConnector>), String> {
    let direct = *proxy == ProxyConfig::Direct;
    if tls::is_default(tls) {
        let clients = if pools == 1 && direct && idle == IdleTimeout::DEFAULT {
            vec![process_client()?]
        } else {
            (0..pools)
                .map(|_| client_with(default_tls()?, proxy, idle))
                .collect::<Result<_, _>>()?
        };
        return Ok((clients, direct.then(default_streams).transpose()?));
    }
    let config = tls_config(tls)?;
    let clients = (0..pools)
        .map(|_| client_with(config.clone(), proxy, idle))
        .collect::<Result<_, _>>()?;
    Ok((
        clients,
        direct.then(|| StreamConnector::new(config, USER_AGENT)),
    ))
}

/// The stream connector of every target with the default TLS settings that goes direct
/// (built once).
fn default_streams() -> Result<StreamConnector, String> {
    static DEFAULT: Mutex<Option<StreamConnector>> = Mutex::new(None);
    let mut d = DEFAULT.lock().expect("stream lock");
    if let Some(streams) = &*d {
        return Ok(streams.clone());
    }
    let streams = StreamConnector::new(default_tls()?, USER_AGENT);
    *d = Some(streams.clone());
    Ok(streams)
}

/// What every request of the exporter says it is.
const USER_AGENT: &str = concat!("mcp_exporter/", env!("CARGO_PKG_VERSION"));

/// The client of every single-pool target with default TLS and proxy settings (built once).
fn process_client() -> Result<reqwest::Client, String> {
    static CLIENT: Mutex<Option<reqwest::Client>> = Mutex::new(None);
    let mut c = CLIENT.lock().expect("client lock");
    if let Some(client) = &*c {
        return Ok(client.clone());
    }
    let client = build_client(&TlsConfig::default(), &ProxyConfig::default())?;
    *c = Some(client.clone());
    Ok(client)
}

/// The rustls configuration of `tls`: the shared default one, or loaded from its files.
fn tls_config(tls: &TlsConfig) -> Result<rustls::ClientConfig, String> {
    if tls::is_default(tls) {
        return default_tls();
    }
    let material = tls::Material::load(tls).map_err(|f| format!("{}: {}", f.field, f.why))?;
    tls::client_config(tls, material)
}

/// The default TLS configuration (platform roots), loaded once: a clone shares its verifier
/// and roots. A failed load is not kept, so the next client tries again.
fn default_tls() -> Result<rustls::ClientConfig, String> {
    static DEFAULT: Mutex<Option<rustls::ClientConfig>> = Mutex::new(None);
    let mut d = DEFAULT.lock().expect("TLS lock");
    if let Some(config) = &*d {
        return Ok(config.clone());
    }
    let tls = TlsConfig::default();
    let material = tls::Material::load(&tls).map_err(|f| format!("{}: {}", f.field, f.why))?;
    let config = tls::client_config(&tls, material)?;
    *d = Some(config.clone());
    Ok(config)
}

/// A client (its own connection pool) for `tls` and `proxy`, idle connections kept for the
/// default time. Errors name the field and why, never key material.
pub fn build_client(tls: &TlsConfig, proxy: &ProxyConfig) -> Result<reqwest::Client, String> {
    client_with(tls_config(tls)?, proxy, IdleTimeout::DEFAULT)
}

/// A client (its own connection pool) on a loaded TLS configuration.
fn client_with(
    config: rustls::ClientConfig,
    proxy: &ProxyConfig,
    idle: IdleTimeout,
) -> Result<reqwest::Client, String> {
    let builder = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .tcp_keepalive(TCP_KEEPALIVE)
        .pool_idle_timeout(idle.get())
        .user_agent(USER_AGENT)
        .tls_backend_preconfigured(config);
    egress_proxy::apply(builder, proxy)?
        .build()
        .map_err(|e| format!("HTTP client: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::SocketAddr;

    /// A server that answers every request with the client's address (its TCP connection).
    async fn peer_echo() -> url::Url {
        use axum::extract::ConnectInfo;
        let app = axum::Router::new().route(
            "/",
            axum::routing::get(|ConnectInfo(peer): ConnectInfo<SocketAddr>| async move {
                peer.to_string()
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            let app = app.into_make_service_with_connect_info::<SocketAddr>();
            let _ = axum::serve(listener, app).await;
        });
        url::Url::parse(&format!("http://{addr}/")).unwrap()
    }

    async fn peer(net: &TargetHttp, url: &url::Url) -> String {
        let resp = net.send(|c| c.get(url.clone())).await.unwrap();
        resp.text().await.unwrap()
    }

    #[tokio::test]
    async fn connections_of_a_target_with_several_have_pools_of_their_own() {
        let url = peer_echo().await;
        let cfg = HttpClientConfig::default();
        let net = TargetHttp::with_pools("kb", &cfg, &url, 2).unwrap();
        let (zero, one) = (net.connection(0), net.connection(1));
        let first = peer(&zero, &url).await;
        assert_eq!(
            peer(&zero, &url).await,
            first,
            "a connection keeps its socket"
        );
        assert_ne!(
            peer(&one, &url).await,
            first,
            "another connection, another socket"
        );

        // One connection: the process-wide client, whose pool every such target shares.
        let a = TargetHttp::new("a", &cfg, &url).unwrap();
        let b = TargetHttp::new("b", &cfg, &url).unwrap();
        let shared = peer(&a, &url).await;
        assert_eq!(peer(&b.connection(0), &url).await, shared);
    }

    #[tokio::test]
    async fn idle_connections_are_kept_as_long_as_configured() {
        let url = peer_echo().await;
        let idle = |d| HttpClientConfig {
            idle: IdleTimeout::new(d).unwrap(),
            ..HttpClientConfig::default()
        };
        let short = TargetHttp::new("short", &idle(Duration::from_millis(200)), &url).unwrap();
        let long = TargetHttp::new("long", &idle(Duration::from_secs(60)), &url).unwrap();
        let (short_first, long_first) = (peer(&short, &url).await, peer(&long, &url).await);
        assert_ne!(short_first, long_first, "each keeps a pool of its own");
        // Idle past the short time and well within the long one (the pool checks an idle
        // connection's age when it hands it out).
        tokio::time::sleep(Duration::from_millis(600)).await;
        assert_ne!(
            peer(&short, &url).await,
            short_first,
            "not kept past 200 ms idle"
        );
        assert_eq!(peer(&long, &url).await, long_first, "kept: 60 s");
    }
}
