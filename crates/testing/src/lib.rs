//! Test support shared by Toolshed's crates; a dev-dependency only, never linked into the
//! binary.
//!
//! - [`fixtures`]: files under a crate's `tests/fixtures/` as text or JSON (`.gz` gunzipped),
//!   through the [`fixture!`] and [`fixture_text!`] macros that name the calling crate's folder.
//! - [`mcp`]: an MCP server and client joined in-process over a memory pipe.
//! - [`upstream`]: [`test_upstream`] and [`conformance_upstream`], the paths of the test MCP
//!   servers, built when needed.
//! - [`model_server`]: a scripted model server speaking the OpenAI and Anthropic streaming
//!   wire formats, for agent runs.
//! - [`retrieval_set`]: the tool-retrieval sets' files (`tools.jsonl`, `queries.jsonl`,
//!   `qrels.tsv`), read one way by every bench that measures ranking on them.
//!
//! It depends on nothing of Toolshed's own, so that any crate (including those it would test)
//! can use it without a dependency cycle.

pub mod fixtures;
pub mod mcp;
pub mod model_server;
pub mod retrieval_set;
pub mod upstream;

pub use upstream::{conformance_upstream, test_upstream};
