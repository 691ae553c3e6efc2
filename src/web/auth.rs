//! What `--web.config.file` asks of each request: basic authentication and response headers,
//! with the file read again for every request (see [`super::webconfig`]).
//!
//! Why a cache of verified passwords: bcrypt is deliberately slow (tens of milliseconds at cost
//! 10), and a scraper sends the same credentials every few seconds. Like the toolkit, a success
//! is remembered under a digest of (user, password, stored hash), so changing the hash in the
//! file (or the password) misses the cache. Unlike the toolkit, failures are not remembered: an
//! attacker cycling wrong passwords cannot evict the scraper's entry and make it pay bcrypt.
//! bcrypt runs one at a time off the async threads, as the toolkit serialises it, so a flood of
//! wrong passwords costs one core, not all of them; cached scrapes never wait for it.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use sha2::{Digest, Sha256};
use tokio::sync::Semaphore;

use super::webconfig::{WebConfig, WebConfigFile};

/// Verified credentials remembered at most: a handful of scrapers and people, with room to
/// spare; at the cap an arbitrary entry makes room (that client pays one bcrypt again).
const CACHE_ENTRIES: usize = 100;

/// The per-request side of `--web.config.file`.
pub struct Guard {
    file: Arc<WebConfigFile>,
    verified: Mutex<HashSet<[u8; 32]>>,
    /// One bcrypt at a time.
    bcrypt: Semaphore,
}

impl Guard {
    pub fn new(file: Arc<WebConfigFile>) -> Arc<Self> {
        Arc::new(Guard {
            file,
            verified: Mutex::new(HashSet::new()),
            bcrypt: Semaphore::new(1),
        })
    }

    /// Whether the `Authorization` header holds the credentials of a user of `config`.
    async fn authenticated(&self, config: &WebConfig, authorization: Option<&HeaderValue>) -> bool {
        let Some((user, password)) = authorization.and_then(basic_credentials) else {
            return false;
        };
        let known = std::str::from_utf8(&user)
            .ok()
            .and_then(|u| config.users.get(u));
        // An unknown user is checked against another user's hash and refused whatever the
        // outcome: it costs what a wrong password costs, so timing does not tell users apart.
        let Some(stored) = known.or_else(|| config.users.values().next()) else {
            return false;
        };
        let key = cache_key(&user, &password, stored);
        if known.is_some() && self.lock().contains(&key) {
            return true;
        }
        let Ok(_turn) = self.bcrypt.acquire().await else {
            return false;
        };
        let stored_hash = stored.clone();
        // bcrypt's comparison of the digests is constant-time. Passwords over 72 bytes are
        // refused rather than truncated, as in Go's bcrypt.
        let matches = tokio::task::spawn_blocking(move || {
            bcrypt::non_truncating_verify(&password, &stored_hash).unwrap_or(false)
        })
        .await
        .unwrap_or(false);
        let ok = matches && known.is_some();
        if ok {
            let mut verified = self.lock();
            if verified.len() >= CACHE_ENTRIES
                && let Some(any) = verified.iter().next().copied()
            {
                verified.remove(&any);
            }
            verified.insert(key);
        }
        ok
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashSet<[u8; 32]>> {
        self.verified.lock().unwrap_or_else(|p| p.into_inner())
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

/// The middleware: read the file, authenticate, serve, add the configured headers.
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
    let mut response = if config.users.is_empty()
        || config.excluded_paths.contains(req.uri().path())
        || g.authenticated(&config, req.headers().get(header::AUTHORIZATION))
            .await
    {
        next.run(req).await
    } else {
        let mut r = plain(StatusCode::UNAUTHORIZED);
        r.headers_mut()
            .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Basic"));
        r
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

    #[test]
    fn the_cache_key_binds_user_password_and_hash() {
        let k = cache_key(b"a", b"bc", "h");
        assert_ne!(k, cache_key(b"ab", b"c", "h"));
        assert_ne!(k, cache_key(b"a", b"bc", "h2"));
    }
}
