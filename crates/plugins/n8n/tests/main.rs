//! Integration tests of this crate, linked into one binary (one link, one process).

mod budgets;
mod common;
mod live;
mod live_build;
mod live_runs;
mod redirects;
mod replay_build;
mod replay_runs;
mod replay_tools;
mod server;
mod work_items;
