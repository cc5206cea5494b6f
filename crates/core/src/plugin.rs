//! Plugins: a named group of tools that share auth providers.
//!
//! A plugin declares the auth providers its handlers need ([`Plugin::with_auth`]); the
//! deployment configures credentials for them, and a handler gets the token with
//! `ctx.token("<provider id>")`. A provider declared by a plugin serves only that plugin's tools.

use serde::{Deserialize, Serialize};

use crate::tool::Tool;

/// An auth provider a plugin's handlers can ask their context for (`ctx.token(id)`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AuthProviderDef {
    pub id: String,
    /// `api_key`, `bearer`, `basic`, `oauth2_client_credentials`, ...
    pub kind: String,
    #[serde(default)]
    pub description: String,
}

impl AuthProviderDef {
    /// A provider `id` of `kind` (`api_key`, `bearer`, `oauth2_client_credentials`, ...).
    pub fn new(
        id: impl Into<String>,
        kind: impl Into<String>,
        description: impl Into<String>,
    ) -> Self {
        Self {
            id: id.into(),
            kind: kind.into(),
            description: description.into(),
        }
    }
}

/// A group of tools with a common namespace and auth.
#[derive(Debug, Clone)]
pub struct Plugin {
    /// Also the namespace of its tools, unless tools say otherwise.
    pub id: String,
    pub name: String,
    pub description: String,
    pub auth: Vec<AuthProviderDef>,
    pub tools: Vec<Tool>,
}

impl Plugin {
    pub fn new(
        id: impl Into<String>,
        name: impl Into<String>,
        description: impl Into<String>,
    ) -> Self {
        Self {
            id: id.into(),
            name: name.into(),
            description: description.into(),
            auth: Vec::new(),
            tools: Vec::new(),
        }
    }

    pub fn with_tool(mut self, tool: Tool) -> Self {
        self.tools.push(tool);
        self
    }

    /// Declares an auth provider its handlers ask their context for.
    pub fn with_auth(mut self, provider: AuthProviderDef) -> Self {
        self.auth.push(provider);
        self
    }

    /// The origin label its tools carry: `plugin:<id>`.
    pub fn origin(&self) -> String {
        format!("plugin:{}", self.id)
    }
}
