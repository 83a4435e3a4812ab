//! What flows between the engine and its front ends: commands in, snapshots
//! out. The types live in the data model (`crate::model::live`).

pub use crate::model::live::{
    Control, ErrorEntry, HistoryPoint, LiveStage, PlannedStage, RunHistory, SeriesPoint, Snapshot,
    StageMark,
};
