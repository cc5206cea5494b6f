//! Sending a request to a configured endpoint: retries, the stream, and errors without keys.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use futures::StreamExt;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use toolshed_outbound::net::{AddressRule, GuardedResolver};
use toolshed_outbound::secret::redact;

use crate::sse::SseParser;
use crate::{anthropic, openai, ChatRequest, Completion, Endpoint, ModelError, Provider};

/// Largest streamed answer read, in bytes: a server that never stops is cut off, and a
/// run's stored journal stays bounded.
pub const MAX_STREAM_BYTES: usize = 8 * 1024 * 1024;

/// How failed requests are tried again.
#[derive(Debug, Clone, Copy)]
pub struct RetryPolicy {
    /// Attempts in all, the first included.
    pub attempts: u32,
    /// The first backoff; doubled after each failure.
    pub base: Duration,
    /// The longest wait, whatever `Retry-After` asks.
    pub max_wait: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            attempts: 4,
            base: Duration::from_millis(500),
            max_wait: Duration::from_secs(30),
        }
    }
}

struct Configured {
    endpoint: Endpoint,
    client: reqwest::Client,
}

/// The model endpoints: the configured ones, and those put at runtime. Cheap to clone; clones
/// share the endpoints.
#[derive(Clone, Default)]
pub struct Models {
    endpoints: Arc<RwLock<HashMap<String, Arc<Configured>>>>,
    retry: RetryPolicy,
}

impl std::fmt::Debug for Models {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Models")
            .field("endpoints", &self.ids())
            .finish()
    }
}

/// A client for endpoint `e`: its base URL must parse and the address rule must allow it.
fn configure(e: Endpoint) -> Result<Configured, ModelError> {
    let config = |message: String| ModelError::Config {
        id: e.id.clone(),
        message,
    };
    let url = url::Url::parse(&e.base_url)
        .map_err(|err| config(format!("base_url is not a URL: {err}")))?;
    toolshed_outbound::net::check_url(&url, e.allow_private)
        .map_err(|err| config(err.to_string()))?;
    let client = reqwest::Client::builder()
        .no_proxy()
        .redirect(reqwest::redirect::Policy::none())
        .connect_timeout(e.timeout.min(Duration::from_secs(10)))
        .timeout(e.timeout)
        .dns_resolver(GuardedResolver::new(AddressRule::new(e.allow_private)))
        .build()
        .map_err(|err| config(err.to_string()))?;
    Ok(Configured {
        endpoint: e,
        client,
    })
}

impl Models {
    /// Clients for `endpoints`; `Err` names an endpoint whose URL cannot be used.
    pub fn new(endpoints: Vec<Endpoint>) -> Result<Self, ModelError> {
        let mut map = HashMap::new();
        for e in endpoints {
            map.insert(e.id.clone(), Arc::new(configure(e)?));
        }
        Ok(Self {
            endpoints: Arc::new(RwLock::new(map)),
            retry: RetryPolicy::default(),
        })
    }

    /// Checks an endpoint as [`Models::new`] and [`Models::put`] do, without keeping it: its
    /// base URL parses and the address rule allows it.
    pub fn check(e: &Endpoint) -> Result<(), ModelError> {
        configure(e.clone()).map(|_| ())
    }

    /// Adds or replaces endpoint `e.id` (a runtime endpoint); `Err` when its URL cannot be used.
    pub fn put(&self, e: Endpoint) -> Result<(), ModelError> {
        let c = Arc::new(configure(e)?);
        self.write().insert(c.endpoint.id.clone(), c);
        Ok(())
    }

    /// Removes endpoint `id`.
    pub fn remove(&self, id: &str) {
        self.write().remove(id);
    }

    /// The endpoints' ids, sorted.
    pub fn ids(&self) -> Vec<String> {
        let mut ids: Vec<String> = self.read().keys().cloned().collect();
        ids.sort();
        ids
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, HashMap<String, Arc<Configured>>> {
        self.endpoints.read().unwrap_or_else(|p| p.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, HashMap<String, Arc<Configured>>> {
        self.endpoints.write().unwrap_or_else(|p| p.into_inner())
    }

    /// The same endpoints under another retry policy.
    pub fn with_retry(mut self, retry: RetryPolicy) -> Self {
        self.retry = retry;
        self
    }

    /// Whether endpoint `id` exists.
    pub fn has(&self, id: &str) -> bool {
        self.read().contains_key(id)
    }

    /// Endpoint `id`.
    pub fn endpoint(&self, id: &str) -> Option<Endpoint> {
        self.read().get(id).map(|c| c.endpoint.clone())
    }

    /// Sends `req` to endpoint `id` and reads the streamed answer; text deltas go to `on_text`
    /// as they arrive. A retried attempt may deliver text again: deltas are progress, the
    /// returned [`Completion`] is the answer.
    pub async fn complete(
        &self,
        id: &str,
        req: &ChatRequest,
        on_text: &mut (dyn FnMut(&str) + Send),
    ) -> Result<Completion, ModelError> {
        let c = self
            .read()
            .get(id)
            .cloned()
            .ok_or_else(|| ModelError::Config {
                id: id.to_string(),
                message: "no such model credential is configured ([models.<id>])".into(),
            })?;
        let c = c.as_ref();
        if let Some(reason) = &c.endpoint.unavailable {
            return Err(ModelError::Config {
                id: id.to_string(),
                message: reason.clone(),
            });
        }
        let mut attempt = 0;
        loop {
            attempt += 1;
            match self.attempt(c, req, on_text).await {
                Ok(done) => return Ok(done),
                Err((e, after)) if e.retryable() && attempt < self.retry.attempts => {
                    let backoff = self.retry.base * 2u32.saturating_pow(attempt - 1);
                    let wait = after.unwrap_or(backoff).min(self.retry.max_wait);
                    tracing::warn!(model = %req.model, attempt, error = %e, wait_ms = wait.as_millis() as u64, "model request failed; trying again");
                    tokio::time::sleep(wait).await;
                }
                Err((e, _)) => return Err(e),
            }
        }
    }

    /// One attempt; `Err` carries the wait the server asked for (`Retry-After`).
    async fn attempt(
        &self,
        c: &Configured,
        req: &ChatRequest,
        on_text: &mut (dyn FnMut(&str) + Send),
    ) -> Result<Completion, (ModelError, Option<Duration>)> {
        let e = &c.endpoint;
        let base = e.base_url.trim_end_matches('/');
        let (url, body) = match e.provider {
            Provider::Openai => (format!("{base}/chat/completions"), openai::body(req)),
            Provider::Anthropic => (format!("{base}/v1/messages"), anthropic::body(req)),
        };
        let keys: Vec<&str> = e.api_key.iter().map(|k| k.expose()).collect();
        let scrub = |s: String| redact(&s, &keys);
        let model = req.model.clone();
        let transport = |err: reqwest::Error| {
            let err = err.without_url();
            let e = if err.is_timeout() {
                ModelError::Timeout {
                    model: model.clone(),
                    seconds: c.endpoint.timeout.as_secs(),
                }
            } else {
                ModelError::Transport {
                    model: model.clone(),
                    message: scrub(describe(&err)),
                }
            };
            (e, None)
        };
        let resp = c
            .client
            .post(&url)
            .headers(headers(e))
            .json(&body)
            .send()
            .await
            .map_err(transport)?;
        let status = resp.status();
        if !status.is_success() {
            let after = retry_after(resp.headers());
            let text = resp.text().await.unwrap_or_default();
            let message = error_text(e.provider, &text);
            return Err((
                ModelError::Status {
                    model: model.clone(),
                    status: status.as_u16(),
                    message: scrub(message),
                },
                after,
            ));
        }
        let broken = |message: String| {
            (
                ModelError::Stream {
                    model: model.clone(),
                    message: scrub(message),
                },
                None,
            )
        };
        let mut parser = SseParser::default();
        let mut bytes = resp.bytes_stream();
        let mut oa = openai::Stream::default();
        let mut an = anthropic::Stream::default();
        let mut feed = |ev: &crate::sse::SseEvent| match e.provider {
            Provider::Openai => oa.event(ev, on_text),
            Provider::Anthropic => an.event(ev, on_text),
        };
        let mut received = 0usize;
        while let Some(chunk) = bytes.next().await {
            let chunk = chunk.map_err(transport)?;
            received += chunk.len();
            if received > MAX_STREAM_BYTES {
                return Err(broken(format!(
                    "the answer's stream passed {MAX_STREAM_BYTES} bytes"
                )));
            }
            for ev in parser.push(&chunk).map_err(broken)? {
                feed(&ev).map_err(broken)?;
            }
        }
        if let Some(ev) = parser.finish() {
            feed(&ev).map_err(broken)?;
        }
        let done = match e.provider {
            Provider::Openai => oa.done,
            Provider::Anthropic => an.done,
        };
        if !done {
            return Err((
                ModelError::Transport {
                    model,
                    message: "the stream ended before the answer was complete".into(),
                },
                None,
            ));
        }
        Ok(match e.provider {
            Provider::Openai => oa.finish(),
            Provider::Anthropic => an.finish(),
        })
    }
}

fn headers(e: &Endpoint) -> HeaderMap {
    let mut h = HeaderMap::new();
    let mut put = |name: &str, value: &str| {
        if let (Ok(n), Ok(mut v)) = (
            HeaderName::from_bytes(name.as_bytes()),
            HeaderValue::from_str(value),
        ) {
            v.set_sensitive(true);
            h.insert(n, v);
        }
    };
    for (k, v) in &e.headers {
        put(k, v);
    }
    match (e.provider, &e.api_key) {
        (Provider::Openai, Some(k)) => put("authorization", &format!("Bearer {}", k.expose())),
        (Provider::Anthropic, Some(k)) => put("x-api-key", k.expose()),
        (_, None) => {}
    }
    if e.provider == Provider::Anthropic {
        put("anthropic-version", anthropic::API_VERSION);
    }
    put("accept", "text/event-stream");
    h
}

/// `retry-after-ms` (milliseconds) or `Retry-After` (seconds).
fn retry_after(h: &HeaderMap) -> Option<Duration> {
    let read = |name: &str| h.get(name)?.to_str().ok()?.trim().parse::<f64>().ok();
    if let Some(ms) = read("retry-after-ms").filter(|v| *v >= 0.0) {
        return Some(Duration::from_secs_f64(ms / 1000.0));
    }
    read("retry-after")
        .filter(|v| *v >= 0.0)
        .map(Duration::from_secs_f64)
}

/// The provider's error message from a body, cut to 500 characters.
fn error_text(provider: Provider, body: &str) -> String {
    let message = match serde_json::from_str::<serde_json::Value>(body) {
        Ok(v) => match provider {
            Provider::Openai => v
                .get("error")
                .map(openai::error_message)
                .unwrap_or_else(|| v.to_string()),
            Provider::Anthropic => anthropic::error_message(&v),
        },
        Err(_) => body.to_string(),
    };
    let message = message.trim();
    match message.char_indices().nth(500) {
        Some((at, _)) => format!("{}…", &message[..at]),
        None if message.is_empty() => "(no body)".into(),
        None => message.to_string(),
    }
}

fn describe(e: &reqwest::Error) -> String {
    use std::error::Error;
    let mut out = e.to_string();
    let mut cur = e.source();
    while let Some(s) = cur {
        let t = s.to_string();
        if !out.contains(&t) {
            out.push_str(": ");
            out.push_str(&t);
        }
        cur = s.source();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_reads_both_headers() {
        let mut h = HeaderMap::new();
        h.insert("retry-after", HeaderValue::from_static("2"));
        assert_eq!(retry_after(&h), Some(Duration::from_secs(2)));
        h.insert("retry-after-ms", HeaderValue::from_static("150"));
        assert_eq!(retry_after(&h), Some(Duration::from_millis(150)));
    }

    #[test]
    fn error_bodies_give_their_message() {
        assert_eq!(
            error_text(
                Provider::Openai,
                r#"{"error":{"message":"Incorrect API key","type":"invalid_request_error"}}"#
            ),
            "Incorrect API key"
        );
        assert_eq!(
            error_text(
                Provider::Anthropic,
                r#"{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}"#
            ),
            "authentication_error: invalid x-api-key"
        );
    }
}
