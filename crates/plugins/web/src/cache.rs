//! A small bounded cache with a time to live: at most `capacity` entries, the least recently
//! inserted one evicted first, an entry older than the TTL never returned.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Entries by key, each with the time it was stored.
pub struct TtlCache<V> {
    ttl: Duration,
    capacity: usize,
    state: Mutex<State<V>>,
}

struct State<V> {
    entries: HashMap<String, (Instant, V)>,
    /// Keys in insertion order (a key re-inserted moves to the back).
    order: VecDeque<String>,
}

impl<V: Clone> TtlCache<V> {
    pub fn new(ttl: Duration, capacity: usize) -> Self {
        Self {
            ttl,
            capacity: capacity.max(1),
            state: Mutex::new(State {
                entries: HashMap::new(),
                order: VecDeque::new(),
            }),
        }
    }

    /// The value under `key` if it is younger than the TTL.
    pub fn get(&self, key: &str) -> Option<V> {
        let mut s = self.lock();
        match s.entries.get(key) {
            Some((at, v)) if at.elapsed() < self.ttl => Some(v.clone()),
            Some(_) => {
                s.entries.remove(key);
                s.order.retain(|k| k != key);
                None
            }
            None => None,
        }
    }

    /// Stores `value` under `key`, evicting the oldest entries beyond the capacity.
    pub fn insert(&self, key: String, value: V) {
        let mut s = self.lock();
        if s.entries.contains_key(&key) {
            s.order.retain(|k| k != &key);
        }
        s.order.push_back(key.clone());
        s.entries.insert(key, (Instant::now(), value));
        while s.entries.len() > self.capacity {
            let Some(oldest) = s.order.pop_front() else {
                break;
            };
            s.entries.remove(&oldest);
        }
    }

    /// Entries held (expired ones included until they are read or evicted).
    pub fn len(&self) -> usize {
        self.lock().entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State<V>> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_expire_and_the_oldest_is_evicted() {
        let c = TtlCache::new(Duration::from_millis(50), 2);
        c.insert("a".into(), 1);
        c.insert("b".into(), 2);
        assert_eq!(c.get("a"), Some(1));
        c.insert("c".into(), 3);
        assert_eq!(c.len(), 2);
        assert_eq!(c.get("a"), None, "the oldest insert was evicted");
        assert_eq!(c.get("c"), Some(3));
        // Re-inserting refreshes the position.
        c.insert("b".into(), 20);
        c.insert("d".into(), 4);
        assert_eq!(c.get("b"), Some(20));
        assert_eq!(c.get("c"), None);
        std::thread::sleep(Duration::from_millis(60));
        assert_eq!(c.get("b"), None, "expired");
        assert!(c.len() <= 1);
    }
}
