//! Cut a byte stream into whole SSE lines before the SSE parser sees it, and bound what a server
//! can make the client buffer.
//!
//! Two reasons this sits in front of `eventsource-stream`: its parser re-scans an unfinished line
//! on every chunk (a 4 MiB line in 4 KiB chunks costs seconds of CPU), and it yields nothing for
//! comments and priming events, so a cap counted per yielded event would add keep-alives up
//! forever. Here each line is scanned once, the line being received is capped, and the event
//! being built is capped by its non-comment bytes since the last blank line.

use bytes::{Bytes, BytesMut};

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
}

impl LineFramer {
    pub fn new(max_event: usize) -> Self {
        LineFramer {
            pending: BytesMut::new(),
            max_event,
            event_bytes: 0,
            total: 0,
            after_cr: false,
        }
    }

    /// Bytes received so far.
    pub fn total(&self) -> usize {
        self.total
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
        if content.is_empty() {
            self.event_bytes = 0; // a blank line dispatches the event
        } else if content[0] != b':' {
            self.event_bytes += line.len();
            if self.event_bytes > self.max_event {
                return Err(TooLarge(self.max_event));
            }
        }
        Ok(())
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
