//! llmsweep: a terminal load tester for OpenAI-compatible LLM inference servers.
//!
//! The binary is a thin shell over this library; integration tests use the
//! same modules (for example, [`sim`] to start a simulated server in-process).
//!
//! Data flows one way: `profile` plans stages, `engine` dispatches requests
//! through `client`, `stats` aggregates what comes back into the data model
//! (`types`), `report` renders it, and front ends (`headless`, `tui`, and
//! viewers through `attach`) only read the engine's snapshots.

pub mod attach;
pub mod bounds;
pub mod cli;
pub mod client;
pub mod config;
pub mod data;
pub mod engine;
pub mod headless;
pub mod phases;
pub mod profile;
pub mod redact;
pub mod report;
pub mod run;
pub mod safe;
pub mod server_metrics;
pub mod sim;
pub mod stats;
pub mod term;
pub mod tokenizer;
pub mod tui;
pub mod typed;
pub mod types;
