//! The shared core of the transports where every message of both directions travels on one
//! ordered channel: stdio (the server's stdin and stdout) and HTTP+SSE of 2024-11-05 (one GET
//! stream in, one POST per message out).
//!
//! Streamable HTTP pairs each answer with its POST; here nothing does, so responses are matched
//! to requests by JSON-RPC id, and everything else a server sends (notifications, its own
//! requests, late answers) is sorted out of the same stream. One writer task puts messages on the
//! wire whole and in order, so a caller that gives up mid-write (its timeout fired) cannot leave
//! half a line on a stdin. The channel ends once, for one reason, and from then on every waiting
//! and every new request fails at once with `stream_closed`: the owner opens a new channel and
//! re-walks, which is how the probe sees and counts a lost connection.
//!
//! Bounded throughout: the transports cap each message in bytes before it reaches [`Feed`], the
//! outgoing queue has a fixed capacity, the pending map holds one entry per request a caller is
//! awaiting (a dropped request future removes its own), and notifications coalesce in the
//! [`Inbox`].

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};

use futures_util::future::BoxFuture;
use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::{AbortHandle, JoinHandle};

use super::error::{McpError, Reason};
use super::inbox::Inbox;
use super::jsonrpc::{self, Incoming, RpcError};

/// Messages waiting for the writer; a sender past this waits (its caller's deadline bounds it).
const OUTGOING_QUEUE: usize = 16;

/// A response and the bytes its message took on the wire.
pub type Answer = (Result<Value, RpcError>, usize);

/// How a transport puts one whole message on the wire. One task calls it, in order; `feed` is
/// there for a transport whose write can learn that the channel is gone.
pub(crate) trait Outlet: Send + 'static {
    fn write(
        &mut self,
        body: Vec<u8>,
        feed: &Feed,
    ) -> impl Future<Output = Result<(), McpError>> + Send;
}

/// What a transport does after the channel ended: wait until its peer is really gone (stdio:
/// the process group is reaped), and what it keeps for diagnosis.
pub(crate) trait Teardown: Send + Sync + 'static {
    /// Resolves once the transport's resources are released; bounded by the transport.
    fn finish(&self) -> BoxFuture<'_, ()>;
    /// The end of what the server wrote to stderr, at most `max_bytes`, safe to show.
    fn stderr_tail(&self, _max_bytes: usize) -> Option<String> {
        None
    }
}

struct Waiter {
    max_bytes: usize,
    tx: oneshot::Sender<Result<Answer, McpError>>,
}

#[derive(Default)]
struct State {
    pending: HashMap<u64, Waiter>,
    /// Why the channel ended; set once.
    end: Option<McpError>,
}

struct Core {
    inbox: Arc<Inbox>,
    state: Mutex<State>,
    ended: watch::Sender<Option<McpError>>,
}

impl Core {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().expect("duplex state lock")
    }

    /// What a request on an ended channel fails with.
    fn closed_error(end: &McpError) -> McpError {
        if end.reason == Reason::StreamClosed {
            end.clone()
        } else {
            McpError::new(
                Reason::StreamClosed,
                format!("channel closed ({}): {}", end.reason, end.detail),
            )
        }
    }

    fn current_closed_error(&self) -> McpError {
        match &self.lock().end {
            Some(end) => Self::closed_error(end),
            None => McpError::new(Reason::StreamClosed, "channel closed"),
        }
    }

    fn register(
        &self,
        id: u64,
        max_bytes: usize,
    ) -> Result<oneshot::Receiver<Result<Answer, McpError>>, McpError> {
        let mut state = self.lock();
        if let Some(end) = &state.end {
            return Err(Self::closed_error(end));
        }
        if state.pending.contains_key(&id) {
            return Err(McpError::new(
                Reason::InvalidResponse,
                format!("request id {id} is already awaiting an answer"),
            ));
        }
        let (tx, rx) = oneshot::channel();
        state.pending.insert(id, Waiter { max_bytes, tx });
        Ok(rx)
    }

    /// Remove a waiter; true when it was still there (no answer came).
    fn forget(&self, id: u64) -> bool {
        self.lock().pending.remove(&id).is_some()
    }

    fn is_ended(&self) -> bool {
        self.lock().end.is_some()
    }

    fn end(&self, why: McpError) {
        let waiters = {
            let mut state = self.lock();
            if state.end.is_some() {
                return;
            }
            state.end = Some(why.clone());
            std::mem::take(&mut state.pending)
        };
        let err = Self::closed_error(&why);
        for (_, w) in waiters {
            let _ = w.tx.send(Err(err.clone()));
        }
        self.ended.send_replace(Some(why));
    }

    fn dispatch(&self, bytes: &[u8]) -> Result<(), McpError> {
        for msg in jsonrpc::decode(bytes)? {
            match msg {
                Incoming::Response { id, outcome } => {
                    let waiter = id.as_u64().and_then(|n| self.lock().pending.remove(&n));
                    match waiter {
                        Some(w) => {
                            let answer = if bytes.len() > w.max_bytes {
                                Err(McpError::new(
                                    Reason::BodyTooLarge,
                                    format!("answer of {} bytes over {}", bytes.len(), w.max_bytes),
                                ))
                            } else {
                                Ok((outcome, bytes.len()))
                            };
                            let _ = w.tx.send(answer);
                        }
                        // Late (its caller gave up) or never asked for: dropped, as the spec
                        // asks of late responses.
                        None => self.inbox.deliver(Incoming::Response { id, outcome }),
                    }
                }
                other => self.inbox.deliver(other),
            }
        }
        Ok(())
    }
}

/// A transport reader's handle on the channel: hand it each whole message, and the reason when
/// the stream ends.
#[derive(Clone)]
pub(crate) struct Feed {
    core: Arc<Core>,
}

impl Feed {
    /// Sort one message (or batch): a response goes to its waiter, everything else to the inbox.
    /// An error (not JSON, not JSON-RPC) is the reader's to end the channel with.
    pub(crate) fn message(&self, bytes: &[u8]) -> Result<(), McpError> {
        self.core.dispatch(bytes)
    }

    /// End the channel; the first reason given is the one kept.
    pub(crate) fn end(&self, why: McpError) {
        self.core.end(why)
    }

    /// Resolves when the channel has ended (at once if it already has).
    pub(crate) fn ended(&self) -> impl Future<Output = ()> + Send + 'static {
        let mut rx = self.core.ended.subscribe();
        async move {
            let _ = rx.wait_for(Option::is_some).await;
        }
    }
}

struct Outgoing {
    body: Vec<u8>,
    done: Option<oneshot::Sender<Result<(), McpError>>>,
}

/// One ordered, two-way message channel to an MCP server.
pub struct Duplex {
    core: Arc<Core>,
    outgoing: mpsc::Sender<Outgoing>,
    /// Tasks that die with the channel (readers, the writer); aborted on close and drop.
    tasks: Mutex<Vec<AbortHandle>>,
    teardown: Option<Box<dyn Teardown>>,
}

impl std::fmt::Debug for Duplex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Duplex")
            .field("ended", &self.core.is_ended())
            .finish_non_exhaustive()
    }
}

impl Duplex {
    /// A channel writing through `outlet`; the transport feeds what it reads into the [`Feed`].
    pub(crate) fn new(inbox: Arc<Inbox>, outlet: impl Outlet) -> (Duplex, Feed) {
        let core = Arc::new(Core {
            inbox,
            state: Mutex::new(State::default()),
            ended: watch::Sender::new(None),
        });
        let feed = Feed { core: core.clone() };
        let (tx, rx) = mpsc::channel(OUTGOING_QUEUE);
        let writer = tokio::spawn(write_loop(outlet, rx, feed.clone()));
        let duplex = Duplex {
            core,
            outgoing: tx,
            tasks: Mutex::new(vec![writer.abort_handle()]),
            teardown: None,
        };
        (duplex, feed)
    }

    /// Tie a transport task to the channel: it is aborted when the channel is closed or dropped.
    pub(crate) fn own(&mut self, task: JoinHandle<()>) {
        self.tasks
            .get_mut()
            .expect("duplex tasks lock")
            .push(task.abort_handle());
    }

    pub(crate) fn set_teardown(&mut self, teardown: Box<dyn Teardown>) {
        self.teardown = Some(teardown);
    }

    /// Send a request already framed by [`jsonrpc::request`] with `id`, and wait for the response
    /// with that id. `usize` is the bytes its message took; one over `max_bytes` fails with
    /// `body_too_large`. No deadline here: the caller bounds the wait. Dropping the future
    /// forgets the request, and tells the server with `notifications/cancelled` when it was
    /// already sent (the spec's rule for abandoned requests; `initialize` is never cancelled).
    pub async fn request(
        &self,
        id: u64,
        body: Vec<u8>,
        max_bytes: usize,
    ) -> Result<Answer, McpError> {
        let cancellable = method_of(&body).as_deref() != Some("initialize");
        let answer = self.core.register(id, max_bytes)?;
        let mut guard = PendingGuard {
            duplex: self,
            id,
            sent: false,
            cancellable,
        };
        let written = self.enqueue(body).await?;
        guard.sent = true;
        self.on_wire(written).await?;
        let answer = answer
            .await
            .unwrap_or_else(|_| Err(self.core.current_closed_error()));
        drop(guard);
        answer
    }

    /// Send a notification, or a response to a server request; resolves once it is on the wire.
    pub async fn send(&self, body: Vec<u8>) -> Result<(), McpError> {
        if self.core.is_ended() {
            return Err(self.core.current_closed_error());
        }
        let written = self.enqueue(body).await?;
        self.on_wire(written).await
    }

    /// Queue `body` for the writer (waiting while the queue is full); the receiver tells when it
    /// is on the wire.
    async fn enqueue(
        &self,
        body: Vec<u8>,
    ) -> Result<oneshot::Receiver<Result<(), McpError>>, McpError> {
        let (done, written) = oneshot::channel();
        self.outgoing
            .send(Outgoing {
                body,
                done: Some(done),
            })
            .await
            .map_err(|_| self.core.current_closed_error())?;
        Ok(written)
    }

    /// Wait until the writer has put a queued message on the wire, or failed to.
    async fn on_wire(
        &self,
        written: oneshot::Receiver<Result<(), McpError>>,
    ) -> Result<(), McpError> {
        written
            .await
            .unwrap_or_else(|_| Err(self.core.current_closed_error()))
    }

    /// Resolves when the channel is gone, with why: `stream_closed` for an orderly end (the
    /// process exited, the SSE stream ended, [`Duplex::close`]), another reason for a fault
    /// (`body_too_large`, `invalid_json`, `transport` …).
    pub async fn closed(&self) -> McpError {
        let mut rx = self.core.ended.subscribe();
        match rx.wait_for(Option::is_some).await {
            Ok(end) => end.clone().expect("waited for Some"),
            // The sender lives in `core`, which `self` holds: it cannot be dropped.
            Err(_) => self.core.current_closed_error(),
        }
    }

    /// Whether the channel has ended.
    pub fn is_closed(&self) -> bool {
        self.core.is_ended()
    }

    /// End the channel: stdio closes the server's stdin, waits a grace and then ends its process
    /// group; SSE drops the stream. Waiting requests fail with `stream_closed`.
    pub async fn close(&self) {
        self.core.end(McpError::new(
            Reason::StreamClosed,
            "channel closed by the client",
        ));
        self.abort_tasks();
        if let Some(t) = &self.teardown {
            t.finish().await;
        }
    }

    /// The last of what a stdio server wrote to stderr (at most `max_bytes`, escaped for logs);
    /// `None` for transports without one.
    pub fn stderr_tail(&self, max_bytes: usize) -> Option<String> {
        self.teardown.as_ref()?.stderr_tail(max_bytes)
    }

    fn abort_tasks(&self) {
        for t in self.tasks.lock().expect("duplex tasks lock").drain(..) {
            t.abort();
        }
    }
}

impl Drop for Duplex {
    fn drop(&mut self) {
        self.core
            .end(McpError::new(Reason::StreamClosed, "channel dropped"));
        self.abort_tasks();
    }
}

/// Removes a request's waiter when its future ends without an answer (timeout, drop).
struct PendingGuard<'a> {
    duplex: &'a Duplex,
    id: u64,
    sent: bool,
    cancellable: bool,
}

impl Drop for PendingGuard<'_> {
    fn drop(&mut self) {
        let unanswered = self.duplex.core.forget(self.id);
        if unanswered && self.sent && self.cancellable && !self.duplex.core.is_ended() {
            // Best effort: a full queue means the server is not reading; the notice is dropped.
            let _ = self.duplex.outgoing.try_send(Outgoing {
                body: cancelled(self.id),
                done: None,
            });
        }
    }
}

fn cancelled(id: u64) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "jsonrpc": "2.0",
        "method": "notifications/cancelled",
        "params": {"requestId": id, "reason": "the client stopped waiting"},
    }))
    .expect("a JSON value always serializes")
}

/// The `method` of a message this client framed.
fn method_of(body: &[u8]) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Method {
        method: String,
    }
    serde_json::from_slice::<Method>(body)
        .ok()
        .map(|m| m.method)
}

async fn write_loop(mut outlet: impl Outlet, mut rx: mpsc::Receiver<Outgoing>, feed: Feed) {
    let ended = feed.ended();
    tokio::pin!(ended);
    loop {
        let item = tokio::select! {
            biased;
            _ = &mut ended => return,
            item = rx.recv() => match item {
                Some(item) => item,
                None => return,
            },
        };
        let result = tokio::select! {
            biased;
            _ = &mut ended => return,
            r = outlet.write(item.body, &feed) => r,
        };
        if let Some(done) = item.done {
            let _ = done.send(result);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// An outlet that hands every written message to the test.
    struct Capture(mpsc::UnboundedSender<Vec<u8>>);

    impl Outlet for Capture {
        async fn write(&mut self, body: Vec<u8>, _feed: &Feed) -> Result<(), McpError> {
            let _ = self.0.send(body);
            Ok(())
        }
    }

    fn channel() -> (
        Duplex,
        Feed,
        mpsc::UnboundedReceiver<Vec<u8>>,
        Arc<Inbox>,
        crate::mcp::Requests,
    ) {
        let (inbox, requests) = Inbox::new();
        let inbox = Arc::new(inbox);
        let (tx, rx) = mpsc::unbounded_channel();
        let (d, feed) = Duplex::new(inbox.clone(), Capture(tx));
        (d, feed, rx, inbox, requests)
    }

    async fn within<T>(f: impl Future<Output = T>) -> T {
        tokio::time::timeout(Duration::from_secs(10), f)
            .await
            .expect("within the test deadline")
    }

    /// The one server-request responder ([`crate::mcp::Responder`]): a server's
    /// `ping` gets the empty result the spec requires, any other request "method not found"
    /// (this client offers no capabilities), each with the server's own id.
    #[tokio::test]
    async fn the_responder_answers_a_servers_ping_and_refuses_other_requests() {
        use crate::mcp::Client;
        use crate::mcp::session::Session;
        use crate::mcp::version::ProtocolVersion;
        let (d, feed, mut out, inbox, requests) = channel();
        let wait = Duration::from_secs(5);
        let opening = tokio::spawn(Session::open_over(
            Arc::new(d),
            ProtocolVersion::NEWEST_LEGACY,
            inbox,
            wait,
            wait,
        ));
        within(out.recv()).await.expect("initialize sent");
        feed.message(
            br#"{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":"2025-11-25","capabilities":{},"serverInfo":{"name":"s","version":"1"}}}"#,
        )
        .expect("the answer is JSON-RPC");
        let session = within(opening).await.expect("task").expect("session");
        within(out.recv()).await.expect("initialized sent");
        let client = Arc::new(Client::Legacy(session));
        // Polled in the connection's own loop: an idle responder is its queue and an empty slot.
        let size = std::mem::size_of::<crate::mcp::Responder>();
        assert!(size <= 64, "an idle responder is {size} bytes");
        let _responder = tokio::spawn(crate::mcp::Responder::new(requests).run(client));
        let mut next = async || -> Value {
            serde_json::from_slice(&within(out.recv()).await.expect("an answer")).expect("JSON")
        };
        feed.message(br#"{"jsonrpc":"2.0","id":"s-1","method":"ping"}"#)
            .expect("a request");
        assert_eq!(
            next().await,
            json!({"jsonrpc": "2.0", "id": "s-1", "result": {}})
        );
        feed.message(br#"{"jsonrpc":"2.0","id":7,"method":"sampling/createMessage","params":{}}"#)
            .expect("a request");
        let refused = next().await;
        assert_eq!(
            (refused["id"].clone(), refused["error"]["code"].clone()),
            (json!(7), json!(-32601))
        );
    }

    fn pending(d: &Duplex) -> usize {
        d.core.lock().pending.len()
    }

    #[tokio::test]
    async fn responses_meet_their_requests_by_id_in_any_order() {
        let (d, feed, mut wire, inbox, mut requests) = channel();
        let a = d.request(1, jsonrpc::request(1, "tools/list", None), usize::MAX);
        let b = d.request(2, jsonrpc::request(2, "tools/list", None), usize::MAX);
        let server = async {
            within(wire.recv()).await.unwrap();
            within(wire.recv()).await.unwrap();
            // Noise first: a notification, a server request, an unknown and a string id.
            feed.message(br#"{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}"#)
                .unwrap();
            feed.message(br#"{"jsonrpc":"2.0","id":"s1","method":"ping"}"#)
                .unwrap();
            feed.message(br#"{"jsonrpc":"2.0","id":99,"result":{}}"#)
                .unwrap();
            feed.message(br#"{"jsonrpc":"2.0","id":"1","result":{"wrong":true}}"#)
                .unwrap();
            feed.message(br#"{"jsonrpc":"2.0","id":2,"result":{"page":2}}"#)
                .unwrap();
            feed.message(br#"{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"no"}}"#)
                .unwrap();
        };
        let (a, b, ()) = within(async { tokio::join!(a, b, server) }).await;
        let (b, bytes) = b.unwrap();
        assert_eq!(b.unwrap(), json!({"page": 2}));
        assert_eq!(
            bytes,
            br#"{"jsonrpc":"2.0","id":2,"result":{"page":2}}"#.len()
        );
        assert_eq!(a.unwrap().0.unwrap_err().code, jsonrpc::INVALID_PARAMS);
        assert_eq!(inbox.list_changed_count(), 1);
        assert_eq!(requests.try_recv().unwrap().method, "ping");
        assert_eq!(pending(&d), 0);
    }

    #[tokio::test]
    async fn an_answer_over_the_callers_cap_fails_that_request_only() {
        let (d, feed, mut wire, _inbox, _rq) = channel();
        let msg = br#"{"jsonrpc":"2.0","id":1,"result":{"tools":[]}}"#;
        let small = d.request(1, jsonrpc::request(1, "tools/list", None), msg.len() - 1);
        let server = async {
            within(wire.recv()).await.unwrap();
            feed.message(msg).unwrap();
        };
        let (r, ()) = within(async { tokio::join!(small, server) }).await;
        assert_eq!(r.unwrap_err().reason, Reason::BodyTooLarge);
        assert!(!d.is_closed());
        // The channel still works, and a message exactly at the cap passes.
        let msg = br#"{"jsonrpc":"2.0","id":2,"result":{}}"#;
        let exact = d.request(2, jsonrpc::request(2, "ping", None), msg.len());
        let server = async {
            within(wire.recv()).await.unwrap();
            feed.message(msg).unwrap();
        };
        let (r, ()) = within(async { tokio::join!(exact, server) }).await;
        assert_eq!(r.unwrap().1, msg.len());
    }

    #[tokio::test]
    async fn a_dropped_request_leaves_no_entry_and_is_cancelled() {
        let (d, _feed, mut wire, _inbox, _rq) = channel();
        let r = tokio::time::timeout(
            Duration::from_millis(50),
            d.request(7, jsonrpc::request(7, "tools/list", None), usize::MAX),
        )
        .await;
        assert!(r.is_err(), "no server answers");
        assert_eq!(pending(&d), 0);
        assert!(within(wire.recv()).await.unwrap().starts_with(b"{"));
        let cancel: Value = serde_json::from_slice(&within(wire.recv()).await.unwrap()).unwrap();
        assert_eq!(cancel["method"], "notifications/cancelled");
        assert_eq!(cancel["params"]["requestId"], 7);
        // The id is free again.
        let again = tokio::time::timeout(
            Duration::from_millis(10),
            d.request(7, jsonrpc::request(7, "tools/list", None), usize::MAX),
        )
        .await;
        assert!(again.is_err());
        assert_eq!(pending(&d), 0);
    }

    #[tokio::test]
    async fn initialize_is_never_cancelled() {
        let (d, _feed, mut wire, _inbox, _rq) = channel();
        let _ = tokio::time::timeout(
            Duration::from_millis(20),
            d.request(0, jsonrpc::request(0, "initialize", None), usize::MAX),
        )
        .await;
        within(wire.recv()).await.unwrap();
        d.send(jsonrpc::notification("marker")).await.unwrap();
        let next: Value = serde_json::from_slice(&within(wire.recv()).await.unwrap()).unwrap();
        assert_eq!(next["method"], "marker");
    }

    #[tokio::test]
    async fn the_end_fails_waiting_and_later_requests_with_stream_closed() {
        let (d, feed, mut wire, _inbox, _rq) = channel();
        let waiting = d.request(1, jsonrpc::request(1, "tools/list", None), usize::MAX);
        let ender = async {
            within(wire.recv()).await.unwrap();
            feed.end(McpError::new(Reason::BodyTooLarge, "line over 10 bytes"));
        };
        let (r, ()) = within(async { tokio::join!(waiting, ender) }).await;
        let e = r.unwrap_err();
        assert_eq!(e.reason, Reason::StreamClosed);
        assert!(e.detail.contains("line over 10 bytes"), "{e}");
        assert_eq!(within(d.closed()).await.reason, Reason::BodyTooLarge);
        let later = within(d.request(2, jsonrpc::request(2, "ping", None), usize::MAX)).await;
        assert_eq!(later.unwrap_err().reason, Reason::StreamClosed);
        assert_eq!(
            within(d.send(jsonrpc::notification("x")))
                .await
                .unwrap_err()
                .reason,
            Reason::StreamClosed
        );
        assert_eq!(pending(&d), 0);
        // A second end does not replace the first reason.
        feed.end(McpError::new(Reason::Transport, "later"));
        assert_eq!(within(d.closed()).await.reason, Reason::BodyTooLarge);
    }

    #[tokio::test]
    async fn a_duplicate_id_is_refused_while_the_first_waits() {
        let (d, _feed, _wire, _inbox, _rq) = channel();
        let first = d.request(3, jsonrpc::request(3, "ping", None), usize::MAX);
        tokio::pin!(first);
        assert!(
            tokio::time::timeout(Duration::from_millis(10), &mut first)
                .await
                .is_err()
        );
        let second = within(d.request(3, jsonrpc::request(3, "ping", None), usize::MAX)).await;
        assert_eq!(second.unwrap_err().reason, Reason::InvalidResponse);
        assert_eq!(pending(&d), 1);
    }

    #[test]
    fn the_channel_and_its_futures_can_move_between_tasks() {
        fn send_sync<T: Send + Sync>(_: &T) {}
        fn send<T: Send>(_: T) {}
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let _guard = rt.enter();
        let (d, _feed, _wire, _inbox, _rq) = channel();
        send_sync(&d);
        send(d.request(1, Vec::new(), 0));
        send(d.send(Vec::new()));
        send(d.closed());
        send(d.close());
    }

    #[tokio::test]
    async fn garbage_is_an_error_for_the_reader_to_end_with() {
        let (_d, feed, _wire, _inbox, _rq) = channel();
        assert_eq!(
            feed.message(b"hello").unwrap_err().reason,
            Reason::InvalidJson
        );
        assert_eq!(
            feed.message(b"{\"id\":1}").unwrap_err().reason,
            Reason::InvalidResponse
        );
    }
}
