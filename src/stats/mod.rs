//! Statistics: HDR-histogram distributions, the per-request metric formulas,
//! and the per-stage aggregator with its live series.

pub mod answer;
pub mod answer_line;
pub mod backlog;
pub mod client;
pub mod dist;
pub mod images;
pub mod judge;
pub mod metrics;
pub mod models;
pub mod policy;
pub mod pooling;
pub mod significance;
pub mod spread;
pub mod stage;
pub mod thinking;
pub mod tools;
pub mod verdict;
