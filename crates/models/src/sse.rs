//! Server-Sent Events read incrementally from a byte stream: chunks may split a line, or a
//! UTF-8 character, anywhere.

/// One event: its `event:` name (empty when none) and its `data:` lines joined by `\n`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SseEvent {
    pub event: String,
    pub data: String,
}

/// Longest line kept, in bytes; a longer one is an error (a stream that never ends a line).
pub const MAX_LINE_BYTES: usize = 4 * 1024 * 1024;

/// Collects bytes and yields complete events.
#[derive(Default)]
pub struct SseParser {
    buf: Vec<u8>,
    event: String,
    data: Vec<String>,
}

impl SseParser {
    /// Feeds a chunk; returns the events it completed. `Err` when a line grows past
    /// [`MAX_LINE_BYTES`].
    pub fn push(&mut self, chunk: &[u8]) -> Result<Vec<SseEvent>, String> {
        self.buf.extend_from_slice(chunk);
        let mut out = Vec::new();
        while let Some(at) = self.buf.iter().position(|b| *b == b'\n') {
            let mut line: Vec<u8> = self.buf.drain(..=at).collect();
            line.pop();
            if line.last() == Some(&b'\r') {
                line.pop();
            }
            let line = String::from_utf8_lossy(&line).into_owned();
            if let Some(e) = self.line(&line) {
                out.push(e);
            }
        }
        if self.buf.len() > MAX_LINE_BYTES {
            return Err(format!("a line longer than {MAX_LINE_BYTES} bytes"));
        }
        Ok(out)
    }

    /// The event still open when the stream ended without a blank line.
    pub fn finish(&mut self) -> Option<SseEvent> {
        if !self.buf.is_empty() {
            let rest = String::from_utf8_lossy(&std::mem::take(&mut self.buf)).into_owned();
            if let Some(e) = self.line(rest.trim_end_matches('\r')) {
                return Some(e);
            }
        }
        self.dispatch()
    }

    fn line(&mut self, line: &str) -> Option<SseEvent> {
        if line.is_empty() {
            return self.dispatch();
        }
        if line.starts_with(':') {
            return None;
        }
        let (field, value) = match line.split_once(':') {
            Some((f, v)) => (f, v.strip_prefix(' ').unwrap_or(v)),
            None => (line, ""),
        };
        match field {
            "event" => self.event = value.to_string(),
            "data" => self.data.push(value.to_string()),
            _ => {}
        }
        None
    }

    fn dispatch(&mut self) -> Option<SseEvent> {
        if self.data.is_empty() {
            self.event.clear();
            return None;
        }
        Some(SseEvent {
            event: std::mem::take(&mut self.event),
            data: std::mem::take(&mut self.data).join("\n"),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_survive_any_split() {
        let text = "event: a\ndata: {\"x\":\"é\"}\n\n: comment\r\ndata: 1\r\ndata: 2\r\n\r\ndata: [DONE]\n\n";
        let bytes = text.as_bytes();
        for cut in 0..bytes.len() {
            let mut p = SseParser::default();
            let mut all = p.push(&bytes[..cut]).unwrap();
            all.extend(p.push(&bytes[cut..]).unwrap());
            assert_eq!(all.len(), 3, "cut at {cut}");
            assert_eq!(all[0].event, "a");
            assert_eq!(all[0].data, "{\"x\":\"é\"}");
            assert_eq!(all[1].data, "1\n2");
            assert_eq!(all[2].data, "[DONE]");
        }
    }

    #[test]
    fn an_unterminated_last_event_is_kept() {
        let mut p = SseParser::default();
        assert!(p.push(b"data: last").unwrap().is_empty());
        assert_eq!(p.finish().unwrap().data, "last");
    }
}
