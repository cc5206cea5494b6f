//! The post of a direct call ([`crate::direct`]) without rmcp's generic HTTP code, for
//! upstreams without OAuth (those take rmcp's, through [`UpstreamHttp`](crate::oauth::UpstreamHttp),
//! which answers their challenges).
//!
//! rmcp's client parses the URL and builds the headers of every request anew, serialises the
//! request through its generic message types, and reads a JSON answer as any message a server
//! may send (untagged enums tried one after the other: for a small result, the largest part of
//! the upstream leg's own CPU time, see `docs/benchmarks.md`). Here the URL and the session's
//! headers are prepared once per session ([`Prepared`]), the request is written from the call's
//! parameters, and a JSON answer is read as what it must be, a response to `tools/call`; only
//! an answer that does not read as one is parsed as rmcp parses it.
//!
//! A plain-`http` upstream is posted to over the session's own connections, driven by the
//! calling task ([`crate::h1`]); others (`https`) through reqwest's client.
//!
//! The answers are those of rmcp's client: `202`/`204` accepted, `404` an expired session, an
//! SSE stream (each event bounded, as rmcp bounds them) or a JSON message (bounded), a JSON-RPC
//! error in a failed response's JSON body, and otherwise the status with the start of the body.

use std::borrow::Cow;
use std::collections::HashMap;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use futures::{Stream, StreamExt};
use reqwest::header::{HeaderMap, HeaderName, HeaderValue, ACCEPT, CONTENT_TYPE};
use rmcp::model::{
    CallToolRequestParams, CallToolResult, ErrorData, RequestId, ServerJsonRpcMessage, ServerResult,
};
use rmcp::transport::streamable_http_client::{
    HttpStatusError, StreamableHttpError, StreamableHttpPostResponse,
};
use serde::Deserialize;
use sse_stream::SseStream;

type HttpError = StreamableHttpError<reqwest::Error>;

/// Most bytes of a JSON answer (rmcp's limit).
const MAX_JSON: usize = 16 * 1024 * 1024;
/// Most bytes read of a failed response's body (rmcp's limit).
const MAX_ERROR_BODY: usize = 64 * 1024;
/// Most bytes of the body quoted in an error.
const QUOTED: usize = 512;

/// The URL and headers of a session's posts, prepared once.
#[derive(Debug)]
pub(crate) struct Prepared {
    url: reqwest::Url,
    headers: HeaderMap,
    session_id: Option<String>,
    /// The session's own connections, for a plain-`http` upstream.
    h1: Option<crate::h1::Connections>,
}

impl Prepared {
    /// The posts to `uri` on the session `session_id`, with the session's `custom` headers
    /// (`MCP-Protocol-Version` and the configured ones); `None` when the URL does not parse
    /// (rmcp's path reports that).
    pub(crate) fn new(
        uri: &str,
        session_id: Option<&str>,
        custom: &HashMap<HeaderName, HeaderValue>,
        allow_private: bool,
    ) -> Option<Self> {
        let url = reqwest::Url::parse(uri).ok()?;
        let mut headers = HeaderMap::with_capacity(custom.len() + 3);
        headers.insert(
            ACCEPT,
            HeaderValue::from_static("text/event-stream, application/json"),
        );
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        for (name, value) in custom {
            headers.insert(name.clone(), value.clone());
        }
        if let Some(id) = session_id {
            headers.insert("mcp-session-id", HeaderValue::from_str(id).ok()?);
        }
        Some(Self {
            h1: crate::h1::Connections::for_url(&url, allow_private),
            url,
            headers,
            session_id: session_id.map(str::to_string),
        })
    }
}

/// `tools/call` as it goes on the wire.
#[derive(serde::Serialize)]
struct CallRequest<'a> {
    jsonrpc: &'static str,
    id: &'a RequestId,
    method: &'static str,
    params: &'a CallToolRequestParams,
}

/// A JSON answer read as the response to a call: its id and result or error. Anything else
/// (a request, a notification, another result) fails to read as this.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CallAnswer {
    #[allow(dead_code)]
    jsonrpc: IgnoredVersion,
    id: RequestId,
    #[serde(default)]
    result: Option<CallToolResult>,
    #[serde(default)]
    error: Option<ErrorData>,
}

/// The `jsonrpc` member, which must be `"2.0"`.
struct IgnoredVersion;

impl<'de> Deserialize<'de> for IgnoredVersion {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let v = Cow::<'de, str>::deserialize(d)?;
        if v == "2.0" {
            Ok(Self)
        } else {
            Err(serde::de::Error::custom("jsonrpc must be \"2.0\""))
        }
    }
}

/// Members that make a result something other than a complete `CallToolResult` (a task, a
/// 2026-07-28 `input_required`): a body that names one anywhere is read as rmcp reads it.
const NOT_PLAIN: [&[u8]; 2] = [b"\"task\"", b"\"resultType\""];

/// Reads a JSON answer: as the response to a call when it plainly is one, else as rmcp reads
/// any message.
fn read_answer(body: &[u8]) -> Result<ServerJsonRpcMessage, serde_json::Error> {
    let plain = !NOT_PLAIN
        .iter()
        .any(|m| body.windows(m.len()).any(|w| w == *m));
    if let Some(answer) = plain
        .then(|| serde_json::from_slice::<CallAnswer>(body).ok())
        .flatten()
    {
        match (answer.result, answer.error) {
            (Some(result), None) => {
                return Ok(ServerJsonRpcMessage::response(
                    ServerResult::CallToolResult(result),
                    answer.id,
                ))
            }
            (None, Some(error)) => return Ok(ServerJsonRpcMessage::error(error, Some(answer.id))),
            _ => {}
        }
    }
    serde_json::from_slice::<ServerJsonRpcMessage>(body)
}

/// Posts `tools/call` with `params` under `id` and reads the answer (see the module docs).
pub(crate) async fn post_call(
    client: &reqwest::Client,
    prepared: &Prepared,
    id: &RequestId,
    params: &CallToolRequestParams,
    max_sse_event: usize,
) -> Result<StreamableHttpPostResponse, HttpError> {
    let body = serde_json::to_vec(&CallRequest {
        jsonrpc: "2.0",
        id,
        method: "tools/call",
        params,
    })?;
    let Answered {
        status,
        content_type,
        retry_after,
        answer,
    } = match &prepared.h1 {
        Some(conns) => send_own(conns, prepared, body).await?,
        None => send_pooled(client, prepared, body).await?,
    };
    let session = prepared.session_id.clone();
    if matches!(
        status,
        reqwest::StatusCode::ACCEPTED | reqwest::StatusCode::NO_CONTENT
    ) {
        return Ok(StreamableHttpPostResponse::Accepted);
    }
    if status == reqwest::StatusCode::NOT_FOUND && session.is_some() {
        return Err(StreamableHttpError::SessionExpired);
    }
    let is = |prefix: &str| {
        content_type
            .as_deref()
            .is_some_and(|ct| ct.as_bytes().starts_with(prefix.as_bytes()))
    };
    let json = is("application/json");
    let body = match answer {
        Answer::Stream(bytes) if status.is_success() => {
            let bytes = Bounded::new(bytes, max_sse_event);
            return Ok(StreamableHttpPostResponse::Sse(
                SseStream::from_bytes_stream(bytes).boxed(),
                session,
            ));
        }
        // A failed event stream: its start, for the error.
        Answer::Stream(bytes) => read_some(bytes, MAX_ERROR_BODY).await,
        Answer::Read(bytes) => bytes,
    };
    if !status.is_success() {
        return failed(body, status, json, session, retry_after);
    }
    if !json {
        return Err(StreamableHttpError::UnexpectedContentType(content_type));
    }
    match read_answer(&body) {
        Ok(message) => Ok(StreamableHttpPostResponse::Json(message, session)),
        Err(e) => Err(StreamableHttpError::UnexpectedServerResponse(Cow::Owned(
            format!(
                "the answer is not a JSON-RPC message ({e}): {}",
                quoted(&body)
            ),
        ))),
    }
}

/// Status, content type, `Retry-After` and body of an answer.
struct Answered {
    status: reqwest::StatusCode,
    content_type: Option<String>,
    retry_after: Option<String>,
    answer: Answer,
}

/// The first `Retry-After` value, as text (`HttpStatusError::new` bounds it, as rmcp's client
/// does).
fn retry_after_of(headers: &reqwest::header::HeaderMap) -> Option<String> {
    let value = headers.get(reqwest::header::RETRY_AFTER)?.to_str().ok()?;
    Some(value.to_string())
}

/// Posts `body` over the session's own connections ([`crate::h1`]).
async fn send_own(
    conns: &crate::h1::Connections,
    prepared: &Prepared,
    body: Vec<u8>,
) -> Result<Answered, HttpError> {
    let (parts, body) = conns
        .post(&prepared.headers, Bytes::from(body), MAX_JSON)
        .await
        .map_err(h1_error)?;
    let answer = match body {
        crate::h1::Body::Read(bytes) => Answer::Read(bytes),
        crate::h1::Body::Stream(incoming) => {
            Answer::Stream(boxed(http_body_util::BodyDataStream::new(incoming)))
        }
    };
    Ok(Answered {
        status: parts.status,
        content_type: content_type_of(&parts.headers),
        retry_after: retry_after_of(&parts.headers),
        answer,
    })
}

/// Posts `body` with reqwest's client (an `https` upstream).
async fn send_pooled(
    client: &reqwest::Client,
    prepared: &Prepared,
    body: Vec<u8>,
) -> Result<Answered, HttpError> {
    let response = client
        .post(prepared.url.clone())
        .headers(prepared.headers.clone())
        .body(body)
        .send()
        .await
        .map_err(StreamableHttpError::Client)?;
    let (status, content_type) = (response.status(), content_type_of(response.headers()));
    let retry_after = retry_after_of(response.headers());
    let answer = if is_sse(&content_type) {
        Answer::Stream(boxed(response.bytes_stream()))
    } else {
        Answer::Read(read_bounded(response, MAX_JSON).await?)
    };
    Ok(Answered {
        status,
        content_type,
        retry_after,
        answer,
    })
}

/// A failed response: the JSON-RPC error in its JSON body (the upstream's refusal, as rmcp
/// gives it); a `429`, or a `5xx` with a `Retry-After`, without one as rmcp's client reports
/// it (the status and `Retry-After`); else an error with its status and the start of its body.
fn failed(
    body: Bytes,
    status: reqwest::StatusCode,
    json: bool,
    session: Option<String>,
    retry_after: Option<String>,
) -> Result<StreamableHttpPostResponse, HttpError> {
    if body.len() > MAX_ERROR_BODY {
        return Err(StreamableHttpError::ResponseBodyTooLarge {
            max_size: MAX_ERROR_BODY,
        });
    }
    let auth = matches!(
        status,
        reqwest::StatusCode::UNAUTHORIZED | reqwest::StatusCode::FORBIDDEN
    );
    if json && !auth {
        if let Ok(message @ ServerJsonRpcMessage::Error(_)) =
            serde_json::from_slice::<ServerJsonRpcMessage>(&body)
        {
            return Ok(StreamableHttpPostResponse::Json(message, session));
        }
    }
    // A server error without a `Retry-After` keeps the start of its body, which says more.
    let busy = status == reqwest::StatusCode::TOO_MANY_REQUESTS
        || (status.is_server_error() && retry_after.is_some());
    if busy {
        return Err(StreamableHttpError::HttpStatus(HttpStatusError::new(
            status.as_u16(),
            retry_after,
        )));
    }
    Err(StreamableHttpError::UnexpectedServerResponse(Cow::Owned(
        format!("HTTP {status}: {}", quoted(&body)),
    )))
}

/// The start of `body` as text, for an error.
fn quoted(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(&body[..body.len().min(QUOTED)]);
    if body.len() > QUOTED {
        format!("{text}…")
    } else {
        text.into_owned()
    }
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// An answer's body: read whole, or an event stream.
enum Answer {
    Read(Bytes),
    Stream(futures::stream::BoxStream<'static, Result<Bytes, BoxError>>),
}

/// A byte stream of either client, its errors boxed.
fn boxed<S, E>(stream: S) -> futures::stream::BoxStream<'static, Result<Bytes, BoxError>>
where
    S: Stream<Item = Result<Bytes, E>> + Send + 'static,
    E: std::error::Error + Send + Sync + 'static,
{
    stream
        .map(|r| r.map_err(|e| Box::new(e) as BoxError))
        .boxed()
}

fn content_type_of(headers: &HeaderMap) -> Option<String> {
    headers
        .get(CONTENT_TYPE)
        .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
}

fn is_sse(content_type: &Option<String>) -> bool {
    content_type
        .as_deref()
        .is_some_and(|ct| ct.starts_with("text/event-stream"))
}

/// A failure of the session's own connections, as rmcp's client reports transport failures.
fn h1_error(e: crate::h1::H1Error) -> HttpError {
    match e {
        crate::h1::H1Error::TooLarge(max) => {
            StreamableHttpError::ResponseBodyTooLarge { max_size: max }
        }
        e => StreamableHttpError::Io(std::io::Error::other(e.to_string())),
    }
}

/// Up to `max` bytes of `stream` (the start of a failed answer).
async fn read_some(
    mut stream: futures::stream::BoxStream<'static, Result<Bytes, BoxError>>,
    max: usize,
) -> Bytes {
    let mut all = Vec::new();
    while let Some(Ok(chunk)) = stream.next().await {
        all.extend_from_slice(&chunk);
        if all.len() >= max {
            all.truncate(max);
            break;
        }
    }
    Bytes::from(all)
}

/// The body of `response`, failing past `max` bytes.
async fn read_bounded(response: reqwest::Response, max: usize) -> Result<Bytes, HttpError> {
    if response.content_length().is_some_and(|n| n > max as u64) {
        return Err(StreamableHttpError::ResponseBodyTooLarge { max_size: max });
    }
    let mut stream = response.bytes_stream();
    let Some(first) = stream.next().await else {
        return Ok(Bytes::new());
    };
    let first = first.map_err(StreamableHttpError::Client)?;
    // Most answers come in one piece: no copy.
    let Some(second) = stream.next().await else {
        return Ok(first);
    };
    let mut all = Vec::from(first);
    let mut next = Some(second);
    while let Some(chunk) = next {
        let chunk = chunk.map_err(StreamableHttpError::Client)?;
        if all.len() + chunk.len() > max {
            return Err(StreamableHttpError::ResponseBodyTooLarge { max_size: max });
        }
        all.extend_from_slice(&chunk);
        next = stream.next().await;
    }
    if all.len() > max {
        return Err(StreamableHttpError::ResponseBodyTooLarge { max_size: max });
    }
    Ok(Bytes::from(all))
}

/// A byte stream of SSE that fails when one event (the bytes since the last blank line)
/// grows past `max`.
struct Bounded<S> {
    inner: S,
    max: usize,
    /// Bytes since the last event boundary.
    pending: usize,
    /// The last bytes seen, to find a boundary split across chunks.
    tail: [u8; 3],
    failed: bool,
}

impl<S> Bounded<S> {
    fn new(inner: S, max: usize) -> Self {
        Self {
            inner,
            max,
            pending: 0,
            tail: [0; 3],
            failed: false,
        }
    }

    /// Counts `chunk`; false when an event grew past the limit.
    fn admit(&mut self, chunk: &[u8]) -> bool {
        let mut last_end = None;
        let mut window = self.tail;
        for (i, &b) in chunk.iter().enumerate() {
            let boundary = match b {
                b'\n' => window[2] == b'\n' || (window[1] == b'\n' && window[2] == b'\r'),
                // `\r\r`, and `\n\r`: a line ended by LF, then an empty one by CR.
                b'\r' => window[2] == b'\r' || window[2] == b'\n',
                _ => false,
            };
            if boundary {
                last_end = Some(i + 1);
            }
            window = [window[1], window[2], b];
        }
        self.tail = window;
        self.pending = match last_end {
            Some(end) => chunk.len() - end,
            None => self.pending + chunk.len(),
        };
        self.pending <= self.max
    }
}

/// Why an answer stream's bytes stopped.
#[derive(Debug, thiserror::Error)]
enum StreamError {
    #[error(transparent)]
    Read(BoxError),
    #[error("an event of the answer stream exceeded the maximum size of {0} bytes")]
    EventTooLarge(usize),
}

impl<S> Stream for Bounded<S>
where
    S: Stream<Item = Result<Bytes, BoxError>> + Unpin,
{
    type Item = Result<Bytes, StreamError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        if self.failed {
            return Poll::Ready(None);
        }
        match std::task::ready!(self.inner.poll_next_unpin(cx)) {
            Some(Ok(chunk)) => {
                if self.admit(&chunk) {
                    Poll::Ready(Some(Ok(chunk)))
                } else {
                    self.failed = true;
                    Poll::Ready(Some(Err(StreamError::EventTooLarge(self.max))))
                }
            }
            Some(Err(e)) => Poll::Ready(Some(Err(StreamError::Read(e)))),
            None => Poll::Ready(None),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_call_answer_reads_as_the_generic_parse_does() {
        let answers = [
            json!({"jsonrpc": "2.0", "id": "ts-1", "result": {"content": [{"type": "text", "text": "hi"}]}}),
            json!({"jsonrpc": "2.0", "id": 7, "result": {"content": [
                {"type": "image", "data": "aGk=", "mimeType": "image/png", "annotations": {"priority": 0.5}},
                {"type": "resource_link", "uri": "file:///a", "name": "a"}],
                "structuredContent": {"a": 1}, "isError": false, "_meta": {"k": "v"}}}),
            json!({"jsonrpc": "2.0", "id": "ts-2", "error": {"code": -32602, "message": "bad", "data": {"x": 1}}}),
            // not a call's answer: read as rmcp reads it
            json!({"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": "x"}}),
            json!({"jsonrpc": "2.0", "id": "ts-3", "result": {"content": [], "task": {"taskId": "t"}}}),
        ];
        for a in answers {
            let body = serde_json::to_vec(&a).unwrap();
            let lean = read_answer(&body).unwrap();
            let generic = serde_json::from_slice::<ServerJsonRpcMessage>(&body).unwrap();
            assert_eq!(
                serde_json::to_value(&lean).unwrap(),
                serde_json::to_value(&generic).unwrap(),
                "{a}"
            );
        }
        assert!(read_answer(b"{\"jsonrpc\":\"1.0\",\"id\":1,\"result\":{}}").is_err());
        assert!(read_answer(b"not json").is_err());
    }

    #[test]
    fn the_request_is_a_plain_tools_call() {
        let mut params = CallToolRequestParams::new("echo");
        params.arguments = Some(json!({"text": "hi"}).as_object().unwrap().clone());
        let id = RequestId::String("ts-9".into());
        let sent = serde_json::to_value(CallRequest {
            jsonrpc: "2.0",
            id: &id,
            method: "tools/call",
            params: &params,
        })
        .unwrap();
        assert_eq!(
            sent,
            json!({"jsonrpc": "2.0", "id": "ts-9", "method": "tools/call",
                "params": {"name": "echo", "arguments": {"text": "hi"}}})
        );
    }

    #[test]
    fn an_event_is_bounded_however_the_stream_is_cut() {
        let mut b = Bounded::new(futures::stream::empty::<Result<Bytes, BoxError>>(), 8);
        assert!(b.admit(b"data: 1\n"));
        assert!(b.admit(b"\ndata: 22"), "a boundary split across chunks");
        assert_eq!(b.pending, 8);
        assert!(b.admit(b"\r\n\r\n"));
        assert_eq!(b.pending, 0);
        assert!(!b.admit(b"data: 123456789"), "one event past the limit");
        let mut b = Bounded::new(futures::stream::empty::<Result<Bytes, BoxError>>(), 8);
        assert!(b.admit(b"data: 1\n\ndata: 2\n\ndata"));
        assert_eq!(b.pending, 4);
        let mut b = Bounded::new(futures::stream::empty::<Result<Bytes, BoxError>>(), 8);
        assert!(b.admit(b"data: 1\n\rdata: 22"), "LF then CR ends an event");
        assert_eq!(b.pending, 8);
    }
}
