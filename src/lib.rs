//! llmsweep: a terminal load tester for OpenAI-compatible LLM inference servers.
//!
//! The binary is a thin shell over this library; integration tests use the
//! same modules (for example, [`sim`] to start a simulated server in-process).

pub mod client;
pub mod report;
pub mod sim;
pub mod stats;
pub mod tokenizer;
