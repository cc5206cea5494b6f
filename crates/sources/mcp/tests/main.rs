//! Integration tests of this crate, linked into one binary (one link, one process).

mod common;
mod direct_path;
mod http_upstream;
mod oauth;
mod protocol_versions;
mod redirects;
mod reference_servers;
mod stdio_upstream;
mod subscriptions;
