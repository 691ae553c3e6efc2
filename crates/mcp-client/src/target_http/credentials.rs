//! What goes in a target's `Authorization` header: nothing, a static credential (`authorization`,
//! `basic_auth`), or an OAuth 2.0 access token.
//!
//! Static credentials named by a `*_file` are read again when the file changes (its stamp, see
//! `files`), so a rotated token is sent from the next request on. A refusal of a static value
//! is retried once only if the file changed since the refused request was sent; otherwise
//! sending the same value again cannot help.

use std::sync::{Arc, Mutex};

use base64::Engine as _;
use reqwest::header::HeaderValue;

use crate::net::files::{self, Stamp};
use crate::net::http_config::{OAuth2Config, SecretSource, TargetAuth};
use crate::net::refusal::{AuthError, AuthStep, Refusal, Retry};
use crate::oauth::TokenSource;

/// How one target's requests are authenticated.
pub enum Auth {
    None,
    Static(StaticAuth),
    OAuth2(Arc<TokenSource>),
}

impl Auth {
    /// `oauth2` needs its own client (for the authorization server); it is passed in.
    pub fn new(
        target: &str,
        cfg: &TargetAuth,
        resource: &url::Url,
        oauth_http: impl FnOnce(&OAuth2Config) -> Result<reqwest::Client, AuthError>,
    ) -> Result<Auth, AuthError> {
        Ok(match cfg {
            TargetAuth::None => Auth::None,
            TargetAuth::Authorization {
                scheme,
                credentials,
            } => Auth::Static(StaticAuth {
                scheme: Scheme::Authorization(scheme.clone()),
                first: SecretCell::new(credentials),
                second: None,
            }),
            TargetAuth::Basic { username, password } => Auth::Static(StaticAuth {
                scheme: Scheme::Basic,
                first: SecretCell::new(username),
                second: password.as_ref().map(SecretCell::new),
            }),
            TargetAuth::OAuth2(o) => {
                Auth::OAuth2(TokenSource::new(target, o, resource, oauth_http(o)?))
            }
        })
    }

    pub async fn header(&self) -> Result<Option<HeaderValue>, AuthError> {
        match self {
            Auth::None => Ok(None),
            Auth::Static(s) => s.header().map(Some),
            Auth::OAuth2(t) => t.bearer().await,
        }
    }

    pub async fn refused(&self, refusal: &Refusal<'_>) -> Result<Retry, AuthError> {
        match self {
            Auth::None => Ok(Retry::No),
            Auth::Static(s) => s.refused(refusal),
            Auth::OAuth2(t) => t.challenged(refusal).await,
        }
    }

    pub fn is_none(&self) -> bool {
        matches!(self, Auth::None)
    }
}

enum Scheme {
    /// `Authorization: <type> <credentials>`.
    Authorization(String),
    /// `Authorization: Basic base64(username:password)`.
    Basic,
}

/// `authorization` (first = credentials) or `basic_auth` (first = username, second = password).
pub struct StaticAuth {
    scheme: Scheme,
    first: SecretCell,
    second: Option<SecretCell>,
}

impl StaticAuth {
    fn header(&self) -> Result<HeaderValue, AuthError> {
        let text = match &self.scheme {
            Scheme::Authorization(scheme) => format!("{scheme} {}", self.first.value()?),
            Scheme::Basic => {
                let password = match &self.second {
                    Some(p) => p.value()?,
                    None => String::new(),
                };
                let pair = format!("{}:{password}", self.first.value()?);
                format!(
                    "Basic {}",
                    base64::engine::general_purpose::STANDARD.encode(pair)
                )
            }
        };
        let mut value = HeaderValue::from_str(&text).map_err(|_| {
            AuthError::new(
                AuthStep::Credentials,
                "the configured credentials are not a valid header value",
            )
        })?;
        value.set_sensitive(true);
        Ok(value)
    }

    fn refused(&self, refusal: &Refusal<'_>) -> Result<Retry, AuthError> {
        let now = self.header()?;
        Ok(match refusal.sent {
            Some(sent) if *sent != now => Retry::Once,
            _ => Retry::No,
        })
    }
}

/// One secret: inline, or a file read again when its stamp changes.
struct SecretCell {
    source: SecretSource,
    cached: Mutex<Option<(Stamp, String)>>,
}

impl SecretCell {
    fn new(source: &SecretSource) -> SecretCell {
        SecretCell {
            source: source.clone(),
            cached: Mutex::new(None),
        }
    }

    fn value(&self) -> Result<String, AuthError> {
        let path = match &self.source {
            SecretSource::Inline(s) => return Ok(s.expose().to_owned()),
            SecretSource::File(p) => p,
        };
        let mut cached = self.cached.lock().expect("secret lock");
        let stamp = files::stamp(path);
        if let (Some((seen, value)), Some(now)) = (cached.as_ref(), stamp)
            && *seen == now
        {
            return Ok(value.clone());
        }
        match (files::read_secret(path), stamp) {
            (Ok(value), Some(now)) => {
                *cached = Some((now, value.clone()));
                Ok(value)
            }
            (Ok(value), None) => Ok(value),
            // Mid-rotation (the file briefly missing or empty): keep what worked.
            (Err(why), _) => match cached.as_ref() {
                Some((_, value)) => {
                    tracing::debug!(error = %why, "credentials file unreadable; using the last value read");
                    Ok(value.clone())
                }
                None => Err(AuthError::new(AuthStep::Credentials, why)),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::secret::Secret;

    const SENTINEL: &str = "s3cr3t-token";

    fn resource() -> url::Url {
        "https://kb.example/mcp".parse().unwrap()
    }

    fn no_oauth(_: &OAuth2Config) -> Result<reqwest::Client, AuthError> {
        unreachable!("no oauth2 here")
    }

    #[tokio::test]
    async fn authorization_and_basic_headers() {
        let a = Auth::new(
            "kb",
            &TargetAuth::Authorization {
                scheme: "Bearer".into(),
                credentials: SecretSource::Inline(Secret::new(SENTINEL)),
            },
            &resource(),
            no_oauth,
        )
        .unwrap();
        let h = a.header().await.unwrap().unwrap();
        assert_eq!(h.to_str().unwrap(), format!("Bearer {SENTINEL}"));
        assert!(h.is_sensitive());
        assert!(!format!("{h:?}").contains(SENTINEL));
        let b = Auth::new(
            "kb",
            &TargetAuth::Basic {
                username: SecretSource::Inline(Secret::new("user")),
                password: Some(SecretSource::Inline(Secret::new("pass"))),
            },
            &resource(),
            no_oauth,
        )
        .unwrap();
        let h = b.header().await.unwrap().unwrap();
        assert_eq!(h.to_str().unwrap(), "Basic dXNlcjpwYXNz");
        assert!(Auth::None.header().await.unwrap().is_none());
    }

    #[tokio::test]
    async fn a_rotated_file_is_used_and_the_refused_request_retried_once() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("token");
        std::fs::write(&path, "one\n").unwrap();
        let a = Auth::new(
            "kb",
            &TargetAuth::Authorization {
                scheme: "Bearer".into(),
                credentials: SecretSource::File(path.clone()),
            },
            &resource(),
            no_oauth,
        )
        .unwrap();
        let sent = a.header().await.unwrap().unwrap();
        assert_eq!(sent, "Bearer one");
        let refusal = Refusal {
            status: 401,
            www_authenticate: None,
            sent: Some(&sent),
        };
        assert_eq!(a.refused(&refusal).await.unwrap(), Retry::No);
        std::fs::write(&path, "two-rotated\n").unwrap();
        assert_eq!(a.refused(&refusal).await.unwrap(), Retry::Once);
        assert_eq!(a.header().await.unwrap().unwrap(), "Bearer two-rotated");
        // mid-rotation: missing file keeps the last value
        std::fs::remove_file(&path).unwrap();
        assert_eq!(a.header().await.unwrap().unwrap(), "Bearer two-rotated");
    }

    #[tokio::test]
    async fn an_unreadable_file_is_a_credentials_failure_naming_the_path() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("missing");
        let a = Auth::new(
            "kb",
            &TargetAuth::Basic {
                username: SecretSource::Inline(Secret::new("u")),
                password: Some(SecretSource::File(path.clone())),
            },
            &resource(),
            no_oauth,
        )
        .unwrap();
        let e = a.header().await.unwrap_err();
        assert_eq!(e.step, AuthStep::Credentials);
        assert!(e.detail.contains(&path.display().to_string()), "{e}");
    }
}
