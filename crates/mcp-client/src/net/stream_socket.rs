//! A long-lived response on a socket of its own: the server's notification streams (the GET
//! stream, a `subscriptions/listen` stream, the HTTP+SSE stream), which each hold a connection
//! for hours and carry a few hundred bytes an hour.
//!
//! Why not the pooled client: a response of reqwest's keeps all of hyper's per-connection
//! machinery alive for as long as its body is read — a dispatch channel block, 8 KiB read and
//! write buffers, a connection task — about 26 KB a stream, measured (docs/performance.md),
//! paid twice by a target with the legacy watch. Such a stream needs none of it: it is written
//! once and read to its end, never reused. Here it costs its socket and a read buffer sized to
//! what arrives (1 KiB while idle, growing while reads fill it), read in the caller's task.
//!
//! What is parsed is what any HTTP/1.1 client parses, with the well-kept parser hyper uses
//! (`httparse`): the response head (bounded in bytes and headers), then the body as chunked,
//! a declared length, or to the end of the connection. The request is the one the pooled
//! client would send (built by the same `reqwest::RequestBuilder`, so headers, credentials and
//! the body are the caller's), and the answer is handed back as a `reqwest::Response`, so every
//! reader above (status, media type, SSE under caps) serves both ways unchanged.
//!
//! Only direct connections come here: a target behind an egress proxy keeps the pooled client
//! (the choice is `target_http`'s). TLS is the target's own rustls configuration, offering
//! HTTP/1.1 only.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::{Buf, Bytes, BytesMut};
use reqwest::header::{HOST, HeaderMap, HeaderName, HeaderValue, USER_AGENT};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use url::{Host, Url};

/// Largest response head (status line and headers) read before the answer is refused.
const MAX_HEAD_BYTES: usize = 64 * 1024;
/// Most response headers.
const MAX_HEADERS: usize = 100;
/// Largest chunk-size line (with extensions) of a chunked body.
const MAX_CHUNK_LINE: usize = 4 * 1024;
/// Read size while a stream is idle (what one notification needs) ...
const IDLE_READ: usize = 1024;
/// ... and once a read filled it (a burst, or a large message).
const BUSY_READ: usize = 16 * 1024;
/// Most addresses of a name tried in turn.
const MAX_ADDRESSES: usize = 8;
/// Most `1xx` interim answers skipped before the final one.
const MAX_INTERIM: usize = 8;

/// Why a stream could not be opened: the step that failed, with the error.
#[derive(Debug)]
pub enum StreamFault {
    /// The host name did not resolve.
    Dns(io::Error),
    /// No address of the host accepted the connection.
    Connect(io::Error),
    /// The TLS handshake failed.
    Tls(io::Error),
    /// The request could not be sent, or the answer was not HTTP/1.x.
    Transport(String),
}

impl std::fmt::Display for StreamFault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StreamFault::Dns(e) => write!(f, "dns error: {e}"),
            StreamFault::Connect(e) => write!(f, "connect: {e}"),
            StreamFault::Tls(e) => write!(f, "tls handshake: {e}"),
            StreamFault::Transport(why) => f.write_str(why),
        }
    }
}

/// What a stream's socket needs to reach its server: the target's TLS configuration (HTTP/1.1
/// only) and the `User-Agent` the pooled client sends.
#[derive(Clone)]
pub struct StreamConnector {
    tls: Arc<rustls::ClientConfig>,
    user_agent: HeaderValue,
}

impl std::fmt::Debug for StreamConnector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StreamConnector").finish_non_exhaustive()
    }
}

impl StreamConnector {
    /// `tls`: the target's client configuration; its ALPN is narrowed to HTTP/1.1.
    pub fn new(mut tls: rustls::ClientConfig, user_agent: &'static str) -> StreamConnector {
        tls.alpn_protocols = vec![b"http/1.1".to_vec()];
        StreamConnector {
            tls: Arc::new(tls),
            user_agent: HeaderValue::from_static(user_agent),
        }
    }

    /// Send `req` on a new connection and read its response head; the body is read as the
    /// returned response is. The caller bounds the wait.
    pub async fn execute(&self, req: reqwest::Request) -> Result<reqwest::Response, StreamFault> {
        let url = req.url().clone();
        let tcp = connect(&url).await?;
        let mut io: Box<dyn Io> = if url.scheme() == "https" {
            let name = server_name(&url)?;
            let tls = tokio_rustls::TlsConnector::from(self.tls.clone())
                .connect(name, tcp)
                .await
                .map_err(StreamFault::Tls)?;
            Box::new(tls)
        } else {
            Box::new(tcp)
        };
        let head = self.request_bytes(&req)?;
        let sent = async {
            io.write_all(&head).await?;
            io.flush().await
        };
        sent.await
            .map_err(|e| StreamFault::Transport(format!("sending the request: {e}")))?;
        let mut buf = BytesMut::with_capacity(IDLE_READ);
        let (status, headers) = read_head(&mut io, &mut buf).await?;
        let framing = Framing::of(status, &headers)?;
        let body = Body {
            io,
            buf,
            framing,
            busy: false,
        };
        let stream = futures_util::stream::unfold(body, |mut body| async move {
            body.next_chunk().await.transpose().map(|r| (r, body))
        });
        let mut resp = http::Response::new(reqwest::Body::wrap_stream(stream));
        *resp.status_mut() = status;
        *resp.headers_mut() = headers;
        Ok(reqwest::Response::from(resp))
    }

    /// The request as HTTP/1.1 bytes: its line, `Host`, the builder's headers, a `User-Agent`
    /// unless it set one, the body's length and the body.
    fn request_bytes(&self, req: &reqwest::Request) -> Result<Vec<u8>, StreamFault> {
        let url = req.url();
        let body = match req.body() {
            None => &[][..],
            Some(b) => b.as_bytes().ok_or_else(|| {
                StreamFault::Transport("a streamed request body cannot be sent here".into())
            })?,
        };
        let target = &url[url::Position::BeforePath..url::Position::AfterQuery];
        let authority = &url[url::Position::BeforeHost..url::Position::AfterPort];
        let mut out = Vec::with_capacity(256 + body.len());
        out.extend_from_slice(req.method().as_str().as_bytes());
        out.push(b' ');
        out.extend_from_slice(if target.is_empty() { "/" } else { target }.as_bytes());
        out.extend_from_slice(b" HTTP/1.1\r\n");
        let mut line = |name: &HeaderName, value: &HeaderValue| {
            out.extend_from_slice(name.as_str().as_bytes());
            out.extend_from_slice(b": ");
            out.extend_from_slice(value.as_bytes());
            out.extend_from_slice(b"\r\n");
        };
        // A configured `Host` (virtual hosting behind an address) wins, as it does in the pool.
        let host = match req.headers().get(HOST) {
            Some(configured) => configured.clone(),
            None => HeaderValue::from_str(authority).map_err(|_| {
                StreamFault::Transport("the URL's host is not a header value".into())
            })?,
        };
        line(&HOST, &host);
        for (name, value) in req.headers() {
            if name != HOST && name != http::header::CONTENT_LENGTH {
                line(name, value);
            }
        }
        if !req.headers().contains_key(USER_AGENT) {
            line(&USER_AGENT, &self.user_agent);
        }
        if req.body().is_some() || req.method() == reqwest::Method::POST {
            line(
                &http::header::CONTENT_LENGTH,
                &HeaderValue::from(body.len()),
            );
        }
        out.extend_from_slice(b"\r\n");
        out.extend_from_slice(body);
        Ok(out)
    }
}

/// A connection: plain TCP or TLS over it.
trait Io: AsyncRead + AsyncWrite + Send + Unpin {}
impl<T: AsyncRead + AsyncWrite + Send + Unpin> Io for T {}

/// TCP to the URL's host and port: each resolved address in turn, with no delay and the
/// kernel's keepalive, so a half-open stream is noticed.
async fn connect(url: &Url) -> Result<TcpStream, StreamFault> {
    let port = url
        .port_or_known_default()
        .ok_or_else(|| StreamFault::Transport(format!("{} URL without a port", url.scheme())))?;
    let addrs: Vec<SocketAddr> = match url.host() {
        Some(Host::Ipv4(ip)) => vec![SocketAddr::new(ip.into(), port)],
        Some(Host::Ipv6(ip)) => vec![SocketAddr::new(ip.into(), port)],
        Some(Host::Domain(name)) => tokio::net::lookup_host((name, port))
            .await
            .map_err(StreamFault::Dns)?
            .take(MAX_ADDRESSES)
            .collect(),
        None => return Err(StreamFault::Transport("URL without a host".into())),
    };
    let mut last = io::Error::new(io::ErrorKind::NotFound, "the name has no address");
    for addr in addrs {
        match TcpStream::connect(addr).await {
            Ok(tcp) => {
                let _ = tcp.set_nodelay(true);
                let keepalive = socket2::TcpKeepalive::new().with_time(TCP_KEEPALIVE);
                let _ = socket2::SockRef::from(&tcp).set_tcp_keepalive(&keepalive);
                return Ok(tcp);
            }
            Err(e) => last = e,
        }
    }
    Err(StreamFault::Connect(last))
}

/// Kernel keepalive on a stream's socket (as on the pooled client's).
const TCP_KEEPALIVE: Duration = Duration::from_secs(30);

/// The name the server's certificate is checked against: the URL's host.
fn server_name(url: &Url) -> Result<rustls::pki_types::ServerName<'static>, StreamFault> {
    let bad = || StreamFault::Transport("the URL's host is not a TLS server name".into());
    match url.host() {
        Some(Host::Domain(d)) => {
            rustls::pki_types::ServerName::try_from(d.to_owned()).map_err(|_| bad())
        }
        Some(Host::Ipv4(ip)) => Ok(rustls::pki_types::ServerName::IpAddress(
            std::net::IpAddr::from(ip).into(),
        )),
        Some(Host::Ipv6(ip)) => Ok(rustls::pki_types::ServerName::IpAddress(
            std::net::IpAddr::from(ip).into(),
        )),
        None => Err(bad()),
    }
}

/// Read up to the final response head (skipping interim `1xx` ones); what follows it stays in
/// `buf`.
async fn read_head(
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
                if !status.is_informational() {
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

/// How the body's end is known.
#[derive(Debug, PartialEq)]
enum Framing {
    /// `Transfer-Encoding: chunked`, at this point of a chunk.
    Chunked(Chunk),
    /// This many bytes left of a declared `Content-Length`.
    Length(u64),
    /// Neither: the body ends with the connection.
    ToClose,
    /// Read to its end (or failed): nothing more is read.
    Done,
}

/// Where a chunked body's reader is.
#[derive(Debug, PartialEq)]
enum Chunk {
    /// At a chunk-size line.
    Size,
    /// This many bytes left of the chunk's data.
    Data(u64),
    /// At the CRLF after a chunk's data.
    DataEnd,
}

impl Framing {
    fn of(status: http::StatusCode, headers: &HeaderMap) -> Result<Framing, StreamFault> {
        if status == http::StatusCode::NO_CONTENT || status == http::StatusCode::NOT_MODIFIED {
            return Ok(Framing::Done);
        }
        let chunked = headers
            .get_all(http::header::TRANSFER_ENCODING)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
            .map(str::trim)
            .rfind(|c| !c.is_empty())
            .map(|last| last.eq_ignore_ascii_case("chunked"));
        match chunked {
            Some(true) => return Ok(Framing::Chunked(Chunk::Size)),
            // Encoded but not chunked last: the body ends with the connection (RFC 9112 6.3).
            Some(false) => return Ok(Framing::ToClose),
            None => {}
        }
        let mut lengths = headers.get_all(http::header::CONTENT_LENGTH).iter();
        match lengths.next() {
            None => Ok(Framing::ToClose),
            Some(v) => {
                let n = v
                    .to_str()
                    .ok()
                    .and_then(|s| s.trim().parse::<u64>().ok())
                    .ok_or_else(|| StreamFault::Transport("invalid Content-Length".into()))?;
                if lengths.any(|other| other != v) {
                    return Err(StreamFault::Transport("conflicting Content-Length".into()));
                }
                Ok(Framing::Length(n))
            }
        }
    }
}

/// The body being read: what the connection has delivered beyond the last chunk handed out.
struct Body {
    io: Box<dyn Io>,
    buf: BytesMut,
    framing: Framing,
    /// Whether the last read filled what it was given (read more at once next time).
    busy: bool,
}

impl Body {
    /// The next piece of the body; `None` at its end. After an error nothing more is read.
    async fn next_chunk(&mut self) -> io::Result<Option<Bytes>> {
        let next = self.decode().await;
        if !matches!(next, Ok(Some(_))) {
            self.framing = Framing::Done;
            self.buf = BytesMut::new();
        }
        next
    }

    async fn decode(&mut self) -> io::Result<Option<Bytes>> {
        loop {
            match &mut self.framing {
                Framing::Done | Framing::Length(0) => return Ok(None),
                Framing::ToClose => {
                    if self.buf.is_empty() && self.fill().await? == 0 {
                        return Ok(None);
                    }
                    return Ok(Some(self.buf.split().freeze()));
                }
                Framing::Length(left) | Framing::Chunked(Chunk::Data(left)) => {
                    let left = *left;
                    if self.buf.is_empty() && self.fill().await? == 0 {
                        return Err(cut_short());
                    }
                    let take = self
                        .buf
                        .len()
                        .min(usize::try_from(left).unwrap_or(usize::MAX));
                    let after = left - take as u64;
                    self.framing = match self.framing {
                        Framing::Length(_) => Framing::Length(after),
                        _ if after == 0 => Framing::Chunked(Chunk::DataEnd),
                        _ => Framing::Chunked(Chunk::Data(after)),
                    };
                    return Ok(Some(self.buf.split_to(take).freeze()));
                }
                Framing::Chunked(Chunk::DataEnd) => {
                    while self.buf.len() < 2 {
                        if self.fill().await? == 0 {
                            return Err(cut_short());
                        }
                    }
                    if &self.buf[..2] != b"\r\n" {
                        return Err(invalid("chunk data not followed by CRLF"));
                    }
                    self.buf.advance(2);
                    self.framing = Framing::Chunked(Chunk::Size);
                }
                Framing::Chunked(Chunk::Size) => match httparse::parse_chunk_size(&self.buf) {
                    Ok(httparse::Status::Complete((len, 0))) => {
                        // The last chunk: trailers are not read, the connection is not reused.
                        self.buf.advance(len);
                        return Ok(None);
                    }
                    Ok(httparse::Status::Complete((len, size))) => {
                        self.buf.advance(len);
                        self.framing = Framing::Chunked(Chunk::Data(size));
                    }
                    Ok(httparse::Status::Partial) if self.buf.len() > MAX_CHUNK_LINE => {
                        return Err(invalid("chunk-size line too long"));
                    }
                    Ok(httparse::Status::Partial) => {
                        if self.fill().await? == 0 {
                            return Err(cut_short());
                        }
                    }
                    Err(_) => return Err(invalid("invalid chunk size")),
                },
            }
        }
    }

    /// Read what the connection has: a small read while the stream is idle, a larger one
    /// after a read that filled its room.
    async fn fill(&mut self) -> io::Result<usize> {
        let room = if self.busy { BUSY_READ } else { IDLE_READ };
        if !self.busy && self.buf.is_empty() && self.buf.capacity() > BUSY_READ / 2 {
            // Quiet again after a burst: give the large buffer back.
            self.buf = BytesMut::new();
        }
        self.buf.reserve(room);
        let n = self.io.read_buf(&mut self.buf).await?;
        self.busy = n >= room;
        Ok(n)
    }
}

fn cut_short() -> io::Error {
    io::Error::new(io::ErrorKind::UnexpectedEof, "the stream ended mid-body")
}

fn invalid(why: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, why.to_owned())
}

#[cfg(test)]
mod tests;
