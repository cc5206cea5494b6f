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
    /// Set by [`crate::Engine::relay`] when the face relays an upstream's requests to its
    /// client (elicitation, sampling); like `wire`, only the face's own call gets it.
    pub(crate) client: Option<Arc<dyn toolshed_core::ClientChannel>>,
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
            client: None,
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
/// such a principal owns is resumed (by whoever answers its wait) with these roles. The access
/// compiled from them is kept too, for the policy it was compiled under, so a signed-in
/// request does not compile glob sets again.
#[derive(Default)]
pub(crate) struct SignedInRoles {
    map: parking_lot::RwLock<HashMap<String, Known>>,
}

struct Known {
    roles: Arc<[String]>,
    /// The access of these roles, with the policy it was compiled under (held, so that its
    /// address cannot be reused by a later policy).
    access: Option<(Arc<toolshed_core::Policy>, Access)>,
}

impl SignedInRoles {
    pub(crate) fn get(&self, principal: &str) -> Option<Arc<[String]>> {
        self.map.read().get(principal).map(|k| k.roles.clone())
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
        let known = Known {
            roles: Arc::from(roles),
            access: None,
        };
        map.insert(principal.to_string(), known);
        true
    }

    /// The access of `principal` with its recorded roles under `policy` (compiled once per
    /// roles and policy); `None` when the principal never signed in.
    pub(crate) fn access(
        &self,
        principal: &str,
        policy: &Arc<toolshed_core::Policy>,
    ) -> Option<Access> {
        let roles = {
            let map = self.map.read();
            let known = map.get(principal)?;
            if let Some((p, access)) = &known.access {
                if Arc::ptr_eq(p, policy) {
                    return Some(access.clone());
                }
            }
            known.roles.clone()
        };
        let access = policy.access_with_roles(principal, &roles);
        if let Some(known) = self.map.write().get_mut(principal) {
            if known.roles == roles {
                known.access = Some((policy.clone(), access.clone()));
            }
        }
        Some(access)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use toolshed_core::{Policy, Role};

    fn policy(pattern: &str) -> Arc<Policy> {
        let role = Role {
            id: "rows".into(),
            patterns: vec![pattern.into()],
            ..Role::default()
        };
        Arc::new(Policy::new(vec![role], vec![]).unwrap())
    }

    /// The access follows the recorded roles and the current policy.
    #[test]
    fn signed_in_access_follows_roles_and_policy() {
        let known = SignedInRoles::default();
        let tables = policy("tables.**");
        assert!(known.access("iss#a", &tables).is_none(), "never signed in");
        known.remember("iss#a", &["rows".into()]);
        assert!(known
            .access("iss#a", &tables)
            .unwrap()
            .allows("tables.list"));
        let again = known.access("iss#a", &tables).unwrap();
        assert!(again.allows("tables.list"), "from the cache");
        let github = policy("github.**");
        let changed = known.access("iss#a", &github).unwrap();
        assert!(changed.allows("github.issues") && !changed.allows("tables.list"));
        assert!(known.remember("iss#a", &[]), "new roles");
        assert!(!known
            .access("iss#a", &github)
            .unwrap()
            .allows("github.issues"));
    }
}
