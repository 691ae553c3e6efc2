//! OAuth 2.0 client credentials for a machine client: the exporter authenticates as itself,
//! per MCP authorization and its `io.modelcontextprotocol/oauth-client-credentials` extension.
//!
//! There is no browser, no user and no authorization code flow here, ever: a probe that needs a
//! person to log in is not a probe. The operator pre-registers a client (secret or signing key)
//! at the authorization server; we find the token endpoint by discovery (or `token_url`), ask for
//! a token bound to the MCP server (`resource`), and keep it fresh for all of a target's
//! connections:
//!
//! * one [`TokenSource`] per target, shared by its connections: one token, one request in flight
//!   (others wait on it), refreshed before it expires and at once when the server refuses the
//!   token we hold — but only once for N connections refused with the same token;
//! * failures back off (0.5 s doubling to 60 s, with jitter) per target, so a broken
//!   authorization server neither hammers the AS nor delays other targets;
//! * `403 insufficient_scope` steps up (previous scopes ∪ challenged scopes) at most
//!   [`MAX_STEP_UPS`] times in a row (the count restarts with a token renewed for another reason);
//! * the credentials go only where the configuration says: `token_url`, else the authorization
//!   server `issuer` names, else one on the MCP URL's own origin; a server naming another one is
//!   refused (`untrusted_authorization_server`) before any request is sent to it, and metadata
//!   is fetched only from those origins and `metadata_origins` (`metadata::Trust`);
//! * the credentials are bound to the first authorization server they were used with: if the
//!   resource later names another one we refuse rather than present them elsewhere;
//! * tokens, secrets and assertions never reach `Debug`, logs or errors.
//!
//! * `challenge`: `WWW-Authenticate: Bearer` parameters.
//! * `discovery`: protected resource and authorization server metadata, with their checks.
//! * `token`: client authentication and the token request.
//! * `fetch`: bounded, timed HTTP for both.

mod challenge;
mod fetch;
mod metadata;
mod token;

use crate::net::http_config::OAuth2Config;
use crate::net::refusal::{AuthError, AuthStep, Refusal, Retry};
use reqwest::header::HeaderValue;
use std::fmt;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, SystemTime};
use tokio::time::Instant;
use url::Url;

/// Step-ups on `insufficient_scope` in a row before the refusal stands.
pub const MAX_STEP_UPS: u32 = 3;
/// First delay after a failed token acquisition; doubles per failure up to [`BACKOFF_MAX`]
/// (the one retry curve, `crate::backoff`).
pub use crate::backoff::{BASE as BACKOFF_START, MAX as BACKOFF_MAX};
/// How long a caller waits for the token request another connection has in flight.
const WAIT_FOR_FLIGHT: Duration = Duration::from_secs(45);
/// Bound on one acquisition (discovery and token request, each request also bounded).
const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(40);
/// A 401 on a token obtained because of a 401 (or after such a refusal) less than this long ago
/// is not answered with yet another token at once: backoff applies, longer for each such token
/// in a row, so a server that refuses every token costs one token request a minute at most.
const REFUSAL_WINDOW: Duration = Duration::from_secs(10);
/// A token is renewed at 3/4 of its lifetime, and at least this long before it expires.
const REFRESH_MARGIN: Duration = Duration::from_secs(10);

/// Where a [`TokenSource`] reports its token requests: the exporter's per-target series. A trait
/// here, at the client's floor, so the client knows nothing of the metrics that watch it.
pub trait TokenEvents: Send + Sync {
    /// A token request ended, `ok` or not.
    fn token_request(&self, ok: bool);
    /// The current token expires at `unix_seconds` (0: no stated lifetime).
    fn token_expiry(&self, unix_seconds: f64);
}

/// The access token of one target, kept fresh for all its connections.
pub struct TokenSource {
    target: String,
    cfg: OAuth2Config,
    server: Url,
    /// Where the credentials may go and metadata may come from (the configuration's choice).
    trust: metadata::Trust,
    http: reqwest::Client,
    /// Held across a token request: that is the single flight.
    state: tokio::sync::Mutex<State>,
    metrics: OnceLock<Arc<dyn TokenEvents>>,
}

#[derive(Default)]
struct State {
    token: Option<Held>,
    discovered: Option<metadata::Discovered>,
    /// The `resource_metadata` URL of the latest challenge.
    resource_metadata: Option<Url>,
    /// Scopes asked for by the latest token request (None: none made yet).
    requested: Option<Vec<String>>,
    /// Scopes challenges asked for since (to be added at the next request).
    challenged: Vec<String>,
    /// Whether a challenge has been seen: discovery waits for one unless `token_url` is set.
    challenge_seen: bool,
    step_ups: u32,
    failures: u32,
    /// Tokens in a row refused right after being issued (each one backs off longer).
    refused_streak: u32,
    retry_at: Option<Instant>,
    last_error: Option<AuthError>,
    /// The issuer our credentials were first used with.
    bound_issuer: Option<String>,
}

struct Held {
    header: HeaderValue,
    obtained: Instant,
    refresh_at: Option<Instant>,
    expires_at: Option<Instant>,
    /// Obtained because the previous token was refused: a refusal of this one is not cured by
    /// another token at once.
    after_refusal: bool,
}

impl Held {
    fn usable(&self, now: Instant) -> bool {
        self.expires_at.is_none_or(|t| now < t)
    }
    fn fresh(&self, now: Instant) -> bool {
        self.refresh_at.is_none_or(|t| now < t)
    }
}

impl fmt::Debug for TokenSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TokenSource")
            .field("target", &self.target)
            .field("client_id", &self.cfg.client_id)
            .field("server", &crate::secret::redact_url(&self.server))
            .field("token", &"<redacted>")
            .finish()
    }
}

/// Why a token is being requested.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Cause {
    Expiry,
    Refused,
    StepUp,
}

impl TokenSource {
    /// `resource`: the MCP server's URL; `http`: the client for discovery and the token endpoint
    /// (built from `cfg.tls` / `cfg.proxy`).
    pub fn new(
        target: &str,
        cfg: &OAuth2Config,
        resource: &Url,
        http: reqwest::Client,
    ) -> Arc<TokenSource> {
        Arc::new(TokenSource {
            target: target.to_owned(),
            cfg: cfg.clone(),
            server: resource.clone(),
            trust: metadata::Trust::new(resource, cfg.issuer.as_ref(), &cfg.metadata_origins),
            http,
            state: tokio::sync::Mutex::new(State::default()),
            metrics: OnceLock::new(),
        })
    }

    /// Reports token requests and expiry to `metrics` from now on (first call wins).
    pub fn set_metrics(&self, metrics: Arc<dyn TokenEvents>) {
        let _ = self.metrics.set(metrics);
    }

    /// The `Authorization` value for the next request: the cached token, renewed when due.
    ///
    /// `Ok(None)` before the server's first challenge when `token_url` is not configured: the
    /// MCP spec has the client learn where to authenticate from the 401 (`resource_metadata`,
    /// `scope`), so the first request goes without a token and [`Self::challenged`] acquires one.
    pub async fn bearer(&self) -> Result<Option<HeaderValue>, AuthError> {
        let mut st = self.lock().await?;
        let now = Instant::now();
        if let Some(t) = st.token.as_ref().filter(|t| t.fresh(now)) {
            return Ok(Some(t.header.clone()));
        }
        if self.cfg.token_url.is_none() && !st.challenge_seen {
            return Ok(None);
        }
        match self.acquire(&mut st, Cause::Expiry).await {
            Ok(h) => Ok(Some(h)),
            // A token due for renewal but not expired still works while renewal fails.
            Err(e) => match st.token.as_ref().filter(|t| t.usable(Instant::now())) {
                Some(t) => Ok(Some(t.header.clone())),
                None => Err(e),
            },
        }
    }

    /// The server refused a request (401/403): decide whether new credentials can fix it, and
    /// get them.
    pub async fn challenged(&self, refusal: &Refusal<'_>) -> Result<Retry, AuthError> {
        let ch = refusal
            .www_authenticate
            .and_then(challenge::parse)
            .unwrap_or_default();
        let mut st = self.lock().await?;
        let current = st.token.as_ref().map(|t| &t.header);
        let superseded = current.is_some() && refusal.sent != current;
        match refusal.status {
            401 => {
                if superseded {
                    // Another connection already replaced the refused token.
                    return Ok(Retry::Once);
                }
                self.learn(&mut st, &ch);
                // The server may have moved to another authorization server: discover again.
                st.discovered = None;
                let now = Instant::now();
                let refused = st.token.take();
                let just_issued = refused
                    .as_ref()
                    .is_some_and(|t| t.after_refusal && now < t.obtained + REFUSAL_WINDOW);
                if refused.is_some() && !just_issued {
                    st.refused_streak = 0;
                }
                if just_issued {
                    st.refused_streak = st.refused_streak.saturating_add(1);
                    // Another token will not help; discovery may still explain why (a new
                    // authorization server), so run it for the error message.
                    let e = match self.discovered(&mut st).await {
                        Err(e) => e,
                        Ok(_) => AuthError::new(
                            AuthStep::Unauthorized,
                            "the server refused a token issued moments ago",
                        ),
                    };
                    self.failed(&mut st, &e);
                    return Err(e);
                }
                self.acquire(&mut st, Cause::Refused)
                    .await
                    .map(|_| Retry::Once)
            }
            403 if ch.insufficient_scope() => {
                if superseded {
                    return Ok(Retry::Once);
                }
                if st.step_ups >= MAX_STEP_UPS {
                    return Err(AuthError::new(
                        AuthStep::InsufficientScope,
                        format!(
                            "insufficient_scope after {MAX_STEP_UPS} step-ups (asked for: {})",
                            crate::text::bounded(&ch.scopes.join(" "), 200)
                        ),
                    ));
                }
                st.step_ups += 1;
                self.learn(&mut st, &ch);
                self.acquire(&mut st, Cause::StepUp)
                    .await
                    .map(|_| Retry::Once)
            }
            403 => Err(AuthError::new(
                AuthStep::Forbidden,
                "the server refused the request (403) for a reason other than scope",
            )),
            _ => Ok(Retry::No),
        }
    }

    async fn lock(&self) -> Result<tokio::sync::MutexGuard<'_, State>, AuthError> {
        tokio::time::timeout(WAIT_FOR_FLIGHT, self.state.lock())
            .await
            .map_err(|_| {
                AuthError::new(
                    AuthStep::TokenEndpoint,
                    "timed out waiting for the token request in flight",
                )
            })
    }

    /// Takes what a challenge says into account for the next token request.
    fn learn(&self, st: &mut State, ch: &challenge::Challenge) {
        st.challenge_seen = true;
        if let Some(rm) = ch
            .resource_metadata
            .as_deref()
            .and_then(|s| Url::parse(s).ok())
        {
            st.resource_metadata = Some(rm);
        }
        for s in &ch.scopes {
            if !st.challenged.contains(s) {
                st.challenged.push(s.clone());
            }
        }
    }

    /// Discovery (when needed) and a token request, unless backing off.
    async fn acquire(&self, st: &mut State, cause: Cause) -> Result<HeaderValue, AuthError> {
        let now = Instant::now();
        if st.retry_at.is_some_and(|at| now < at) {
            return Err(st.last_error.clone().unwrap_or_else(|| {
                AuthError::new(AuthStep::TokenEndpoint, "backing off after a failure")
            }));
        }
        let result = tokio::time::timeout(ACQUIRE_TIMEOUT, self.fetch(st))
            .await
            .unwrap_or_else(|_| {
                Err(AuthError::new(
                    AuthStep::TokenEndpoint,
                    "discovery and token request timed out",
                ))
            });
        match result {
            Ok((issued, requested)) => {
                let now = Instant::now();
                let (refresh_at, expires_at) = match issued.expires_in {
                    Some(life) => (Some(now + refresh_after(life)), Some(now + life)),
                    None => (None, None),
                };
                if cause != Cause::StepUp {
                    st.step_ups = 0;
                }
                st.requested = Some(requested);
                st.challenged.clear();
                st.failures = 0;
                st.retry_at = None;
                st.last_error = None;
                st.token = Some(Held {
                    header: issued.header.clone(),
                    obtained: now,
                    refresh_at,
                    expires_at,
                    after_refusal: cause == Cause::Refused || st.refused_streak > 0,
                });
                if let Some(m) = self.metrics.get() {
                    m.token_request(true);
                    let expiry = issued
                        .expires_in
                        .and_then(|life| SystemTime::now().checked_add(life))
                        .and_then(|t| t.duration_since(SystemTime::UNIX_EPOCH).ok())
                        .map_or(0.0, |d| d.as_secs_f64());
                    m.token_expiry(expiry);
                }
                Ok(issued.header)
            }
            Err(e) => {
                if let Some(m) = self.metrics.get() {
                    m.token_request(false);
                }
                self.failed(st, &e);
                Err(e)
            }
        }
    }

    fn failed(&self, st: &mut State, e: &AuthError) {
        st.failures = st.failures.saturating_add(1);
        let n = st.failures.saturating_add(st.refused_streak);
        let delay = crate::backoff::delay_after(n, rand::random::<f64>());
        st.retry_at = Some(Instant::now() + delay);
        st.last_error = Some(e.clone());
        tracing::warn!(
            reason = e.step.as_str(),
            error = %e.detail,
            retry_in = ?delay,
            "OAuth token acquisition failed"
        );
    }

    /// Where to ask for tokens: `token_url`, the cached discovery, or a new one (refused when
    /// it names another authorization server than the one the credentials were used with).
    async fn discovered(&self, st: &mut State) -> Result<metadata::Discovered, AuthError> {
        if let Some(url) = &self.cfg.token_url {
            return Ok(metadata::Discovered {
                resource: metadata::canonical_resource(&self.server),
                scopes_supported: Vec::new(),
                issuer: None,
                token_endpoint: url.clone(),
                auth_methods: Vec::new(),
            });
        }
        if let Some(d) = &st.discovered {
            return Ok(d.clone());
        }
        let d = metadata::discover(&self.http, &self.trust, st.resource_metadata.as_ref()).await?;
        if let (Some(bound), Some(now)) = (&st.bound_issuer, &d.issuer)
            && bound != now
        {
            return Err(AuthError::new(
                AuthStep::Discovery,
                format!(
                    "the server now names authorization server {}, but the configured client credentials were used with {}: reload the configuration with credentials for the new one",
                    crate::text::bounded(now, 200),
                    crate::text::bounded(bound, 200)
                ),
            ));
        }
        st.discovered = Some(d.clone());
        Ok(d)
    }

    async fn fetch(&self, st: &mut State) -> Result<(token::Issued, Vec<String>), AuthError> {
        let d = self.discovered(st).await?;
        let requested = select_scopes(
            &self.cfg.scopes,
            st.requested.as_deref(),
            &st.challenged,
            &d.scopes_supported,
        );
        let audience = d
            .issuer
            .clone()
            .unwrap_or_else(|| d.token_endpoint.to_string());
        let req = token::Request {
            endpoint: &d.token_endpoint,
            client_id: &self.cfg.client_id,
            auth: &self.cfg.client_auth,
            method: token::method(&self.cfg.client_auth, &d.auth_methods),
            audience,
            resource: &d.resource,
            scopes: &requested,
            endpoint_params: &self.cfg.endpoint_params,
        };
        let issued = token::request(&self.http, &req).await?;
        if st.bound_issuer.is_none() {
            st.bound_issuer = d.issuer.clone();
        }
        Ok((issued, requested))
    }
}

/// The scopes of a token request (MCP scope selection strategy, then step-up by union):
/// configured scopes, else the scopes asked for last time, else none; plus every scope a
/// challenge asked for since; and when that is still empty, the resource's `scopes_supported`.
fn select_scopes(
    configured: &[String],
    previous: Option<&[String]>,
    challenged: &[String],
    supported: &[String],
) -> Vec<String> {
    let mut out: Vec<String> = if !configured.is_empty() {
        configured.to_vec()
    } else {
        previous.unwrap_or_default().to_vec()
    };
    for s in challenged {
        if !out.contains(s) {
            out.push(s.clone());
        }
    }
    if out.is_empty() && previous.is_none() {
        out = supported.to_vec();
    }
    out
}

/// When to renew a token that lives `life`: at 3/4 of it, and at least [`REFRESH_MARGIN`]
/// before it ends (half-way for tokens shorter than twice the margin).
fn refresh_after(life: Duration) -> Duration {
    let three_quarters = life * 3 / 4;
    match life.checked_sub(REFRESH_MARGIN) {
        Some(before_end) if before_end >= life / 2 => three_quarters.min(before_end),
        _ => life / 2,
    }
}

#[cfg(test)]
mod tests;
