//! Plugins: a named group of tools that share auth providers.

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

    /// The origin label its tools carry: `plugin:<id>`.
    pub fn origin(&self) -> String {
        format!("plugin:{}", self.id)
    }
}
