//! The response head: read up to the final status line and headers (interim `1xx` answers
//! skipped), held to a size and a count, parsed by `httparse`.

use bytes::{Buf, BytesMut};
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use tokio::io::AsyncReadExt;

use super::body::IDLE_READ;
use super::{Io, StreamFault};

/// Largest response head (status line and headers) read before the answer is refused.
pub(super) const MAX_HEAD_BYTES: usize = 64 * 1024;
/// Most response headers.
const MAX_HEADERS: usize = 100;
/// Most `1xx` interim answers skipped before the final one.
const MAX_INTERIM: usize = 8;

/// Read up to the final response head (skipping interim `1xx` ones); what follows it stays in
/// `buf`.
pub(super) async fn read_head(
    io: &mut Box<dyn Io>,
    buf: &mut BytesMut,
) -> Result<(http::StatusCode, HeaderMap), StreamFault> {
    let mut interim = 0;
    loop {
        let parsed = {
            let mut slots = [httparse::EMPTY_HEADER; MAX_HEADERS];
            let mut head = httparse::Response::new(&mut slots);
            match head.parse(buf) {
                Ok(httparse::Status::Complete(len)) => Some(owned_head(&head, len)?),
                Ok(httparse::Status::Partial) => None,
                Err(e) => {
                    return Err(StreamFault::Transport(format!(
                        "malformed HTTP response head: {e}"
                    )));
                }
            }
        };
        match parsed {
            Some((status, headers, len)) => {
                buf.advance(len);
                // 101 is final (nothing asked for an upgrade: the caller judges it as a status).
                if !status.is_informational() || status == http::StatusCode::SWITCHING_PROTOCOLS {
                    return Ok((status, headers));
                }
                interim += 1;
                if interim > MAX_INTERIM {
                    return Err(StreamFault::Transport(
                        "too many interim (1xx) answers".into(),
                    ));
                }
            }
            None if buf.len() >= MAX_HEAD_BYTES => {
                return Err(StreamFault::Transport(format!(
                    "HTTP response head over {MAX_HEAD_BYTES} bytes"
                )));
            }
            None => {
                buf.reserve(IDLE_READ);
                let n = io.read_buf(buf).await.map_err(|e| {
                    StreamFault::Transport(format!("reading the response head: {e}"))
                })?;
                if n == 0 {
                    return Err(StreamFault::Transport(
                        "connection closed before the response head".into(),
                    ));
                }
            }
        }
    }
}

/// A parsed head as owned values, and its length in bytes.
fn owned_head(
    head: &httparse::Response<'_, '_>,
    len: usize,
) -> Result<(http::StatusCode, HeaderMap, usize), StreamFault> {
    let bad = |what: &str| StreamFault::Transport(format!("HTTP response with {what}"));
    let status = head
        .code
        .and_then(|c| http::StatusCode::from_u16(c).ok())
        .ok_or_else(|| bad("an invalid status"))?;
    let mut headers = HeaderMap::with_capacity(head.headers.len());
    for h in head.headers.iter() {
        let name =
            HeaderName::from_bytes(h.name.as_bytes()).map_err(|_| bad("an invalid header name"))?;
        let value = HeaderValue::from_bytes(h.value).map_err(|_| bad("an invalid header value"))?;
        headers.append(name, value);
    }
    Ok((status, headers, len))
}
