//! The report fields that carry a stage's GPUs (read from DCGM exporters)
//! and what the stage cost. Serde types only, importing nothing of the
//! crate; docs/REPORT.md documents them.

use serde::{Deserialize, Serialize};

/// Mean and maximum of a GPU gauge over a stage's scrapes.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq)]
pub struct GpuGauge {
    pub mean: f64,
    pub max: f64,
}

/// One GPU's figures over a stage, or all GPUs' together (`total`: power,
/// memory and energy summed; utilisation, clock and temperature averaged
/// over the GPUs). A figure the exporter did not export is absent, never 0.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct GpuFigures {
    /// `DCGM_FI_DEV_GPU_UTIL`, percent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub util_pct: Option<GpuGauge>,
    /// `DCGM_FI_PROF_GR_ENGINE_ACTIVE`, 0..1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engine_active: Option<GpuGauge>,
    /// `DCGM_FI_PROF_SM_ACTIVE`, 0..1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sm_active: Option<GpuGauge>,
    /// `DCGM_FI_PROF_DRAM_ACTIVE`, 0..1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dram_active: Option<GpuGauge>,
    /// `DCGM_FI_DEV_FB_USED`, MiB.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fb_used_mib: Option<GpuGauge>,
    /// `DCGM_FI_DEV_FB_FREE`, MiB.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fb_free_mib: Option<GpuGauge>,
    /// `DCGM_FI_DEV_POWER_USAGE`, W.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub power_w: Option<GpuGauge>,
    /// Joules over the window, from the increase of the
    /// `DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION` counter (mJ), not power × time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub energy_j: Option<f64>,
    /// Share of the window the energy counter covered (intervals across a
    /// reset, or a GPU that was gone, count nothing): 1 when whole.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub energy_covered: Option<f64>,
    /// `DCGM_FI_DEV_SM_CLOCK`, MHz.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sm_clock_mhz: Option<GpuGauge>,
    /// `DCGM_FI_DEV_GPU_TEMP`, °C.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temp_c: Option<GpuGauge>,
}

/// One GPU over a stage: who it is (the exporter's labels) and its figures.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct GpuUnit {
    /// The `gpu` label (the index on its node).
    pub gpu: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub uuid: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub model_name: String,
    /// The `Hostname` label (else the exporter URL's host).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub hostname: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub pod: String,
    /// Scrapes of this GPU inside the window.
    pub samples: u64,
    #[serde(flatten)]
    pub figures: GpuFigures,
}

/// Energy per unit of work over the stage's measured window.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq)]
pub struct GpuEnergy {
    /// All GPUs' joules over the window (`total.energy_j`).
    pub joules: f64,
    /// The output tokens it is divided by.
    pub output_tokens: f64,
    /// Where they were counted: `server` (its generation-token counter over
    /// the same window) or `client` (the measured completed requests').
    pub tokens_source: TokenSource,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub joules_per_output_token: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_tokens_per_joule: Option<f64>,
    /// Joules per measured completed request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub joules_per_request: Option<f64>,
}

/// Whose output-token count the energy is divided by.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum TokenSource {
    Server,
    #[default]
    Client,
}

/// What the stage's work cost at its rate, from `--gpu-hourly-cost`.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq)]
pub struct GpuCost {
    /// Dollars per GPU-hour (`--gpu-hourly-cost`).
    pub gpu_hourly_usd: f64,
    /// GPUs paid for: `--gpus`, else those the exporters showed.
    pub gpus: u32,
    /// Output (input) tokens per second and requests per second it rests on.
    pub output_tokens_per_s: f64,
    pub input_tokens_per_s: f64,
    pub requests_per_s: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usd_per_million_output_tokens: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usd_per_million_input_tokens: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usd_per_1000_requests: Option<f64>,
}

/// A stage's GPU side: per GPU, summed, per token, and its cost.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct GpuStage {
    /// Scrapes inside the window (of any exporter).
    pub samples: u64,
    /// Each GPU the exporters showed in the window.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub gpus: Vec<GpuUnit>,
    /// All GPUs together; absent without an exporter.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total: Option<GpuFigures>,
    /// Absent when any GPU's energy counter did not cover the window.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub energy: Option<GpuEnergy>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost: Option<GpuCost>,
}
