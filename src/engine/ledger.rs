//! The run's record so far: its finished stages (and the planned ones the
//! plan decides from), the timeline, warnings and the latest errors.

use std::collections::VecDeque;
use std::sync::Arc;

use crate::types::live::{ErrorEntry, PlannedStage};
use crate::types::{StageReport, TimelineEvent};

#[derive(Default)]
pub(super) struct Ledger {
    pub(super) finished: Vec<StageReport>,
    /// `finished` as the snapshots share it: rebuilt when a stage ends, not
    /// on every snapshot (reports carry their histograms).
    pub(super) finished_shared: Arc<Vec<StageReport>>,
    /// The planned stages that ran to their end (or were skipped): what the
    /// plan decides from. Manual stages and stages cut short by a rate
    /// change (they run again) are not in it.
    pub(super) planned_done: Vec<StageReport>,
    pub(super) timeline: Vec<TimelineEvent>,
    pub(super) recent_errors: VecDeque<ErrorEntry>,
    pub(super) warnings: Vec<String>,
    /// The run has warned that a server's `usage` was unusable (once a run).
    pub(super) usage_warned: bool,
    pub(super) manual_stages: usize,
    /// Planned stages run again after a rate change cut them short.
    pub(super) reruns: usize,
    /// A planned stage cut short by a rate change, to run again after the
    /// operator's stage: shown first among the stages to come.
    pub(super) rerun_next: Option<PlannedStage>,
}
