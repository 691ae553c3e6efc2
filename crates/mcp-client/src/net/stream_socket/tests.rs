//! The stream socket against a raw TCP peer that writes exactly the bytes a test scripts, in
//! the pieces it scripts (a real server's framing is covered by every stream test above).

use super::body::{Body, Chunk, Framing, IDLE_READ};
use super::head::MAX_HEAD_BYTES;
use super::*;
use bytes::BytesMut;
use futures_util::StreamExt;
use reqwest::header::HeaderMap;
use tokio::io::AsyncReadExt;
use tokio::net::TcpListener;
use tokio::sync::oneshot;

/// A peer that reads one request (head and `Content-Length` body), hands it to the test, and
/// writes `pieces` one at a time, flushing each, then closes.
async fn peer(pieces: Vec<&'static [u8]>) -> (Url, oneshot::Receiver<String>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = Url::parse(&format!(
        "http://{}/mcp?x=1",
        listener.local_addr().unwrap()
    ))
    .unwrap();
    let (tx, rx) = oneshot::channel();
    tokio::spawn(async move {
        let (mut sock, _) = listener.accept().await.unwrap();
        let mut got = Vec::new();
        let mut byte = [0u8; 1];
        while !got.ends_with(b"\r\n\r\n") {
            sock.read_exact(&mut byte).await.unwrap();
            got.push(byte[0]);
        }
        let text = String::from_utf8(got).unwrap();
        let length = text
            .lines()
            .find_map(|l| l.strip_prefix("content-length: "))
            .map_or(0, |n| n.parse::<usize>().unwrap());
        let mut body = vec![0u8; length];
        sock.read_exact(&mut body).await.unwrap();
        let _ = tx.send(text + &String::from_utf8(body).unwrap());
        for p in pieces {
            sock.write_all(p).await.unwrap();
            sock.flush().await.unwrap();
            tokio::task::yield_now().await;
        }
    });
    (url, rx)
}

fn connector() -> StreamConnector {
    let tls = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::aws_lc_rs::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(rustls::RootCertStore::empty())
    .with_no_client_auth();
    StreamConnector::new(tls, "mcp_exporter/test")
}

async fn open(url: &Url, post: Option<&'static str>) -> Result<reqwest::Response, StreamFault> {
    let client = reqwest::Client::new();
    let req = match post {
        Some(body) => client.post(url.clone()).body(body),
        None => client.get(url.clone()),
    };
    let req = req
        .header("accept", "text/event-stream")
        .header("authorization", "Bearer t0ken")
        .build()
        .unwrap();
    connector().execute(req).await
}

/// The whole body, or the error it ended with.
async fn body_of(resp: reqwest::Response) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    let mut body = resp.bytes_stream();
    while let Some(chunk) = body.next().await {
        out.extend_from_slice(&chunk.map_err(|e| format!("{e:?}"))?);
    }
    Ok(out)
}

#[tokio::test]
async fn a_chunked_stream_in_any_pieces_reads_as_its_bytes() {
    let (url, request) = peer(vec![
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n",
        b"\r\n1",
        b"9;ext=1\r\ndata: {\"jsonrpc\":\"2.0\"}\n\n\r",
        b"\n",
        b"5\r\nab",
        b"cde\r\n0\r\n\r\n",
    ])
    .await;
    let resp = open(&url, Some("{\"id\":1}")).await.unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["content-type"], "text/event-stream");
    let sent = request.await.unwrap();
    let port = url.port().unwrap();
    assert!(sent.starts_with("POST /mcp?x=1 HTTP/1.1\r\n"), "{sent}");
    assert!(
        sent.contains(&format!("host: 127.0.0.1:{port}\r\n")),
        "{sent}"
    );
    assert!(sent.contains("authorization: Bearer t0ken\r\n"), "{sent}");
    assert!(sent.contains("user-agent: mcp_exporter/test\r\n"), "{sent}");
    assert!(sent.contains("content-length: 8\r\n"), "{sent}");
    assert!(sent.ends_with("\r\n\r\n{\"id\":1}"), "{sent}");
    assert_eq!(
        body_of(resp).await.unwrap(),
        b"data: {\"jsonrpc\":\"2.0\"}\n\nabcde"
    );
}

#[tokio::test]
async fn a_declared_length_ends_the_body_and_no_framing_ends_it_with_the_connection() {
    let (url, _) = peer(vec![
        b"HTTP/1.1 100 Continue\r\n\r\n",
        b"HTTP/1.1 405 Method Not Allowed\r\ncontent-length: 4\r\n\r\nnopeEXTRA",
    ])
    .await;
    let resp = open(&url, None).await.unwrap();
    assert_eq!(resp.status(), 405, "the interim answer is skipped");
    assert_eq!(body_of(resp).await.unwrap(), b"nope");

    let (url, request) = peer(vec![b"HTTP/1.1 200 OK\r\n\r\nuntil", b" the end"]).await;
    let req = reqwest::Client::new()
        .get(url.clone())
        .header("host", "mcp.internal")
        .header("user-agent", "configured/1")
        .build()
        .unwrap();
    let resp = connector().execute(req).await.unwrap();
    assert_eq!(body_of(resp).await.unwrap(), b"until the end");
    let sent = request.await.unwrap();
    assert!(sent.starts_with("GET /mcp?x=1 HTTP/1.1\r\n"), "{sent}");
    assert_eq!(sent.matches("host: ").count(), 1, "{sent}");
    assert!(
        sent.contains("host: mcp.internal\r\n"),
        "a configured Host wins: {sent}"
    );
    assert_eq!(sent.matches("user-agent: ").count(), 1, "{sent}");
    assert!(sent.contains("user-agent: configured/1\r\n"), "{sent}");
    assert!(
        !sent.contains("content-length"),
        "a GET has no body: {sent}"
    );
}

#[tokio::test]
async fn a_body_cut_short_or_malformed_is_an_error_not_an_end() {
    for pieces in [
        vec![&b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n5\r\nab"[..]],
        vec![&b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n2\r\nabXY"[..]],
        vec![&b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\nzz\r\n"[..]],
        vec![&b"HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\nshort"[..]],
    ] {
        let (url, _) = peer(pieces).await;
        let resp = open(&url, None).await.unwrap();
        assert!(body_of(resp).await.is_err());
    }
}

#[tokio::test]
async fn a_head_that_is_not_http_or_never_ends_is_refused() {
    let (url, _) = peer(vec![b"SSH-2.0-OpenSSH\r\n\r\n"]).await;
    let err = open(&url, None).await.unwrap_err();
    assert!(
        err.to_string().contains("malformed HTTP response head"),
        "{err}"
    );

    let (url, _) = peer(vec![b"HTTP/1.1 200 OK\r\n"]).await;
    let err = open(&url, None).await.unwrap_err();
    assert!(err.to_string().contains("closed before the response head"));

    static ENDLESS: std::sync::LazyLock<Vec<u8>> = std::sync::LazyLock::new(|| {
        let mut head = b"HTTP/1.1 200 OK\r\n".to_vec();
        head.extend_from_slice(b"x-filler: ");
        head.resize(head.len() + MAX_HEAD_BYTES, b'a');
        head
    });
    let (url, _) = peer(vec![ENDLESS.as_slice()]).await;
    let err = open(&url, None).await.unwrap_err();
    assert!(err.to_string().contains("head over"), "{err}");
}

#[tokio::test]
async fn nothing_listening_is_a_connect_failure() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = Url::parse(&format!("http://{}/", listener.local_addr().unwrap())).unwrap();
    drop(listener);
    assert!(matches!(
        open(&url, None).await,
        Err(StreamFault::Connect(_))
    ));
}

#[tokio::test]
async fn the_body_keeps_a_small_buffer_once_a_burst_is_over() {
    let (mut server, client) = tokio::io::duplex(64 * 1024);
    let mut body = Body {
        io: Box::new(client),
        buf: BytesMut::new(),
        framing: Framing::ToClose,
        busy: false,
    };
    server.write_all(&[b'x'; 40 * 1024]).await.unwrap();
    let mut read = 0;
    while read < 40 * 1024 {
        read += body.next_chunk().await.unwrap().unwrap().len();
    }
    for _ in 0..2 {
        server.write_all(b"data: {}\n\n").await.unwrap();
        assert_eq!(
            &body.next_chunk().await.unwrap().unwrap()[..],
            b"data: {}\n\n"
        );
    }
    assert!(
        body.buf.capacity() <= IDLE_READ,
        "idle again: {} bytes held",
        body.buf.capacity()
    );
}

#[test]
fn framing_follows_the_headers() {
    // Chunked wins over a length, an encoding not ending in chunked reads to the close,
    // conflicting lengths are refused, a 204 has no body.
    let h = |pairs: &[(&'static str, &'static str)]| {
        let mut m = HeaderMap::new();
        for (k, v) in pairs {
            m.append(*k, HeaderValue::from_static(v));
        }
        m
    };
    let ok = http::StatusCode::OK;
    assert_eq!(
        Framing::of(
            ok,
            &h(&[
                ("transfer-encoding", "gzip, chunked"),
                ("content-length", "3")
            ])
        )
        .unwrap(),
        Framing::Chunked(Chunk::Size)
    );
    assert_eq!(
        Framing::of(ok, &h(&[("transfer-encoding", "gzip")])).unwrap(),
        Framing::ToClose
    );
    assert!(Framing::of(ok, &h(&[("content-length", "3"), ("content-length", "4")])).is_err());
    assert_eq!(
        Framing::of(http::StatusCode::NO_CONTENT, &h(&[])).unwrap(),
        Framing::Done
    );
}

#[tokio::test]
async fn a_switching_protocols_answer_is_final() {
    let (url, _) = peer(vec![b"HTTP/1.1 101 Switching Protocols\r\n\r\n"]).await;
    assert_eq!(open(&url, None).await.unwrap().status(), 101);
}

#[tokio::test]
async fn a_handshake_is_a_tls_failure_only_when_tls_was_spoken() {
    async fn https_peer(answer: &'static [u8]) -> Url {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            let (mut sock, _) = listener.accept().await.unwrap();
            let mut hello = [0u8; 512];
            let _ = sock.read(&mut hello).await;
            let _ = sock.write_all(answer).await;
        });
        Url::parse(&format!("https://localhost:{}/", addr.port())).unwrap()
    }
    // Closed before any TLS record: the connection failed, as the pool reports it.
    let closed = https_peer(b"").await;
    assert!(
        matches!(open(&closed, None).await, Err(StreamFault::Connect(_))),
        "closed at once"
    );
    // Something else than TLS answered: a TLS failure.
    let plain = https_peer(b"HTTP/1.1 400 Bad Request\r\n\r\n").await;
    assert!(
        matches!(open(&plain, None).await, Err(StreamFault::Tls(_))),
        "plain HTTP on the TLS port"
    );
}
