//! A session's own HTTP/1.1 connections to a plain-`http` upstream, each driven by the task of
//! the call that uses it ([`lean`](crate::lean) posts direct calls over them).
//!
//! A pooled client (reqwest's, hyper's) runs every connection in a task of its own: a call
//! hands its request to that task and is woken with the answer, two hand-overs between tasks
//! (often between threads) per call. Here a call takes an idle connection out of the session's
//! pool, polls the connection itself while it writes the request and reads the answer, and puts
//! it back: one task does it all. An answer that streams (SSE) is read by the call after the
//! connection was handed to a task of its own, and that connection is not reused.
//!
//! Only what the guarded client would reach is reached: the host is resolved at each new
//! connection, the addresses [`AddressRule`] refuses (private, loopback and the like, unless the
//! source allows private addresses) are dropped, as the guarded resolver drops them, and the
//! others are tried in turn. A connection that closed while idle is found closed when taken and
//! dropped; one that closes before the request was written is dropped too, which hands the
//! request back unsent (hyper's "canceled"), and the request goes once more on a new
//! connection. A connection whose answer was not read to its end is never reused.

use std::net::SocketAddr;
use std::sync::Mutex;
use std::time::Duration;

use bytes::Bytes;
use futures::FutureExt;
use http::header::HOST;
use http::{HeaderMap, HeaderValue, Method, Request, Response, Uri};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::client::conn::http1;
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;
use toolshed_outbound::net::AddressRule;

/// Most idle connections a session keeps.
const MAX_IDLE: usize = 32;
/// How long a new connection may take to open.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Why a post over [`Connections`] failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum H1Error {
    #[error("cannot resolve {host}: {source}")]
    Resolve {
        host: String,
        source: std::io::Error,
    },
    #[error("{host} resolves to no address")]
    NoAddress { host: String },
    #[error("{host} resolves to {addr}, a {class} address, which this source may not reach (allow_private)")]
    Refused {
        host: String,
        addr: std::net::IpAddr,
        class: &'static str,
    },
    #[error("connecting to {addr} failed: {source}")]
    Connect {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("connecting to {0} timed out")]
    ConnectTimeout(SocketAddr),
    #[error("HTTP/1.1: {0}")]
    Http(#[from] hyper::Error),
    #[error("the answer's body exceeded {0} bytes")]
    TooLarge(usize),
}

/// One connection: its request half and the connection future that does its reading and
/// writing when polled.
struct Conn {
    sender: http1::SendRequest<Full<Bytes>>,
    /// `None` once it finished (the connection closed): dropping it hands requests not yet
    /// written back as canceled.
    conn: Option<Connection>,
}

/// The body of an answer: read whole (JSON, errors), or streaming (SSE) with its connection in
/// a task of its own.
#[derive(Debug)]
pub(crate) enum Body {
    Read(Bytes),
    Stream(Incoming),
}

/// A session's connections to one plain-`http` origin.
pub(crate) struct Connections {
    host: String,
    port: u16,
    /// The `Host` header.
    authority: HeaderValue,
    /// The request target (path and query).
    target: Uri,
    rule: AddressRule,
    idle: Mutex<Vec<Conn>>,
}

impl std::fmt::Debug for Connections {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connections")
            .field("host", &self.host)
            .field("port", &self.port)
            .finish_non_exhaustive()
    }
}

impl Connections {
    /// Connections for posts to `url`; `None` unless it is a plain `http` URL.
    pub(crate) fn for_url(url: &reqwest::Url, allow_private: bool) -> Option<Self> {
        if url.scheme() != "http" || !url.username().is_empty() || url.password().is_some() {
            return None;
        }
        let host = url.host_str()?.to_string();
        let port = url.port_or_known_default()?;
        let authority = match url.port() {
            Some(p) => format!("{host}:{p}"),
            None => host.clone(),
        };
        let target = match url.query() {
            Some(q) => format!("{}?{q}", url.path()),
            None => url.path().to_string(),
        };
        Some(Self {
            host: host
                .trim_start_matches('[')
                .trim_end_matches(']')
                .to_string(),
            port,
            authority: HeaderValue::from_str(&authority).ok()?,
            target: target.parse().ok()?,
            rule: AddressRule::new(allow_private),
            idle: Mutex::new(Vec::new()),
        })
    }

    fn idle(&self) -> std::sync::MutexGuard<'_, Vec<Conn>> {
        self.idle.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Posts `body` with `headers` and answers the status, the headers and the body: read whole
    /// up to `max` bytes unless the answer is an event stream.
    pub(crate) async fn post(
        &self,
        headers: &HeaderMap,
        body: Bytes,
        max: usize,
    ) -> Result<(http::response::Parts, Body), H1Error> {
        let mut resent = false;
        loop {
            // A request sent again goes on a new connection.
            let mut c = if resent {
                self.dial().await?
            } else {
                self.take().await?
            };
            let mut request = Request::new(Full::new(body.clone()));
            *request.method_mut() = Method::POST;
            *request.uri_mut() = self.target.clone();
            let h = request.headers_mut();
            h.reserve(headers.len() + 1);
            if !headers.contains_key(HOST) {
                h.insert(HOST, self.authority.clone());
            }
            for (name, value) in headers {
                h.append(name, value.clone());
            }
            match c.exchange(request).await {
                Ok(response) => return self.answer(c, response, max).await,
                // Never written: the connection closed first. Once more, on a new one.
                Err(H1Error::Http(e)) if e.is_canceled() && !resent => resent = true,
                Err(e) => return Err(e),
            }
        }
    }

    /// Reads the answer's body (unless it streams) and puts the connection back.
    async fn answer(
        &self,
        mut c: Conn,
        response: Response<Incoming>,
        max: usize,
    ) -> Result<(http::response::Parts, Body), H1Error> {
        let (parts, incoming) = response.into_parts();
        let content_type = parts.headers.get(http::header::CONTENT_TYPE);
        let is = |prefix: &[u8]| content_type.is_some_and(|v| v.as_bytes().starts_with(prefix));
        if is(b"text/event-stream") {
            // Read as it comes, for as long as it lasts: the connection runs on its own and
            // closes when the stream ends.
            if let Some(conn) = c.conn.take() {
                tokio::spawn(async move {
                    let _ = conn.await;
                });
            }
            return Ok((parts, Body::Stream(incoming)));
        }
        if parts.status.is_success() && !is(b"application/json") {
            // Neither of the answers a post may have: not read (the connection goes with it).
            return Ok((parts, Body::Read(Bytes::new())));
        }
        let bytes = c.read_body(incoming, max).await?;
        if c.conn.is_some() {
            let mut idle = self.idle();
            if idle.len() < MAX_IDLE {
                idle.push(c);
            }
        }
        Ok((parts, Body::Read(bytes)))
    }

    /// An idle connection ready for a request, else a new one.
    async fn take(&self) -> Result<Conn, H1Error> {
        loop {
            let Some(mut c) = self.idle().pop() else {
                return self.dial().await;
            };
            if c.ready().await {
                return Ok(c);
            }
        }
    }

    /// A new connection to the first address of the host that answers, among those the
    /// address rule allows.
    async fn dial(&self) -> Result<Conn, H1Error> {
        let addrs: Vec<SocketAddr> = match self.host.parse::<std::net::IpAddr>() {
            Ok(ip) => vec![SocketAddr::new(ip, self.port)],
            Err(_) => tokio::net::lookup_host((self.host.as_str(), self.port))
                .await
                .map_err(|source| H1Error::Resolve {
                    host: self.host.clone(),
                    source,
                })?
                .collect(),
        };
        let mut first_refused = None;
        let allowed: Vec<SocketAddr> = addrs
            .into_iter()
            .filter(|a| match self.rule.refusal(a.ip()) {
                None => true,
                Some(class) => {
                    first_refused.get_or_insert((a.ip(), class));
                    false
                }
            })
            .collect();
        if let (true, Some((addr, class))) = (allowed.is_empty(), first_refused) {
            return Err(H1Error::Refused {
                host: self.host.clone(),
                addr,
                class,
            });
        }
        let mut failure = H1Error::NoAddress {
            host: self.host.clone(),
        };
        let mut opened = None;
        for addr in allowed {
            match tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(addr)).await {
                Ok(Ok(stream)) => {
                    opened = Some(stream);
                    break;
                }
                Ok(Err(source)) => failure = H1Error::Connect { addr, source },
                Err(_) => failure = H1Error::ConnectTimeout(addr),
            }
        }
        let stream = opened.ok_or(failure)?;
        let _ = stream.set_nodelay(true);
        let (sender, conn) = http1::handshake(TokioIo::new(stream)).await?;
        Ok(Conn {
            sender,
            conn: Some(conn),
        })
    }
}

type Connection = http1::Connection<TokioIo<TcpStream>, Full<Bytes>>;

/// Polls the connection in `slot` until it finished (closed or failed), then drops it. Pending
/// until then, and for ever on an empty slot.
async fn drive(slot: &mut Option<Connection>) -> Result<(), H1Error> {
    let Some(conn) = slot.as_mut() else {
        return std::future::pending().await;
    };
    let r = conn.await;
    *slot = None;
    Ok(r?)
}

impl Conn {
    /// Whether the connection can take a request now: it is driven until it can, and found
    /// closed when the upstream closed it while it was idle.
    async fn ready(&mut self) -> bool {
        // Whatever the connection has to read first (the upstream's close) is read now.
        if drive(&mut self.conn).now_or_never().is_some() {
            return false;
        }
        tokio::select! {
            biased;
            r = self.sender.ready() => r.is_ok() && self.conn.is_some(),
            _ = drive(&mut self.conn) => false,
        }
    }

    /// Sends `request` and drives the connection until the answer's head came.
    async fn exchange(
        &mut self,
        request: Request<Full<Bytes>>,
    ) -> Result<Response<Incoming>, H1Error> {
        let answer = self.sender.send_request(request);
        tokio::pin!(answer);
        tokio::select! {
            biased;
            r = &mut answer => Ok(r?),
            r = drive(&mut self.conn) => {
                // The connection ended first, and was dropped: the request's own outcome
                // says how (canceled when it was never written).
                match (answer.await, r) {
                    (Ok(response), _) => Ok(response),
                    (Err(e), _) if e.is_canceled() => Err(e.into()),
                    (Err(_), Err(closed)) => Err(closed),
                    (Err(e), Ok(())) => Err(e.into()),
                }
            }
        }
    }

    /// Reads `body` whole, driving the connection meanwhile; fails past `max` bytes.
    async fn read_body(&mut self, mut body: Incoming, max: usize) -> Result<Bytes, H1Error> {
        let mut first: Option<Bytes> = None;
        let mut all: Vec<u8> = Vec::new();
        loop {
            let frame = tokio::select! {
                biased;
                f = body.frame() => f,
                r = drive(&mut self.conn) => {
                    r?;
                    body.frame().await
                }
            };
            let Some(frame) = frame else { break };
            let Ok(data) = frame?.into_data() else {
                continue;
            };
            let len = first.as_ref().map_or(0, Bytes::len) + all.len() + data.len();
            if len > max {
                return Err(H1Error::TooLarge(max));
            }
            match first.take() {
                None if all.is_empty() => first = Some(data),
                None => all.extend_from_slice(&data),
                Some(f) => {
                    all.extend_from_slice(&f);
                    all.extend_from_slice(&data);
                }
            }
        }
        // Most answers come in one piece: no copy.
        Ok(first.unwrap_or_else(|| Bytes::from(all)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_plain_http_urls_get_connections() {
        let of = |u: &str| Connections::for_url(&reqwest::Url::parse(u).unwrap(), false);
        let c = of("http://127.0.0.1:8080/mcp?x=1").unwrap();
        assert_eq!(c.authority, "127.0.0.1:8080");
        assert_eq!(c.target, "/mcp?x=1");
        let c = of("http://[::1]/mcp").unwrap();
        assert_eq!((c.host.as_str(), c.port), ("::1", 80));
        assert_eq!(c.authority, "[::1]");
        assert!(of("https://example.com/mcp").is_none());
        assert!(of("http://user:pw@example.com/mcp").is_none());
    }

    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// A raw HTTP/1.1 server answering each POST with `answer` (after reading its body);
    /// `close_after` closes each connection after its first answer, without saying so, and
    /// `idle_close` when it was idle that long (an upstream's keep-alive timeout). Counts the
    /// connections.
    async fn server(answer: &'static str, close_after: bool) -> (String, Arc<AtomicUsize>) {
        server_closing(answer, close_after, None).await
    }

    async fn server_closing(
        answer: &'static str,
        close_after: bool,
        idle_close: Option<Duration>,
    ) -> (String, Arc<AtomicUsize>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/mcp", listener.local_addr().unwrap());
        let count = Arc::new(AtomicUsize::new(0));
        let counted = count.clone();
        tokio::spawn(async move {
            loop {
                let (mut s, _) = listener.accept().await.unwrap();
                counted.fetch_add(1, Ordering::SeqCst);
                tokio::spawn(async move {
                    let mut buf = Vec::new();
                    loop {
                        let mut chunk = [0u8; 4096];
                        let read = s.read(&mut chunk);
                        let n = match idle_close {
                            Some(idle) => match tokio::time::timeout(idle, read).await {
                                Ok(r) => r.unwrap_or(0),
                                Err(_) => return,
                            },
                            None => read.await.unwrap_or(0),
                        };
                        if n == 0 {
                            return;
                        }
                        buf.extend_from_slice(&chunk[..n]);
                        let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") else {
                            continue;
                        };
                        let head = String::from_utf8_lossy(&buf[..end]).to_lowercase();
                        let len: usize = head
                            .lines()
                            .find_map(|l| l.strip_prefix("content-length: "))
                            .map_or(0, |v| v.trim().parse().unwrap());
                        if buf.len() < end + 4 + len {
                            continue;
                        }
                        buf.drain(..end + 4 + len);
                        s.write_all(answer.as_bytes()).await.unwrap();
                        if close_after {
                            return;
                        }
                    }
                });
            }
        });
        (url, count)
    }

    const JSON: &str =
        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 8\r\n\r\n{\"ok\":1}";

    fn conns(url: &str) -> Connections {
        Connections::for_url(&reqwest::Url::parse(url).unwrap(), true).unwrap()
    }

    async fn post(c: &Connections) -> Result<(http::response::Parts, Body), H1Error> {
        c.post(&HeaderMap::new(), Bytes::from_static(b"{}"), 1024)
            .await
    }

    #[tokio::test]
    async fn a_connection_is_reused_and_replaced_when_it_closed() {
        let (url, count) = server(JSON, false).await;
        let c = conns(&url);
        for _ in 0..3 {
            let (parts, body) = post(&c).await.unwrap();
            assert_eq!(parts.status, 200);
            assert!(matches!(body, Body::Read(b) if b == "{\"ok\":1}"));
        }
        assert_eq!(
            count.load(Ordering::SeqCst),
            1,
            "one connection for all three"
        );

        // The upstream closes each connection after answering: the next call opens another.
        let (url, count) = server(JSON, true).await;
        let c = conns(&url);
        for _ in 0..3 {
            let (parts, _) = post(&c).await.unwrap();
            assert_eq!(parts.status, 200);
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(count.load(Ordering::SeqCst), 3);
    }

    #[tokio::test]
    async fn a_connection_the_upstream_closed_while_idle_is_not_used() {
        // The upstream closes a connection idle for 50 ms; the next call comes after 200 ms,
        // once the close arrived, and finds it closed.
        let (url, count) = server_closing(JSON, false, Some(Duration::from_millis(50))).await;
        let c = conns(&url);
        for _ in 0..3 {
            let answered = tokio::time::timeout(Duration::from_secs(5), post(&c)).await;
            let (parts, _) = answered.expect("no call hangs").unwrap();
            assert_eq!(parts.status, 200);
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        assert_eq!(count.load(Ordering::SeqCst), 3);
    }

    #[tokio::test]
    async fn large_bodies_are_refused_and_streams_are_streamed() {
        let big: &'static str = Box::leak(
            format!(
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2000\r\n\r\n{}",
                "x".repeat(2000)
            )
            .into_boxed_str(),
        );
        let (url, _) = server(big, false).await;
        assert!(matches!(
            post(&conns(&url)).await,
            Err(H1Error::TooLarge(1024))
        ));

        let sse = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n7\r\ndata: 1\r\n2\r\n\n\n\r\n0\r\n\r\n";
        let (url, _) = server(sse, false).await;
        let (_, body) = post(&conns(&url)).await.unwrap();
        let Body::Stream(incoming) = body else {
            panic!("not streamed")
        };
        let all = incoming.collect().await.unwrap().to_bytes();
        assert_eq!(all, "data: 1\n\n");
    }

    #[tokio::test]
    async fn refused_addresses_are_not_dialed() {
        let c = Connections::for_url(
            &reqwest::Url::parse("http://127.0.0.1:9/mcp").unwrap(),
            false,
        )
        .unwrap();
        let e = c
            .post(&HeaderMap::new(), Bytes::new(), 10)
            .await
            .unwrap_err();
        assert!(matches!(e, H1Error::Refused { .. }), "{e}");
    }
}
