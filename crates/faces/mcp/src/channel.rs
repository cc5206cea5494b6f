//! A session's client as the [`ClientChannel`] of the calls it makes on a virtual server: an
//! upstream's `elicitation/create` and `sampling/createMessage` during such a call are put to
//! this client, as the client declared it could take them. Each call has a channel of its own
//! that names the call's request, so that over streamable HTTP the request travels on that
//! call's response stream (SEP-2260), and every channel of a session has the session's id.
#![allow(deprecated)] // Sampling is deprecated by the 2026-07-28 revision; older clients use it.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use rmcp::model::{
    ClientResult, CreateMessageRequest, CreateMessageRequestParams, ElicitRequest,
    ElicitRequestParams, GetExtensions, RequestId, ServerRequest,
};
use rmcp::service::OriginatingRequestId;
use rmcp::{Peer, RoleServer};
use serde_json::Value;
use toolshed_core::{ClientChannel, ToolError};

/// A session's identity among channels.
pub(crate) fn new_session_id() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// The client of one call: its session's peer and the call's own request id.
struct CallClient {
    session: u64,
    peer: Peer<RoleServer>,
    originating: RequestId,
}

/// The channel of the call `originating` of session `session`.
pub(crate) fn of(
    session: u64,
    peer: Peer<RoleServer>,
    originating: RequestId,
) -> Arc<dyn ClientChannel> {
    Arc::new(CallClient {
        session,
        peer,
        originating,
    })
}

#[async_trait::async_trait]
impl ClientChannel for CallClient {
    fn client_id(&self) -> u64 {
        self.session
    }

    fn supports(&self, capability: &str) -> bool {
        let Some(info) = self.peer.peer_info() else {
            return false;
        };
        let caps = &info.capabilities;
        match capability {
            "sampling" => caps.sampling.is_some(),
            // An empty `elicitation` object means form mode (the 2025-06-18 shape).
            "elicitation" => caps
                .elicitation
                .as_ref()
                .is_some_and(|e| e.form.is_some() || e.url.is_none()),
            "elicitation.url" => caps.elicitation.as_ref().is_some_and(|e| e.url.is_some()),
            _ => false,
        }
    }

    async fn request(&self, method: &str, params: Value) -> Result<Value, ToolError> {
        let malformed = |e: serde_json::Error| ToolError::invalid(format!("{method}: {e}"));
        let mut request = match method {
            "elicitation/create" => {
                let params: ElicitRequestParams =
                    serde_json::from_value(params).map_err(malformed)?;
                ServerRequest::ElicitRequest(ElicitRequest::new(params))
            }
            "sampling/createMessage" => {
                let params: CreateMessageRequestParams =
                    serde_json::from_value(params).map_err(malformed)?;
                ServerRequest::CreateMessageRequest(CreateMessageRequest::new(params))
            }
            other => {
                return Err(ToolError::invalid(format!(
                    "Toolshed does not relay '{other}' to clients"
                )))
            }
        };
        request
            .extensions_mut()
            .insert(OriginatingRequestId(self.originating.clone()));
        let answer = self
            .peer
            .send_request(request)
            .await
            .map_err(|e| ToolError::upstream(format!("the client refused {method}: {e}")))?;
        let value = match answer {
            ClientResult::ElicitResult(r) => serde_json::to_value(r),
            ClientResult::CreateMessageResult(r) => serde_json::to_value(r),
            other => serde_json::to_value(other),
        };
        value.map_err(|e| ToolError::internal(format!("the client's answer to {method}: {e}")))
    }
}
