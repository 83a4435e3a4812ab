//! Load profiles: the sweep planner (and, later, TOML profile files).

pub mod sweep;
