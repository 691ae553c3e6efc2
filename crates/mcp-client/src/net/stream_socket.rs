//! A long-lived response on a socket of its own: the server's notification streams (the GET
//! stream, a `subscriptions/listen` stream, the HTTP+SSE stream), which each hold a connection
//! for hours and carry a few hundred bytes an hour.
//!
//! Why not the pooled client: a response of reqwest's keeps all of hyper's per-connection
//! machinery alive for as long as its body is read — a dispatch channel block, 8 KiB read and
//! write buffers, a connection task — about 26 KB a stream, measured (docs/performance.md),
//! paid twice by a target with the legacy watch. Such a stream needs none of it: it is written
//! once and read to its end, never reused. Here it costs its socket and a read buffer sized to
//! what arrives (512 bytes while idle, growing while reads fill it), read in the caller's task.
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
//!
//! This file connects and writes the request; `head` reads the response head, `body` the body.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;

use bytes::BytesMut;
use reqwest::header::{HOST, HeaderName, HeaderValue, USER_AGENT};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use url::{Host, Url};

use super::TCP_KEEPALIVE;
use body::{Body, Framing, IDLE_READ};
use head::read_head;

mod body;
mod head;

/// Most addresses of a name tried in turn.
const MAX_ADDRESSES: usize = 8;

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
                .map_err(handshake_fault)?;
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
pub(crate) trait Io: AsyncRead + AsyncWrite + Send + Unpin {}
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
    let count = addrs.len();
    for (i, addr) in addrs.into_iter().enumerate() {
        // An address that drops packets (an IPv6 route that goes nowhere) must not spend the
        // caller's whole deadline while another one would answer: all but the last get
        // CONNECT_ATTEMPT each, as the pool's connector gives the other family a head start.
        let attempt = TcpStream::connect(addr);
        let connected = if i + 1 < count {
            tokio::time::timeout(CONNECT_ATTEMPT, attempt)
                .await
                .unwrap_or_else(|_| Err(io::Error::from(io::ErrorKind::TimedOut)))
        } else {
            attempt.await
        };
        match connected {
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

/// How long one address of several may take to accept before the next is tried.
const CONNECT_ATTEMPT: std::time::Duration = std::time::Duration::from_secs(2);

/// A failed handshake is a TLS failure when rustls says so; a connection reset or closed before
/// any TLS record is a connect failure, as the pool reports it.
fn handshake_fault(e: io::Error) -> StreamFault {
    let from_rustls = e
        .get_ref()
        .is_some_and(|inner| inner.downcast_ref::<rustls::Error>().is_some());
    if from_rustls || e.kind() == io::ErrorKind::InvalidData {
        StreamFault::Tls(e)
    } else {
        StreamFault::Connect(e)
    }
}

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

#[cfg(test)]
mod tests;
