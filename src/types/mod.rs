//! The data model every other module shares: the report, its stages, and
//! the summaries they carry. Serde types only; this module imports nothing
//! of the crate, so `engine`, `stats`, `profile`, `report`, the front ends
//! and the control protocol all depend on it and none on each other through
//! it. The rules that fill these types live beside their subjects
//! (`stats::stage`, `stats::verdict`, `profile::search`, `server_metrics`).

mod answer;
mod baseline;
mod conversation;
mod dist;
pub mod gpu;
mod kinds;
pub mod live;
mod report;
mod requests;
mod search;
pub mod server_metrics;
mod settings;
mod slo;
mod strategy;
mod target;
mod verdict;
mod warning;

pub use answer::Answer;
pub use baseline::{BaselineComparison, CurvePoint, FigureChange, StageChange};
pub use conversation::{Conversations, TurnFigures};
pub use dist::DistSummary;
pub use kinds::{Api, EventKind, RunEnd, StageEndReason};
pub use report::*;
pub use requests::RequestLine;
pub use search::{SearchProbe, SearchSummary};
pub use settings::SavedSettings;
pub use slo::Slo;
pub use strategy::{KindInfo, Steers, StrategyKind, SweepRole};
pub use target::{Target, TargetName};
pub use verdict::{Basis, CapacityEstimate, Method, Outcome, Verdict};
pub use warning::{StageWarning, LATENCIES_PER_STAGE};
