//! The data model every other module shares: the report, its stages, and
//! the summaries they carry. Serde types only; this module imports nothing
//! of the crate, so `engine`, `stats`, `profile`, `report`, the front ends
//! and the control protocol all depend on it and none on each other through
//! it. The rules that fill these types live beside their subjects
//! (`stats::stage`, `stats::verdict`, `profile::search`, `server_metrics`).

pub mod answer;
pub mod conversation;
pub mod dist;
pub mod kinds;
pub mod live;
pub mod report;
pub mod requests;
pub mod search;
pub mod server;
pub mod slo;
pub mod verdict;

pub use answer::Answer;
pub use conversation::{Conversations, TurnFigures};
pub use dist::DistSummary;
pub use kinds::{Api, EventKind, StrategyKind};
pub use report::*;
pub use requests::RequestLine;
pub use search::{SearchProbe, SearchSummary};
pub use slo::Slo;
pub use verdict::{CapacityEstimate, Method, Outcome, Verdict};
