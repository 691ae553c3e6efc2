//! Reading the JSON-RPC that passes through, without holding it up.
//!
//! The forwarder hands every chunk downstream first and shows a copy here. SSE bodies are cut
//! into lines by the probe's own [`LineFramer`] (bounded per event) and each event's `data` is
//! decoded with [`jsonrpc::decode`] as soon as its blank line passes; JSON bodies are kept (up to
//! a cap) and decoded at their end. An event or body over the cap is simply not observed: the
//! client still gets every byte.

use bytes::Bytes;
use serde_json::Value;

use mcp_client::listing::list::List;
use mcp_client::mcp::jsonrpc::{self, Incoming};
use mcp_client::mcp::sse_lines::LineFramer;

/// Largest SSE event or JSON body the proxy decodes (the probe's own answer cap).
pub const MAX_OBSERVED_BYTES: usize = mcp_client::mcp::http::MAX_BODY_BYTES;

/// The MCP methods that get their own `method` label; anything else is `other`.
const METHODS: [&str; 22] = [
    "initialize",
    "ping",
    "server/discover",
    "tools/list",
    "tools/call",
    "resources/list",
    "resources/read",
    "resources/templates/list",
    "resources/subscribe",
    "resources/unsubscribe",
    "prompts/list",
    "prompts/get",
    "completion/complete",
    "logging/setLevel",
    "subscriptions/listen",
    "notifications/initialized",
    "notifications/cancelled",
    "notifications/progress",
    "notifications/roots/list_changed",
    "tasks/get",
    "tasks/cancel",
    "tasks/result",
];

/// The `method` label of a JSON-RPC method.
pub fn method_label(method: &str) -> &'static str {
    METHODS
        .iter()
        .find(|m| **m == method)
        .copied()
        .unwrap_or("other")
}

/// Messages in an SSE byte stream, event by event.
pub struct SseReader {
    framer: Option<LineFramer>,
    data: Vec<u8>,
    lines: Vec<Bytes>,
    /// The last line ended with `\r`: a lone `\n` line next is the rest of its terminator
    /// (the framer hands it over on its own when `\r\n` is split across chunks).
    after_cr: bool,
    /// The current event is an `endpoint` event (HTTP+SSE: its data is the message URL).
    endpoint_event: bool,
    /// The data of the last `endpoint` event, until taken.
    endpoint: Option<String>,
    /// A line of an event passed and its blank line did not yet.
    in_event: bool,
}

impl Default for SseReader {
    fn default() -> Self {
        SseReader {
            framer: Some(LineFramer::new(MAX_OBSERVED_BYTES)),
            data: Vec::new(),
            lines: Vec::new(),
            after_cr: false,
            endpoint_event: false,
            endpoint: None,
            in_event: false,
        }
    }
}

impl SseReader {
    /// Feed a chunk; `each` gets the messages of every event completed by it.
    pub fn push(&mut self, chunk: &[u8], mut each: impl FnMut(Incoming)) {
        let Some(framer) = &mut self.framer else {
            return;
        };
        if framer.push(chunk, &mut self.lines).is_err() {
            // Over the cap: stop observing this stream (it is still forwarded whole).
            self.framer = None;
            self.lines.clear();
            self.data = Vec::new();
            return;
        }
        for line in self.lines.drain(..) {
            let rest_of_crlf = std::mem::replace(&mut self.after_cr, line.ends_with(b"\r"));
            if rest_of_crlf && &line[..] == b"\n" {
                continue;
            }
            let content = trim_eol(&line);
            self.in_event = !content.is_empty();
            if content.is_empty() {
                if std::mem::take(&mut self.endpoint_event) {
                    self.endpoint = Some(String::from_utf8_lossy(&self.data).into_owned());
                } else if !self.data.is_empty()
                    && let Ok(messages) = jsonrpc::decode(&self.data)
                {
                    messages.into_iter().for_each(&mut each);
                }
                self.data.clear();
                continue;
            }
            if let Some(name) = content.strip_prefix(b"event:") {
                self.endpoint_event = name.trim_ascii() == b"endpoint";
                continue;
            }
            if let Some(value) = content.strip_prefix(b"data") {
                let value = match value.first() {
                    None => value,
                    Some(b':') => value[1..].strip_prefix(b" ").unwrap_or(&value[1..]),
                    Some(_) => continue, // another field whose name starts with "data"
                };
                if !self.data.is_empty() {
                    self.data.push(b'\n');
                }
                self.data.extend_from_slice(value);
            }
        }
    }
}

impl SseReader {
    /// The data of the last `endpoint` event seen (HTTP+SSE), once.
    pub fn take_endpoint(&mut self) -> Option<String> {
        self.endpoint.take()
    }

    /// Every byte so far belongs to complete events: an event of the proxy's own may be put
    /// here without splitting one of the upstream's. False once the stream is no longer read
    /// (an event over the cap).
    pub fn at_event_boundary(&self) -> bool {
        self.framer.as_ref().is_some_and(|f| !f.mid_line()) && !self.in_event
    }
}

fn trim_eol(line: &[u8]) -> &[u8] {
    let end = line
        .iter()
        .rposition(|b| *b != b'\n' && *b != b'\r')
        .map_or(0, |i| i + 1);
    &line[..end]
}

/// Largest answer to a `tools/call` the proxy decodes: every known "no such tool" answer (see
/// [`super::unknown_tool`]) is a few hundred bytes, and a larger answer is a tool's result, which
/// the proxy has no reason to hold.
pub const MAX_CALL_ANSWER_BYTES: usize = 8 * 1024;

/// A JSON answer on its way through: kept (up to a cap) only when its content matters (it
/// answers a `tools/list`, or a `tools/call` that may say the tool does not exist), otherwise
/// only its end is noticed. With a
/// `Content-Length`, the body is complete when its last chunk is seen, before that chunk is
/// handed on, so the accounting is done before the client can send its next request.
#[derive(Default)]
pub struct JsonBody {
    bytes: Vec<u8>,
    /// Most bytes kept; 0: the content is not read.
    keep: usize,
    over: bool,
    expected: Option<u64>,
    seen: u64,
}

impl JsonBody {
    /// A body of `expected` bytes (its `Content-Length`, when it has one); its content is read
    /// when it is at most `keep` bytes (0: only its end is noticed).
    pub fn new(keep: usize, expected: Option<u64>) -> Self {
        JsonBody {
            keep,
            expected,
            ..JsonBody::default()
        }
    }

    /// Feed a chunk; true when it completed the body (its `Content-Length` reached).
    pub fn push(&mut self, chunk: &[u8]) -> bool {
        self.seen += chunk.len() as u64;
        if self.keep > 0 && !self.over {
            if self.bytes.len() + chunk.len() > self.keep {
                self.over = true;
                self.bytes = Vec::new();
            } else {
                self.bytes.extend_from_slice(chunk);
            }
        }
        self.expected.is_some_and(|n| self.seen >= n)
    }

    /// The messages of the body, when it was kept and whole JSON-RPC.
    pub fn messages(&self) -> Vec<Incoming> {
        if self.over || self.keep == 0 {
            return Vec::new();
        }
        jsonrpc::decode(&self.bytes).unwrap_or_default()
    }
}

/// One client request, kept to interpret its answer.
pub struct Pending {
    pub id: Value,
    pub method: &'static str,
    pub asked: Asked,
}

/// What a client request is, as far as the proxy's accounting goes.
#[derive(Debug, Clone, PartialEq)]
pub enum Asked {
    /// `tools/list`; `cursor`: the cursor it carried.
    ToolsList {
        cursor: Option<String>,
    },
    /// `tools/call` of `tool` with `arguments`.
    ToolsCall {
        tool: String,
        arguments: Value,
    },
    /// A listing of another list (`prompts/list`, `resources/list`,
    /// `resources/templates/list`); `cursor`: the cursor it carried.
    List {
        list: List,
        cursor: Option<String>,
    },
    /// A use of an item of `list`: `prompts/get` of a name (prompts), `resources/read` of a URI
    /// (resources); `key` is `None` when it names none or one over
    /// [`MAX_KEY_BYTES`] (not judged).
    Use {
        list: List,
        key: Option<String>,
    },
    Initialize,
    Other,
}

impl Asked {
    pub fn of(method: &str, params: Option<&Value>) -> Asked {
        match method {
            "tools/list" => Asked::ToolsList {
                cursor: params
                    .and_then(|p| p.get("cursor"))
                    .and_then(Value::as_str)
                    .map(str::to_string),
            },
            "tools/call" => Asked::ToolsCall {
                tool: params
                    .and_then(|p| p.get("name"))
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string(),
                arguments: params
                    .and_then(|p| p.get("arguments"))
                    .cloned()
                    .unwrap_or(Value::Object(Default::default())),
            },
            "initialize" => Asked::Initialize,
            "prompts/get" | "resources/read" => {
                let (list, field) = if method == "prompts/get" {
                    (List::Prompts, "name")
                } else {
                    (List::Resources, "uri")
                };
                let key = params
                    .and_then(|p| p.get(field))
                    .and_then(Value::as_str)
                    .filter(|k| k.len() <= MAX_KEY_BYTES)
                    .map(str::to_string);
                Asked::Use { list, key }
            }
            _ => match List::of_method(method) {
                Some(list) if list != List::Tools => Asked::List {
                    list,
                    cursor: params
                        .and_then(|p| p.get("cursor"))
                        .and_then(Value::as_str)
                        .map(str::to_string),
                },
                _ => Asked::Other,
            },
        }
    }
}

/// Whether a request was made in the 2026-07-28 era, whose clients honour `ttlMs`: by its
/// `MCP-Protocol-Version` header (required on every modern HTTP request), else by the protocol
/// version its `_meta` carries.
pub fn modern(header: Option<&str>, params: Option<&Value>) -> bool {
    let version = header.or_else(|| {
        params
            .and_then(|p| p.get("_meta"))
            .and_then(|m| m.get("io.modelcontextprotocol/protocolVersion"))
            .and_then(Value::as_str)
    });
    version
        .and_then(mcp_client::mcp::ProtocolVersion::parse)
        .is_some_and(|v| v.era() == mcp_client::mcp::Era::Modern)
}

/// The session an HTTP+SSE (2024-11-05) message URL names in its query: `sessionId` (the
/// TypeScript SDK) or `session_id` (the Python SDK), as the `endpoint` event gave it.
pub fn stream_session(query: Option<&str>) -> Option<String> {
    url::form_urlencoded::parse(query?.as_bytes())
        .find(|(k, _)| k == "sessionId" || k == "session_id")
        .map(|(_, v)| v.into_owned())
        .filter(|v| !v.is_empty())
}

/// The client's self-reported name: `initialize`'s `clientInfo.name` (legacy) or the modern
/// `_meta["io.modelcontextprotocol/clientInfo"].name` of any request.
pub fn client_name<'a>(method: &str, params: Option<&'a Value>) -> Option<&'a str> {
    let params = params?;
    let info = if method == "initialize" {
        params.get("clientInfo")
    } else {
        None
    }
    .or_else(|| {
        params
            .get("_meta")
            .and_then(|m| m.get("io.modelcontextprotocol/clientInfo"))
    })?;
    info.get("name").and_then(Value::as_str)
}

/// Longest prompt name or resource URI a request may name and still be judged.
pub const MAX_KEY_BYTES: usize = 4096;

/// A stable 64-bit digest of a cursor (the session keeps this, not the cursor).
pub fn cursor_digest(cursor: &str) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    cursor.hash(&mut h);
    h.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_json_answer_is_complete_at_its_length_and_kept_only_when_it_matters() {
        let body = br#"{"jsonrpc":"2.0","id":1,"result":{"tools":[],"nextCursor":"c"}}"#;
        let (head, last) = body.split_at(body.len() - 3);
        let mut kept = JsonBody::new(MAX_OBSERVED_BYTES, Some(body.len() as u64));
        assert!(!kept.push(head), "not complete before its last chunk");
        assert!(
            kept.push(last),
            "complete with its last chunk, before it is handed on"
        );
        assert_eq!(kept.messages().len(), 1);
        let mut over = JsonBody::new(body.len() - 1, None);
        over.push(body);
        assert!(
            over.messages().is_empty() && over.bytes.is_empty(),
            "over its cap: not read"
        );
        let mut passed = JsonBody::new(0, None);
        assert!(
            !passed.push(body),
            "no length: complete only at the stream's end"
        );
        assert!(passed.messages().is_empty() && passed.bytes.is_empty());
    }

    #[test]
    fn the_event_boundary_is_only_between_whole_events() {
        let mut r = SseReader::default();
        assert!(r.at_event_boundary(), "nothing yet");
        let stream: &[u8] = b"id: 1\r\nevent: message\r\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"x\"}\r\n\r\n: keepalive\n\n";
        let ends = [stream.len() - ": keepalive\n\n".len(), stream.len()];
        for cut in 1..stream.len() {
            let mut r = SseReader::default();
            r.push(&stream[..cut], |_| {});
            assert_eq!(r.at_event_boundary(), ends.contains(&cut), "cut at {cut}");
        }
        r.push(stream, |_| {});
        assert!(r.at_event_boundary());
        r.push(b"data: {\"jsonrpc\":\"2.0\"", |_| {});
        assert!(!r.at_event_boundary(), "a partial line");
        r.push(b",\"method\":\"x\"}\n", |_| {});
        assert!(!r.at_event_boundary(), "a whole line, no blank line yet");
        r.push(b"\n", |_| {});
        assert!(r.at_event_boundary());
    }

    #[test]
    fn sse_events_are_decoded_whatever_the_chunking() {
        let text = b": keepalive\n\nevent: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/tools/list_changed\"}\n\nid: 7\r\ndata: {\"jsonrpc\":\"2.0\",\r\ndata: \"id\":1,\"result\":{}}\r\n\r\n";
        for size in [1, 3, 17, text.len()] {
            let mut r = SseReader::default();
            let mut seen = Vec::new();
            for chunk in text.chunks(size) {
                r.push(chunk, |m| seen.push(m));
            }
            assert_eq!(seen.len(), 2, "chunks of {size}");
            assert!(
                matches!(&seen[0], Incoming::Notification { method, .. } if method.ends_with("list_changed"))
            );
            assert!(matches!(&seen[1], Incoming::Response { id, .. } if *id == json!(1)));
        }
    }

    #[test]
    fn an_endpoint_event_is_kept_apart_from_messages() {
        let text = b"event: endpoint\r\ndata: /messages/?session_id=ab\r\n\r\nevent: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n\n";
        for size in [1, 5, text.len()] {
            let mut r = SseReader::default();
            let mut seen = Vec::new();
            for chunk in text.chunks(size) {
                r.push(chunk, |m| seen.push(m));
            }
            assert_eq!(seen.len(), 1, "chunks of {size}");
            assert_eq!(
                r.take_endpoint().as_deref(),
                Some("/messages/?session_id=ab")
            );
            assert_eq!(r.take_endpoint(), None);
        }
    }

    #[test]
    fn the_era_is_read_from_the_header_or_meta_and_the_stream_session_from_the_query() {
        assert!(modern(Some("2026-07-28"), None));
        assert!(!modern(Some("2025-11-25"), None));
        assert!(!modern(None, None));
        let meta = json!({"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}});
        assert!(modern(None, Some(&meta)));
        assert!(!modern(Some("2025-06-18"), Some(&meta)), "the header rules");
        assert_eq!(
            stream_session(Some("sessionId=abc")).as_deref(),
            Some("abc")
        );
        assert_eq!(
            stream_session(Some("x=1&session_id=f00d")).as_deref(),
            Some("f00d")
        );
        assert_eq!(stream_session(Some("session_id=")), None);
        assert_eq!(stream_session(None), None);
    }

    #[test]
    fn requests_are_classified_and_client_names_read_in_both_eras() {
        let p = json!({"cursor": "c1"});
        assert_eq!(
            Asked::of("tools/list", Some(&p)),
            Asked::ToolsList {
                cursor: Some("c1".into())
            }
        );
        let init = json!({"clientInfo": {"name": "claude-code", "version": "1"}});
        assert_eq!(client_name("initialize", Some(&init)), Some("claude-code"));
        let modern = json!({"_meta": {"io.modelcontextprotocol/clientInfo": {"name": "cursor"}}});
        assert_eq!(client_name("tools/list", Some(&modern)), Some("cursor"));
        assert_eq!(client_name("tools/list", None), None);
        assert_eq!(method_label("tools/call"), "tools/call");
        assert_eq!(method_label("x/y"), "other");
    }
}
