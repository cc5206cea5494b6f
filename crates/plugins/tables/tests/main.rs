//! Integration tests of this crate, linked into one binary (one link, one process).

mod common;
mod postgres;
mod tables;
