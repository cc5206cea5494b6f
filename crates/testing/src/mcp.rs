//! An MCP server and client joined in-process: the real protocol over a memory pipe, no
//! sockets or child processes.

use rmcp::service::{RoleClient, RunningService};
use rmcp::{ClientHandler, ServerHandler, ServiceExt};

/// Serves `server` on one end of a pipe (in a task that lives as long as the session) and
/// connects `client` to the other; returns the client's session after the handshake.
pub async fn connect<S, C>(server: S, client: C) -> RunningService<RoleClient, C>
where
    S: ServerHandler,
    C: ClientHandler,
{
    let (client_io, server_io) = tokio::io::duplex(64 * 1024);
    tokio::spawn(async move {
        let running = server.serve(server_io).await.expect("MCP server handshake");
        let _ = running.waiting().await;
    });
    client.serve(client_io).await.expect("MCP client handshake")
}
