//! The vocabulary between a transport that was refused (401/403) and the credentials that can
//! fix it: the transport reports a [`Refusal`], the credentials answer [`Retry`] or an
//! [`AuthError`] whose [`AuthStep`] is a bounded label value.

use reqwest::header::HeaderValue;
use std::fmt;

/// What a 401/403 answer said.
#[derive(Debug, Clone, Copy)]
pub struct Refusal<'a> {
    pub status: u16,
    /// The `WWW-Authenticate` header, as text (absent or not UTF-8: `None`).
    pub www_authenticate: Option<&'a str>,
    /// The `Authorization` value the refused request carried, so that a token another
    /// connection has already replaced is not refreshed a second time.
    pub sent: Option<&'a HeaderValue>,
}

/// What the transport does after reporting a [`Refusal`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Retry {
    /// New credentials are ready: repeat the request, once.
    Once,
    /// Nothing to do: the refusal stands.
    No,
}

/// Which step of authenticating failed. Bounded: it is the `reason` label of
/// `mcp_probe_auth_failures_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AuthStep {
    /// 401 with credentials that could not be renewed (or none configured).
    Unauthorized,
    /// 403 that is not a scope problem.
    Forbidden,
    /// 403 `insufficient_scope` after the step-up limit.
    InsufficientScope,
    /// Protected resource or authorization server metadata could not be found or used.
    Discovery,
    /// The token endpoint failed or refused.
    TokenEndpoint,
    /// A configured secret or key file could not be read or used.
    Credentials,
    /// The server named an authorization server the configuration does not trust
    /// (`oauth2.issuer`, else the MCP URL's origin): no request was sent to it.
    UntrustedAuthorizationServer,
    /// The server pointed discovery at metadata on an origin the configuration does not allow
    /// (the MCP URL's, the issuer's, `oauth2.metadata_origins`): not fetched.
    UntrustedMetadataOrigin,
}

impl AuthStep {
    pub const ALL: [AuthStep; 8] = [
        AuthStep::Unauthorized,
        AuthStep::Forbidden,
        AuthStep::InsufficientScope,
        AuthStep::Discovery,
        AuthStep::TokenEndpoint,
        AuthStep::Credentials,
        AuthStep::UntrustedAuthorizationServer,
        AuthStep::UntrustedMetadataOrigin,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            AuthStep::Unauthorized => "unauthorized",
            AuthStep::Forbidden => "forbidden",
            AuthStep::InsufficientScope => "insufficient_scope",
            AuthStep::Discovery => "discovery",
            AuthStep::TokenEndpoint => "token_endpoint",
            AuthStep::Credentials => "credentials",
            AuthStep::UntrustedAuthorizationServer => "untrusted_authorization_server",
            AuthStep::UntrustedMetadataOrigin => "untrusted_metadata_origin",
        }
    }
}

/// An authentication failure. `detail` never holds a secret, token, assertion or body beyond a
/// short, sanitised excerpt of an OAuth `error` / `error_description`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthError {
    pub step: AuthStep,
    pub detail: String,
}

impl AuthError {
    pub fn new(step: AuthStep, detail: impl Into<String>) -> AuthError {
        AuthError {
            step,
            detail: detail.into(),
        }
    }
}

impl fmt::Display for AuthError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "auth ({}): {}", self.step.as_str(), self.detail)
    }
}

impl std::error::Error for AuthError {}
