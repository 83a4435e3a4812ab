//! What the simulator's request handlers share.

use std::sync::atomic::AtomicU64;
use std::sync::Arc;

use tokio::sync::mpsc;

use super::batcher::{Gauges, SeqRequest};
use super::config::{FaultArgs, ModelParams};
use super::truth::Truth;

/// Everything the request handlers share.
pub struct AppState {
    pub model_name: String,
    /// `model_name` as a JSON string literal, quotes included.
    pub model_json: String,
    /// Every name requests may use, `model_name` first: the served names,
    /// then the LoRA adapters (vLLM's `--lora-modules`).
    pub models: Vec<super::config::ServedModel>,
    pub params: ModelParams,
    pub faults: FaultArgs,
    pub seed: u64,
    pub engine: mpsc::UnboundedSender<SeqRequest>,
    pub gauges: Arc<Gauges>,
    pub truth: Arc<Truth>,
    /// `--gpus N`: the simulated GPUs behind `/dcgm-metrics`.
    pub gpus: Option<super::dcgm::GpuMeter>,
    /// The pooling engine (embeddings, rerank, score): one request at a time.
    pub pooler: super::pooling::PoolEngine,
    pub ordinal: AtomicU64,
    pub requests_total: AtomicU64,
    /// Inputs of completed pooling batches past each batch's first: vLLM
    /// counts each input as a request (`request_success_total`).
    pub pooled_inputs_beyond_first: AtomicU64,
    /// With `params.prefix_cache`: the blocks earlier prompts computed.
    pub prefix_cache: Option<std::sync::Mutex<super::batcher::PrefixCache>>,
}
