//! What upstreams say outside any call: log messages (MCP `notifications/message`) and changed
//! resources (`notifications/resources/updated`), for faces that relay them to their clients
//! (virtual servers). Sources publish, faces subscribe; a
//! subscriber that falls behind loses the oldest notices, never blocks a source.

use serde_json::Value;
use tokio::sync::broadcast;

/// Notices kept for subscribers that fall behind.
pub const CAPACITY: usize = 1024;
/// Largest log payload relayed, as JSON text; a larger one is replaced by a note.
pub const MAX_LOG_BYTES: usize = 8 * 1024;

/// A log message of an upstream.
#[derive(Debug, Clone, PartialEq)]
pub struct LogNotice {
    /// The source (namespace) that sent it.
    pub source: String,
    /// An MCP logging level: debug, info, notice, warning, error, critical, alert, emergency.
    pub level: String,
    pub logger: Option<String>,
    pub data: Value,
}

/// Longest resource URI relayed in a notice.
pub const MAX_URI_BYTES: usize = 2048;

/// A resource an upstream says changed, for the sessions that subscribed to it.
#[derive(Debug, Clone, PartialEq)]
pub struct ResourceNotice {
    /// The source (namespace) that sent it.
    pub source: String,
    /// The resource's URI (at most [`MAX_URI_BYTES`]).
    pub uri: String,
}

/// One notice.
#[derive(Debug, Clone, PartialEq)]
pub enum Notice {
    Log(LogNotice),
    ResourceUpdated(ResourceNotice),
}

/// The channel sources publish notices on. Cheap to clone; clones share the channel.
#[derive(Clone, Debug)]
pub struct Notices(broadcast::Sender<Notice>);

impl Default for Notices {
    fn default() -> Self {
        Self(broadcast::channel(CAPACITY).0)
    }
}

/// Two handles are equal when they publish on the same channel.
impl PartialEq for Notices {
    fn eq(&self, other: &Self) -> bool {
        self.0.same_channel(&other.0)
    }
}

impl Eq for Notices {}

impl Notices {
    /// Publishes a log message (bounded: logger cut to 200 bytes, data over
    /// [`MAX_LOG_BYTES`] replaced by a note).
    pub fn log(&self, mut notice: LogNotice) {
        if let Some(l) = &mut notice.logger {
            l.truncate(l.floor_char_boundary(200));
        }
        let size = serde_json::to_string(&notice.data).map_or(0, |s| s.len());
        if size > MAX_LOG_BYTES {
            notice.data = Value::String(format!(
                "(a log message of {size} bytes, over the {MAX_LOG_BYTES} relayed)"
            ));
        }
        let _ = self.0.send(Notice::Log(notice));
    }

    /// Publishes that the resource at `uri` of `source` changed. A URI over
    /// [`MAX_URI_BYTES`] is not published (no client could have subscribed to it): `false`.
    pub fn resource_updated(&self, source: &str, uri: &str) -> bool {
        if uri.len() > MAX_URI_BYTES {
            return false;
        }
        let _ = self.0.send(Notice::ResourceUpdated(ResourceNotice {
            source: source.to_string(),
            uri: uri.to_string(),
        }));
        true
    }

    pub fn subscribe(&self) -> broadcast::Receiver<Notice> {
        self.0.subscribe()
    }
}

/// The rank of an MCP logging level (debug lowest); unknown levels rank as `info`.
pub fn level_rank(level: &str) -> u8 {
    match level {
        "debug" => 0,
        "info" => 1,
        "notice" => 2,
        "warning" => 3,
        "error" => 4,
        "critical" => 5,
        "alert" => 6,
        "emergency" => 7,
        _ => 1,
    }
}
