//! What the lab's two eras share: the profiles and their fault knobs, the legacy sessions and
//! their replay buffers, the change feed of long-lived streams, and the JSON-RPC answer helpers.
//! [`super::server`] routes each request to the legacy handlers there or to [`super::modern`];
//! both read this state, which reaches neither of them.

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use futures_util::{Stream, StreamExt};
use serde_json::{Value, json};
use tokio::sync::watch;

use super::behaviour::{Behaviour, Instances};
use super::listing::{self, ListState};
use mcp_client::listing::list::List;

/// Most sessions the lab keeps; beyond that `initialize` gets 503.
const MAX_SESSIONS: usize = 20_000;
/// Keep-alive comment period on long-lived streams (GET, `subscriptions/listen`).
pub(super) const KEEPALIVE: Duration = Duration::from_secs(15);
/// The legacy versions the lab speaks, newest first.
pub(super) const LEGACY_VERSIONS: [&str; 3] = ["2025-11-25", "2025-06-18", "2025-03-26"];
/// Most `subscriptions/listen` streams open at once; beyond that a listen request gets 503.
pub(super) const MAX_LISTENS: usize = MAX_SESSIONS;
/// TCP connections the modern era remembers an instance for (F12); beyond it they are forgotten.
const MAX_PEERS: usize = 40_000;
/// The `retry` (ms) a resumable POST answer asks for before its resumption GET.
const RESUME_RETRY_MS: u64 = 50;
/// Answer streams a session keeps for replay; the oldest is forgotten first.
const REPLAY_STREAMS: usize = 32;
/// An answer larger than this (answers echo client input) is not kept for replay: it is sent
/// whole on its POST stream.
const REPLAY_MAX_ANSWER_BYTES: usize = 64 * 1024;
/// Bytes of answers one session keeps for replay; the oldest stream is forgotten first.
pub(super) const REPLAY_SESSION_BYTES: usize = 256 * 1024;
/// Bytes of answers all sessions together keep for replay; beyond it answers are sent whole.
const REPLAY_TOTAL_BYTES: usize = 32 * 1024 * 1024;

/// What a request learns about its session.
pub(super) struct SessionRef {
    pub(super) id: String,
    pub(super) closed: watch::Receiver<bool>,
    pub(super) instance: u8,
}

/// Mutable per-profile fault state.
#[derive(Debug, Default)]
pub(super) struct ProfileState {
    failing_lists: u32,
    round_robin: u64,
    pub(super) hotfix: bool,
    pub(super) sessions: u64,
}

pub(super) struct LabSession {
    pub(super) profile: String,
    pub(super) closed: watch::Sender<bool>,
    /// The generation this session was last told about.
    pub(super) announced: u64,
    /// The instance this session is pinned to (F12).
    pub(super) instance: u8,
    /// Resumable answer streams (number, messages after the priming event), for replay. A stream
    /// is forgotten once replayed.
    pub(super) replay: VecDeque<(u64, Vec<String>)>,
    /// Bytes of the messages in `replay`.
    pub(super) replay_bytes: usize,
    pub(super) streams: u64,
}

impl LabSession {
    /// Forget the oldest replayable stream; returns its bytes.
    fn forget_oldest(&mut self) -> usize {
        let freed = self.replay.pop_front().map_or(0, |(_, m)| bytes_of(&m));
        self.replay_bytes -= freed;
        freed
    }
}

pub(super) fn bytes_of(messages: &[String]) -> usize {
    messages.iter().map(String::len).sum()
}

/// What a profile with `resumable_posts` saw of SSE polling.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ResumeCounts {
    /// Answer streams closed after their priming event.
    pub primed: u64,
    /// GETs whose `Last-Event-ID` named one of those streams: its messages were replayed.
    pub resumed: u64,
    /// GETs with a `Last-Event-ID` the profile never handed out or already replayed (answered
    /// 400).
    pub unknown: u64,
    /// Answers too large to keep for replay, sent whole on their POST stream instead.
    pub sent_whole: u64,
}

pub(super) struct LabState {
    pub(super) profiles: HashMap<String, Behaviour>,
    pub(super) generation: watch::Sender<u64>,
    /// Per profile: bumped when the server ends its `subscriptions/listen` streams gracefully.
    pub(super) listen_ends: HashMap<String, watch::Sender<u64>>,
    /// The instance each client TCP connection is pinned to in the modern era (F12: there are no
    /// sessions, so a layer-4 balancer pins connections).
    pub(super) peers: Mutex<HashMap<SocketAddr, u8>>,
    pub(super) sessions: Mutex<HashMap<String, LabSession>>,
    /// Sum of every session's `replay_bytes` (only added to under the `sessions` lock, so the
    /// check against [`REPLAY_TOTAL_BYTES`] holds).
    pub(super) replay_bytes: AtomicUsize,
    pub(super) next_session: AtomicU64,
    pub(super) initializes: Mutex<HashMap<String, u64>>,
    pub(super) deletes: Mutex<HashMap<String, u64>>,
    pub(super) resumes: Mutex<HashMap<String, ResumeCounts>>,
    pub(super) profile_state: Mutex<HashMap<String, ProfileState>>,
    pub(super) modern_requests: Mutex<HashMap<String, u64>>,
    /// Open `subscriptions/listen` streams, all profiles (at most [`MAX_LISTENS`]).
    pub(super) listens: Arc<AtomicUsize>,
    pub(super) tools_list_calls: AtomicU64,
    pub(super) tools_calls: AtomicU64,
    pub(super) tools_list_in_flight: AtomicU64,
    pub(super) tools_list_max_in_flight: AtomicU64,
}

/// The lab's `Implementation` (legacy `serverInfo`, modern `_meta` serverInfo).
pub(super) fn server_info() -> Value {
    json!({"name": "kb-lab", "version": env!("CARGO_PKG_VERSION")})
}

/// The lists a profile serves: the tools, and the others with `prompts_and_resources`.
pub(super) fn served(b: &Behaviour) -> impl Iterator<Item = List> + use<> {
    let all = b.prompts_and_resources;
    List::ALL
        .into_iter()
        .filter(move |l| all || *l == List::Tools)
}

/// The list `method` lists, when the profile serves it.
pub(super) fn served_listing(b: &Behaviour, method: &str) -> Option<List> {
    List::of_method(method).filter(|l| served(b).any(|s| s == *l))
}

/// The capabilities a profile declares, in both eras: one per list it serves, each with
/// `listChanged` when the profile declares it.
pub(super) fn capabilities(b: &Behaviour) -> Value {
    let mut caps = json!({});
    for list in served(b) {
        let mut cap = json!({});
        if b.list_changed_capability {
            cap["listChanged"] = json!(true);
        }
        caps[list.capability()] = cap;
    }
    caps
}

/// The notifications that announce a redeploy, one per notification method of the lists
/// `wanted` (the resource lists share one), as JSON-RPC text with `params` (or none).
pub(super) fn announcements(
    wanted: impl Iterator<Item = List>,
    params: Option<&Value>,
) -> Vec<String> {
    let mut methods: Vec<&'static str> = wanted.map(List::changed_notification).collect();
    methods.dedup();
    methods
        .into_iter()
        .map(|method| {
            let mut msg = json!({"jsonrpc": "2.0", "method": method});
            if let Some(p) = params {
                msg["params"] = p.clone();
            }
            msg.to_string()
        })
        .collect()
}

pub(super) fn rpc_result(id: &Value, result: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "result": result})
}

pub(super) fn rpc_error(id: &Value, code: i64, message: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
}

async fn sleep_opt(d: Option<Duration>) {
    match d {
        Some(d) => tokio::time::sleep(d).await,
        None => std::future::pending().await,
    }
}

async fn sleep_until_opt(at: Option<tokio::time::Instant>) {
    match at {
        Some(t) => tokio::time::sleep_until(t).await,
        None => std::future::pending().await,
    }
}

/// An HTTP refusal: status and a short body.
pub(super) type Refusal = (StatusCode, &'static str);

pub(super) fn status(code: StatusCode, msg: &'static str) -> Response {
    (code, msg).into_response()
}

pub(super) fn origin_ok(headers: &HeaderMap) -> bool {
    match headers.get("origin").and_then(|o| o.to_str().ok()) {
        None => true,
        Some(o) => o.starts_with("http://127.0.0.1") || o.starts_with("http://localhost"),
    }
}

impl LabState {
    /// End every session of `profile`: later requests with those ids get 404, streams close.
    /// The modern era has no sessions: its listen streams of `profile` end gracefully instead.
    pub(super) fn expire(&self, profile: &str) {
        if let Some(ends) = self.listen_ends.get(profile) {
            ends.send_modify(|n| *n += 1);
        }
        let mut sessions = self.sessions.lock().expect("lab lock");
        sessions.retain(|_, s| {
            if s.profile == profile {
                let _ = s.closed.send(true);
                self.replay_bytes
                    .fetch_sub(s.replay_bytes, Ordering::Relaxed);
                false
            } else {
                true
            }
        });
    }

    /// The backend is redeployed: the next generation of the catalog, announced to every stream
    /// that delivers notifications; profiles with `failing_lists_after_change` start failing.
    pub(super) fn redeploy(&self) {
        {
            let mut profiles = self.profile_state.lock().expect("lab lock");
            for (name, b) in &self.profiles {
                profiles.entry(name.clone()).or_default().failing_lists =
                    b.failing_lists_after_change;
            }
        }
        self.generation.send_modify(|g| *g += 1);
    }

    /// The session a request names, if it exists and belongs to `profile`.
    pub(super) fn session(
        &self,
        headers: &HeaderMap,
        profile: &str,
    ) -> Result<SessionRef, Refusal> {
        let Some(id) = headers.get("mcp-session-id").and_then(|v| v.to_str().ok()) else {
            return Err((
                StatusCode::BAD_REQUEST,
                "Bad Request: missing Mcp-Session-Id",
            ));
        };
        let sessions = self.sessions.lock().expect("lab lock");
        match sessions.get(id) {
            Some(s) if s.profile == profile => Ok(SessionRef {
                id: id.to_string(),
                closed: s.closed.subscribe(),
                instance: s.instance,
            }),
            _ => Err((StatusCode::NOT_FOUND, "Session not found")),
        }
    }

    /// Read (and update) the SSE polling counts of `profile`.
    pub(super) fn resume_counts(
        &self,
        profile: &str,
        update: impl FnOnce(&mut ResumeCounts),
    ) -> ResumeCounts {
        let mut all = self.resumes.lock().expect("lab lock");
        let counts = all.entry(profile.to_string()).or_default();
        update(counts);
        *counts
    }

    /// SSE polling, answer side: keep `messages` for replay and send only the priming event
    /// (`<stream>-0`, with `retry`), then end the stream. Message `i` gets id `<stream>-<i+1>`.
    ///
    /// The store is bounded: an answer over [`REPLAY_MAX_ANSWER_BYTES`], or one that would take
    /// all sessions over [`REPLAY_TOTAL_BYTES`], is sent whole instead; a session keeps at most
    /// [`REPLAY_STREAMS`] streams and [`REPLAY_SESSION_BYTES`], forgetting the oldest first.
    pub(super) fn prime(&self, profile: &str, session_id: &str, messages: Vec<String>) -> Response {
        let size = bytes_of(&messages);
        let stream = {
            let mut sessions = self.sessions.lock().expect("lab lock");
            let Some(s) = sessions.get_mut(session_id) else {
                return status(StatusCode::NOT_FOUND, "Session not found");
            };
            if size > REPLAY_MAX_ANSWER_BYTES {
                Err(messages)
            } else {
                while !s.replay.is_empty()
                    && (s.replay.len() >= REPLAY_STREAMS
                        || s.replay_bytes + size > REPLAY_SESSION_BYTES)
                {
                    let freed = s.forget_oldest();
                    self.replay_bytes.fetch_sub(freed, Ordering::Relaxed);
                }
                if self.replay_bytes.load(Ordering::Relaxed) + size <= REPLAY_TOTAL_BYTES {
                    self.replay_bytes.fetch_add(size, Ordering::Relaxed);
                    s.replay_bytes += size;
                    s.streams += 1;
                    s.replay.push_back((s.streams, messages));
                    Ok(s.streams)
                } else {
                    Err(messages)
                }
            }
        };
        let stream = match stream {
            Ok(stream) => stream,
            Err(messages) => {
                self.resume_counts(profile, |c| c.sent_whole += 1);
                return message_stream(&messages);
            }
        };
        self.resume_counts(profile, |c| c.primed += 1);
        let body = format!("id: {stream}-0\nretry: {RESUME_RETRY_MS}\ndata: \n\n");
        event_stream(body)
    }

    /// SSE polling, GET side: replay what followed `last` on its stream, then end the stream and
    /// forget it (a later GET naming it is answered 400).
    pub(super) fn replay(&self, profile: &str, session_id: &str, last: &HeaderValue) -> Response {
        let position = last.to_str().ok().and_then(|l| {
            let (stream, seq) = l.split_once('-')?;
            Some((stream.parse::<u64>().ok()?, seq.parse::<usize>().ok()?))
        });
        let events = position.and_then(|(stream, seq)| {
            let mut sessions = self.sessions.lock().expect("lab lock");
            let s = sessions.get_mut(session_id)?;
            let at = s
                .replay
                .iter()
                .position(|(n, messages)| *n == stream && seq <= messages.len())?;
            let (_, messages) = s.replay.remove(at).expect("position in range");
            let freed = bytes_of(&messages);
            s.replay_bytes -= freed;
            self.replay_bytes.fetch_sub(freed, Ordering::Relaxed);
            Some(
                messages[seq..]
                    .iter()
                    .enumerate()
                    .fold(String::new(), |mut body, (i, m)| {
                        let id = seq + i + 1;
                        body.push_str(&format!("id: {stream}-{id}\nevent: message\ndata: {m}\n\n"));
                        body
                    }),
            )
        });
        match events {
            Some(body) => {
                self.resume_counts(profile, |c| c.resumed += 1);
                event_stream(body)
            }
            None => {
                self.resume_counts(profile, |c| c.unknown += 1);
                status(
                    StatusCode::BAD_REQUEST,
                    "Bad Request: unknown Last-Event-ID",
                )
            }
        }
    }

    pub(super) fn initialize(
        &self,
        profile: &str,
        b: &Behaviour,
        id: &Value,
        params: &Value,
    ) -> Response {
        let mut sessions = self.sessions.lock().expect("lab lock");
        if sessions.len() >= MAX_SESSIONS {
            return status(StatusCode::SERVICE_UNAVAILABLE, "too many sessions");
        }
        let n = self.next_session.fetch_add(1, Ordering::Relaxed);
        let session_id = format!("lab-{n:016x}-{:08x}", rand::random::<u32>());
        let (closed, _) = watch::channel(false);
        let announced = *self.generation.borrow();
        let instance = {
            let mut profiles = self.profile_state.lock().expect("lab lock");
            let ps = profiles.entry(profile.to_string()).or_default();
            ps.sessions += 1;
            ((ps.sessions - 1) % 2) as u8
        };
        sessions.insert(
            session_id.clone(),
            LabSession {
                profile: profile.to_string(),
                closed,
                announced,
                instance,
                replay: VecDeque::new(),
                replay_bytes: 0,
                streams: 0,
            },
        );
        drop(sessions);
        *self
            .initializes
            .lock()
            .expect("lab lock")
            .entry(profile.to_string())
            .or_default() += 1;
        let asked = params
            .get("protocolVersion")
            .and_then(Value::as_str)
            .unwrap_or("");
        let version = if LEGACY_VERSIONS.contains(&asked) {
            asked
        } else {
            LEGACY_VERSIONS[0]
        };
        let result = json!({
            "protocolVersion": version,
            "capabilities": capabilities(b),
            "serverInfo": server_info(),
        });
        let answer = rpc_result(id, result);
        let mut resp = if b.resumable_posts {
            self.prime(profile, &session_id, vec![answer.to_string()])
        } else {
            reply(b, answer)
        };
        resp.headers_mut().insert(
            "mcp-session-id",
            HeaderValue::from_str(&session_id).expect("ASCII session id"),
        );
        resp
    }

    /// Decide the per-request state of a listing answer of `list` for `profile`: a failure
    /// budget (F5, the tool list's), the answering instance (F8/F12) and the hot-fix insertion
    /// (F11, the tool list's).
    fn list_state(
        &self,
        profile: &str,
        b: &Behaviour,
        list: List,
        session_instance: u8,
        has_cursor: bool,
        empty_cursor: bool,
    ) -> Option<ListState> {
        let mut profiles = self.profile_state.lock().expect("lab lock");
        let ps = profiles.entry(profile.to_string()).or_default();
        if list == List::Tools && ps.failing_lists > 0 {
            ps.failing_lists -= 1;
            return None;
        }
        let instance = match b.instances {
            Instances::One => 0,
            Instances::RoundRobinLocalCursors => {
                ps.round_robin += 1;
                (ps.round_robin % 2) as u8
            }
            Instances::PinnedDivergent => session_instance,
        };
        if b.insert_during_walk && list == List::Tools {
            ps.hotfix = has_cursor;
        }
        Some(ListState {
            generation: *self.generation.borrow(),
            instance,
            hotfix: ps.hotfix,
            empty_cursor,
        })
    }

    /// Answer the listing of `list` for `profile` in either era: the result page, or `Err(None)`
    /// when the backend fails (HTTP 503, F5), or `Err(Some(message))` for an invalid cursor
    /// (-32602). `empty_cursor` says whether the empty string is a cursor here (modern era).
    /// The tool list's requests are counted (`tools_list_calls`, in flight) for the benches.
    pub(super) async fn list(
        &self,
        profile: &str,
        b: &Behaviour,
        list: List,
        instance: u8,
        params: &Value,
        empty_cursor: bool,
    ) -> Result<Value, Option<&'static str>> {
        let tools = list == List::Tools;
        if tools {
            let now = self.tools_list_in_flight.fetch_add(1, Ordering::Relaxed) + 1;
            self.tools_list_max_in_flight
                .fetch_max(now, Ordering::Relaxed);
        }
        tokio::time::sleep(b.page_delay).await;
        // The page is cut after the delay, so a redeploy during it shows in the answer.
        let cursor = params.get("cursor");
        let list_state =
            self.list_state(profile, b, list, instance, cursor.is_some(), empty_cursor);
        if tools {
            self.tools_list_calls.fetch_add(1, Ordering::Relaxed);
            self.tools_list_in_flight.fetch_sub(1, Ordering::Relaxed);
        }
        listing::answer(b, list_state.ok_or(None)?, list, cursor).map_err(Some)
    }

    /// The deploy state a call answered on `instance` sees.
    fn call_state(&self, b: &Behaviour, instance: u8) -> ListState {
        ListState {
            generation: *self.generation.borrow(),
            instance: match b.instances {
                Instances::PinnedDivergent => instance,
                _ => 0,
            },
            hotfix: false,
            empty_cursor: false,
        }
    }

    /// Answer `tools/call` in either era: the `CallToolResult`, or a JSON-RPC error.
    pub(super) fn tools_call(
        &self,
        b: &Behaviour,
        instance: u8,
        params: &Value,
    ) -> Result<Value, (i64, String)> {
        self.tools_calls.fetch_add(1, Ordering::Relaxed);
        listing::call(b, self.call_state(b, instance), params)
    }

    /// Answer `prompts/get` or `resources/read` (`not_found`: the era's "resource not found"
    /// code) for a profile that serves them; `None` for a method that is neither, or a profile
    /// that serves only tools.
    pub(super) fn item_call(
        &self,
        b: &Behaviour,
        instance: u8,
        method: &str,
        params: &Value,
        not_found: i64,
    ) -> Option<Result<Value, (i64, String)>> {
        if !b.prompts_and_resources {
            return None;
        }
        let st = self.call_state(b, instance);
        match method {
            "prompts/get" => Some(listing::get_prompt(b, st, params)),
            "resources/read" => Some(listing::read_resource(b, st, params, not_found)),
            _ => None,
        }
    }

    /// The instance a modern-era request from `peer` lands on: TCP connections are pinned
    /// alternately, as sessions are in the legacy era (F12).
    pub(super) fn peer_instance(&self, profile: &str, peer: SocketAddr) -> u8 {
        let mut peers = self.peers.lock().expect("lab lock");
        if let Some(i) = peers.get(&peer) {
            return *i;
        }
        if peers.len() >= MAX_PEERS {
            peers.clear();
        }
        let mut profiles = self.profile_state.lock().expect("lab lock");
        let ps = profiles.entry(profile.to_string()).or_default();
        ps.sessions += 1;
        let instance = ((ps.sessions - 1) % 2) as u8;
        peers.insert(peer, instance);
        instance
    }
}

/// What a long-lived stream (legacy GET, modern listen) carries next.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Feed {
    /// The tool list changed (or, F14, the server says so although it did not).
    ListChanged,
    /// The server ended the stream on purpose; nothing follows.
    Ended,
}

/// The change feed of one long-lived stream of a profile: a `list_changed` for every redeploy
/// (when `notify`), spurious ones (F14), a proxy cut after `stream_close_after` that ends the
/// stream abruptly, possibly with a redeploy in the gap (F4), and [`Feed::Ended`] once `ended`
/// resolves. Both eras frame these events their own way.
pub(super) fn change_feed(
    state: &Arc<LabState>,
    b: &Behaviour,
    notify: bool,
    ended: impl std::future::Future<Output = ()> + Send + 'static,
) -> impl Stream<Item = Feed> + Send + 'static {
    let generation = state.generation.subscribe();
    let spurious = b.spurious_list_changed.filter(|_| notify);
    let proxy_cut = b
        .stream_close_after
        .map(|d| tokio::time::Instant::now() + d);
    let redeploy_in_gap = b.change_in_stream_gap.then(|| state.clone());
    let ended = Some(Box::pin(ended));
    let announcements = if b.two_step_changes { 2 } else { 1 };
    let feed =
        futures_util::stream::unfold((generation, ended), move |(mut generation, mut ended)| {
            let redeploy_in_gap = redeploy_in_gap.clone();
            async move {
                let end = ended.as_mut()?;
                loop {
                    // Biased: a change that happened before the end is announced before it.
                    tokio::select! {
                        biased;
                        changed = generation.changed() => {
                            changed.ok()?;
                            if notify {
                                return Some((Feed::ListChanged, (generation, ended)));
                            }
                        }
                        _ = sleep_opt(spurious) => {
                            return Some((Feed::ListChanged, (generation, ended)));
                        }
                        _ = sleep_until_opt(proxy_cut) => {
                            if let Some(state) = redeploy_in_gap {
                                state.redeploy();
                            }
                            return None;
                        }
                        _ = end.as_mut() => {
                            return Some((Feed::Ended, (generation, None)));
                        }
                    }
                }
            }
        });
    feed.flat_map(move |f| {
        let n = if f == Feed::ListChanged {
            announcements
        } else {
            1
        };
        futures_util::stream::iter(std::iter::repeat_n(f, n))
    })
}

/// Send one JSON-RPC message as the profile answers: plain JSON or a one-event SSE stream.
pub(super) fn reply(b: &Behaviour, msg: Value) -> Response {
    if b.sse_responses {
        message_stream(&[msg.to_string()])
    } else {
        axum::Json(msg).into_response()
    }
}

/// A complete SSE body: the stream ends after it.
fn event_stream(body: String) -> Response {
    ([("content-type", "text/event-stream")], body).into_response()
}

/// JSON-RPC messages as one `message` event each, in a stream that ends after them.
pub(super) fn message_stream(messages: &[String]) -> Response {
    event_stream(
        messages
            .iter()
            .map(|m| format!("event: message\ndata: {m}\n\n"))
            .collect(),
    )
}
