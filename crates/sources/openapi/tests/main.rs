//! Integration tests of this crate, linked into one binary (one link, one process).

mod auth;
mod bad_input;
mod common;
mod end_to_end;
mod fixtures;
mod outbound_safety;
mod real_specs;
mod security;
