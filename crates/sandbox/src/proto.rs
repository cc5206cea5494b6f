//! The pipe protocol between the server and a worker process: length-prefixed JSON frames
//! (a 4-byte little-endian length, then that many bytes of JSON), one pipe pair per worker.
//!
//! ```text
//! server → worker   Run {run, source, limits, det}      start a script
//! worker → server   Call {run, call: HostCall}          a tool call for the engine's call path
//! server → worker   Reply {run, seq, reply: HostReply}  its answer (in any order)
//! worker → server   Done {run, status, logs, calls}     how the run ended
//! ```
//!
//! The worker sends `Ready` once, after its rlimits and system-call filter are in place. Every
//! message of a run carries the run's number, so a late reply never reaches the next script.

use std::io::{self, Read, Write};

use serde::{Deserialize, Serialize};

use crate::types::{Determinism, HostCall, HostReply, Limits, LogEntry, Status};

/// Largest frame either side accepts from the pipe (the server bounds results far below it).
pub const MAX_FRAME: usize = 256 * 1024 * 1024;

/// A message from the server to a worker.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum ToWorker {
    /// Run a script.
    Run {
        run: u64,
        source: String,
        limits: Limits,
        det: Determinism,
    },
    /// The host's answer to call `seq` of run `run`.
    Reply {
        run: u64,
        seq: u32,
        reply: HostReply,
    },
}

/// A message from a worker to the server.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum FromWorker {
    /// The worker is sandboxed and waits for scripts.
    Ready,
    /// The script issued a host call.
    Call { run: u64, call: HostCall },
    /// The run ended.
    Done {
        run: u64,
        status: Status,
        logs: Vec<LogEntry>,
        calls: u32,
    },
}

/// Encodes `msg` as one frame (length prefix included).
pub fn encode<T: Serialize>(msg: &T) -> io::Result<Vec<u8>> {
    let mut buf = vec![0u8; 4];
    serde_json::to_writer(&mut buf, msg).map_err(io::Error::other)?;
    let len = u32::try_from(buf.len() - 4)
        .ok()
        .filter(|n| (*n as usize) <= MAX_FRAME)
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "frame too large"))?;
    buf[..4].copy_from_slice(&len.to_le_bytes());
    Ok(buf)
}

/// Decodes the JSON body of a frame.
pub fn decode<T: for<'de> Deserialize<'de>>(body: &[u8]) -> io::Result<T> {
    serde_json::from_slice(body).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
}

/// Writes one frame with a single `write_all`.
pub fn write_frame<T: Serialize>(w: &mut impl Write, msg: &T) -> io::Result<()> {
    w.write_all(&encode(msg)?)?;
    w.flush()
}

/// Reads one frame (blocking). `Ok(None)` at a clean end of the stream.
pub fn read_frame<T: for<'de> Deserialize<'de>>(r: &mut impl Read) -> io::Result<Option<T>> {
    let mut len = [0u8; 4];
    match r.read_exact(&mut len) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e),
    }
    let len = u32::from_le_bytes(len) as usize;
    if len > MAX_FRAME {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("frame of {len} bytes is over the limit of {MAX_FRAME}"),
        ));
    }
    let mut body = vec![0u8; len];
    r.read_exact(&mut body)?;
    decode(&body).map(Some)
}

/// Splits complete frames off a byte buffer filled by non-blocking reads (cancel-safe on the
/// async side: bytes stay in the buffer until a whole frame is there).
#[derive(Default)]
pub struct FrameBuffer {
    buf: Vec<u8>,
    limit: usize,
}

impl FrameBuffer {
    /// A buffer refusing frames over `limit` bytes.
    pub fn new(limit: usize) -> Self {
        Self {
            buf: Vec::new(),
            limit: limit.min(MAX_FRAME),
        }
    }

    /// Appends bytes read from the pipe.
    pub fn extend(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
    }

    /// The next complete frame's body, if one is buffered; `Err` when a frame is over the limit.
    pub fn next_frame(&mut self) -> io::Result<Option<Vec<u8>>> {
        if self.buf.len() < 4 {
            return Ok(None);
        }
        let len = u32::from_le_bytes([self.buf[0], self.buf[1], self.buf[2], self.buf[3]]) as usize;
        if len > self.limit {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("frame of {len} bytes is over the limit of {}", self.limit),
            ));
        }
        if self.buf.len() < 4 + len {
            return Ok(None);
        }
        let body = self.buf[4..4 + len].to_vec();
        self.buf.drain(..4 + len);
        Ok(Some(body))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn frames_round_trip_whole_and_in_pieces() {
        let msg = ToWorker::Reply {
            run: 3,
            seq: 1,
            reply: HostReply::Ok(json!({"a": [1, 2]})),
        };
        let bytes = encode(&msg).unwrap();
        let back: ToWorker = read_frame(&mut &bytes[..]).unwrap().unwrap();
        assert!(matches!(back, ToWorker::Reply { run: 3, seq: 1, .. }));
        let mut fb = FrameBuffer::new(1 << 20);
        let (a, b) = bytes.split_at(5);
        fb.extend(a);
        assert!(fb.next_frame().unwrap().is_none());
        fb.extend(b);
        fb.extend(&bytes);
        for _ in 0..2 {
            let body = fb.next_frame().unwrap().unwrap();
            let m: ToWorker = decode(&body).unwrap();
            assert!(matches!(m, ToWorker::Reply { seq: 1, .. }));
        }
        assert!(fb.next_frame().unwrap().is_none());
        assert!(read_frame::<ToWorker>(&mut &[][..]).unwrap().is_none());
    }

    #[test]
    fn oversized_frames_are_refused() {
        let mut fb = FrameBuffer::new(8);
        fb.extend(&100u32.to_le_bytes());
        let e = fb.next_frame().unwrap_err().to_string();
        assert!(e.contains("over the limit of 8"), "{e}");
    }
}
