//! A scan split among the CPU's cores: one home for running runs of a large catalog on threads
//! of their own, used by the 8-bit scan ([`crate::scan`]) and the sketch scan
//! ([`crate::sketch`]). How many parts a scan gets is the caller's to say
//! ([`crate::scan::scan_parts`]).

use std::ops::Range;

/// Most runs a scan is split into, whatever its caller asks for (each but one is a thread).
const MOST_RUNS: usize = 16;

/// `scan` of `0..len` in `parts` consecutive runs of the same length (the last one shorter;
/// at most [`MOST_RUNS`]), all but the first on threads of their own; the runs' outputs in
/// order. A run whose thread could not be started (the process at its limit of threads) is
/// scanned on the caller after the first; a run that panics panics the caller.
pub(crate) fn run<T: Send>(
    len: usize,
    parts: usize,
    scan: impl Fn(Range<usize>) -> T + Sync,
) -> Vec<T> {
    let per = len.div_ceil(parts.clamp(1, MOST_RUNS).min(len.max(1)));
    if per >= len {
        return vec![scan(0..len)];
    }
    let scan = &scan;
    std::thread::scope(|scope| {
        let rest: Vec<_> = (per..len)
            .step_by(per)
            .map(|start| {
                let rows = start..(start + per).min(len);
                let run = rows.clone();
                let thread = std::thread::Builder::new()
                    .name("toolshed-scan".into())
                    .spawn_scoped(scope, move || scan(run));
                (rows, thread.ok())
            })
            .collect();
        let mut out = vec![scan(0..per)];
        for (rows, thread) in rest {
            match thread.map(|t| t.join()) {
                Some(Ok(part)) => out.push(part),
                Some(Err(panic)) => std::panic::resume_unwind(panic),
                None => out.push(scan(rows)),
            }
        }
        out
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_cover_the_range_in_order() {
        for (len, parts) in [(0, 2), (1, 3), (10, 1), (10, 3), (100, 4), (9, 2), (17, 16)] {
            let runs = run(len, parts, |r| r);
            let mut next = 0;
            for r in &runs {
                assert_eq!(r.start, next, "{len} in {parts}: {runs:?}");
                assert!(!r.is_empty() || len == 0, "{len} in {parts}: {runs:?}");
                next = r.end;
            }
            assert_eq!(next, len);
            assert!(runs.len() <= parts.max(1));
        }
        assert_eq!(run(100, 4, |r| r.len()), vec![25; 4]);
        assert_eq!(run(10, 3, |r| r.len()), vec![4, 4, 2]);
        // However many are asked for, a scan has at most MOST_RUNS runs.
        assert_eq!(run(1_000, usize::MAX, |r| r).len(), MOST_RUNS);
        // The first run is the caller's (the others are on threads of their own unless one
        // could not be started).
        let caller = std::thread::current().id();
        let on_caller = run(4, 2, |_| std::thread::current().id() == caller);
        assert_eq!(on_caller.len(), 2);
        assert!(on_caller[0]);
    }
}
