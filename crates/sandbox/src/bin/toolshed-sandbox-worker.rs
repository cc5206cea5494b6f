//! A bare sandbox worker process, for this crate's tests and benches (the `toolshed` binary
//! serves the same loop when started with `__sandbox-worker`).

fn main() {
    toolshed_sandbox::worker::main()
}
