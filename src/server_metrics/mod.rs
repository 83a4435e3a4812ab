//! The server's side of the story: what the target's Prometheus `/metrics`
//! says while the load runs, per stage, beside the client's numbers.
//!
//! * `prom`: the Prometheus text parser;
//! * `vocab`: vLLM, SGLang, TGI and llama.cpp names mapped onto one
//!   vocabulary (running, waiting, KV-cache use, preemptions, prefix cache,
//!   tokens, and the server's TTFT / ITL / queue / end-to-end histograms);
//! * `series`: readings over time in bounded memory, and window arithmetic;
//! * `summary`: a stage's summary as a pure function of the readings;
//! * `model`: the report fields (serde only);
//! * `scrape`: the scraping task and the dashboard's live view;
//! * `dcgm`: a DCGM exporter's page read into each GPU's figures;
//! * `gpu`: GPU readings over time, a stage's GPU figures, energy per token
//!   and cost (pure);
//! * `gpu_scrape`: the task that reads the `--gpu-metrics` exporters.

pub mod dcgm;
pub mod gpu;
pub mod gpu_scrape;
pub mod prom;
pub mod rounds;
pub mod scrape;
pub mod series;
pub mod summary;
pub mod vocab;

use std::time::SystemTime;

pub use gpu_scrape::{GpuHandle, GpuLive, GpuRecord, GpuScrapeConfig, GpuScraper};
pub use scrape::{LiveView, Record, ScrapeConfig, ScrapeHandle, Scraper, Status};

use anyhow::{bail, Context as _, Result};

use crate::types::server_metrics::ServerStage;
use crate::types::StageReport;

/// Seconds between scrapes unless `--server-metrics-interval` says otherwise.
pub const DEFAULT_INTERVAL_S: f64 = 1.0;

/// What the run's flags ask for.
#[derive(Debug, Clone, Default)]
pub struct Flags<'a> {
    /// `--server-metrics URL|off` (None: the target's /metrics).
    pub url: Option<&'a str>,
    /// `--server-metric NAME` (repeatable).
    pub raw: &'a [String],
    /// `--server-metrics-interval SECONDS`.
    pub interval_s: Option<f64>,
}

/// The scraper's configuration for a run against `base_url` (the target's
/// base URL, without `/v1`); None when the user turned scraping off.
pub fn config(
    flags: &Flags,
    base_url: &str,
    model: &str,
    api_key: Option<String>,
    insecure: bool,
    follow_redirects: crate::client::FollowRedirects,
) -> Result<Option<ScrapeConfig>> {
    let interval = flags.interval_s.unwrap_or(DEFAULT_INTERVAL_S);
    if !(interval.is_finite() && (0.05..=3600.0).contains(&interval)) {
        bail!("--server-metrics-interval {interval} is not possible: use 0.05 to 3600 seconds");
    }
    for name in flags.raw {
        if name.is_empty() || prom::parse_line(&format!("{name} 0")).is_none_or(|s| s.name != *name)
        {
            bail!("--server-metric {name:?} is not a Prometheus metric name (e.g. my_server:queue_depth)");
        }
    }
    let (url, explicit) = match flags.url.map(str::trim) {
        Some(u) if u.eq_ignore_ascii_case("off") || u.eq_ignore_ascii_case("none") => {
            return Ok(None)
        }
        Some(u) => {
            let parsed = reqwest::Url::parse(u)
                .with_context(|| format!("--server-metrics {u:?} is not a URL (or `off`)"))?;
            if !matches!(parsed.scheme(), "http" | "https") {
                bail!("--server-metrics {u:?}: use an http or https URL, or `off`");
            }
            (u.to_string(), true)
        }
        None => (crate::client::join_url(base_url, "/metrics"), false),
    };
    let timeout = std::time::Duration::from_secs_f64(interval.clamp(0.5, 5.0) * 2.0);
    Ok(Some(ScrapeConfig {
        url,
        interval: std::time::Duration::from_secs_f64(interval),
        timeout,
        raw: flags.raw.to_vec(),
        model: Some(model.to_string()),
        explicit,
        // The target's key goes only to the target's own /metrics.
        bearer: if explicit { None } else { api_key },
        insecure,
        follow_redirects,
    }))
}

/// The GPU flags of a run.
#[derive(Debug, Clone, Default)]
pub struct GpuFlags<'a> {
    /// `--gpu-metrics URL` (repeatable): DCGM exporters.
    pub urls: &'a [String],
    /// `--server-metrics-interval`: one clock for both scrapers.
    pub interval_s: Option<f64>,
    /// `--gpu-hourly-cost DOLLARS` (per GPU).
    pub hourly_usd: Option<f64>,
    /// `--gpus N`.
    pub gpus: Option<u32>,
}

/// An exporter's URL as given, with `/metrics` added to a bare
/// `http://host:9400`.
fn exporter_url(u: &str) -> Result<String> {
    let u = u.trim();
    let mut parsed = reqwest::Url::parse(u).with_context(|| {
        format!(
            "--gpu-metrics {:?} is not a URL (e.g. http://gpu-node:9400/metrics)",
            crate::redact::redact_url(u)
        )
    })?;
    if !matches!(parsed.scheme(), "http" | "https") {
        bail!(
            "--gpu-metrics {:?}: use an http or https URL",
            crate::redact::redact_url(u)
        );
    }
    if parsed.path().is_empty() || parsed.path() == "/" {
        parsed.set_path("/metrics");
    }
    Ok(parsed.to_string())
}

/// The GPU scraper's configuration (None: no `--gpu-metrics`) and the price
/// (None: no `--gpu-hourly-cost`). A price needs a GPU count: `--gpus`, or
/// exporters to count them.
pub fn gpu_config(
    flags: &GpuFlags,
    insecure: bool,
    follow_redirects: crate::client::FollowRedirects,
) -> Result<(Option<GpuScrapeConfig>, Option<gpu::Price>)> {
    let urls = flags
        .urls
        .iter()
        .map(|u| exporter_url(u))
        .collect::<Result<Vec<_>>>()?;
    let price = match flags.hourly_usd {
        None => None,
        Some(usd) => {
            if flags.gpus.is_none() && urls.is_empty() {
                bail!("--gpu-hourly-cost needs to know how many GPUs it pays for: add --gpus N, or --gpu-metrics URL to count them from the DCGM exporters");
            }
            Some(gpu::Price {
                gpu_hourly_usd: usd,
                gpus: flags.gpus,
            })
        }
    };
    let interval = flags.interval_s.unwrap_or(DEFAULT_INTERVAL_S);
    let scrape = (!urls.is_empty()).then(|| GpuScrapeConfig {
        urls,
        interval: std::time::Duration::from_secs_f64(interval),
        timeout: std::time::Duration::from_secs_f64(interval.clamp(0.5, 5.0) * 2.0),
        insecure,
        follow_redirects,
    });
    Ok((scrape, price))
}

/// The GPU side of a run while it runs: the exporters' readings (if any)
/// and the price (if any), for checkpoints and exports.
#[derive(Clone, Default)]
pub struct GpuSide {
    pub handle: Option<GpuHandle>,
    pub price: Option<gpu::Price>,
}

impl GpuSide {
    /// Puts each stage's GPU figures on it from what was scraped so far
    /// (after the server's: energy per token reads its token counter).
    pub fn attach_live(&self, stages: &mut [StageReport]) {
        match &self.handle {
            Some(h) => h.with(|r| attach_gpu(Some(r), self.price, stages)),
            None => attach_gpu(None, self.price, stages),
        }
    }
}

/// Puts each stage's GPU figures on it (after the server's summary).
pub fn attach_gpu(
    record: Option<&GpuRecord>,
    price: Option<gpu::Price>,
    stages: &mut [StageReport],
) {
    for s in stages.iter_mut() {
        let window = record.and_then(|r| stage_window(s, r.t0_wall));
        s.gpu = gpu::stage_figures(record.map(|r| &r.history), window, price, s);
    }
}

/// The server's summary of every stage, as scraped so far (exports and
/// checkpoints during the run).
pub fn attach_live(handle: &ScrapeHandle, stages: &mut [StageReport]) {
    handle.with(|record| {
        for s in stages.iter_mut() {
            s.server = summarize_stage(record, s);
        }
    });
}

/// The stage's window in seconds since the scraper started: its measured
/// window when it has one, else the whole stage.
pub fn stage_window(stage: &StageReport, t0_wall: SystemTime) -> Option<(f64, f64)> {
    let start = humantime::parse_rfc3339_weak(&stage.start).ok()?;
    let offset = match start.duration_since(t0_wall) {
        Ok(d) => d.as_secs_f64(),
        Err(e) => -e.duration().as_secs_f64(),
    };
    let (from, len) = if stage.measured_s > 0.0 {
        (stage.measured_from_s.unwrap_or(0.0), stage.measured_s)
    } else {
        (0.0, stage.duration_s)
    };
    // Paused seconds are left out of the durations but not out of the clock.
    let len = len + stage.paused_s.max(0.0);
    let a = offset + from.max(0.0);
    (len > 0.0).then_some((a, a + len))
}

/// The server's summary of one stage, from what has been scraped.
pub fn summarize_stage(record: &Record, stage: &StageReport) -> Option<ServerStage> {
    let (a, b) = stage_window(stage, record.t0_wall)?;
    let client = summary::ClientSide {
        ttft_mean_ms: stage.ttft_ms.mean,
        e2e_mean_ms: stage.latency_ms.mean,
        measured: stage.requests.measured,
        sent: stage.requests.sent,
    };
    let source = record.source.map_or("other", vocab::Source::name);
    summary::summarize(
        record.history.points(),
        source,
        &record.raw_ids,
        a,
        b,
        client,
    )
}

/// Puts the server's summary on every stage, and returns the warnings the
/// scraping left. Called once, when the run is over.
pub fn attach(record: &Record, stages: &mut [StageReport]) -> Vec<String> {
    for s in stages.iter_mut() {
        s.server = summarize_stage(record, s);
    }
    record.warnings()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_become_a_scrape_config() {
        let base = "http://127.0.0.1:8000";
        // A run with an API key: its scrape config.
        let keyed = |flags: &Flags| {
            config(
                flags,
                base,
                "m",
                Some("sk".into()),
                false,
                Default::default(),
            )
            .unwrap()
            .unwrap()
        };
        let c = keyed(&Flags::default());
        assert_eq!(c.url, "http://127.0.0.1:8000/metrics");
        assert!(!c.explicit);
        assert_eq!(c.bearer.as_deref(), Some("sk"));
        assert_eq!(c.interval.as_secs_f64(), 1.0);
        let off = Flags {
            url: Some("off"),
            ..Default::default()
        };
        assert!(config(&off, base, "m", None, false, Default::default())
            .unwrap()
            .is_none());
        let other = Flags {
            url: Some("http://10.0.0.1:9400/metrics"),
            ..Default::default()
        };
        let c = keyed(&other);
        assert!(c.explicit);
        assert_eq!(c.bearer, None, "the key stays with the target");
        for bad in [
            Flags {
                url: Some("ftp://x/metrics"),
                ..Default::default()
            },
            Flags {
                url: Some("not a url"),
                ..Default::default()
            },
            Flags {
                interval_s: Some(0.0),
                ..Default::default()
            },
            Flags {
                interval_s: Some(f64::NAN),
                ..Default::default()
            },
            Flags {
                interval_s: Some(1e300),
                ..Default::default()
            },
            Flags {
                raw: &["bad name".to_string()],
                ..Default::default()
            },
        ] {
            assert!(
                config(&bad, base, "m", None, false, Default::default()).is_err(),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn gpu_flags_become_a_scrape_config_and_a_price() {
        let urls = [
            "http://node-1:9400".to_string(),
            "https://node-2:9400/x".into(),
        ];
        let flags = GpuFlags {
            urls: &urls,
            hourly_usd: Some(2.5),
            ..Default::default()
        };
        let (scrape, price) = gpu_config(&flags, false, Default::default()).unwrap();
        let scrape = scrape.unwrap();
        assert_eq!(
            scrape.urls,
            ["http://node-1:9400/metrics", "https://node-2:9400/x"],
            "the exporter's path when none is given"
        );
        assert_eq!(scrape.interval.as_secs_f64(), 1.0);
        let price = price.unwrap();
        assert_eq!((price.gpu_hourly_usd, price.gpus), (2.5, None));
        let priced_alone = GpuFlags {
            hourly_usd: Some(2.5),
            ..Default::default()
        };
        let e = gpu_config(&priced_alone, false, Default::default()).unwrap_err();
        assert!(e.to_string().contains("--gpus N"), "{e}");
        let counted = GpuFlags {
            gpus: Some(8),
            ..priced_alone
        };
        let (none, price) = gpu_config(&counted, false, Default::default()).unwrap();
        assert!(none.is_none());
        assert_eq!(price.unwrap().gpus, Some(8));
        let bad = ["ftp://node:9400".to_string()];
        let e = gpu_config(
            &GpuFlags {
                urls: &bad,
                ..Default::default()
            },
            false,
            Default::default(),
        )
        .unwrap_err();
        assert!(e.to_string().contains("http or https"), "{e}");
        let secret = ["ftp://user:hunter2@node:9400/metrics".to_string()];
        let e = gpu_config(
            &GpuFlags {
                urls: &secret,
                ..Default::default()
            },
            false,
            Default::default(),
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("user:***@node") && !e.contains("hunter2"), "{e}");
        let e = gpu_config(
            &GpuFlags {
                urls: &["not a url".to_string()],
                ..Default::default()
            },
            false,
            Default::default(),
        )
        .unwrap_err();
        assert!(e.to_string().contains("not a URL"), "{e}");
    }

    #[test]
    fn a_stage_window_is_its_measured_window_on_the_scrapers_clock() {
        let t0 = humantime::parse_rfc3339("2026-01-01T00:00:00Z").unwrap();
        let stage = StageReport {
            start: "2026-01-01T00:00:10.500Z".into(),
            duration_s: 30.0,
            measured_s: 20.0,
            measured_from_s: Some(5.0),
            ..Default::default()
        };
        assert_eq!(stage_window(&stage, t0), Some((15.5, 35.5)));
        let unmeasured = StageReport {
            measured_s: 0.0,
            ..stage
        };
        assert_eq!(stage_window(&unmeasured, t0), Some((10.5, 40.5)));
    }
}
