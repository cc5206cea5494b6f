//! Integration tests of this crate, linked into one binary (one link, one process).

mod agent_runs;
mod agents_cli;
mod audit_cli;
mod cli_verbs;
mod connections;
mod custom_tools;
mod durability;
mod listeners;
mod mcp_e2e;
mod n8n_live;
mod n8n_mcp;
mod oauth;
mod pauses;
mod policy_faces;
mod python_client;
mod sandbox_corpus;
#[cfg(feature = "semantic")]
mod semantic_search;
mod sources_auth;
mod sources_mcp;
mod sources_openapi;
mod support;
mod upstream_person;
mod virtual_resources;
mod virtual_servers;
mod web_cli;
