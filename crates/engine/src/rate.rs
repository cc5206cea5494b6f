//! Per-principal rate limits for tool calls and scripts: one token bucket per principal and kind,
//! holding up to a minute's allowance and refilled continuously. The engine checks it on the one
//! call path ([`crate::Engine::invoke`]) and when a script starts, so every face is limited the
//! same way; a refusal is [`EngineError::RateLimited`] (`rate_limited`) with a retry-after hint.
//!
//! The bucket map is bounded ([`MAX_BUCKETS`]): when it is full, buckets that have refilled
//! completely are dropped (a full bucket is the same as a new one), then the longest idle.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::EngineError;

/// Buckets kept at most.
pub const MAX_BUCKETS: usize = 10_000;

/// Limits per minute; 0 means unlimited.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RateLimits {
    /// Tool calls a principal may start per minute (each call of a script counts).
    pub calls_per_minute: u32,
    /// Scripts a principal may start per minute.
    pub scripts_per_minute: u32,
}

/// What is limited.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RateKind {
    Calls,
    Scripts,
}

impl RateKind {
    fn what(self) -> &'static str {
        match self {
            Self::Calls => "tool calls",
            Self::Scripts => "scripts",
        }
    }
}

impl RateLimits {
    fn per_minute(&self, kind: RateKind) -> u32 {
        match kind {
            RateKind::Calls => self.calls_per_minute,
            RateKind::Scripts => self.scripts_per_minute,
        }
    }
}

struct Bucket {
    tokens: f64,
    last: Instant,
}

impl Bucket {
    /// Tokens at `now` for a bucket of `cap` refilled at `cap` per minute.
    fn level(&self, cap: f64, now: Instant) -> f64 {
        let elapsed = now.saturating_duration_since(self.last).as_secs_f64();
        (self.tokens + elapsed * cap / 60.0).min(cap)
    }
}

/// The buckets of every principal.
#[derive(Default)]
pub(crate) struct RateLimiter {
    defaults: RateLimits,
    overrides: HashMap<String, RateLimits>,
    buckets: Mutex<HashMap<(RateKind, Arc<str>), Bucket>>,
}

impl RateLimiter {
    pub(crate) fn new(defaults: RateLimits, overrides: HashMap<String, RateLimits>) -> Self {
        Self {
            defaults,
            overrides,
            buckets: Mutex::default(),
        }
    }

    fn limit(&self, principal: &str, kind: RateKind) -> u32 {
        self.overrides
            .get(principal)
            .unwrap_or(&self.defaults)
            .per_minute(kind)
    }

    /// Takes one token for `principal`, or says how long until one is available.
    pub(crate) fn check(&self, principal: &Arc<str>, kind: RateKind) -> Result<(), EngineError> {
        self.check_at(principal, kind, Instant::now())
    }

    fn check_at(
        &self,
        principal: &Arc<str>,
        kind: RateKind,
        now: Instant,
    ) -> Result<(), EngineError> {
        let per_minute = self.limit(principal, kind);
        if per_minute == 0 {
            return Ok(());
        }
        let cap = f64::from(per_minute);
        let mut buckets = self.buckets.lock();
        let key = (kind, principal.clone());
        if buckets.len() >= MAX_BUCKETS && !buckets.contains_key(&key) {
            self.prune(&mut buckets, now);
        }
        let bucket = buckets.entry(key).or_insert(Bucket {
            tokens: cap,
            last: now,
        });
        bucket.tokens = bucket.level(cap, now);
        bucket.last = now;
        if bucket.tokens >= 1.0 {
            bucket.tokens -= 1.0;
            return Ok(());
        }
        let wait = (1.0 - bucket.tokens) * 60.0 / cap;
        Err(EngineError::RateLimited {
            principal: crate::audit::truncated(principal, crate::audit::MAX_PRINCIPAL_BYTES),
            what: kind.what(),
            per_minute,
            retry_after: Duration::from_secs_f64(wait),
        })
    }

    /// Drops the buckets that refilled completely; if none did, the longest idle one.
    fn prune(&self, buckets: &mut HashMap<(RateKind, Arc<str>), Bucket>, now: Instant) {
        buckets.retain(|(kind, p), b| {
            let cap = f64::from(self.limit(p, *kind));
            cap > 0.0 && b.level(cap, now) < cap
        });
        if buckets.len() >= MAX_BUCKETS {
            if let Some(idle) = buckets
                .iter()
                .min_by_key(|(_, b)| b.last)
                .map(|(k, _)| k.clone())
            {
                buckets.remove(&idle);
            }
        }
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.buckets.lock().len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limiter(calls: u32, scripts: u32) -> RateLimiter {
        RateLimiter::new(
            RateLimits {
                calls_per_minute: calls,
                scripts_per_minute: scripts,
            },
            HashMap::from([(
                "vip".to_string(),
                RateLimits {
                    calls_per_minute: 0,
                    scripts_per_minute: 1,
                },
            )]),
        )
    }

    #[test]
    fn a_minutes_allowance_then_a_hint_then_refill() {
        let l = limiter(3, 0);
        let (alice, bob): (Arc<str>, Arc<str>) = ("alice".into(), "bob".into());
        let t0 = Instant::now();
        for _ in 0..3 {
            l.check_at(&alice, RateKind::Calls, t0).unwrap();
        }
        let e = l.check_at(&alice, RateKind::Calls, t0).unwrap_err();
        assert_eq!(e.code(), "rate_limited");
        assert_eq!(e.retry_after_secs(), Some(20), "one token per 20 s");
        assert!(e.to_string().contains("3 tool calls per minute"), "{e}");
        l.check_at(&bob, RateKind::Calls, t0).unwrap();
        l.check_at(&alice, RateKind::Scripts, t0).unwrap();
        let later = t0 + Duration::from_secs(20);
        l.check_at(&alice, RateKind::Calls, later).unwrap();
        assert!(l.check_at(&alice, RateKind::Calls, later).is_err());
    }

    #[test]
    fn per_principal_overrides_replace_the_defaults() {
        let l = limiter(1, 5);
        let vip: Arc<str> = "vip".into();
        let t0 = Instant::now();
        for _ in 0..10 {
            l.check_at(&vip, RateKind::Calls, t0).unwrap();
        }
        l.check_at(&vip, RateKind::Scripts, t0).unwrap();
        assert!(l.check_at(&vip, RateKind::Scripts, t0).is_err());
    }

    #[test]
    fn the_bucket_map_stays_bounded() {
        let l = limiter(2, 0);
        let t0 = Instant::now();
        for i in 0..MAX_BUCKETS + 50 {
            let p: Arc<str> = format!("p{i}").into();
            l.check_at(&p, RateKind::Calls, t0).unwrap();
        }
        assert!(l.len() <= MAX_BUCKETS, "{}", l.len());
        // Idle buckets that refilled are dropped first.
        let later = t0 + Duration::from_secs(60);
        let p: Arc<str> = "late".into();
        l.check_at(&p, RateKind::Calls, later).unwrap();
        assert_eq!(l.len(), 1);
    }
}
