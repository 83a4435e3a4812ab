//! Load profiles: TOML profile files and the sweep planner.

pub mod file;
pub mod plan;
pub mod repeat;
pub mod search;
pub mod slo;
pub mod sweep;
