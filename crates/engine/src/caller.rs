//! Who is calling, through which face, and what they may see. How a network face finds the
//! principal (API keys, OAuth bearer tokens) is `toolshed_identity`'s job.

use std::collections::HashMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use toolshed_core::Access;

/// The surface a call arrived through; recorded in the audit log.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Face {
    Mcp,
    Http,
    Cli,
    Script,
}

impl Face {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Mcp => "mcp",
            Self::Http => "http",
            Self::Cli => "cli",
            Self::Script => "script",
        }
    }
}

/// A principal with its compiled access. Build it with [`crate::Engine::caller`].
#[derive(Debug, Clone)]
pub struct Caller {
    pub principal: Arc<str>,
    pub access: Access,
    pub face: Face,
    /// How many saved scripts (custom tools) deep this call runs; 0 for a face's own call.
    pub depth: u8,
    /// Set for a call made by a script execution: a saved script the call runs journals its
    /// calls in that execution (see [`Nest`]).
    pub(crate) nest: Option<Nest>,
    /// Set by [`crate::Engine::relay`]: where the called handler keeps its protocol's own
    /// answer. Only the face's own call gets it, never a call made inside that call.
    pub(crate) wire: Option<toolshed_core::WireSlot>,
    /// Set by [`crate::Engine::relay`] when the face's client asked for progress; like `wire`,
    /// only the face's own call gets it.
    pub(crate) progress: Option<toolshed_core::ProgressSink>,
    /// The OAuth token the principal signed in with, for sources that exchange it for their
    /// own (RFC 8693). Calls made inside this call keep it; a run resumed later does not have
    /// it.
    pub(crate) subject_token: Option<toolshed_outbound::Secret>,
}

/// Where a saved script's calls are journaled: the execution's host and the key of the call
/// that runs the saved script.
#[derive(Clone)]
pub(crate) struct Nest {
    pub host: std::sync::Arc<crate::executions::host::HostCtx>,
    pub parent: u64,
}

impl std::fmt::Debug for Nest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Nest")
            .field("execution", &self.host.execution_id)
            .field("parent", &self.parent)
            .finish()
    }
}

impl Caller {
    pub(crate) fn new(principal: &str, access: Access, face: Face) -> Self {
        Self {
            principal: Arc::from(principal),
            access,
            face,
            depth: 0,
            nest: None,
            wire: None,
            progress: None,
            subject_token: None,
        }
    }

    pub fn allows(&self, path: &str) -> bool {
        self.access.allows(path)
    }
}

/// Most signed-in principals whose roles are kept in memory (the store keeps them all).
const MAX_SIGNED_IN: usize = 100_000;

/// The roles of principals signed in with a token, as their newest token granted them: a run
/// such a principal owns is resumed (by whoever answers its wait) with these roles.
#[derive(Default)]
pub(crate) struct SignedInRoles {
    map: parking_lot::RwLock<HashMap<String, Arc<[String]>>>,
}

impl SignedInRoles {
    pub(crate) fn get(&self, principal: &str) -> Option<Arc<[String]>> {
        self.map.read().get(principal).cloned()
    }

    /// Records `roles` for `principal`; true when they differ from what was recorded.
    pub(crate) fn remember(&self, principal: &str, roles: &[String]) -> bool {
        if self.get(principal).is_some_and(|known| *known == *roles) {
            return false;
        }
        let mut map = self.map.write();
        if map.len() >= MAX_SIGNED_IN && !map.contains_key(principal) {
            map.clear();
        }
        map.insert(principal.to_string(), Arc::from(roles));
        true
    }
}
