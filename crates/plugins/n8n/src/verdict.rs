//! The verification loop of one work item: a small deterministic state machine that turns an
//! agent's verdict on a verification run into the next step, and stops the loop instead of
//! letting it spin on the same failure.
//!
//! A work item (one workflow being built) is in one [`Phase`]. Each report carries a
//! [`Verdict`] and, for failures, a `failureSignature` (any stable text the agent derives from
//! the failure, e.g. node name plus error class). The answer is the [`Next`] step and guidance.
//!
//! | phase \ verdict | `verified` | `needs_patch` | `needs_rebuild` | `trigger_only` | `needs_user_input` | `failed_terminal` |
//! |---|---|---|---|---|---|---|
//! | building, verified, trigger only | verified: done | building: patch ¹ | building: rebuild ² | trigger only: done | awaiting user: ask user | stopped: stop |
//! | awaiting user | as building, with the counters reset (a human changed the situation) | | | | | |
//! | stopped | stopped: stop (closed: start a new work item) | | | | | |
//!
//! ¹ Escalates to a rebuild when this item already had [`MAX_PATCHES`] patches since its last
//! (re)build, or when its failure signature was already reported once.
//! ² Escalates to asking the user when the item already had [`MAX_REBUILDS`] rebuilds.
//! Either failure verdict whose signature was already reported [`REPEAT_LIMIT`] times asks
//! the user too: the same failure three times means the agent's fixes are not reaching it.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Patches allowed between two (re)builds before a further patch escalates to a rebuild.
pub const MAX_PATCHES: u32 = 3;
/// Rebuilds allowed before a further one escalates to asking the user.
pub const MAX_REBUILDS: u32 = 2;
/// Reports of one failure signature after which the next one asks the user.
pub const REPEAT_LIMIT: u32 = 2;
/// Distinct failure signatures remembered per work item (the oldest is forgotten first).
pub const MAX_SIGNATURES: usize = 32;
/// Longest failure signature kept (longer ones are cut).
pub const MAX_SIGNATURE_CHARS: usize = 200;

/// What the agent concluded from a verification run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    Verified,
    NeedsPatch,
    NeedsRebuild,
    TriggerOnly,
    NeedsUserInput,
    FailedTerminal,
}

impl Verdict {
    /// The wire names, in order.
    pub const NAMES: [&'static str; 6] = [
        "verified",
        "needs_patch",
        "needs_rebuild",
        "trigger_only",
        "needs_user_input",
        "failed_terminal",
    ];
}

/// Where a work item stands.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    #[default]
    Building,
    AwaitingUser,
    Verified,
    TriggerOnly,
    Stopped,
}

/// The step the agent should take next.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Next {
    Patch,
    Rebuild,
    AskUser,
    Done,
    Stop,
}

/// One verdict report.
#[derive(Debug, Clone, Default)]
pub struct Report {
    pub failure_signature: Option<String>,
    pub failed_node: Option<String>,
    pub diagnosis: Option<String>,
}

/// The stored state of one work item.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct WorkItem {
    pub phase: Phase,
    /// Reports received.
    pub reports: u32,
    /// Patches since the last (re)build.
    pub patches: u32,
    pub rebuilds: u32,
    /// Times each failure signature was reported, with the report number that last saw it.
    pub signatures: BTreeMap<String, (u32, u32)>,
}

/// The answer to one report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Step {
    pub next: Next,
    pub guidance: String,
}

impl WorkItem {
    /// Applies `verdict` and returns the next step. Deterministic: the same state and report
    /// always give the same step and the same new state.
    pub fn apply(&mut self, verdict: Verdict, report: &Report) -> Step {
        if self.phase == Phase::Stopped {
            return Step {
                next: Next::Stop,
                guidance: "This work item is closed (stopped earlier). Do not verify or change it \
                           again under this id; report the outcome to the user, and start a new \
                           work item if they ask for another attempt."
                    .into(),
            };
        }
        if self.phase == Phase::AwaitingUser {
            // The user answered: a fresh budget for the agent's own fixes.
            self.patches = 0;
            self.rebuilds = 0;
            self.signatures.clear();
        }
        self.reports += 1;
        let at = where_it_failed(report);
        match verdict {
            Verdict::Verified => self.settle(Phase::Verified, Next::Done, "The workflow is verified. Report success to the user with the execution id as evidence; do not run it again.".into()),
            Verdict::TriggerOnly => self.settle(Phase::TriggerOnly, Next::Done, "The workflow can only be exercised by its real trigger. Tell the user how to trigger it and what to check; do not keep re-running it.".into()),
            Verdict::NeedsUserInput => self.ask_user(format!("Ask the user for what is missing{at} and wait for the answer; do not retry until then.")),
            Verdict::FailedTerminal => self.settle(Phase::Stopped, Next::Stop, format!("Stop: the failure{at} cannot be fixed by editing the workflow. Report it to the user with the diagnosis.")),
            Verdict::NeedsPatch | Verdict::NeedsRebuild => self.failure(verdict, report, &at),
        }
    }

    fn failure(&mut self, verdict: Verdict, report: &Report, at: &str) -> Step {
        let seen_before = self.note_signature(report.failure_signature.as_deref());
        if seen_before >= REPEAT_LIMIT {
            return self.ask_user(format!(
                "The same failure{at} was reported {} times; the fixes are not reaching it. Stop editing: explain the diagnosis to the user and ask how to proceed.",
                seen_before + 1
            ));
        }
        let wants_rebuild =
            verdict == Verdict::NeedsRebuild || seen_before > 0 || self.patches >= MAX_PATCHES;
        if !wants_rebuild {
            self.patches += 1;
            self.phase = Phase::Building;
            return Step {
                next: Next::Patch,
                guidance: format!(
                    "Patch the failing part{at} with a targeted edit (patch {} of {MAX_PATCHES}), then verify again.",
                    self.patches
                ),
            };
        }
        if self.rebuilds >= MAX_REBUILDS {
            return self.ask_user(format!(
                "{MAX_REBUILDS} rebuilds did not verify{at}. Stop: explain the diagnosis to the user and ask how to proceed."
            ));
        }
        self.rebuilds += 1;
        self.patches = 0;
        self.phase = Phase::Building;
        let why = if verdict == Verdict::NeedsRebuild {
            String::new()
        } else if seen_before > 0 {
            " (this failure came back after a patch, so patching does not fix it)".into()
        } else {
            format!(" ({MAX_PATCHES} patches did not verify)")
        };
        Step {
            next: Next::Rebuild,
            guidance: format!(
                "Rebuild the failing part{at} from scratch{why} (rebuild {} of {MAX_REBUILDS}), then verify again.",
                self.rebuilds
            ),
        }
    }

    fn settle(&mut self, phase: Phase, next: Next, guidance: String) -> Step {
        self.phase = phase;
        Step { next, guidance }
    }

    fn ask_user(&mut self, guidance: String) -> Step {
        self.settle(Phase::AwaitingUser, Next::AskUser, guidance)
    }

    /// Counts one report of `signature`; returns how often it was reported before.
    fn note_signature(&mut self, signature: Option<&str>) -> u32 {
        let Some(sig) = signature.map(str::trim).filter(|s| !s.is_empty()) else {
            return 0;
        };
        let sig: String = sig.chars().take(MAX_SIGNATURE_CHARS).collect();
        let reports = self.reports;
        let entry = self.signatures.entry(sig).or_insert((0, reports));
        let before = entry.0;
        *entry = (before + 1, reports);
        if self.signatures.len() > MAX_SIGNATURES {
            let oldest = self
                .signatures
                .iter()
                .min_by_key(|(_, (_, last))| *last)
                .map(|(k, _)| k.clone());
            if let Some(k) = oldest {
                self.signatures.remove(&k);
            }
        }
        before
    }
}

/// " at node X: diagnosis" when the report names them.
fn where_it_failed(report: &Report) -> String {
    let mut s = String::new();
    if let Some(node) = report.failed_node.as_deref().filter(|n| !n.is_empty()) {
        s.push_str(&format!(" at node '{}'", cut(node, 100)));
    }
    if let Some(d) = report.diagnosis.as_deref().filter(|d| !d.is_empty()) {
        s.push_str(&format!(" ({})", cut(d, 300)));
    }
    s
}

fn cut(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        format!("{}…", s.chars().take(n).collect::<String>())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(sig: Option<&str>) -> Report {
        Report {
            failure_signature: sig.map(String::from),
            failed_node: Some("HTTP Request".into()),
            ..Report::default()
        }
    }

    fn step(item: &mut WorkItem, v: Verdict, sig: Option<&str>) -> Next {
        item.apply(v, &report(sig)).next
    }

    #[test]
    fn verified_is_done_and_a_later_failure_reopens_the_item() {
        let mut w = WorkItem::default();
        assert_eq!(step(&mut w, Verdict::Verified, None), Next::Done);
        assert_eq!(w.phase, Phase::Verified);
        assert_eq!(step(&mut w, Verdict::NeedsPatch, Some("a")), Next::Patch);
        assert_eq!(w.phase, Phase::Building);
    }

    #[test]
    fn trigger_only_is_done_without_verifying() {
        let mut w = WorkItem::default();
        let s = w.apply(Verdict::TriggerOnly, &report(None));
        assert_eq!(s.next, Next::Done);
        assert_eq!(w.phase, Phase::TriggerOnly);
        assert!(s.guidance.contains("real trigger"), "{}", s.guidance);
    }

    #[test]
    fn needs_user_input_waits_and_the_answer_resets_the_budget() {
        let mut w = WorkItem::default();
        for sig in ["a", "b", "c"] {
            assert_eq!(step(&mut w, Verdict::NeedsPatch, Some(sig)), Next::Patch);
        }
        assert_eq!(step(&mut w, Verdict::NeedsUserInput, None), Next::AskUser);
        assert_eq!(w.phase, Phase::AwaitingUser);
        // After the user's answer the agent may patch again.
        assert_eq!(step(&mut w, Verdict::NeedsPatch, Some("a")), Next::Patch);
        assert_eq!(w.patches, 1);
    }

    #[test]
    fn failed_terminal_stops_and_the_item_stays_closed() {
        let mut w = WorkItem::default();
        assert_eq!(step(&mut w, Verdict::FailedTerminal, None), Next::Stop);
        for v in [
            Verdict::Verified,
            Verdict::NeedsPatch,
            Verdict::NeedsUserInput,
        ] {
            let s = w.apply(v, &report(None));
            assert_eq!(s.next, Next::Stop);
            assert!(s.guidance.contains("closed"), "{}", s.guidance);
        }
        assert_eq!(w.reports, 1, "a closed item counts no more reports");
    }

    #[test]
    fn patches_escalate_to_a_rebuild_after_the_limit() {
        let mut w = WorkItem::default();
        for (i, sig) in ["a", "b", "c"].iter().enumerate() {
            assert_eq!(step(&mut w, Verdict::NeedsPatch, Some(sig)), Next::Patch);
            assert_eq!(w.patches, i as u32 + 1);
        }
        let s = w.apply(Verdict::NeedsPatch, &report(Some("d")));
        assert_eq!(s.next, Next::Rebuild);
        assert!(
            s.guidance.contains("3 patches did not verify"),
            "{}",
            s.guidance
        );
        assert_eq!((w.patches, w.rebuilds), (0, 1));
    }

    #[test]
    fn a_repeated_signature_escalates_then_asks_the_user() {
        let mut w = WorkItem::default();
        assert_eq!(
            step(&mut w, Verdict::NeedsPatch, Some("timeout")),
            Next::Patch
        );
        // The same failure after a patch: patching does not fix it.
        let s = w.apply(Verdict::NeedsPatch, &report(Some("timeout")));
        assert_eq!(s.next, Next::Rebuild);
        assert!(s.guidance.contains("came back"), "{}", s.guidance);
        // A third time: stop looping.
        let s = w.apply(Verdict::NeedsRebuild, &report(Some("timeout")));
        assert_eq!(s.next, Next::AskUser);
        assert!(s.guidance.contains("3 times"), "{}", s.guidance);
        assert!(s.guidance.contains("HTTP Request"), "{}", s.guidance);
    }

    #[test]
    fn rebuilds_are_bounded() {
        let mut w = WorkItem::default();
        assert_eq!(
            step(&mut w, Verdict::NeedsRebuild, Some("a")),
            Next::Rebuild
        );
        assert_eq!(
            step(&mut w, Verdict::NeedsRebuild, Some("b")),
            Next::Rebuild
        );
        assert_eq!(
            step(&mut w, Verdict::NeedsRebuild, Some("c")),
            Next::AskUser
        );
        assert_eq!(w.phase, Phase::AwaitingUser);
    }

    #[test]
    fn failures_without_signature_never_count_as_repeats() {
        let mut w = WorkItem::default();
        assert_eq!(step(&mut w, Verdict::NeedsPatch, None), Next::Patch);
        assert_eq!(step(&mut w, Verdict::NeedsPatch, Some("  ")), Next::Patch);
        assert!(w.signatures.is_empty());
    }

    #[test]
    fn signatures_are_bounded_in_number_and_length() {
        let mut w = WorkItem::default();
        for i in 0..(MAX_SIGNATURES + 10) {
            w.phase = Phase::Building;
            w.patches = 0;
            w.apply(Verdict::NeedsPatch, &report(Some(&format!("sig-{i}"))));
        }
        assert_eq!(w.signatures.len(), MAX_SIGNATURES);
        assert!(
            !w.signatures.contains_key("sig-0"),
            "the oldest is forgotten"
        );
        w.apply(Verdict::NeedsPatch, &report(Some(&"x".repeat(1000))));
        assert!(w
            .signatures
            .keys()
            .all(|k| k.chars().count() <= MAX_SIGNATURE_CHARS));
    }

    #[test]
    fn the_same_history_gives_the_same_answers() {
        let history = [
            (Verdict::NeedsPatch, Some("a")),
            (Verdict::NeedsPatch, Some("b")),
            (Verdict::NeedsPatch, Some("a")),
            (Verdict::NeedsRebuild, None),
            (Verdict::Verified, None),
        ];
        let run = || {
            let mut w = WorkItem::default();
            let steps: Vec<Step> = history
                .iter()
                .map(|(v, s)| w.apply(*v, &report(*s)))
                .collect();
            (w, steps)
        };
        assert_eq!(run(), run());
    }
}
