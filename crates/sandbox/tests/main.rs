//! Integration tests of this crate, linked into one binary (one link, one process).

mod basics;
mod common;
mod concurrency;
mod corpus;
mod limits;
mod replay;
mod workers;
