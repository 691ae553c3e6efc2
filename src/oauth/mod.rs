//! OAuth 2.0 client credentials for a target (stub on the net branch: the oauth work replaces
//! this file; only the signatures the transports are written against are here).

use std::sync::Arc;

use reqwest::header::HeaderValue;

use crate::config::OAuth2Config;
use crate::net::refusal::{AuthError, AuthStep, Refusal, Retry};

/// The tokens of one target, shared by all its connections.
pub struct TokenSource {
    target: String,
}

impl TokenSource {
    pub fn new(
        target: &str,
        _cfg: &OAuth2Config,
        _resource: &url::Url,
        _http: reqwest::Client,
    ) -> Arc<TokenSource> {
        Arc::new(TokenSource {
            target: target.to_owned(),
        })
    }

    pub async fn bearer(&self) -> Result<HeaderValue, AuthError> {
        Err(self.unavailable())
    }

    pub async fn challenged(&self, _refusal: &Refusal<'_>) -> Result<Retry, AuthError> {
        Err(self.unavailable())
    }

    fn unavailable(&self) -> AuthError {
        AuthError::new(
            AuthStep::TokenEndpoint,
            format!(
                "target {}: oauth2 is not built into this branch",
                self.target
            ),
        )
    }
}
