//! What the front ends see of the run: the snapshot channel, the run's
//! per-second history, and the running stage so far.

use std::sync::Arc;

use tokio::sync::watch;

use crate::types::live::{RunHistory, Snapshot};
use crate::types::StageReport;

pub(super) struct Live {
    pub(super) snapshots: watch::Sender<Snapshot>,
    /// The run's per-second history, shared with every snapshot.
    pub(super) history: Arc<RunHistory>,
    /// The running stage so far, refreshed once a second (summarising five
    /// histograms 4×/s would cost the dispatcher for nothing).
    pub(super) so_far: Option<Arc<StageReport>>,
    /// The running stage's verdict so far as a warning (`saturating: …`),
    /// refreshed with `so_far` when a second closes.
    pub(super) live_warning: Option<crate::types::live::LiveWarning>,
    /// The stages cut short whose requests still run, each so far
    /// (`Snapshot::finishing`), refreshed as one joins or leaves them and
    /// when a second closes.
    pub(super) finishing: Arc<Vec<StageReport>>,
}

impl Live {
    pub(super) fn new(snapshots: watch::Sender<Snapshot>) -> Self {
        Live {
            snapshots,
            history: Arc::new(RunHistory::new()),
            so_far: None,
            live_warning: None,
            finishing: Arc::new(Vec::new()),
        }
    }
}
