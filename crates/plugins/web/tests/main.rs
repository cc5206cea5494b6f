//! Integration tests of the web plugin, linked into one binary: real pages served on
//! loopback, search providers answering in their documented JSON shapes.

mod fetch;
mod search;
mod support;
