//! Integration tests of this crate, linked into one binary (one link, one process).

mod auth;
mod common;
mod large;
mod live;
mod outbound_safety;
mod schemas;
