//! The client's request as it goes to the upstream: its path, query and end-to-end headers,
//! never the headers of one hop. Forwarding and `flatten_pages` both send it, so it is one
//! function below both.

use axum::http::{HeaderMap, HeaderName, HeaderValue, Method, header};

use super::Shared;

/// The client's request as it goes upstream: same path, query and end-to-end headers (the
/// body's length is the new body's). Forwarding and `flatten_pages` both send this.
pub(super) fn upstream_request(
    sh: &Shared,
    method: Method,
    parts: &axum::http::request::Parts,
) -> reqwest::RequestBuilder {
    let mut url = sh.config.upstream.clone();
    url.set_path(parts.uri.path());
    url.set_query(parts.uri.query());
    let mut req = sh.http.request(method, url);
    for (name, value) in end_to_end(&parts.headers) {
        if name != header::CONTENT_LENGTH {
            req = req.header(name, value);
        }
    }
    req
}

/// The headers a proxy passes on: not hop-by-hop, and not named in `Connection` (RFC 9110 7.6.1).
pub(super) fn end_to_end(headers: &HeaderMap) -> impl Iterator<Item = (&HeaderName, &HeaderValue)> {
    let named: Vec<String> = headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|t| t.trim().to_ascii_lowercase())
        .take(32)
        .collect();
    headers
        .iter()
        .filter(move |(n, _)| !hop_by_hop(n) && !named.iter().any(|t| t == n.as_str()))
}

/// Headers that belong to one hop, never forwarded (RFC 9110 § 7.6.1), plus `host`, and
/// `accept-encoding`: the proxy must read the JSON-RPC it forwards, so answers come uncompressed.
pub(super) fn hop_by_hop(name: &HeaderName) -> bool {
    matches!(
        name.as_str(),
        "connection"
            | "keep-alive"
            | "proxy-connection"
            | "proxy-authenticate"
            | "proxy-authorization"
            | "te"
            | "trailer"
            | "transfer-encoding"
            | "upgrade"
            | "host"
            | "accept-encoding"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hop_by_hop_headers_and_those_connection_names_stay_behind() {
        let mut h = HeaderMap::new();
        h.insert(header::CONNECTION, HeaderValue::from_static("close, X-Hop"));
        h.insert("x-hop", HeaderValue::from_static("1"));
        h.insert(
            header::TRANSFER_ENCODING,
            HeaderValue::from_static("chunked"),
        );
        h.insert("mcp-session-id", HeaderValue::from_static("s"));
        h.insert(header::AUTHORIZATION, HeaderValue::from_static("Bearer t"));
        let kept: Vec<&str> = end_to_end(&h).map(|(n, _)| n.as_str()).collect();
        assert_eq!(kept, ["mcp-session-id", "authorization"]);
    }
}
