//! Model APIs for agent runs: one neutral conversation ([`Message`], [`ToolSpec`]) sent to
//! either wire format, and one answer ([`Completion`]) read back from its stream.
//!
//! | kind | API | request | stream |
//! |---|---|---|---|
//! | `openai` | Chat Completions (OpenAI, vLLM, Ollama, llama.cpp, LiteLLM, OpenRouter) | `POST {base_url}/chat/completions` | `data:` chunks, tool-call deltas by `index`, usage in the last chunk (`stream_options.include_usage`), `[DONE]` |
//! | `anthropic` | Messages | `POST {base_url}/v1/messages` | `message_start`, `content_block_*` (`text_delta`, `input_json_delta`), `message_delta`, `ping`, `error` |
//!
//! [`Models::complete`] streams the answer, hands text deltas to a callback as they arrive,
//! assembles tool calls from their fragments (arguments may be split at any byte), and
//! retries on 429 (honouring `Retry-After` / `retry-after-ms`), 5xx and transport failures
//! with exponential backoff. A 4xx is a [`ModelError::Status`] naming the model and the
//! status. The key is sent only in its header and is blanked out of every error text
//! ([`toolshed_outbound::secret::redact`]), since a provider may echo it.
//!
//! Requests go through the outbound address guard: a `base_url` on a loopback or private
//! address (a local Ollama or vLLM) needs `allow_private`.

mod anthropic;
mod client;
mod openai;
mod sse;

use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use toolshed_outbound::Secret;

pub use client::{Models, RetryPolicy};

/// The wire format of a model endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Provider {
    Openai,
    Anthropic,
}

impl Provider {
    /// Reads `openai` or `anthropic`.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "openai" => Some(Self::Openai),
            "anthropic" => Some(Self::Anthropic),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Openai => "openai",
            Self::Anthropic => "anthropic",
        }
    }

    /// The provider's public API, used when no `base_url` is configured.
    pub fn default_base_url(self) -> &'static str {
        match self {
            Self::Openai => "https://api.openai.com/v1",
            Self::Anthropic => "https://api.anthropic.com",
        }
    }
}

/// A configured model endpoint (`[models.<id>]`).
#[derive(Clone)]
pub struct Endpoint {
    /// The credential's id, as definitions name it.
    pub id: String,
    pub provider: Provider,
    pub base_url: String,
    pub api_key: Option<Secret>,
    /// Extra headers sent with every request (e.g. an OpenRouter referer).
    pub headers: Vec<(String, String)>,
    /// The whole request, stream included.
    pub timeout: Duration,
    /// Whether the endpoint may be on a loopback or private address.
    pub allow_private: bool,
    /// Why the endpoint cannot be used although it is configured (its key's environment
    /// variable is not set); requests fail at once with this reason.
    pub unavailable: Option<String>,
}

impl std::fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Endpoint")
            .field("id", &self.id)
            .field("provider", &self.provider)
            .field("base_url", &self.base_url)
            .field("api_key", &self.api_key.as_ref().map(|_| "[REDACTED]"))
            .field("timeout", &self.timeout)
            .field("allow_private", &self.allow_private)
            .finish()
    }
}

/// One message of a conversation, in neither provider's format.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "role", rename_all = "snake_case")]
pub enum Message {
    User {
        content: String,
    },
    #[serde(rename_all = "camelCase")]
    Assistant {
        #[serde(default)]
        content: String,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<ToolCall>,
    },
    /// The result of one tool call, sent back to the model.
    #[serde(rename_all = "camelCase")]
    Tool {
        tool_call_id: String,
        name: String,
        content: String,
        #[serde(default)]
        is_error: bool,
    },
}

/// A tool the model may call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    /// `^[a-zA-Z0-9_-]{1,64}$`, as both APIs require.
    pub name: String,
    pub description: String,
    /// A JSON Schema object.
    pub parameters: Value,
}

/// A tool call the model made.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    /// The parsed arguments; arguments that are not a JSON object arrive as
    /// `{"_unparsed": "<text>"}` so the caller can answer the model with an error.
    pub arguments: Value,
}

/// Tokens one request used.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Usage {
    pub input_tokens: u64,
    pub output_tokens: u64,
}

impl Usage {
    pub fn total(&self) -> u64 {
        self.input_tokens + self.output_tokens
    }
}

/// What one request asks.
#[derive(Debug, Clone)]
pub struct ChatRequest {
    /// The model name without its provider prefix (`gpt-4.1-mini`).
    pub model: String,
    pub system: String,
    pub messages: Vec<Message>,
    pub tools: Vec<ToolSpec>,
    /// The answer's token cap (Anthropic requires one; default 4096 there).
    pub max_tokens: Option<u64>,
}

/// A model's answer.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Completion {
    pub text: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCall>,
    #[serde(default)]
    pub usage: Usage,
    /// `stop`, `tool_calls`, `length`, `end_turn`, `tool_use`, `max_tokens`, as the provider
    /// said it.
    #[serde(default)]
    pub stop_reason: String,
}

/// Why a request failed; every text is free of the endpoint's key.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ModelError {
    #[error("model '{model}' answered HTTP {status}: {message}")]
    Status {
        model: String,
        status: u16,
        message: String,
    },
    #[error("model '{model}' could not be reached: {message}")]
    Transport { model: String, message: String },
    #[error("model '{model}' sent a stream that cannot be read: {message}")]
    Stream { model: String, message: String },
    #[error("model '{model}' did not answer within {seconds} s")]
    Timeout { model: String, seconds: u64 },
    #[error("model endpoint '{id}': {message}")]
    Config { id: String, message: String },
}

impl ModelError {
    /// A short code for errors shown to callers.
    pub fn code(&self) -> &'static str {
        match self {
            Self::Status { .. } => "model_status",
            Self::Transport { .. } => "model_unreachable",
            Self::Stream { .. } => "model_stream",
            Self::Timeout { .. } => "model_timeout",
            Self::Config { .. } => "model_config",
        }
    }

    /// Whether trying again may help (429, 5xx, transport, timeout).
    pub fn retryable(&self) -> bool {
        match self {
            Self::Status { status, .. } => *status == 429 || *status >= 500,
            Self::Transport { .. } | Self::Timeout { .. } => true,
            Self::Stream { .. } | Self::Config { .. } => false,
        }
    }
}

/// Arguments text as a tool call's `arguments` (an object, or `{"_unparsed": text}`).
pub(crate) fn parse_arguments(text: &str) -> Value {
    if text.trim().is_empty() {
        return Value::Object(Default::default());
    }
    match serde_json::from_str::<Value>(text) {
        Ok(v @ Value::Object(_)) => v,
        _ => serde_json::json!({ "_unparsed": text }),
    }
}
