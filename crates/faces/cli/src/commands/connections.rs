//! `toolshed connections list|revoke NAME`: the local principal's grants at per-user
//! connections (sources with `oauth2_user` credentials). Tokens are never shown.

use std::process::ExitCode;

use serde_json::json;

use crate::app::App;

#[derive(clap::Subcommand, Debug)]
pub enum ConnectionsAction {
    /// Your grants: connection, scopes, when connected, when the token expires.
    List,
    /// Revoke your grant at a connection: the next call of its tools pauses for a new one.
    Revoke { connection: String },
}

pub async fn run(
    app: &App,
    principal: &str,
    action: ConnectionsAction,
    json_out: bool,
) -> anyhow::Result<ExitCode> {
    let Some(connections) = app.engine.connections() else {
        anyhow::bail!(
            "no per-user connection is configured (a source with auth type \"oauth2_user\")"
        );
    };
    match action {
        ConnectionsAction::List => {
            let list = connections.list(principal).await?;
            if json_out {
                outln!(
                    "{}",
                    serde_json::to_string_pretty(&json!({"connections": list}))?
                );
            } else if list.is_empty() {
                outln!("no grants");
            } else {
                for c in list {
                    outln!(
                        "{:<20} scopes {:<30} connected {}  expires {}",
                        c.connection,
                        c.scopes.join(" "),
                        c.connected_at,
                        c.expires_at.map_or("-".to_string(), |t| t.to_string())
                    );
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        ConnectionsAction::Revoke { connection } => {
            if !connections.revoke(principal, &connection).await? {
                anyhow::bail!("you have no grant at '{connection}'");
            }
            if json_out {
                outln!("{}", json!({"revoked": connection}));
            } else {
                outln!("revoked your grant at {connection}");
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}
