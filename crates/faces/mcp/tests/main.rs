//! Integration tests of this crate, linked into one binary (one link, one process).

mod decisions;
mod direct_calls;
mod elicitation;
mod list_changed;
mod progress;
mod refusals;
mod sessions;
mod tasks;
