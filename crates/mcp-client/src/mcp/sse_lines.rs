//! Cut a byte stream into whole SSE lines before the SSE parser sees it, and bound what a server
//! can make the client buffer.
//!
//! Two reasons this sits in front of `eventsource-stream`: its parser re-scans an unfinished line
//! on every chunk (a 4 MiB line in 4 KiB chunks costs seconds of CPU), and it yields nothing for
//! comments and priming events, so a cap counted per yielded event would add keep-alives up
//! forever. Here each line is scanned once, the line being received is capped, and the event
//! being built is capped by its non-comment bytes since the last blank line.
//!
//! The framer also keeps the stream's [`Cursor`] (last event id, reconnection time), because the
//! parser drops both when an event carries no data, which is exactly what a priming event may do.

use std::time::Duration;

use bytes::{Bytes, BytesMut};

/// Longest SSE `id` kept for a reconnection; a longer one makes the stream unresumable.
pub const MAX_EVENT_ID: usize = 1024;

/// The last event id of a stream, as the SSE standard keeps it for `Last-Event-ID`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum EventId {
    /// No id yet, or the server reset it with an empty `id` field.
    #[default]
    None,
    Id(String),
    /// An id the client cannot send back: longer than [`MAX_EVENT_ID`] or not UTF-8.
    Unusable,
}

/// What a reconnection needs from the stream read so far (WHATWG SSE, "Interpreting an event
/// stream"): the id of the last completed event and the reconnection time (`retry`, applied as
/// soon as the field is read).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Cursor {
    pub last_id: EventId,
    pub retry: Option<Duration>,
}

/// Why a line or event was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TooLarge(pub usize);

/// The framing state.
#[derive(Debug)]
pub struct LineFramer {
    pending: BytesMut,
    max_event: usize,
    event_bytes: usize,
    total: usize,
    /// The previous line ended with `\r`: a leading `\n` completes that terminator.
    after_cr: bool,
    /// The `id` of the event being built; it becomes the cursor's when the event ends.
    id_buffer: EventId,
    cursor: Cursor,
    cursor_changed: bool,
    first_line: bool,
}

impl LineFramer {
    pub fn new(max_event: usize) -> Self {
        Self::resuming(max_event, Cursor::default())
    }

    /// A framer for a stream that continues another: the last event id and reconnection time
    /// carry over until this stream sets them.
    pub fn resuming(max_event: usize, cursor: Cursor) -> Self {
        LineFramer {
            pending: BytesMut::new(),
            max_event,
            event_bytes: 0,
            total: 0,
            after_cr: false,
            id_buffer: cursor.last_id.clone(),
            cursor,
            cursor_changed: false,
            first_line: true,
        }
    }

    /// Part of a line is held (or the `\n` of a `\r\n` may come next): the stream is not at a
    /// line boundary.
    pub fn mid_line(&self) -> bool {
        !self.pending.is_empty() || self.after_cr
    }

    /// Bytes received so far.
    pub fn total(&self) -> usize {
        self.total
    }

    /// The cursor, if it changed since the last call.
    pub fn take_cursor_change(&mut self) -> Option<Cursor> {
        std::mem::take(&mut self.cursor_changed).then(|| self.cursor.clone())
    }

    /// Feed one chunk; complete lines (with their terminators) are appended to `out`, the rest is
    /// kept for the next chunk.
    pub fn push(&mut self, chunk: &[u8], out: &mut Vec<Bytes>) -> Result<(), TooLarge> {
        self.total += chunk.len();
        let mut rest = chunk;
        while let Some(pos) = rest.iter().position(|b| *b == b'\n' || *b == b'\r') {
            let (line, tail) = rest.split_at(pos + 1);
            rest = tail;
            if self.pending.is_empty() && line == b"\n" && self.after_cr {
                // The `\n` of a `\r\n` split across chunks or lines: not a blank line.
                self.after_cr = false;
                out.push(Bytes::copy_from_slice(line));
                continue;
            }
            self.pending.extend_from_slice(line);
            let mut complete = self.pending.split().freeze();
            self.after_cr = complete.last() == Some(&b'\r');
            if self.after_cr && rest.first() == Some(&b'\n') {
                // Keep `\r\n` together in one line.
                let mut joined = BytesMut::from(&complete[..]);
                joined.extend_from_slice(b"\n");
                complete = joined.freeze();
                rest = &rest[1..];
                self.after_cr = false;
            }
            self.account(&complete)?;
            out.push(complete);
        }
        self.pending.extend_from_slice(rest);
        if !rest.is_empty() {
            self.after_cr = false;
        }
        if self.pending.len() > self.max_event {
            return Err(TooLarge(self.max_event));
        }
        Ok(())
    }

    fn account(&mut self, line: &[u8]) -> Result<(), TooLarge> {
        let content = line
            .iter()
            .rposition(|b| *b != b'\n' && *b != b'\r')
            .map_or(&line[..0], |end| &line[..=end]);
        let content = if std::mem::take(&mut self.first_line) {
            content.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(content)
        } else {
            content
        };
        if content.is_empty() {
            self.event_bytes = 0; // a blank line dispatches the event
            if self.cursor.last_id != self.id_buffer {
                self.cursor.last_id = self.id_buffer.clone();
                self.cursor_changed = true;
            }
        } else if content[0] != b':' {
            self.event_bytes += line.len();
            if self.event_bytes > self.max_event {
                return Err(TooLarge(self.max_event));
            }
            self.field(content);
        }
        Ok(())
    }

    /// Note an `id` or `retry` field; every other field is the parser's business.
    fn field(&mut self, content: &[u8]) {
        let (name, value) = match content.iter().position(|b| *b == b':') {
            Some(i) => {
                let v = &content[i + 1..];
                (&content[..i], v.strip_prefix(b" ").unwrap_or(v))
            }
            None => (content, &b""[..]),
        };
        match name {
            b"id" if !value.contains(&0) => {
                self.id_buffer = match std::str::from_utf8(value) {
                    Ok("") => EventId::None,
                    Ok(id) if id.len() <= MAX_EVENT_ID => EventId::Id(id.to_string()),
                    _ => EventId::Unusable,
                };
            }
            b"retry" if !value.is_empty() && value.iter().all(u8::is_ascii_digit) => {
                let ms = std::str::from_utf8(value)
                    .ok()
                    .and_then(|v| v.parse::<u64>().ok())
                    .unwrap_or(u64::MAX);
                self.cursor.retry = Some(Duration::from_millis(ms));
                self.cursor_changed = true;
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn feed(f: &mut LineFramer, chunks: &[&[u8]]) -> Result<Vec<Vec<u8>>, TooLarge> {
        let mut out = Vec::new();
        for c in chunks {
            f.push(c, &mut out)?;
        }
        Ok(out.into_iter().map(|b| b.to_vec()).collect())
    }

    #[test]
    fn lines_are_whole_whatever_the_chunking() {
        let mut f = LineFramer::new(1024);
        let lines = feed(
            &mut f,
            &[b"data: {\"a\"", b":1}\n\nev", b"ent: x\r\n", b"\r\n"],
        )
        .unwrap();
        let joined: Vec<u8> = lines.concat();
        assert_eq!(joined, b"data: {\"a\":1}\n\nevent: x\r\n\r\n");
        assert_eq!(lines[0], b"data: {\"a\":1}\n");
        assert_eq!(f.total(), joined.len());
    }

    #[test]
    fn keepalive_comments_never_add_up() {
        let mut f = LineFramer::new(64);
        for _ in 0..10_000 {
            feed(&mut f, &[b": keep-alive\n\n"]).unwrap();
            feed(&mut f, &[b": ping without blank line\n"]).unwrap();
        }
        feed(&mut f, &[b"data: {}\n\n"]).unwrap();
    }

    #[test]
    fn a_long_line_is_refused_before_it_completes() {
        let mut f = LineFramer::new(100);
        assert!(feed(&mut f, &[&[b'x'; 60]]).is_ok());
        assert_eq!(feed(&mut f, &[&[b'x'; 60]]), Err(TooLarge(100)));
    }

    #[test]
    fn an_event_of_many_short_lines_is_refused() {
        let mut f = LineFramer::new(100);
        let mut r = Ok(vec![]);
        for _ in 0..20 {
            r = feed(&mut f, &[b"data: 0123456789\n"]);
            if r.is_err() {
                break;
            }
        }
        assert_eq!(r, Err(TooLarge(100)));
    }

    fn id(s: &str) -> EventId {
        EventId::Id(s.to_string())
    }

    #[test]
    fn the_cursor_follows_completed_events_and_retry_fields() {
        let mut f = LineFramer::new(4096);
        feed(&mut f, &[b"\xEF\xBB\xBFid: p-0\r\nretry: 50\r\n"]).unwrap();
        // The id waits for the end of its event; the retry applies at once.
        let c = f.take_cursor_change().unwrap();
        assert_eq!(
            (c.last_id, c.retry),
            (EventId::None, Some(Duration::from_millis(50)))
        );
        feed(&mut f, &[b"\r\n", b": keep-alive\n\n"]).unwrap();
        assert_eq!(f.take_cursor_change().unwrap().last_id, id("p-0"));
        assert_eq!(f.take_cursor_change(), None);
        // An event without an id keeps the last one; an unfinished event does not count.
        feed(&mut f, &[b"data: {}\n\nid:p-2\ndata: {}\n"]).unwrap();
        assert_eq!(f.take_cursor_change(), None);
        // `retry` must be digits only; an empty `id` resets.
        feed(&mut f, &[b"\nretry: 5s\nid\n\n"]).unwrap();
        let c = f.take_cursor_change().unwrap();
        assert_eq!(
            (c.last_id, c.retry),
            (EventId::None, Some(Duration::from_millis(50)))
        );
    }

    #[test]
    fn ids_that_cannot_be_sent_back_are_unusable_and_a_resumed_stream_carries_on() {
        let mut f = LineFramer::new(8192);
        let long = format!("id: {}\n\n", "x".repeat(MAX_EVENT_ID + 1));
        feed(&mut f, &[long.as_bytes()]).unwrap();
        assert_eq!(f.take_cursor_change().unwrap().last_id, EventId::Unusable);
        feed(&mut f, &[b"id: a\0b\n\n"]).unwrap(); // NUL: the field is ignored
        assert_eq!(f.take_cursor_change(), None);

        let start = Cursor {
            last_id: id("s-0"),
            retry: Some(Duration::from_millis(7)),
        };
        let mut g = LineFramer::resuming(1024, start.clone());
        feed(&mut g, &[b"data: {}\n\n"]).unwrap();
        assert_eq!(g.take_cursor_change(), None);
        feed(&mut g, &[b"id: s-1\ndata: {}\n\n"]).unwrap();
        assert_eq!(
            g.take_cursor_change(),
            Some(Cursor {
                last_id: id("s-1"),
                ..start
            })
        );
    }

    #[test]
    fn crlf_split_across_chunks_is_not_a_blank_line() {
        let mut f = LineFramer::new(30);
        // Without the CR/LF join, each `\n` would look blank and reset the event size.
        let mut r = Ok(vec![]);
        for _ in 0..10 {
            r = feed(&mut f, &[b"data: 0123456789\r", b"\n"]);
            if r.is_err() {
                break;
            }
        }
        assert_eq!(r, Err(TooLarge(30)));
    }
}
