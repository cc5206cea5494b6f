//! Bounded MCP sessions over streamable HTTP.
//!
//! [`CappedSessions`] wraps rmcp's in-memory session manager and refuses to create a session
//! beyond [`SessionLimits`]: in total and per principal. The principal is the one the admission
//! middleware of [`crate::http_router`] authenticated for the request; it reaches
//! `create_session` through a task-local [`Admission`] that also records a refusal, so the
//! middleware can answer it with a clear error (no session, no worker allocated). Sessions idle
//! longer than [`SessionLimits::idle`] end (rmcp's keep-alive), and a closed session frees its
//! slot; its id then answers 404 like any unknown session.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::Stream;
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::streamable_http_server::session::local::{
    LocalSessionManager, LocalSessionManagerError,
};
use rmcp::transport::streamable_http_server::session::ServerSseMessage;
use rmcp::transport::streamable_http_server::{SessionId, SessionManager};

/// How many MCP sessions may exist, and how long one may stay idle.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SessionLimits {
    /// Sessions of all principals together.
    pub max_sessions: usize,
    /// Sessions of one principal.
    pub max_per_principal: usize,
    /// A session without any request or message for this long is closed.
    pub idle: Duration,
}

impl Default for SessionLimits {
    fn default() -> Self {
        Self {
            max_sessions: 1_000,
            max_per_principal: 100,
            idle: Duration::from_secs(1_800),
        }
    }
}

/// A limit a new session would exceed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum LimitHit {
    #[error("the server already has {max} MCP sessions (max_sessions = {max}); close one (HTTP DELETE /mcp) or wait for idle ones to expire")]
    Total { max: usize },
    #[error("principal '{principal}' already has {max} MCP sessions (max_sessions_per_principal = {max}); close one (HTTP DELETE /mcp) or wait for idle ones to expire")]
    Principal { principal: String, max: usize },
}

impl LimitHit {
    /// The name of the configuration key that was reached.
    pub fn setting(&self) -> &'static str {
        match self {
            Self::Total { .. } => "max_sessions",
            Self::Principal { .. } => "max_sessions_per_principal",
        }
    }
}

/// Errors of [`CappedSessions`].
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    #[error(transparent)]
    Local(#[from] LocalSessionManagerError),
    #[error(transparent)]
    Limit(LimitHit),
    #[error("a session was requested without an authenticated principal")]
    NotAdmitted,
}

/// Who is creating a session in the current request, and why it was refused if it was.
#[derive(Debug)]
pub(crate) struct Admission {
    pub(crate) principal: String,
    pub(crate) refused: Option<LimitHit>,
}

tokio::task_local! {
    /// The admission of the HTTP request being served by this task.
    pub(crate) static ADMISSION: Arc<Mutex<Admission>>;
}

#[derive(Debug, Default)]
struct Table {
    total: usize,
    by_principal: HashMap<String, usize>,
    owners: HashMap<SessionId, String>,
    /// Sessions whose plain calls may skip rmcp's session machinery ([`crate::fast`]).
    direct: HashMap<SessionId, Arc<crate::fast::Direct>>,
}

/// Session counts and owners, shared by the session manager and the admission middleware.
#[derive(Debug)]
pub struct SessionTable {
    limits: SessionLimits,
    table: Mutex<Table>,
}

impl SessionTable {
    pub fn new(limits: SessionLimits) -> Arc<Self> {
        Arc::new(Self {
            limits,
            table: Mutex::new(Table::default()),
        })
    }

    pub fn limits(&self) -> &SessionLimits {
        &self.limits
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Table> {
        self.table.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Sessions that exist now (or are being created).
    pub fn count(&self) -> usize {
        self.lock().total
    }

    /// Sessions of one principal.
    pub fn count_of(&self, principal: &str) -> usize {
        self.lock()
            .by_principal
            .get(principal)
            .copied()
            .unwrap_or(0)
    }

    /// The principal a session belongs to.
    pub fn owner(&self, id: &str) -> Option<String> {
        self.lock().owners.get(id).cloned()
    }

    /// Lets the plain calls of session `id` take the direct path, while it exists.
    pub(crate) fn register_direct(&self, id: &str, direct: crate::fast::Direct) {
        let mut t = self.lock();
        if let Some((key, _)) = t.owners.get_key_value(id) {
            let key = key.clone();
            // A client that sends `notifications/initialized` again keeps its first record
            // (and the calls in flight in it).
            t.direct.entry(key).or_insert_with(|| Arc::new(direct));
        }
    }

    /// The direct-path record of session `id` when `principal` owns the session.
    pub(crate) fn direct_of(&self, id: &str, principal: &str) -> Option<Arc<crate::fast::Direct>> {
        let t = self.lock();
        if t.owners.get(id).map(String::as_str) != Some(principal) {
            return None;
        }
        t.direct.get(id).cloned()
    }

    /// Ends the direct path of session `id` (its rmcp session ended).
    pub(crate) fn forget_direct(&self, id: &str) {
        self.lock().direct.remove(id);
    }

    /// Takes a slot for `principal`, or says which limit is reached.
    fn take_slot(&self, principal: &str) -> Result<(), LimitHit> {
        let mut t = self.lock();
        if t.total >= self.limits.max_sessions {
            return Err(LimitHit::Total {
                max: self.limits.max_sessions,
            });
        }
        let mine = t.by_principal.get(principal).copied().unwrap_or(0);
        if mine >= self.limits.max_per_principal {
            return Err(LimitHit::Principal {
                principal: principal.to_string(),
                max: self.limits.max_per_principal,
            });
        }
        t.total += 1;
        *t.by_principal.entry(principal.to_string()).or_default() += 1;
        Ok(())
    }

    fn give_back(t: &mut Table, principal: &str) {
        t.total = t.total.saturating_sub(1);
        if let Some(n) = t.by_principal.get_mut(principal) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                t.by_principal.remove(principal);
            }
        }
    }

    fn release_slot(&self, principal: &str) {
        Self::give_back(&mut self.lock(), principal);
    }

    fn bind(&self, id: SessionId, principal: String) {
        self.lock().owners.insert(id, principal);
    }

    /// Frees the slot of a session; closing twice frees it once.
    fn close(&self, id: &SessionId) {
        let mut t = self.lock();
        t.direct.remove(id);
        if let Some(principal) = t.owners.remove(id) {
            Self::give_back(&mut t, &principal);
        }
    }
}

/// rmcp's [`LocalSessionManager`] with caps per principal and in total, and idle expiry.
pub struct CappedSessions {
    inner: LocalSessionManager,
    table: Arc<SessionTable>,
}

impl CappedSessions {
    pub fn new(table: Arc<SessionTable>) -> Self {
        let mut inner = LocalSessionManager::default();
        inner.session_config.keep_alive = Some(table.limits.idle);
        Self { inner, table }
    }

    /// The principal of the request creating a session (set by the admission middleware).
    fn admission() -> Result<Arc<Mutex<Admission>>, SessionError> {
        ADMISSION
            .try_with(Arc::clone)
            .map_err(|_| SessionError::NotAdmitted)
    }
}

impl SessionManager for CappedSessions {
    type Error = SessionError;
    type Transport = <LocalSessionManager as SessionManager>::Transport;

    async fn create_session(&self) -> Result<(SessionId, Self::Transport), Self::Error> {
        let admission = Self::admission()?;
        let principal = admission
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .principal
            .clone();
        if let Err(hit) = self.table.take_slot(&principal) {
            admission.lock().unwrap_or_else(|e| e.into_inner()).refused = Some(hit.clone());
            return Err(SessionError::Limit(hit));
        }
        match self.inner.create_session().await {
            Ok((id, transport)) => {
                self.table.bind(id.clone(), principal);
                Ok((id, transport))
            }
            Err(e) => {
                self.table.release_slot(&principal);
                Err(e.into())
            }
        }
    }

    async fn initialize_session(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<ServerJsonRpcMessage, Self::Error> {
        Ok(self.inner.initialize_session(id, message).await?)
    }

    async fn has_session(&self, id: &SessionId) -> Result<bool, Self::Error> {
        Ok(self.inner.has_session(id).await?)
    }

    async fn close_session(&self, id: &SessionId) -> Result<(), Self::Error> {
        self.table.close(id);
        Ok(self.inner.close_session(id).await?)
    }

    async fn create_stream(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        Ok(self.inner.create_stream(id, message).await?)
    }

    async fn accept_message(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<(), Self::Error> {
        Ok(self.inner.accept_message(id, message).await?)
    }

    async fn create_standalone_stream(
        &self,
        id: &SessionId,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        Ok(self.inner.create_standalone_stream(id).await?)
    }

    async fn resume(
        &self,
        id: &SessionId,
        last_event_id: String,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        Ok(self.inner.resume(id, last_event_id).await?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(total: usize, each: usize) -> Arc<SessionTable> {
        SessionTable::new(SessionLimits {
            max_sessions: total,
            max_per_principal: each,
            idle: Duration::from_secs(60),
        })
    }

    #[test]
    fn slots_are_counted_per_principal_and_in_total() {
        let t = table(3, 2);
        t.take_slot("a").unwrap();
        t.take_slot("a").unwrap();
        let hit = t.take_slot("a").unwrap_err();
        assert_eq!(hit.setting(), "max_sessions_per_principal");
        assert!(hit.to_string().contains("'a'"), "{hit}");
        t.take_slot("b").unwrap();
        let hit = t.take_slot("c").unwrap_err();
        assert_eq!(hit, LimitHit::Total { max: 3 });
        assert_eq!((t.count(), t.count_of("a"), t.count_of("b")), (3, 2, 1));
    }

    #[test]
    fn closing_a_session_frees_its_slot_once() {
        let t = table(10, 1);
        t.take_slot("a").unwrap();
        let id: SessionId = "s1".into();
        t.bind(id.clone(), "a".into());
        assert_eq!(t.owner("s1").as_deref(), Some("a"));
        t.close(&id);
        t.close(&id);
        assert_eq!((t.count(), t.count_of("a"), t.owner("s1")), (0, 0, None));
        t.take_slot("a").unwrap();
        t.release_slot("a");
        assert_eq!(t.count(), 0);
    }

    #[tokio::test]
    async fn sessions_are_not_created_outside_an_admitted_request() {
        let m = CappedSessions::new(table(10, 10));
        assert!(matches!(
            m.create_session().await,
            Err(SessionError::NotAdmitted)
        ));
    }
}
