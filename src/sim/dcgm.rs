//! The simulator's GPUs: a DCGM exporter's page (`/dcgm-metrics`) for N
//! simulated GPUs whose power follows the load. The power model is simple
//! enough to be the ground truth of a test: each GPU draws `idle_watts`,
//! and every generated token costs `joules_per_token`, shared evenly by the
//! GPUs (tensor parallel). The energy counter is that integral exactly, in
//! mJ: at time t, per GPU, idle × t + J/token × tokens / N.

use std::fmt::Write as _;
use std::sync::atomic::Ordering;
use std::sync::Mutex;
use std::time::Instant;

use super::batcher::Gauges;

/// `llmsweep sim --gpus N --gpu-idle-watts W --gpu-joules-per-token J`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GpuModel {
    pub count: u32,
    pub idle_watts: f64,
    pub joules_per_token: f64,
}

/// Most GPUs the simulator pretends to have.
pub const MAX_GPUS: u32 = 64;

impl GpuModel {
    /// The flags, checked; None for `--gpus 0`.
    pub fn new(count: u32, idle_watts: f64, joules_per_token: f64) -> Result<Option<Self>, String> {
        if count == 0 {
            return Ok(None);
        }
        if count > MAX_GPUS {
            return Err(format!(
                "--gpus {count}: the simulator has at most {MAX_GPUS}"
            ));
        }
        if !(idle_watts.is_finite() && (0.0..=1000.0).contains(&idle_watts)) {
            return Err(format!(
                "--gpu-idle-watts must be 0 to 1000 W, got {}",
                crate::typed::number(idle_watts)
            ));
        }
        if !(joules_per_token.is_finite() && (0.0..=100.0).contains(&joules_per_token)) {
            return Err(format!(
                "--gpu-joules-per-token must be 0 to 100 J, got {}",
                crate::typed::number(joules_per_token)
            ));
        }
        Ok(Some(GpuModel {
            count,
            idle_watts,
            joules_per_token,
        }))
    }

    /// One GPU's energy in mJ, `secs` after the start with `tokens` generated.
    pub fn energy_mj(&self, secs: f64, tokens: u64) -> f64 {
        (self.idle_watts * secs + self.joules_per_token * tokens as f64 / f64::from(self.count))
            * 1000.0
    }
}

/// An H100's frame buffer, MiB.
const FB_TOTAL_MIB: f64 = 81_559.0;
/// What the server takes at start (vLLM reserves 90 % for weights and KV cache).
const FB_USED_MIB: f64 = 0.9 * FB_TOTAL_MIB;

/// The GPUs' meter: the model, and the last page's readings to rate from.
#[derive(Debug)]
pub struct GpuMeter {
    pub model: GpuModel,
    start: Instant,
    /// Time, tokens and steps of the last page, and the power it gave.
    last: Mutex<(Instant, u64, u64, f64)>,
}

impl GpuMeter {
    pub fn new(model: GpuModel) -> Self {
        let now = Instant::now();
        GpuMeter {
            model,
            start: now,
            last: Mutex::new((now, 0, 0, model.idle_watts)),
        }
    }

    /// The exporter's page: per GPU, the default counters' names, types and
    /// labels (dcgm-exporter 3.3) and the DCP engine, SM and DRAM ratios.
    pub fn page(&self, g: &Gauges, step_s: f64) -> String {
        let now = Instant::now();
        let tokens = g.generation_tokens_total.load(Ordering::Relaxed);
        let (power, busy) = self.power_and_busy(now, tokens, g, step_s);
        let energy = self
            .model
            .energy_mj(now.duration_since(self.start).as_secs_f64(), tokens);
        let mut s = String::with_capacity(4096);
        write_figures(
            &mut s,
            figures(power, busy, energy, g.kv_usage()),
            self.model.count,
        );
        s
    }

    /// The power drawn over the time since the last page (at least 0.2 s
    /// of it; else the last reading) and the share of that time busy.
    fn power_and_busy(&self, now: Instant, tokens: u64, g: &Gauges, step_s: f64) -> (f64, f64) {
        let steps = g.steps_total.load(Ordering::Relaxed);
        let m = self.model;
        let mut last = self.last.lock().unwrap_or_else(|p| p.into_inner());
        let dt = now.duration_since(last.0).as_secs_f64();
        let busy = if dt > 0.0 {
            (steps.saturating_sub(last.2) as f64 * step_s / dt).min(1.0)
        } else {
            0.0
        };
        if dt >= 0.2 {
            let per_gpu_tokens = tokens.saturating_sub(last.1) as f64 / f64::from(m.count);
            last.3 = m.idle_watts + m.joules_per_token * per_gpu_tokens / dt;
            *last = (now, tokens, steps, last.3);
        }
        (last.3, busy)
    }
}

/// A figure of the page: its name, type, help, value and whether it is
/// written with decimals.
type Figure = (&'static str, &'static str, &'static str, f64, bool);

/// The page's figures from the power drawn, the share of time busy, the
/// energy used and the KV cache's use.
fn figures(power: f64, busy: f64, energy: f64, kv: f64) -> [Figure; 10] {
    [
        (
            "DCGM_FI_DEV_SM_CLOCK",
            "gauge",
            "SM clock frequency (in MHz).",
            1980.0,
            false,
        ),
        (
            "DCGM_FI_DEV_GPU_TEMP",
            "gauge",
            "GPU temperature (in C).",
            30.0 + power * 0.08,
            true,
        ),
        (
            "DCGM_FI_DEV_POWER_USAGE",
            "gauge",
            "Power draw (in W).",
            power,
            true,
        ),
        (
            "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
            "counter",
            "Total energy consumption since boot (in mJ).",
            energy,
            false,
        ),
        (
            "DCGM_FI_DEV_GPU_UTIL",
            "gauge",
            "GPU utilization (in %).",
            (busy * 100.0).round(),
            false,
        ),
        (
            "DCGM_FI_DEV_FB_FREE",
            "gauge",
            "Framebuffer memory free (in MiB).",
            FB_TOTAL_MIB - FB_USED_MIB,
            false,
        ),
        (
            "DCGM_FI_DEV_FB_USED",
            "gauge",
            "Framebuffer memory used (in MiB).",
            FB_USED_MIB,
            false,
        ),
        (
            "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
            "gauge",
            "Ratio of time the graphics engine is active.",
            busy,
            true,
        ),
        (
            "DCGM_FI_PROF_SM_ACTIVE",
            "gauge",
            "The ratio of cycles an SM has at least 1 warp assigned.",
            busy * 0.8,
            true,
        ),
        (
            "DCGM_FI_PROF_DRAM_ACTIVE",
            "gauge",
            "Ratio of cycles the device memory interface is active sending or receiving data.",
            busy * (0.3 + 0.5 * kv.clamp(0.0, 1.0)),
            true,
        ),
    ]
}

/// Each figure with its help and type, once per GPU with dcgm-exporter's
/// labels.
fn write_figures(s: &mut String, figures: [Figure; 10], count: u32) {
    for (name, kind, help, value, float) in figures {
        let _ = writeln!(s, "# HELP {name} {help}");
        let _ = writeln!(s, "# TYPE {name} {kind}");
        for i in 0..count {
            let _ = write!(
                s,
                "{name}{{gpu=\"{i}\",UUID=\"GPU-00000000-0000-4000-8000-{i:012x}\",pci_bus_id=\"00000000:{:02X}:00.0\",device=\"nvidia{i}\",modelName=\"NVIDIA H100 80GB HBM3 (llmsweep sim)\",Hostname=\"llmsweep-sim\",DCGM_FI_DRIVER_VERSION=\"535.129.03\"}} ",
                0x18 + i
            );
            if float {
                let _ = writeln!(s, "{value:.6}");
            } else {
                let _ = writeln!(s, "{value:.0}");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server_metrics::{dcgm, prom};

    #[test]
    fn the_page_reads_as_a_dcgm_exporters_with_energy_from_the_power_model() {
        let m = GpuModel::new(2, 50.0, 0.5).unwrap().unwrap();
        // 10 s idle and 1000 tokens: 500 J + 250 J per GPU.
        assert_eq!(m.energy_mj(10.0, 1000), 750_000.0);
        let meter = GpuMeter::new(m);
        let g = Gauges::default();
        let page = prom::parse(&meter.page(&g, 0.008));
        assert_eq!(page.bad_lines, 0);
        let r = dcgm::read(&page, 0, "127.0.0.1");
        assert_eq!(r.gpus.len(), 2);
        assert_eq!(r.rejected, 0);
        let v = &r.gpus[1].1;
        assert_eq!(v[dcgm::Field::Power as usize], Some(50.0));
        assert!(v[dcgm::Field::EnergyMj as usize].is_some());
        assert_eq!(r.gpus[1].0.hostname, "llmsweep-sim");
        assert!(GpuModel::new(0, 50.0, 0.5).unwrap().is_none());
        assert!(GpuModel::new(65, 50.0, 0.5).is_err());
        assert!(GpuModel::new(1, f64::NAN, 0.5).is_err());
        assert!(GpuModel::new(1, 50.0, -1.0).is_err());
    }
}
