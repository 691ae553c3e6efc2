//! The body of a stream's response, framed as its head says (chunked, a declared length, or to
//! the connection's end), read through a buffer sized to what arrives.

use std::io;

use bytes::{Buf, Bytes, BytesMut};
use reqwest::header::HeaderMap;
use tokio::io::AsyncReadExt;

use super::{Io, StreamFault};

/// Largest chunk-size line (with extensions) of a chunked body.
const MAX_CHUNK_LINE: usize = 4 * 1024;
/// Read size while a stream is idle (what one notification needs: a `list_changed` event with
/// its id is ~150 bytes; 1 KiB was most of an idle stream's cost, and a target with the legacy
/// watch keeps two) ...
pub(super) const IDLE_READ: usize = 512;
/// ... and once a read filled it (a burst, or a large message).
const BUSY_READ: usize = 16 * 1024;

/// How the body's end is known.
#[derive(Debug, PartialEq)]
pub(super) enum Framing {
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
pub(super) enum Chunk {
    /// At a chunk-size line.
    Size,
    /// This many bytes left of the chunk's data.
    Data(u64),
    /// At the CRLF after a chunk's data.
    DataEnd,
}

impl Framing {
    pub(super) fn of(
        status: http::StatusCode,
        headers: &HeaderMap,
    ) -> Result<Framing, StreamFault> {
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
pub(super) struct Body {
    pub(super) io: Box<dyn Io>,
    pub(super) buf: BytesMut,
    pub(super) framing: Framing,
    /// Whether the last read filled what it was given (read more at once next time).
    pub(super) busy: bool,
}

impl Body {
    /// The next piece of the body; `None` at its end. After an error nothing more is read.
    pub(super) async fn next_chunk(&mut self) -> io::Result<Option<Bytes>> {
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
