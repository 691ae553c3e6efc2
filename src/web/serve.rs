//! The exporter's own port: the accept loop and the limits of every connection.
//!
//! Why not `axum::serve`: it has no header-read timeout, no idle timeout and no connection cap.
//! 5,000 clients that trickled their request head one byte at a time held 5,000 connections for
//! minutes (107 MB RSS), and ~1,100 idle connections under the default limit of 1,024 open files
//! made `/metrics` time out with nothing logged. A scrape must get through all of that.
//!
//! - A connection is either *waiting* for a request (since it was accepted, or since its last
//!   response ended) or *serving* one. A waiting connection has `header_read_timeout` from the
//!   first byte of a request (from the accept, for the first request) to send the whole head,
//!   and `idle_timeout` to begin its next request; a serving connection is closed when its
//!   response makes no progress for `idle_timeout` (a client that stops reading).
//! - At the cap (`max_connections`), a new connection closes the connection that has waited
//!   longest for a request instead of being turned away. A scrape sends its request at once, so
//!   it is served even while the cap is full of slow or idle clients: those are what gets
//!   closed. Only when every connection is serving a request (which takes milliseconds) is a new
//!   connection refused.
//! - An accept error (EMFILE at the file limit) also closes the longest-waiting connection, to
//!   free a descriptor for the scrape waiting in the backlog, and backs off from 5 ms to 1 s
//!   instead of spinning.
//! - Hitting the cap and failing to accept are logged at most once per [`WARN_EVERY`], with the
//!   count since the previous line; every close is counted in
//!   `mcp_exporter_web_connections_closed_total{reason}`.
//! - With TLS (`--web.config.file`), a connection is waiting while its handshake runs: it may be
//!   evicted, and the handshake has `header_read_timeout` of its own; the first request's head
//!   clock starts when the handshake ends. The TLS configuration is built for each handshake
//!   from the file as it is then (see [`super::webconfig`]); a handshake that fails (a plain
//!   HTTP request, a missing client certificate, a broken file) closes the connection.

use std::collections::HashMap;
use std::convert::Infallible;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use bytes::Bytes;
use hyper::body::{Frame, SizeHint};
use hyper::server::conn::http1;
use hyper::service::Service as _;
use hyper_util::rt::TokioIo;
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, mpsc, watch};
use tokio::time::Instant;
use tokio_rustls::LazyConfigAcceptor;
use tokio_rustls::server::TlsStream;

use super::auth::{Guard, guard};
use super::webconfig::WebConfigFile;
use crate::telemetry::{Telemetry, families};

/// Default `--web.header-read-timeout`: a scrape sends its request head in one packet, so 10 s
/// is generous on the slowest link, and a client that trickles its head is gone within it.
pub const DEFAULT_HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);

/// Default `--web.idle-timeout`: longer than Prometheus' default scrape interval (1 m), so a
/// scraper's keep-alive connection is reused between scrapes rather than opened anew each time.
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(120);

/// Default `--web.max-connections`: Prometheus' own default for its web server; far below the
/// `LimitNOFILE` of the shipped systemd unit, leaving the rest to the probe's connections.
pub const DEFAULT_MAX_CONNECTIONS: usize = 512;

/// Largest request head a connection may send (hyper's read buffer): 64 KiB holds a browser's
/// cookies for the status page, and bounds the buffers of the default cap to 32 MiB.
const MAX_REQUEST_HEAD_BYTES: usize = 64 * 1024;

/// First pause after an accept error, doubled on each further error (Go's net/http does the
/// same): short enough that a descriptor freed a moment later is used at once.
const ACCEPT_BACKOFF_MIN: Duration = Duration::from_millis(5);

/// Longest pause between accept attempts while they keep failing: the port answers again
/// within a second of a descriptor coming free, and a persistent error costs one try a second.
const ACCEPT_BACKOFF_MAX: Duration = Duration::from_secs(1);

use super::throttle::Throttle;
pub use super::throttle::WARN_EVERY;

/// Limits of the exporter's own port (the `--web.*` flags).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Time to send a request head, from its first byte (from the accept, for the first one).
    pub header_read_timeout: Duration,
    /// Time a keep-alive connection may wait for its next request, and a response may go
    /// without progress.
    pub idle_timeout: Duration,
    /// Connections open at once; at the cap the longest-waiting one is closed for a new one.
    pub max_connections: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            header_read_timeout: DEFAULT_HEADER_READ_TIMEOUT,
            idle_timeout: DEFAULT_IDLE_TIMEOUT,
            max_connections: DEFAULT_MAX_CONNECTIONS,
        }
    }
}

/// Why the exporter closed a connection: the `reason` of
/// `mcp_exporter_web_connections_closed_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Closed {
    /// The request head did not arrive within `header_read_timeout`.
    HeaderReadTimeout,
    /// No next request, or no progress of a response, within `idle_timeout`.
    IdleTimeout,
    /// Closed at the cap (or at an accept error) to make room: it had waited longest.
    Evicted,
    /// Turned away at the cap: every connection was serving a request.
    Refused,
    /// The TLS handshake failed: not TLS (a plain HTTP request), no acceptable client
    /// certificate, or the web configuration file unusable at the time.
    TlsHandshakeFailed,
}

impl Closed {
    pub const ALL: [Closed; 5] = [
        Closed::HeaderReadTimeout,
        Closed::IdleTimeout,
        Closed::Evicted,
        Closed::Refused,
        Closed::TlsHandshakeFailed,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Closed::HeaderReadTimeout => "header_read_timeout",
            Closed::IdleTimeout => "idle_timeout",
            Closed::Evicted => "evicted",
            Closed::Refused => "refused",
            Closed::TlsHandshakeFailed => "tls_handshake_failed",
        }
    }
}

/// The port's own series: open connections, and closes by reason (all present from the start).
#[derive(Clone)]
struct WebMetrics {
    open: metrics::Gauge,
    closed: [metrics::Counter; Closed::ALL.len()],
}

impl WebMetrics {
    fn new(telemetry: &Telemetry) -> Self {
        let closed = Closed::ALL.map(|why| {
            let c = telemetry.daemon_counter(
                families::WEB_CONNECTIONS_CLOSED,
                &[("reason", why.as_str().into())],
            );
            c.absolute(0);
            c
        });
        let open = telemetry.daemon_gauge(families::WEB_CONNECTIONS);
        open.set(0.0);
        WebMetrics { open, closed }
    }

    /// Series that go nowhere: for listeners that are not the exporter's own port (the
    /// reverse proxies'), whose connections must not be counted as the port's.
    fn detached() -> Self {
        WebMetrics {
            open: metrics::Gauge::noop(),
            closed: Closed::ALL.map(|_| metrics::Counter::noop()),
        }
    }

    fn closed(&self, why: Closed) {
        self.closed[why as usize].increment(1);
    }
}

/// Where a connection is in its request cycle.
#[derive(Debug, Clone, Copy)]
enum Phase {
    /// No request in progress since `since` (the accept, or the end of the last response).
    /// `head_from`: when the head of the next request began (the accept for the first request,
    /// its first byte for later ones); `None` while the connection is idle.
    Waiting {
        since: Instant,
        head_from: Option<Instant>,
    },
    /// A request is being answered; `progress` is its start or the last byte written.
    Serving { progress: Instant },
}

/// One connection's state, shared by its socket, its service and the accept loop.
struct Slot {
    phase: Mutex<Phase>,
    /// Wakes the connection's watchdog: the phase changed (its deadline may be earlier now) or
    /// the connection was evicted.
    wake: Notify,
    evicted: AtomicBool,
}

impl Slot {
    fn new(now: Instant) -> Self {
        Slot {
            phase: Mutex::new(Phase::Waiting {
                since: now,
                head_from: Some(now),
            }),
            wake: Notify::new(),
            evicted: AtomicBool::new(false),
        }
    }

    fn phase(&self) -> MutexGuard<'_, Phase> {
        // The lock only guards a copy-sized value; a panic cannot leave it half-written.
        self.phase.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn set(&self, phase: Phase) {
        *self.phase() = phase;
        self.wake.notify_one();
    }

    /// Bytes arrived: on an idle connection, the head of the next request has begun.
    fn on_read(&self) {
        let mut phase = self.phase();
        if let Phase::Waiting {
            head_from: head @ None,
            ..
        } = &mut *phase
        {
            *head = Some(Instant::now());
            drop(phase);
            self.wake.notify_one();
        }
    }

    /// Bytes left: progress of the response being served.
    fn on_write(&self) {
        if let Phase::Serving { progress } = &mut *self.phase() {
            *progress = Instant::now();
        }
    }

    /// The TLS handshake is done: the first request's head clock starts now.
    fn handshaken(&self) {
        let now = Instant::now();
        self.set(Phase::Waiting {
            since: now,
            head_from: Some(now),
        });
    }

    fn evict(&self) {
        self.evicted.store(true, Ordering::Relaxed);
        self.wake.notify_one();
    }

    fn is_evicted(&self) -> bool {
        self.evicted.load(Ordering::Relaxed)
    }

    /// Since when the connection has waited for a request; `None` while it serves one.
    fn waiting_since(&self) -> Option<Instant> {
        match *self.phase() {
            Phase::Waiting { since, .. } => Some(since),
            Phase::Serving { .. } => None,
        }
    }

    /// When the connection must be closed, and why, as things stand.
    fn deadline(&self, limits: &Limits) -> (Instant, Closed) {
        match *self.phase() {
            Phase::Waiting {
                head_from: Some(t), ..
            } => (t + limits.header_read_timeout, Closed::HeaderReadTimeout),
            Phase::Waiting {
                since,
                head_from: None,
            } => (since + limits.idle_timeout, Closed::IdleTimeout),
            Phase::Serving { progress } => (progress + limits.idle_timeout, Closed::IdleTimeout),
        }
    }
}

/// The open connections, for the cap.
#[derive(Default)]
struct Registry {
    slots: Mutex<(u64, HashMap<u64, Arc<Slot>>)>,
}

/// A connection's place in the [`Registry`]; leaving it frees the place.
struct Registered {
    registry: Arc<Registry>,
    id: u64,
    open: metrics::Gauge,
}

impl Drop for Registered {
    fn drop(&mut self) {
        self.registry.lock().1.remove(&self.id);
        self.open.decrement(1.0);
    }
}

impl Registry {
    fn lock(&self) -> MutexGuard<'_, (u64, HashMap<u64, Arc<Slot>>)> {
        self.slots.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A place for a new connection. At the cap, the connection that has waited longest for a
    /// request is evicted first (`true`); `None` when every connection is serving a request.
    fn admit(
        self: &Arc<Self>,
        max: usize,
        open: &metrics::Gauge,
    ) -> Option<(Arc<Slot>, Registered, bool)> {
        let mut guard = self.lock();
        let (next, slots) = &mut *guard;
        let evicted = slots.len() >= max;
        if evicted && !evict_longest_waiting(slots) {
            return None;
        }
        let slot = Arc::new(Slot::new(Instant::now()));
        *next += 1;
        slots.insert(*next, slot.clone());
        open.increment(1.0);
        let place = Registered {
            registry: self.clone(),
            id: *next,
            open: open.clone(),
        };
        Some((slot, place, evicted))
    }

    /// Evict the connection that has waited longest for a request; false when none waits.
    fn evict_one(&self) -> bool {
        evict_longest_waiting(&mut self.lock().1)
    }
}

fn evict_longest_waiting(slots: &mut HashMap<u64, Arc<Slot>>) -> bool {
    let oldest = slots
        .iter()
        .filter_map(|(id, s)| s.waiting_since().map(|t| (t, *id)))
        .min();
    match oldest.and_then(|(_, id)| slots.remove(&id)) {
        Some(slot) => {
            slot.evict();
            true
        }
        None => false,
    }
}

/// Serve `app` on `listener` within `limits` until `stop` turns true, then close idle
/// connections at once and let requests in progress finish. With `web_config`, the port speaks
/// TLS if the file configured it at startup, and every request passes its authentication and
/// gets its headers.
pub async fn serve(
    listener: TcpListener,
    app: Router,
    limits: Limits,
    web_config: Option<Arc<WebConfigFile>>,
    telemetry: Arc<Telemetry>,
    stop: watch::Receiver<bool>,
) {
    let app = match &web_config {
        Some(file) => app.layer(axum::middleware::from_fn_with_state(
            Guard::new(file.clone()),
            guard,
        )),
        None => app,
    };
    let tls = web_config.filter(|f| f.tls());
    serve_metered(
        listener,
        app,
        limits,
        tls,
        WebMetrics::new(&telemetry),
        stop,
    )
    .await;
}

/// [`serve`] for another listener than the exporter's port (a reverse proxy's): same limits and
/// accept loop, no TLS, and its connections are not counted in the port's series.
pub async fn serve_detached(
    listener: TcpListener,
    app: Router,
    limits: Limits,
    stop: watch::Receiver<bool>,
) {
    serve_metered(listener, app, limits, None, WebMetrics::detached(), stop).await;
}

async fn serve_metered(
    listener: TcpListener,
    app: Router,
    limits: Limits,
    tls: Option<Arc<WebConfigFile>>,
    metrics: WebMetrics,
    mut stop: watch::Receiver<bool>,
) {
    let registry = Arc::new(Registry::default());
    // Every connection task holds a sender; `recv` returns `None` once all have ended.
    let (alive, mut all_ended) = mpsc::channel::<Infallible>(1);
    let (mut full, mut busy, mut failing) = <(Throttle, Throttle, Throttle)>::default();
    let mut backoff = ACCEPT_BACKOFF_MIN;
    loop {
        let accepted = tokio::select! {
            a = listener.accept() => a,
            _ = stop.wait_for(|s| *s) => break,
        };
        let (stream, peer) = match accepted {
            Ok(accepted) => {
                backoff = ACCEPT_BACKOFF_MIN;
                accepted
            }
            Err(e) if is_per_connection(&e) => continue,
            Err(e) => {
                let freed = registry.evict_one();
                if freed {
                    metrics.closed(Closed::Evicted);
                }
                if let Some(errors) = failing.hit(Instant::now()) {
                    tracing::warn!(error = %e, errors, closed_a_connection = freed, retry_in = ?backoff,
                        "cannot accept connections on --web.listen-address (at the open-file limit? see LimitNOFILE); retrying");
                }
                tokio::select! {
                    _ = tokio::time::sleep(backoff) => {}
                    _ = stop.wait_for(|s| *s) => break,
                }
                backoff = (backoff * 2).min(ACCEPT_BACKOFF_MAX);
                continue;
            }
        };
        let Some((slot, place, evicted)) = registry.admit(limits.max_connections, &metrics.open)
        else {
            drop(stream);
            metrics.closed(Closed::Refused);
            if let Some(refused) = busy.hit(Instant::now()) {
                tracing::warn!(
                    max_connections = limits.max_connections,
                    refused,
                    "connection limit (--web.max-connections) reached with every connection serving a request: refusing new connections"
                );
            }
            continue;
        };
        if evicted {
            metrics.closed(Closed::Evicted);
            if let Some(closed) = full.hit(Instant::now()) {
                tracing::warn!(
                    max_connections = limits.max_connections,
                    closed,
                    "connection limit (--web.max-connections) reached: closing the connections that waited longest for a request"
                );
            }
        }
        let conn = Conn {
            peer,
            slot,
            place,
            limits,
            metrics: metrics.clone(),
            stop: stop.clone(),
            alive: alive.clone(),
        };
        tokio::spawn(conn.run(stream, app.clone(), tls.clone()));
    }
    drop(listener);
    drop(alive);
    let _ = all_ended.recv().await;
}

/// Accept errors about one connection that is already gone; the next accept is fine.
fn is_per_connection(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
            | io::ErrorKind::ConnectionRefused
            | io::ErrorKind::Interrupted
    )
}

/// One accepted connection and what it needs to enforce its limits.
struct Conn {
    /// The client's address, given to each request (`ConnectInfo`: basic authentication admits
    /// bcrypt checks per address).
    peer: std::net::SocketAddr,
    slot: Arc<Slot>,
    place: Registered,
    limits: Limits,
    metrics: WebMetrics,
    stop: watch::Receiver<bool>,
    alive: mpsc::Sender<Infallible>,
}

impl Conn {
    /// Serve the connection (after a TLS handshake with `tls`) until the client leaves, a limit
    /// closes it, or shutdown.
    async fn run(mut self, stream: TcpStream, app: Router, tls: Option<Arc<WebConfigFile>>) {
        let _ = stream.set_nodelay(true);
        match tls {
            None => self.http(stream, app).await,
            Some(file) => {
                if let Some(stream) = self.handshake(stream, file).await {
                    self.slot.handshaken();
                    self.http(stream, app).await;
                }
            }
        }
        drop(self.place);
        drop(self.alive);
    }

    /// The TLS handshake, with the configuration the file gives now; `None` when it failed, took
    /// longer than `header_read_timeout`, the connection was evicted or the server stops.
    async fn handshake(
        &mut self,
        stream: TcpStream,
        file: Arc<WebConfigFile>,
    ) -> Option<TlsStream<TcpStream>> {
        enum Failed {
            Client(io::Error),
            Config,
        }
        let deadline = Instant::now() + self.limits.header_read_timeout;
        let shake = async {
            let start = LazyConfigAcceptor::new(rustls::server::Acceptor::default(), stream)
                .await
                .map_err(Failed::Client)?;
            let f = file.clone();
            let config = match tokio::task::spawn_blocking(move || f.tls_config()).await {
                Ok(Ok(config)) => config,
                Ok(Err(e)) => {
                    file.report(&e, "refusing TLS handshakes until it is fixed");
                    return Err(Failed::Config);
                }
                Err(_) => return Err(Failed::Config),
            };
            start.into_stream(config).await.map_err(Failed::Client)
        };
        let slot = self.slot.clone();
        let evicted = async move {
            loop {
                slot.wake.notified().await;
                if slot.is_evicted() {
                    break;
                }
            }
        };
        tokio::select! {
            shaken = shake => match shaken {
                Ok(stream) => Some(stream),
                Err(failed) => {
                    if let Failed::Client(e) = failed {
                        tracing::debug!(error = %e, "TLS handshake failed");
                    }
                    self.metrics.closed(Closed::TlsHandshakeFailed);
                    None
                }
            },
            _ = tokio::time::sleep_until(deadline) => {
                self.metrics.closed(Closed::HeaderReadTimeout);
                None
            }
            _ = evicted => None,
            _ = self.stop.wait_for(|s| *s) => None,
        }
    }

    /// Serve HTTP/1 on `stream` until the client leaves, a limit closes it, or shutdown.
    async fn http<S>(&mut self, stream: S, app: Router)
    where
        S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let io = TokioIo::new(Tracked {
            io: stream,
            slot: self.slot.clone(),
        });
        let router = TowerToHyperService::new(app);
        let slot = self.slot.clone();
        let peer = axum::extract::ConnectInfo(self.peer);
        let service = hyper::service::service_fn(move |mut req: hyper::Request<_>| {
            req.extensions_mut().insert(peer);
            let turn = Turn::begin(slot.clone());
            let answer = router.call(req);
            async move {
                let response = answer.await?;
                Ok::<_, Infallible>(response.map(|body| Tail { body, _turn: turn }))
            }
        });
        let conn = http1::Builder::new()
            // The header-read and idle timeouts are the watchdog's below; hyper's own timer
            // would run from the end of a response, merging the two.
            .header_read_timeout(None)
            .max_buf_size(MAX_REQUEST_HEAD_BYTES)
            .serve_connection(io, service);
        let mut conn = std::pin::pin!(conn);
        let mut draining = false;
        loop {
            let (deadline, _) = self.slot.deadline(&self.limits);
            tokio::select! {
                _ = conn.as_mut() => break,
                _ = tokio::time::sleep_until(deadline) => {
                    let (deadline, why) = self.slot.deadline(&self.limits);
                    if deadline <= Instant::now() {
                        self.metrics.closed(why);
                        break;
                    }
                }
                _ = self.slot.wake.notified() => if self.slot.is_evicted() { break },
                _ = self.stop.wait_for(|s| *s), if !draining => {
                    if self.slot.waiting_since().is_some() {
                        break;
                    }
                    conn.as_mut().graceful_shutdown();
                    draining = true;
                }
            }
        }
    }
}

/// A request being answered: the connection serves from its head until its response body
/// ends or is dropped.
struct Turn(Arc<Slot>);

impl Turn {
    fn begin(slot: Arc<Slot>) -> Self {
        slot.set(Phase::Serving {
            progress: Instant::now(),
        });
        Turn(slot)
    }
}

impl Drop for Turn {
    fn drop(&mut self) {
        self.0.set(Phase::Waiting {
            since: Instant::now(),
            head_from: None,
        });
    }
}

/// A response body that ends its [`Turn`] when hyper is done with it.
struct Tail {
    body: Body,
    _turn: Turn,
}

impl hyper::body::Body for Tail {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

/// The socket, telling its [`Slot`] when bytes move: the first byte of a request starts its
/// header-read clock, every byte written is progress of a response.
struct Tracked<S> {
    io: S,
    slot: Arc<Slot>,
}

impl<S: AsyncRead + Unpin> AsyncRead for Tracked<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.io).poll_read(cx, buf);
        if matches!(polled, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            self.slot.on_read();
        }
        polled
    }
}

impl<S> Tracked<S> {
    fn wrote(&self, polled: Poll<io::Result<usize>>) -> Poll<io::Result<usize>> {
        if matches!(polled, Poll::Ready(Ok(n)) if n > 0) {
            self.slot.on_write();
        }
        polled
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Tracked<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.io).poll_write(cx, buf);
        self.wrote(polled)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.io).poll_write_vectored(cx, bufs);
        self.wrote(polled)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn eviction_takes_the_longest_waiting_and_spares_the_serving() {
        let registry = Arc::new(Registry::default());
        let open = metrics::Gauge::noop();
        let (first, _p1, _) = registry.admit(2, &open).unwrap();
        let (second, _p2, _) = registry.admit(2, &open).unwrap();
        let _serving = Turn::begin(first.clone());
        let (_third, _p3, evicted) = registry.admit(2, &open).unwrap();
        assert!(evicted && second.is_evicted() && !first.is_evicted());
        // Both remaining connections serve a request: the next one is refused.
        let _serving_too = Turn::begin(_third.clone());
        assert!(registry.admit(2, &open).is_none());
    }

    #[test]
    fn a_new_request_head_runs_the_header_clock_an_idle_connection_the_idle_clock() {
        let limits = Limits {
            header_read_timeout: Duration::from_secs(1),
            idle_timeout: Duration::from_secs(100),
            max_connections: 1,
        };
        let slot = Arc::new(Slot::new(Instant::now()));
        assert_eq!(slot.deadline(&limits).1, Closed::HeaderReadTimeout);
        drop(Turn::begin(slot.clone()));
        let (idle_until, why) = slot.deadline(&limits);
        assert_eq!(why, Closed::IdleTimeout);
        slot.on_read();
        let (head_until, why) = slot.deadline(&limits);
        assert_eq!(why, Closed::HeaderReadTimeout);
        assert!(
            head_until < idle_until,
            "the first byte brings the deadline forward"
        );
    }
}
