//! What `--web.config.file` asks of each request: the toolkit's `rate_limit`, basic
//! authentication and response headers, with the file read again for every request (see
//! [`super::webconfig`]).
//!
//! Why a cache of verified passwords: bcrypt is deliberately slow (tens of milliseconds at cost
//! 10), and a scraper sends the same credentials every few seconds. Like the toolkit, a success
//! is remembered under a digest of (user, password, stored hash), so changing the hash in the
//! file (or the password) misses the cache. Unlike the toolkit, failures are not remembered: an
//! attacker cycling wrong passwords cannot evict the scraper's entry and make it pay bcrypt.
//! A remembered credential is let through before anything else: it never waits for bcrypt.
//!
//! Why the admission rules: a flood of wrong passwords used to queue behind one bcrypt at a time
//! without bound — a login not yet cached (after a restart or a password rotation) waited 23.7 s
//! behind 300 connections, past Prometheus' scrape timeout, and the waiting requests held their
//! connections, so the port's connection cap filled with them. Now at most [`BCRYPT_AT_ONCE`]
//! checks run, at most [`ADMITTED`] attempts run or wait, and one client address has at most
//! [`PER_ADDRESS`] of them: a further attempt is answered **429** at once, without hashing. A
//! scraper's first login therefore waits for at most [`ADMITTED`] / [`BCRYPT_AT_ONCE`] checks,
//! and with the flood coming from other addresses it gets a turn of its own at once.

use std::collections::{HashMap, HashSet};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex};

use axum::extract::{ConnectInfo, Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use sha2::{Digest, Sha256};
use tokio::sync::Semaphore;
use tokio::time::Instant;

use super::throttle::Throttle;
use super::webconfig::{RateLimit, WebConfig, WebConfigFile};

/// Verified credentials remembered at most: a handful of scrapers and people, with room to
/// spare; at the cap an arbitrary entry makes room (that client pays one bcrypt again).
const CACHE_ENTRIES: usize = 100;
/// bcrypt checks running at once. Two, not one: one client address holds at most one of them
/// ([`PER_ADDRESS`]), so a flood from one address leaves a turn free for a scraper's first login
/// beside it, instead of in front of it; not more, so a flood from many addresses takes at most
/// two cores (on the 2-core machines this runs on, the serving threads still get their share).
pub const BCRYPT_AT_ONCE: usize = 2;
/// Attempts admitted to bcrypt at once, running or waiting for a turn, from all addresses: a
/// login waits for at most `ADMITTED / BCRYPT_AT_ONCE` = 8 checks (~0.6 s at cost 10).
pub const ADMITTED: usize = 16;
/// Attempts one client address may have admitted at once.
pub const PER_ADDRESS: usize = 1;

/// What the guard decided about one request's credentials.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Verdict {
    Allowed,
    Denied,
    /// Too many bcrypt checks under way (or one already for this address): not checked.
    Busy,
}

/// Attempts admitted to bcrypt, by client address.
#[derive(Default)]
struct Admitted {
    by_address: HashMap<IpAddr, usize>,
    total: usize,
}

/// One admitted attempt; leaving (also when the request is dropped) makes room.
struct Ticket {
    admitted: Arc<Mutex<Admitted>>,
    address: IpAddr,
}

impl Ticket {
    fn admit(admitted: &Arc<Mutex<Admitted>>, address: IpAddr) -> Option<Ticket> {
        let mut a = lock(admitted);
        let mine = a.by_address.get(&address).copied().unwrap_or(0);
        if a.total >= ADMITTED || mine >= PER_ADDRESS {
            return None;
        }
        a.total += 1;
        a.by_address.insert(address, mine + 1);
        Some(Ticket {
            admitted: admitted.clone(),
            address,
        })
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        let mut a = lock(&self.admitted);
        a.total -= 1;
        if let Some(n) = a.by_address.get_mut(&self.address) {
            *n -= 1;
            if *n == 0 {
                a.by_address.remove(&self.address);
            }
        }
    }
}

/// The toolkit's `rate_limit`: a token bucket of `burst` tokens, one more every `interval`.
struct Bucket {
    limit: RateLimit,
    tokens: f64,
    at: Instant,
}

impl Bucket {
    fn new(limit: RateLimit, now: Instant) -> Self {
        Bucket {
            limit,
            tokens: f64::from(limit.burst),
            at: now,
        }
    }

    /// Take a token if there is one.
    fn allow(&mut self, now: Instant) -> bool {
        let earned = now.duration_since(self.at).as_secs_f64() / self.limit.interval.as_secs_f64();
        self.tokens = (self.tokens + earned).min(f64::from(self.limit.burst));
        self.at = now;
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The per-request side of `--web.config.file`.
pub struct Guard {
    file: Arc<WebConfigFile>,
    verified: Mutex<HashSet<[u8; 32]>>,
    /// Turns at bcrypt, [`BCRYPT_AT_ONCE`].
    bcrypt: Arc<Semaphore>,
    admitted: Arc<Mutex<Admitted>>,
    /// The bucket of the file's `rate_limit`, rebuilt (full) when the setting changes.
    bucket: Mutex<Option<Bucket>>,
    /// One warning per period while attempts are refused for being too many.
    busy: Mutex<Throttle>,
    limited: Mutex<Throttle>,
}

impl Guard {
    pub fn new(file: Arc<WebConfigFile>) -> Arc<Self> {
        Arc::new(Guard {
            file,
            verified: Mutex::new(HashSet::new()),
            bcrypt: Arc::new(Semaphore::new(BCRYPT_AT_ONCE)),
            admitted: Arc::default(),
            bucket: Mutex::new(None),
            busy: Mutex::default(),
            limited: Mutex::default(),
        })
    }

    /// Whether the request may pass the file's `rate_limit` (always, without one).
    fn within_rate_limit(&self, limit: Option<RateLimit>) -> bool {
        let mut bucket = lock(&self.bucket);
        let Some(limit) = limit else {
            *bucket = None;
            return true;
        };
        let now = Instant::now();
        match &mut *bucket {
            Some(b) if b.limit == limit => b.allow(now),
            other => other.insert(Bucket::new(limit, now)).allow(now),
        }
    }

    /// Whether the `Authorization` header holds the credentials of a user of `config`, asked
    /// by a client at `address`.
    async fn authenticated(
        &self,
        config: &WebConfig,
        authorization: Option<&HeaderValue>,
        address: IpAddr,
    ) -> Verdict {
        let Some((user, password)) = authorization.and_then(basic_credentials) else {
            return Verdict::Denied;
        };
        let known = std::str::from_utf8(&user)
            .ok()
            .and_then(|u| config.users.get(u));
        // An unknown user is checked against another user's hash and refused whatever the
        // outcome: it costs what a wrong password costs, so timing does not tell users apart.
        let Some(stored) = known.or_else(|| config.users.values().next()) else {
            return Verdict::Denied;
        };
        let key = cache_key(&user, &password, stored);
        if known.is_some() && lock(&self.verified).contains(&key) {
            return Verdict::Allowed;
        }
        let Some(ticket) = Ticket::admit(&self.admitted, address) else {
            return Verdict::Busy;
        };
        let Ok(turn) = self.bcrypt.clone().acquire_owned().await else {
            return Verdict::Denied;
        };
        let stored_hash = stored.clone();
        // bcrypt's comparison of the digests is constant-time. Passwords over 72 bytes are
        // refused rather than truncated, as in Go's bcrypt. The turn and the ticket go with
        // the check: a client that leaves does not free them before the hashing ends.
        let matches = tokio::task::spawn_blocking(move || {
            let _held = (turn, ticket);
            bcrypt::non_truncating_verify(&password, &stored_hash).unwrap_or(false)
        })
        .await
        .unwrap_or(false);
        let ok = matches && known.is_some();
        if ok {
            let mut verified = lock(&self.verified);
            if verified.len() >= CACHE_ENTRIES
                && let Some(any) = verified.iter().next().copied()
            {
                verified.remove(&any);
            }
            verified.insert(key);
        }
        if ok {
            Verdict::Allowed
        } else {
            Verdict::Denied
        }
    }
}

/// User and password of an `Authorization: Basic …` header (scheme case-insensitive).
fn basic_credentials(value: &HeaderValue) -> Option<(Vec<u8>, Vec<u8>)> {
    let value = value.as_bytes();
    let (scheme, rest) = value.split_at_checked(6)?;
    if !scheme.eq_ignore_ascii_case(b"basic ") {
        return None;
    }
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(rest.trim_ascii())
        .ok()?;
    let colon = decoded.iter().position(|b| *b == b':')?;
    Some((decoded[..colon].to_vec(), decoded[colon + 1..].to_vec()))
}

/// Digest of (user, password, stored hash), each length-prefixed: no two triples share one.
fn cache_key(user: &[u8], password: &[u8], stored: &str) -> [u8; 32] {
    let mut d = Sha256::new();
    for part in [user, password, stored.as_bytes()] {
        d.update((part.len() as u64).to_be_bytes());
        d.update(part);
    }
    d.finalize().into()
}

fn plain(status: StatusCode) -> Response {
    let text = format!("{}\n", status.canonical_reason().unwrap_or("error"));
    (status, text).into_response()
}

/// A refusal for load (rate limit, busy bcrypt): the client may come back in a second.
fn too_many() -> Response {
    let mut r = plain(StatusCode::TOO_MANY_REQUESTS);
    r.headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    r
}

/// The middleware: read the file, apply the rate limit, authenticate, serve, add the configured
/// headers.
pub async fn guard(State(g): State<Arc<Guard>>, req: Request, next: Next) -> Response {
    let file = g.file.clone();
    let config = match tokio::task::spawn_blocking(move || file.current()).await {
        Ok(Ok(config)) => config,
        Ok(Err(e)) => {
            g.file.report(&e, "answering 500 until it is fixed");
            return plain(StatusCode::INTERNAL_SERVER_ERROR);
        }
        Err(_) => return plain(StatusCode::INTERNAL_SERVER_ERROR),
    };
    if config.tls.is_some() && !g.file.tls() {
        let e = super::webconfig::WebConfigError {
            path: g.file.path().to_owned(),
            field: Some("tls_server_config".into()),
            why: "added while the port serves plain HTTP; restart the exporter to serve TLS".into(),
        };
        g.file
            .report(&e, "answering 500 rather than serving plain HTTP");
        return plain(StatusCode::INTERNAL_SERVER_ERROR);
    }
    let mut response = if !g.within_rate_limit(config.rate_limit) {
        if let Some(refused) = lock(&g.limited).hit(Instant::now()) {
            tracing::warn!(
                refused,
                "requests over the web configuration's rate_limit answered 429"
            );
        }
        too_many()
    } else if config.users.is_empty() || config.excluded_paths.contains(req.uri().path()) {
        next.run(req).await
    } else {
        // Without the connection's address (a router served elsewhere), all share one.
        let address = req
            .extensions()
            .get::<ConnectInfo<SocketAddr>>()
            .map_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED), |c| c.0.ip());
        match g
            .authenticated(&config, req.headers().get(header::AUTHORIZATION), address)
            .await
        {
            Verdict::Allowed => next.run(req).await,
            Verdict::Busy => {
                if let Some(refused) = lock(&g.busy).hit(Instant::now()) {
                    tracing::warn!(
                        refused,
                        admitted = ADMITTED,
                        per_address = PER_ADDRESS,
                        "too many password checks under way: attempts not yet verified answered 429 without checking"
                    );
                }
                too_many()
            }
            Verdict::Denied => {
                let mut r = plain(StatusCode::UNAUTHORIZED);
                r.headers_mut()
                    .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Basic"));
                r
            }
        }
    };
    for (name, value) in &config.headers {
        response.headers_mut().insert(name.clone(), value.clone());
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn basic_credentials_split_at_the_first_colon() {
        let v = HeaderValue::from_static("basic YWxpY2U6cGE6c3M="); // alice:pa:ss
        assert_eq!(
            basic_credentials(&v),
            Some((b"alice".to_vec(), b"pa:ss".to_vec()))
        );
        assert_eq!(
            basic_credentials(&HeaderValue::from_static("Bearer x")),
            None
        );
        assert_eq!(
            basic_credentials(&HeaderValue::from_static("Basic !!")),
            None
        );
    }

    use futures_util::FutureExt as _;

    fn basic(user: &str, password: &str) -> HeaderValue {
        let b64 = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
        HeaderValue::from_str(&format!("Basic {b64}")).unwrap()
    }

    /// A guard over a web configuration with `prometheus:right` (cost 4).
    fn guard_with_user(dir: &tempfile::TempDir) -> (Arc<Guard>, Arc<WebConfig>) {
        let path = dir.path().join("web.yml");
        let hash = bcrypt::hash("right", 4).unwrap();
        std::fs::write(&path, format!("basic_auth_users:\n  prometheus: {hash}\n")).unwrap();
        let file = Arc::new(WebConfigFile::open(path).unwrap());
        let config = file.current().unwrap();
        (Guard::new(file), config)
    }

    fn addr(last: u8) -> IpAddr {
        IpAddr::V4(Ipv4Addr::new(127, 0, 0, last))
    }

    /// With every bcrypt turn held (a flood's checks under way), a verified credential is let
    /// through at once, and a new attempt from an address that already has one admitted is
    /// answered at once without hashing: neither waits for a turn.
    #[tokio::test]
    async fn a_verified_credential_and_a_refusal_never_wait_for_bcrypt() {
        let dir = tempfile::tempdir().unwrap();
        let (g, config) = guard_with_user(&dir);
        let right = basic("prometheus", "right");
        assert_eq!(
            g.authenticated(&config, Some(&right), addr(2)).await,
            Verdict::Allowed
        );
        let _all_turns = g
            .bcrypt
            .clone()
            .acquire_many_owned(BCRYPT_AT_ONCE as u32)
            .await
            .unwrap();
        // A flood's attempt from 127.0.0.1 is admitted and waits for a turn …
        let wrong = basic("prometheus", "wrong");
        let mut waiting = Box::pin(g.authenticated(&config, Some(&wrong), addr(1)));
        assert!(
            (&mut waiting).now_or_never().is_none(),
            "it waits for a turn"
        );
        // … the scraper's cached credential passes without one …
        assert_eq!(
            g.authenticated(&config, Some(&right), addr(2))
                .now_or_never(),
            Some(Verdict::Allowed)
        );
        // … and the flood's next attempt is refused without hashing.
        assert_eq!(
            g.authenticated(&config, Some(&wrong), addr(1))
                .now_or_never(),
            Some(Verdict::Busy)
        );
        drop(waiting);
        assert_eq!(lock(&g.admitted).total, 0, "a dropped attempt leaves");
    }

    #[test]
    fn admission_is_bounded_in_all_and_per_address() {
        let admitted = Arc::new(Mutex::new(Admitted::default()));
        let first = Ticket::admit(&admitted, addr(1)).expect("admitted");
        assert!(
            Ticket::admit(&admitted, addr(1)).is_none(),
            "one per address"
        );
        let others: Vec<Ticket> = (2..=ADMITTED as u8)
            .map(|i| Ticket::admit(&admitted, addr(i)).expect("room"))
            .collect();
        assert!(Ticket::admit(&admitted, addr(200)).is_none(), "full");
        drop(first);
        assert!(Ticket::admit(&admitted, addr(1)).is_some());
        drop(others);
        assert_eq!(lock(&admitted).total, 0);
        assert!(lock(&admitted).by_address.is_empty());
    }

    #[test]
    fn the_rate_limit_is_a_token_bucket() {
        let limit = RateLimit {
            interval: std::time::Duration::from_secs(1),
            burst: 3,
        };
        let t0 = Instant::now();
        let mut b = Bucket::new(limit, t0);
        assert!((0..3).all(|_| b.allow(t0)), "the burst");
        assert!(!b.allow(t0));
        assert!(!b.allow(t0 + std::time::Duration::from_millis(900)));
        assert!(b.allow(t0 + std::time::Duration::from_millis(1000)));
        // A long pause refills to the burst, no more.
        let later = t0 + std::time::Duration::from_secs(3600);
        assert_eq!((0..10).filter(|_| b.allow(later)).count(), 3);
    }

    #[test]
    fn the_cache_key_binds_user_password_and_hash() {
        let k = cache_key(b"a", b"bc", "h");
        assert_ne!(k, cache_key(b"ab", b"c", "h"));
        assert_ne!(k, cache_key(b"a", b"bc", "h2"));
    }
}
