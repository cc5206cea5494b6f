//! [`StderrTail`]: a stdio child's stderr, drained into the debug log with secrets blanked out,
//! its last lines kept for handshake errors.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::AsyncBufReadExt;
use tokio::sync::watch;
use toolshed_outbound::secret::redact;

use crate::upstream::lock;

/// How many of the last stderr lines an error quotes.
const STDERR_TAIL_LINES: usize = 8;

/// Drains a child's stderr into the log and keeps the last lines for error messages.
pub(crate) struct StderrTail {
    lines: Arc<Mutex<VecDeque<String>>>,
    eof: watch::Receiver<bool>,
}

impl StderrTail {
    /// `secrets` are blanked out of every line before it is logged or quoted.
    pub(crate) fn start(
        name: &str,
        stderr: Option<tokio::process::ChildStderr>,
        secrets: Vec<String>,
    ) -> Self {
        let lines = Arc::new(Mutex::new(VecDeque::new()));
        let (eof_tx, eof) = watch::channel(false);
        if let Some(stderr) = stderr {
            let name = name.to_string();
            let lines = lines.clone();
            tokio::spawn(async move {
                let secrets: Vec<&str> = secrets.iter().map(String::as_str).collect();
                let mut reader = tokio::io::BufReader::new(stderr).lines();
                while let Ok(Some(line)) = reader.next_line().await {
                    let line = redact(&line, &secrets);
                    tracing::debug!(upstream = %name, "stderr: {line}");
                    let mut l = lock(&lines);
                    if l.len() == STDERR_TAIL_LINES {
                        l.pop_front();
                    }
                    l.push_back(line);
                }
                let _ = eof_tx.send(true);
            });
        } else {
            let _ = eof_tx.send(true);
        }
        Self { lines, eof }
    }

    pub(crate) async fn wait_eof(&self, limit: Duration) {
        let mut eof = self.eof.clone();
        let _ = tokio::time::timeout(limit, eof.wait_for(|e| *e)).await;
    }

    /// "; stderr: a | b" or "" when the child wrote nothing.
    pub(crate) fn detail(&self) -> String {
        let l = lock(&self.lines);
        if l.is_empty() {
            String::new()
        } else {
            let joined: Vec<&str> = l.iter().map(String::as_str).collect();
            format!("; stderr: {}", joined.join(" | "))
        }
    }
}
