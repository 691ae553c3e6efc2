//! Bounded HTTP for the authorization server and metadata documents.
//!
//! Everything here talks to parties that are not the MCP server we watch and that we may not
//! control (a misconfigured proxy, a login page, a hostile metadata host): every request has a
//! timeout, every answer is read up to a byte cap and no further, and an answer that is not
//! JSON is named by its content type instead of being parsed or quoted.

use crate::net::body;
use crate::net::refusal::{AuthError, AuthStep};
use std::time::Duration;

/// Cap on a metadata document or token answer. Real ones are a few KiB.
pub(crate) const MAX_ANSWER_BYTES: usize = 64 * 1024;
/// Timeout of one discovery or token request.
pub(crate) const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// A complete, bounded answer.
#[derive(Debug)]
pub(crate) struct Answer {
    pub status: u16,
    pub body: Vec<u8>,
    /// `Content-Type` without parameters, lowercase; empty when absent.
    pub content_type: String,
}

impl Answer {
    pub(crate) fn ok(&self) -> bool {
        (200..300).contains(&self.status)
    }

    /// The body as a JSON object; `what` names the answering party in the error.
    pub(crate) fn json(
        &self,
        step: AuthStep,
        what: &str,
    ) -> Result<serde_json::Map<String, serde_json::Value>, AuthError> {
        let ct = self.content_type.as_str();
        if ct == "text/html" || ct == "application/xhtml+xml" {
            return Err(AuthError::new(
                step,
                format!("{what} answered {ct}, not JSON"),
            ));
        }
        match serde_json::from_slice::<serde_json::Value>(&self.body) {
            Ok(serde_json::Value::Object(map)) => Ok(map),
            Ok(_) => Err(AuthError::new(
                step,
                format!("{what} answered JSON that is not an object"),
            )),
            Err(_) => {
                let shown = if ct.is_empty() { "no content type" } else { ct };
                Err(AuthError::new(
                    step,
                    format!("{what} answered {shown}, not JSON"),
                ))
            }
        }
    }
}

/// Sends `req` (with [`REQUEST_TIMEOUT`]) and reads the answer up to [`MAX_ANSWER_BYTES`].
pub(crate) async fn send(
    req: reqwest::RequestBuilder,
    step: AuthStep,
    what: &str,
) -> Result<Answer, AuthError> {
    let fail = |detail: String| AuthError::new(step, format!("{what}: {detail}"));
    let work = async {
        let mut resp = req
            .timeout(REQUEST_TIMEOUT)
            .header(reqwest::header::ACCEPT, "application/json")
            .send()
            .await
            .map_err(|e| fail(describe(&e)))?;
        let status = resp.status().as_u16();
        let content_type = body::media_type(resp.headers());
        let body = body::read_capped(&mut resp, MAX_ANSWER_BYTES)
            .await
            .map_err(|e| fail(describe(&e)))?
            .ok_or_else(|| {
                fail(format!(
                    "answer larger than {} KiB (HTTP {status})",
                    MAX_ANSWER_BYTES / 1024
                ))
            })?;
        Ok(Answer {
            status,
            body,
            content_type,
        })
    };
    // The per-request timeout covers the body too, but a belt-and-braces deadline keeps a
    // client built without it (tests) from waiting forever.
    tokio::time::timeout(REQUEST_TIMEOUT + Duration::from_secs(1), work)
        .await
        .unwrap_or_else(|_| Err(fail("timed out".into())))
}

/// A transport error in a few words, without the URL (which may carry a secret query).
fn describe(e: &reqwest::Error) -> String {
    if e.is_timeout() {
        "timed out".into()
    } else if e.is_connect() {
        "connection failed".into()
    } else if e.is_redirect() {
        "too many redirects".into()
    } else if e.is_body() || e.is_decode() {
        "answer broke off".into()
    } else {
        "request failed".into()
    }
}

/// An OAuth `error` code from an error answer, reduced to the RFC 6749 §5.2 character set and
/// 64 bytes: the only part of an error body we repeat (descriptions may echo what we sent).
pub(crate) fn oauth_error_code(body: &[u8]) -> Option<String> {
    let v: serde_json::Value = serde_json::from_slice(body).ok()?;
    let code = v.get("error")?.as_str()?;
    let clean: String = code
        .chars()
        .filter(|c| matches!(c, ' '..='~') && *c != '"' && *c != '\\')
        .take(64)
        .collect();
    (!clean.is_empty()).then_some(clean)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_codes_are_sanitised_and_bounded() {
        assert_eq!(
            oauth_error_code(br#"{"error":"invalid_client","error_description":"secret xyz"}"#),
            Some("invalid_client".into())
        );
        assert_eq!(
            oauth_error_code("{\"error\":\"a\\u001b[31m\\\"b\"}".as_bytes()),
            Some("a[31mb".into())
        );
        let long = format!(r#"{{"error":"{}"}}"#, "x".repeat(500));
        assert_eq!(oauth_error_code(long.as_bytes()).unwrap().len(), 64);
        assert_eq!(oauth_error_code(b"<html>"), None);
        assert_eq!(oauth_error_code(br#"{"error":7}"#), None);
    }

    #[test]
    fn html_is_named_not_parsed() {
        let a = Answer {
            status: 200,
            body: b"<html>login</html>".to_vec(),
            content_type: "text/html".into(),
        };
        let e = a
            .json(AuthStep::TokenEndpoint, "token endpoint")
            .unwrap_err();
        assert_eq!(e.detail, "token endpoint answered text/html, not JSON");
    }
}
