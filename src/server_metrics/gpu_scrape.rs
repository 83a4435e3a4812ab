//! The GPU scraper: a task that reads every `--gpu-metrics` exporter on the
//! server scraper's interval (and, like it, once more at each stage's
//! start), on its own HTTP client, into a [`GpuHistory`] timed from the
//! run's start; and a live view of the latest readings for the dashboard.
//! A failed scrape is counted and reported as a warning, never a request.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use super::dcgm::{self, Field, GpuId, Values};
use super::gpu::GpuHistory;
use super::rounds::{lock, Handle, Running, Task};
use super::scrape::ScrapeConfig;

/// How to scrape the exporters.
#[derive(Debug, Clone)]
pub struct GpuScrapeConfig {
    /// One URL per exporter (node).
    pub urls: Vec<String>,
    pub interval: Duration,
    pub timeout: Duration,
    pub insecure: bool,
    pub follow_redirects: crate::client::FollowRedirects,
}

/// One GPU as last read.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct GpuNow {
    /// `0`, or `host:0` when several hosts are read.
    pub label: String,
    pub model_name: String,
    pub util_pct: Option<f64>,
    pub power_w: Option<f64>,
    pub fb_used_mib: Option<f64>,
    pub fb_free_mib: Option<f64>,
    pub temp_c: Option<f64>,
}

/// One scrape of all GPUs together, for sparklines.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct GpuLivePoint {
    pub t_s: f64,
    /// Summed over the GPUs read.
    pub power_w: Option<f64>,
    pub fb_used_mib: Option<f64>,
    /// Mean over the GPUs read.
    pub util_pct: Option<f64>,
}

/// What the dashboard's GPU panel shows.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct GpuLive {
    /// The exporters' URLs, credentials masked.
    pub urls: Vec<String>,
    /// When the scraper's clock (each point's `t_s`) started, in seconds
    /// since the Unix epoch: where a stage's start falls among the points.
    #[serde(default)]
    pub t0_unix_s: f64,
    pub scrapes: u64,
    pub errors: u64,
    pub last_error: Option<String>,
    pub gpus: Vec<GpuNow>,
    pub series: VecDeque<GpuLivePoint>,
}

/// What a run's GPU scraping left.
#[derive(Debug, Clone)]
pub struct GpuRecord {
    /// Credentials masked.
    pub urls: Vec<String>,
    pub t0_wall: SystemTime,
    pub history: GpuHistory,
    /// Rounds of scrapes that read at least one exporter.
    pub scrapes: u64,
    /// Failed scrapes, per URL, with the first reason.
    pub errors: Vec<(u64, Option<String>)>,
    /// Values left out as impossible, families of the wrong type.
    pub rejected: u64,
    /// Pages past [`crate::bounds::METRICS_PAGE`], read in part.
    pub cut_pages: u64,
}

impl GpuRecord {
    /// The report's warnings about reading the exporters.
    pub fn warnings(&self) -> Vec<String> {
        let mut w = Vec::new();
        for (url, (n, first)) in self.urls.iter().zip(&self.errors) {
            if *n > 0 {
                w.push(format!(
                    "gpu metrics: {n} scrapes of {url} failed{}",
                    first
                        .as_deref()
                        .map(|e| format!(" (first: {e})"))
                        .unwrap_or_default()
                ));
            }
        }
        if self.scrapes == 0 && !self.urls.is_empty() {
            w.push(format!(
                "gpu metrics: no DCGM exporter page was read from {}: the report has no GPU figures",
                self.urls.join(", ")
            ));
        }
        if self.rejected > 0 {
            w.push(format!(
                "gpu metrics: {} values were impossible (negative, not a number, a utilisation over 100 %) or of a histogram or summary family, and were left out",
                self.rejected
            ));
        }
        if self.cut_pages > 0 {
            w.push(format!(
                "gpu metrics: {} exporter pages were longer than {}; only their first part was read",
                self.cut_pages,
                crate::bounds::human(crate::bounds::METRICS_PAGE)
            ));
        }
        if self.history.dropped_gpus > 0 {
            w.push(format!(
                "gpu metrics: more than {} GPUs; the others were left out",
                super::dcgm::MAX_GPUS
            ));
        }
        w
    }
}

/// Live series keep at most this many points.
pub const LIVE_POINTS: usize = 600;

/// A running GPU scraper (see [`super::rounds`]).
pub type GpuScraper = Running<GpuRecord, GpuLive>;

/// Reads a running GPU scraper's record.
pub type GpuHandle = Handle<GpuRecord, GpuLive>;

impl Running<GpuRecord, GpuLive> {
    /// Starts scraping now; readings are timed from `t0` (the server
    /// scraper's start, so both share one clock).
    pub fn start(cfg: GpuScrapeConfig, t0: Instant, t0_wall: SystemTime) -> GpuScraper {
        let urls: Vec<String> = cfg
            .urls
            .iter()
            .map(|u| crate::redact::redact_url(u))
            .collect();
        let record = GpuRecord {
            urls: urls.clone(),
            t0_wall,
            history: GpuHistory::default(),
            scrapes: 0,
            errors: vec![(0, None); cfg.urls.len()],
            rejected: 0,
            cut_pages: 0,
        };
        let view = GpuLive {
            urls,
            t0_unix_s: t0_wall
                .duration_since(SystemTime::UNIX_EPOCH)
                .map_or(0.0, |d| d.as_secs_f64()),
            ..Default::default()
        };
        let interval = cfg.interval;
        Running::spawn(record, view, interval, move |t| run(cfg, t0, t))
    }
}

/// The host of a URL, for GPUs whose page names none.
fn host_of(url: &str) -> String {
    reqwest::Url::parse(url)
        .ok()
        .and_then(|u| u.host_str().map(str::to_string))
        .unwrap_or_default()
}

async fn run(cfg: GpuScrapeConfig, t0: Instant, task: Task<GpuRecord, GpuLive>) {
    let Task {
        shared,
        mut view,
        live,
        mut rounds,
    } = task;
    let http = match crate::client::redirect::builder(cfg.insecure)
        .timeout(cfg.timeout)
        .connect_timeout(cfg.timeout)
        .pool_max_idle_per_host(1)
        .build()
    {
        Ok(c) => c,
        Err(e) => {
            view.last_error = Some(format!("cannot build an HTTP client: {e}"));
            let _ = live.send(Arc::new(view));
            return;
        }
    };
    let pages = exporter_pages(&cfg);
    let hosts: Vec<String> = cfg.urls.iter().map(|u| host_of(u)).collect();
    let with_host = hosts.len() > 1;
    while rounds.next().await {
        let sent = Instant::now();
        let all =
            futures_util::future::join_all(pages.iter().map(|p| super::scrape::fetch(&http, p)));
        let results = rounds.read(all).await;
        let last = rounds.is_last();
        let received = Instant::now();
        let t_s = (sent.duration_since(t0) + received.duration_since(sent) / 2).as_secs_f64();
        let gpus = {
            let mut r = lock(&shared);
            let gpus = read_pages(&mut r, &mut view, results, &hosts);
            if !gpus.is_empty() {
                r.scrapes += 1;
                r.history.push(t_s, gpus.clone(), last);
            }
            gpus
        };
        if !gpus.is_empty() {
            view.scrapes += 1;
            view.gpus = gpus
                .iter()
                .map(|(id, v)| now_of(id, v, with_host))
                .collect();
            if view.series.len() == LIVE_POINTS {
                view.series.pop_front();
            }
            view.series.push_back(live_point(t_s, &gpus));
        }
        let _ = live.send(Arc::new(view.clone()));
    }
}

/// Each exporter as the server scraper reads a page: its bound, its
/// redirect policy; no credentials.
fn exporter_pages(cfg: &GpuScrapeConfig) -> Vec<ScrapeConfig> {
    cfg.urls
        .iter()
        .map(|u| ScrapeConfig {
            url: u.clone(),
            interval: cfg.interval,
            timeout: cfg.timeout,
            raw: Vec::new(),
            model: None,
            explicit: true,
            bearer: None,
            insecure: cfg.insecure,
            follow_redirects: cfg.follow_redirects,
        })
        .collect()
}

/// The GPUs a round's pages gave (none: no page read), each page's
/// failure counted in the record and the live view.
fn read_pages(
    r: &mut GpuRecord,
    view: &mut GpuLive,
    results: Vec<Result<(super::prom::Page, bool), String>>,
    hosts: &[String],
) -> Vec<(GpuId, Values)> {
    let mut gpus: Vec<(GpuId, Values)> = Vec::new();
    for (i, result) in results.into_iter().enumerate() {
        let failure = match result {
            Ok((page, cut)) => {
                r.cut_pages += u64::from(cut);
                let g = dcgm::read(&page, i, &hosts[i]);
                r.rejected += g.rejected as u64;
                r.history.dropped_gpus += g.dropped_gpus as u64;
                if g.gpus.is_empty() {
                    Some("a page without DCGM_FI_ metrics".to_string())
                } else {
                    gpus.extend(g.gpus);
                    None
                }
            }
            Err(e) => Some(e),
        };
        if let Some(e) = failure {
            let (n, first) = &mut r.errors[i];
            *n += 1;
            first.get_or_insert_with(|| e.clone());
            view.errors += 1;
            view.last_error = Some(format!("{}: {e}", r.urls[i]));
        }
    }
    gpus
}

fn now_of(id: &GpuId, v: &Values, with_host: bool) -> GpuNow {
    GpuNow {
        label: id.label(with_host),
        model_name: id.model_name.clone(),
        util_pct: v[Field::Util as usize],
        power_w: v[Field::Power as usize],
        fb_used_mib: v[Field::FbUsed as usize],
        fb_free_mib: v[Field::FbFree as usize],
        temp_c: v[Field::Temp as usize],
    }
}

/// All GPUs of one scrape: power and memory summed, utilisation averaged.
pub fn live_point(t_s: f64, gpus: &[(GpuId, Values)]) -> GpuLivePoint {
    let all = |f: Field| -> Vec<f64> { gpus.iter().filter_map(|(_, v)| v[f as usize]).collect() };
    let sum = |f: Field| {
        let v = all(f);
        (!v.is_empty()).then(|| v.iter().sum())
    };
    let util = all(Field::Util);
    GpuLivePoint {
        t_s,
        power_w: sum(Field::Power),
        fb_used_mib: sum(Field::FbUsed),
        util_pct: (!util.is_empty()).then(|| util.iter().sum::<f64>() / util.len() as f64),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_live_point_sums_power_and_averages_utilisation_and_says_nothing_of_the_absent() {
        let mut a = [None; Field::N];
        a[Field::Power as usize] = Some(300.0);
        a[Field::Util as usize] = Some(90.0);
        let mut b = [None; Field::N];
        b[Field::Power as usize] = Some(100.0);
        b[Field::Util as usize] = Some(10.0);
        let p = live_point(2.0, &[(GpuId::default(), a), (GpuId::default(), b)]);
        assert_eq!(p.power_w, Some(400.0));
        assert_eq!(p.util_pct, Some(50.0));
        assert_eq!(p.fb_used_mib, None);
    }

    #[test]
    fn warnings_name_the_exporter_without_its_credentials() {
        let r = GpuRecord {
            urls: vec![crate::redact::redact_url("http://u:pw@node1:9400/metrics")],
            t0_wall: SystemTime::now(),
            history: GpuHistory::default(),
            scrapes: 3,
            errors: vec![(2, Some("timed out after 2.0 s".into()))],
            rejected: 0,
            cut_pages: 0,
        };
        let w = r.warnings();
        assert_eq!(w.len(), 1);
        assert!(
            w[0].contains("2 scrapes of http://u:***@node1:9400/metrics failed"),
            "{w:?}"
        );
        assert!(!w[0].contains("pw"));
    }
}
