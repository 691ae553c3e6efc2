//! Reading an HTTP answer no further than a byte cap, and naming its media type.
//!
//! The MCP transports and the OAuth client both read answers from parties that may send too
//! much (a proxy's error page, a hostile metadata host): one reader, refusing a declared length
//! over the cap before reading and stopping at the first chunk past it, serves both, and each
//! words its own error.

use reqwest::header::{CONTENT_LENGTH, CONTENT_TYPE, HeaderMap};

/// The whole body when it holds at most `cap` bytes; `None` when its declared length or the
/// bytes read exceed the cap (nothing past the chunk that crossed it is read).
pub async fn read_capped(
    resp: &mut reqwest::Response,
    cap: usize,
) -> Result<Option<Vec<u8>>, reqwest::Error> {
    let declared = resp
        .headers()
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|s| s.parse::<usize>().ok());
    if declared.is_some_and(|n| n > cap) {
        return Ok(None);
    }
    let mut body = Vec::new();
    while let Some(chunk) = resp.chunk().await? {
        if body.len() + chunk.len() > cap {
            return Ok(None);
        }
        body.extend_from_slice(&chunk);
    }
    Ok(Some(body))
}

/// The `Content-Type` without parameters, lowercase (`application/json`); empty when absent.
pub fn media_type(headers: &HeaderMap) -> String {
    headers
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase()
}
