//! The GPUs over a run: DCGM readings in bounded memory, a stage's figures
//! as a pure function of them and its window, and what follows from them
//! (energy per token and per request, and, with an hourly price, the cost of
//! a million tokens and a thousand requests at the stage's rate).
//!
//! Energy comes from `DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION`, a counter in
//! mJ: each interval between two scrapes adds its increase, in proportion to
//! its share inside the window. A scrape that failed only makes an interval
//! longer (the counter loses nothing); an interval over which the counter
//! went down (a driver reload, a wrap) adds nothing and is not covered, so
//! no energy is invented and none is negative.

use super::dcgm::{Field, GpuId, Values, MAX_GPUS};
use crate::types::gpu::{GpuCost, GpuEnergy, GpuFigures, GpuGauge, GpuStage, GpuUnit, TokenSource};
use crate::types::StageReport;

/// One scrape of every exporter: the GPUs' figures, by index into
/// [`GpuHistory::ids`].
#[derive(Debug, Clone, PartialEq)]
pub struct GpuPoint {
    pub t_s: f64,
    pub gpus: Vec<(usize, Values)>,
}

/// Readings over the run, bounded as the server's are: when full, every
/// other point is dropped and from then on every other scrape is kept.
#[derive(Debug, Clone)]
pub struct GpuHistory {
    ids: Vec<GpuId>,
    points: Vec<GpuPoint>,
    cap: usize,
    stride: u64,
    offered: u64,
    /// GPUs past [`MAX_GPUS`], left out.
    pub dropped_gpus: u64,
}

impl Default for GpuHistory {
    fn default() -> Self {
        GpuHistory::new(super::series::HISTORY_CAP)
    }
}

impl GpuHistory {
    pub fn new(cap: usize) -> Self {
        GpuHistory {
            ids: Vec::new(),
            points: Vec::new(),
            cap: cap.max(4),
            stride: 1,
            offered: 0,
            dropped_gpus: 0,
        }
    }

    pub fn ids(&self) -> &[GpuId] {
        &self.ids
    }

    pub fn points(&self) -> &[GpuPoint] {
        &self.points
    }

    /// Adds a scrape. `keep` forces it in (the last scrape of a run).
    pub fn push(&mut self, t_s: f64, gpus: Vec<(GpuId, Values)>, keep: bool) {
        let take = keep || self.offered % self.stride == 0;
        self.offered += 1;
        if !take {
            return;
        }
        let mut point = GpuPoint {
            t_s,
            gpus: Vec::with_capacity(gpus.len()),
        };
        for (id, v) in gpus {
            // One GPU whatever its pod: a pod mapped to it mid-run (or its
            // model name, late) is a label, not another GPU.
            let i = match self.ids.iter().position(|k| k.same(&id)) {
                Some(i) => {
                    let known = &mut self.ids[i];
                    if known.pod.is_empty() {
                        known.pod = id.pod;
                    }
                    if known.model_name.is_empty() {
                        known.model_name = id.model_name;
                    }
                    i
                }
                None if self.ids.len() < MAX_GPUS => {
                    self.ids.push(id);
                    self.ids.len() - 1
                }
                None => {
                    self.dropped_gpus += 1;
                    continue;
                }
            };
            point.gpus.push((i, v));
        }
        if self.points.len() >= self.cap {
            let mut n = 0;
            self.points.retain(|_| {
                n += 1;
                n % 2 == 1
            });
            self.stride *= 2;
        }
        self.points.push(point);
    }
}

fn value(p: &GpuPoint, gpu: usize, f: Field) -> Option<f64> {
    p.gpus
        .iter()
        .find(|(i, _)| *i == gpu)
        .and_then(|(_, v)| v[f as usize])
}

/// Joules one GPU used in [a, b], and the share of the window its counter
/// covered; None when no interval of its counter overlaps the window.
pub fn energy_j(points: &[GpuPoint], gpu: usize, a: f64, b: f64) -> Option<(f64, f64)> {
    if b <= a {
        return None;
    }
    let mut total_mj = 0.0;
    let mut covered = 0.0;
    let mut any = false;
    let mut prev: Option<(f64, f64)> = None;
    for p in points {
        let Some(v) = value(p, gpu, Field::EnergyMj) else {
            // Absent from this page: its counter goes on; the next reading
            // closes a longer interval.
            continue;
        };
        if let Some((t0, v0)) = prev {
            let inside = p.t_s.min(b) - t0.max(a);
            if inside > 0.0 && p.t_s > t0 {
                any = true;
                // A counter that went back (a reset, a wrap) or on faster
                // than any GPU draws (a drop then a jump to 2e15 mJ read
                // 5e11 W) says nothing of the interval: not covered, so
                // the figures per token say "-" rather than a wrong one.
                let watts = (v - v0) / 1000.0 / (p.t_s - t0);
                if v >= v0 && watts <= crate::bounds::GPU_WATTS {
                    total_mj += (v - v0) * inside / (p.t_s - t0);
                    covered += inside;
                }
            }
        }
        prev = Some((p.t_s, v));
        if p.t_s >= b {
            break;
        }
    }
    // Whole, when the parts add up to it but for rounding.
    let share = covered / (b - a);
    let share = if share > 1.0 - 1e-9 {
        1.0
    } else {
        share.max(0.0)
    };
    any.then(|| (total_mj / 1000.0, share))
}

fn stats(mut v: Vec<f64>) -> Option<GpuGauge> {
    v.retain(|x| x.is_finite());
    if v.is_empty() {
        return None;
    }
    let max = v.iter().copied().fold(f64::MIN, f64::max);
    Some(GpuGauge {
        mean: v.iter().sum::<f64>() / v.len() as f64,
        max,
    })
}

/// Figures summed over GPUs (the rest are averaged over them).
fn summed(f: Field) -> bool {
    matches!(f, Field::Power | Field::FbUsed | Field::FbFree)
}

fn set(fig: &mut GpuFigures, f: Field, g: Option<GpuGauge>) {
    match f {
        Field::Util => fig.util_pct = g,
        Field::EngineActive => fig.engine_active = g,
        Field::SmActive => fig.sm_active = g,
        Field::DramActive => fig.dram_active = g,
        Field::FbUsed => fig.fb_used_mib = g,
        Field::FbFree => fig.fb_free_mib = g,
        Field::Power => fig.power_w = g,
        Field::SmClock => fig.sm_clock_mhz = g,
        Field::Temp => fig.temp_c = g,
        Field::EnergyMj => {}
    }
}

/// Share of the window an energy counter must cover for the figures per
/// token: a stage whose counter missed more says "-" rather than too little.
pub const ENERGY_COVERED: f64 = 0.99;

/// The GPUs' figures over [a, b] (seconds on the scraper's clock). None when
/// no GPU was seen in it.
pub fn summarize(h: &GpuHistory, a: f64, b: f64) -> Option<GpuStage> {
    if a.is_nan() || b.is_nan() || b <= a {
        return None;
    }
    let points = h.points();
    let inside: Vec<&GpuPoint> = points.iter().filter(|p| p.t_s >= a && p.t_s <= b).collect();
    let mut units = Vec::new();
    let mut energies = Vec::new();
    for (i, id) in h.ids().iter().enumerate() {
        let samples = inside
            .iter()
            .filter(|p| p.gpus.iter().any(|(g, _)| *g == i))
            .count() as u64;
        let energy = energy_j(points, i, a, b);
        if samples == 0 && energy.is_none() {
            continue;
        }
        let mut figures = GpuFigures::default();
        for f in Field::ALL {
            set(
                &mut figures,
                f,
                stats(inside.iter().filter_map(|p| value(p, i, f)).collect()),
            );
        }
        figures.energy_j = energy.map(|e| e.0);
        figures.energy_covered = energy.map(|e| e.1);
        energies.push(energy);
        units.push(GpuUnit {
            gpu: id.gpu.clone(),
            uuid: id.uuid.clone(),
            model_name: id.model_name.clone(),
            hostname: id.hostname.clone(),
            pod: id.pod.clone(),
            samples,
            figures,
        });
    }
    if units.is_empty() {
        return None;
    }
    // All GPUs: each scrape's sum (or mean over the GPUs it read), then
    // their statistics over the window.
    let mut total = GpuFigures::default();
    for f in Field::ALL {
        let per_scrape: Vec<f64> = inside
            .iter()
            .filter_map(|p| {
                let v: Vec<f64> = p.gpus.iter().filter_map(|(_, v)| v[f as usize]).collect();
                if v.is_empty() {
                    None
                } else if summed(f) {
                    Some(v.iter().sum())
                } else {
                    Some(v.iter().sum::<f64>() / v.len() as f64)
                }
            })
            .collect();
        set(&mut total, f, stats(per_scrape));
    }
    // Energy of all GPUs only when every GPU of the window has a counter.
    if energies.iter().all(Option::is_some) {
        total.energy_j = Some(energies.iter().flatten().map(|e| e.0).sum());
        total.energy_covered = energies.iter().flatten().map(|e| e.1).reduce(f64::min);
    }
    Some(GpuStage {
        samples: inside.len() as u64,
        gpus: units,
        total: Some(total),
        energy: None,
        cost: None,
    })
}

/// The work a stage's energy and cost are divided by.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Work {
    /// Output tokens the server counted over the window (its generation-token counter).
    pub server_output_tokens: Option<f64>,
    /// Output tokens of the measured completed requests.
    pub client_output_tokens: f64,
    /// Measured completed requests.
    pub requests: u64,
    /// The stage's achieved rate (requests/s) and token rates at it.
    pub requests_per_s: f64,
    pub output_tokens_per_s: f64,
    pub input_tokens_per_s: f64,
}

impl Work {
    pub fn of(s: &StageReport) -> Work {
        let rate = if s.rates.completed_per_s > 0.0 {
            s.rates.completed_per_s
        } else {
            s.rates.requests_per_s
        };
        let prompt = s.tokens.prompt_mean_server.unwrap_or(s.tokens.prompt_mean);
        Work {
            server_output_tokens: s
                .server
                .as_ref()
                .and_then(|x| x.generation_tokens)
                .map(|c| c.total),
            client_output_tokens: s.rates.output_tokens_per_s * s.measured_s,
            requests: s.requests.measured,
            requests_per_s: rate,
            output_tokens_per_s: rate * s.tokens.output_mean,
            input_tokens_per_s: rate * prompt,
        }
    }
}

/// Joules per output token and per request, tokens per joule: None unless
/// the energy counter covered the window ([`ENERGY_COVERED`]).
pub fn energy_per_work(total: &GpuFigures, w: &Work) -> Option<GpuEnergy> {
    let joules = total.energy_j?;
    if total.energy_covered? < ENERGY_COVERED || !joules.is_finite() || joules < 0.0 {
        return None;
    }
    let (output_tokens, tokens_source) = match w.server_output_tokens {
        Some(t) if t >= 1.0 => (t, TokenSource::Server),
        _ => (w.client_output_tokens, TokenSource::Client),
    };
    let per_token = (output_tokens >= 1.0).then(|| joules / output_tokens);
    Some(GpuEnergy {
        joules,
        output_tokens,
        tokens_source,
        joules_per_output_token: per_token,
        output_tokens_per_joule: (joules > 0.0 && output_tokens >= 1.0)
            .then(|| output_tokens / joules),
        joules_per_request: (w.requests > 0).then(|| joules / w.requests as f64),
    })
}

/// `--gpu-hourly-cost` and `--gpus`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Price {
    /// Dollars per GPU-hour.
    pub gpu_hourly_usd: f64,
    /// GPUs paid for (None: as many as the exporters show).
    pub gpus: Option<u32>,
}

/// What the stage's work cost at its rate: the GPUs' price per second over
/// what they did per second. Each figure carries the whole price (input and
/// output tokens are not split).
pub fn cost(price: Price, gpus: u32, w: &Work) -> GpuCost {
    let usd_per_s = price.gpu_hourly_usd * f64::from(gpus) / 3600.0;
    let per =
        |rate: f64, unit: f64| (rate > 0.0 && rate.is_finite()).then(|| usd_per_s / rate * unit);
    GpuCost {
        gpu_hourly_usd: price.gpu_hourly_usd,
        gpus,
        output_tokens_per_s: w.output_tokens_per_s,
        input_tokens_per_s: w.input_tokens_per_s,
        requests_per_s: w.requests_per_s,
        usd_per_million_output_tokens: per(w.output_tokens_per_s, 1e6),
        usd_per_million_input_tokens: per(w.input_tokens_per_s, 1e6),
        usd_per_1000_requests: per(w.requests_per_s, 1000.0),
    }
}

/// A stage's GPU side: the exporters' figures over `window` (when there
/// are exporters), energy per unit of work, and the cost with a price.
pub fn stage_figures(
    history: Option<&GpuHistory>,
    window: Option<(f64, f64)>,
    price: Option<Price>,
    stage: &StageReport,
) -> Option<GpuStage> {
    let g = match (history, window) {
        (Some(h), Some((a, b))) => summarize(h, a, b),
        _ => None,
    };
    derive(g, price, stage)
}

/// Energy per unit of work and the cost, from the GPUs' figures (if any)
/// and the stage's work.
fn derive(mut g: Option<GpuStage>, price: Option<Price>, stage: &StageReport) -> Option<GpuStage> {
    let w = Work::of(stage);
    if let Some(g) = g.as_mut() {
        g.energy = g.total.as_ref().and_then(|t| energy_per_work(t, &w));
        g.cost = None;
    }
    if let Some(p) = price {
        let seen = g.as_ref().map_or(0, |g| g.gpus.len() as u32);
        let gpus = p.gpus.unwrap_or(seen);
        if gpus > 0 {
            g.get_or_insert_with(GpuStage::default).cost = Some(cost(p, gpus, &w));
        }
    }
    g
}

/// The price a report's settings name (`gpu_hourly_cost`, `gpus`).
pub fn price_of(config: &serde_json::Value) -> Option<Price> {
    let s = crate::types::SavedSettings::of(config);
    Some(Price {
        gpu_hourly_usd: s.gpu_hourly_cost?,
        gpus: s.gpus,
    })
}

/// A merged report's energy per token and cost again, from its merged
/// stages (the shards read the same GPUs: their figures are one shard's,
/// the work is all shards').
pub fn rederive(r: &mut crate::types::Report) {
    let price = price_of(&r.config);
    for s in r.stages.iter_mut() {
        s.gpu = derive(s.gpu.take(), price, s);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(gpu: &str) -> GpuId {
        GpuId {
            hostname: "h".into(),
            uuid: format!("GPU-{gpu}"),
            gpu: gpu.into(),
            ..Default::default()
        }
    }

    fn vals(power: f64, energy_mj: Option<f64>) -> Values {
        let mut v = [None; Field::N];
        v[Field::Power as usize] = Some(power);
        v[Field::EnergyMj as usize] = energy_mj;
        v
    }

    /// GPU 0 draws 300 W, GPU 1 100 W, scraped once a second.
    fn two_gpus(n: usize) -> GpuHistory {
        let mut h = GpuHistory::default();
        for i in 0..=n {
            let t = i as f64;
            h.push(
                t,
                vec![
                    (id("0"), vals(300.0, Some(1e9 + 300_000.0 * t))),
                    (id("1"), vals(100.0, Some(5e8 + 100_000.0 * t))),
                ],
                false,
            );
        }
        h
    }

    #[test]
    fn energy_is_the_counters_increase_cut_at_the_window() {
        let h = two_gpus(10);
        let (j, covered) = energy_j(h.points(), 0, 2.5, 6.0).unwrap();
        assert!((j - 300.0 * 3.5).abs() < 1e-6, "{j}");
        assert_eq!(covered, 1.0);
        let s = summarize(&h, 2.5, 6.0).unwrap();
        assert_eq!(s.gpus.len(), 2);
        assert_eq!(s.samples, 4, "scrapes at 3, 4, 5 and 6 s");
        let t = s.total.unwrap();
        assert!((t.energy_j.unwrap() - 400.0 * 3.5).abs() < 1e-6);
        assert_eq!(t.power_w.unwrap().mean, 400.0, "power sums over GPUs");
        assert_eq!(s.gpus[1].figures.power_w.unwrap().max, 100.0);
        assert!(t.util_pct.is_none(), "not exported: absent");
        assert!(summarize(&h, 20.0, 30.0).is_none());
    }

    /// A counter that dropped and then jumped to 2e15 mJ read
    /// 1,996,826,432,798 J in a 4 s stage (about 5e11 W beside 350 W of
    /// power): an interval faster than any GPU draws is not counted.
    #[test]
    fn an_energy_counter_that_drops_then_jumps_adds_nothing() {
        let mut h = GpuHistory::default();
        for (t, mj) in [
            (0.0, 1e9),
            (1.0, 1e9 + 350_000.0),
            (2.0, 10.0),
            (3.0, 2e15),
            (4.0, 2e15 + 350_000.0),
        ] {
            h.push(t, vec![(id("0"), vals(350.0, Some(mj)))], false);
        }
        let (j, covered) = energy_j(h.points(), 0, 0.0, 4.0).unwrap();
        assert!((j - 700.0).abs() < 1e-6, "{j}");
        assert!((covered - 0.5).abs() < 1e-9, "{covered}");
    }

    #[test]
    fn a_reset_or_a_wrap_adds_nothing_and_missing_scrapes_lose_nothing() {
        let mut h = GpuHistory::default();
        // 0..2: 1 J/s; at 3 the counter starts again from 0 (driver reload);
        // 3..5: 1 J/s; the scrape at 4 failed (no point).
        for (t, mj) in [
            (0.0, 5000.0),
            (1.0, 6000.0),
            (2.0, 7000.0),
            (3.0, 200.0),
            (5.0, 2200.0),
        ] {
            h.push(t, vec![(id("0"), vals(1.0, Some(mj)))], false);
        }
        let (j, covered) = energy_j(h.points(), 0, 0.0, 5.0).unwrap();
        assert!(
            (j - 4.0).abs() < 1e-9,
            "{j}: 2 J before, 2 J after, none for the reset"
        );
        assert!((covered - 0.8).abs() < 1e-9);
        let s = summarize(&h, 0.0, 5.0).unwrap();
        assert!(s.total.as_ref().unwrap().energy_j.unwrap() >= 0.0);
        // Not covered: no energy per token.
        let w = Work {
            client_output_tokens: 100.0,
            ..Default::default()
        };
        assert!(energy_per_work(s.total.as_ref().unwrap(), &w).is_none());
        // Across the missing scrape alone, all is counted.
        let (j, covered) = energy_j(h.points(), 0, 3.0, 5.0).unwrap();
        assert!((j - 2.0).abs() < 1e-9);
        assert_eq!(covered, 1.0);
    }

    #[test]
    fn a_gpu_that_disappears_leaves_the_sum_without_energy_per_token() {
        let mut h = GpuHistory::default();
        for i in 0..=6 {
            let t = i as f64;
            let mut gpus = vec![(id("0"), vals(300.0, Some(300_000.0 * t)))];
            if i <= 3 {
                gpus.push((id("1"), vals(100.0, Some(100_000.0 * t))));
            }
            h.push(t, gpus, false);
        }
        let s = summarize(&h, 1.0, 6.0).unwrap();
        assert_eq!(s.gpus.len(), 2);
        assert!((s.gpus[1].figures.energy_covered.unwrap() - 0.4).abs() < 1e-9);
        let w = Work {
            client_output_tokens: 1000.0,
            ..Default::default()
        };
        assert!(energy_per_work(s.total.as_ref().unwrap(), &w).is_none());
        // After it is gone, the GPU that is left is the stage's.
        let later = summarize(&h, 4.0, 6.0).unwrap();
        assert_eq!(later.gpus.len(), 1);
        let e = energy_per_work(later.total.as_ref().unwrap(), &w).unwrap();
        assert!((e.joules_per_output_token.unwrap() - 0.6).abs() < 1e-9);
    }

    #[test]
    fn energy_per_token_prefers_the_servers_count_and_cost_follows_the_rate() {
        let total = GpuFigures {
            energy_j: Some(3000.0),
            energy_covered: Some(1.0),
            ..Default::default()
        };
        let mut w = Work {
            server_output_tokens: Some(6000.0),
            client_output_tokens: 5000.0,
            requests: 50,
            requests_per_s: 8.0,
            output_tokens_per_s: 8.0 * 128.0,
            input_tokens_per_s: 8.0 * 256.0,
        };
        let e = energy_per_work(&total, &w).unwrap();
        assert_eq!(e.tokens_source, TokenSource::Server);
        assert_eq!(e.joules_per_output_token, Some(0.5));
        assert_eq!(e.output_tokens_per_joule, Some(2.0));
        assert_eq!(e.joules_per_request, Some(60.0));
        w.server_output_tokens = None;
        let e = energy_per_work(&total, &w).unwrap();
        assert_eq!(e.tokens_source, TokenSource::Client);
        assert_eq!(e.joules_per_output_token, Some(0.6));
        // $2.50 an hour for 2 GPUs at 8 req/s of 128 output tokens:
        // 5/3600 $/s over 1024 tok/s = $1.356 per million output tokens.
        let price = Price {
            gpu_hourly_usd: 2.5,
            gpus: None,
        };
        let c = cost(price, 2, &w);
        let out = c.usd_per_million_output_tokens.unwrap();
        assert!((out - 5.0 / 3600.0 / 1024.0 * 1e6).abs() < 1e-9, "{out}");
        assert!((c.usd_per_million_input_tokens.unwrap() - out / 2.0).abs() < 1e-9);
        assert!((c.usd_per_1000_requests.unwrap() - 5.0 / 3600.0 / 8.0 * 1000.0).abs() < 1e-9);
        let idle = cost(price, 2, &Work::default());
        assert_eq!(
            idle.usd_per_million_output_tokens, None,
            "nothing done: no price per token"
        );
    }

    #[test]
    fn cost_without_an_exporter_needs_the_gpu_count() {
        let stage = StageReport {
            measured_s: 10.0,
            ..Default::default()
        };
        let p = Price {
            gpu_hourly_usd: 2.0,
            gpus: None,
        };
        assert!(stage_figures(None, Some((0.0, 10.0)), Some(p), &stage).is_none());
        let g = stage_figures(None, None, Some(Price { gpus: Some(4), ..p }), &stage).unwrap();
        assert_eq!(g.cost.unwrap().gpus, 4);
        assert!(g.gpus.is_empty() && g.total.is_none());
    }

    #[test]
    fn a_merged_reports_energy_and_cost_are_the_whole_runs() {
        let mut stage = StageReport {
            measured_s: 10.0,
            ..Default::default()
        };
        stage.rates.output_tokens_per_s = 400.0;
        stage.rates.completed_per_s = 4.0;
        stage.tokens.output_mean = 100.0;
        stage.requests.measured = 40;
        // One shard's figures, as merge keeps them: its own share of the work.
        stage.gpu = Some(GpuStage {
            total: Some(GpuFigures {
                energy_j: Some(2000.0),
                energy_covered: Some(1.0),
                ..Default::default()
            }),
            energy: Some(GpuEnergy {
                joules_per_output_token: Some(1.0),
                ..Default::default()
            }),
            ..Default::default()
        });
        let mut r = crate::types::Report {
            stages: vec![stage],
            config: serde_json::json!({"gpu_hourly_cost": 3.6, "gpus": 2}),
            ..Default::default()
        };
        rederive(&mut r);
        let g = r.stages[0].gpu.as_ref().unwrap();
        assert_eq!(g.energy.unwrap().joules_per_output_token, Some(0.5));
        let c = g.cost.unwrap();
        assert_eq!(c.gpus, 2);
        // $7.20 an hour = $0.002 a second, over 400 tokens a second.
        assert!((c.usd_per_million_output_tokens.unwrap() - 5.0).abs() < 1e-9);
        assert_eq!(
            price_of(&serde_json::json!({"gpu_hourly_cost": null})),
            None
        );
    }

    #[test]
    fn a_pod_mapped_mid_run_is_a_label_not_another_gpu() {
        let mut h = GpuHistory::default();
        h.push(0.0, vec![(id("0"), vals(100.0, Some(0.0)))], false);
        let with_pod = GpuId {
            pod: "vllm-0".into(),
            ..id("0")
        };
        h.push(1.0, vec![(with_pod, vals(100.0, Some(100_000.0)))], false);
        assert_eq!(h.ids().len(), 1);
        assert_eq!(h.ids()[0].pod, "vllm-0");
        let s = summarize(&h, 0.0, 1.0).unwrap();
        assert_eq!(s.total.unwrap().energy_j, Some(100.0));
    }

    #[test]
    fn history_memory_is_bounded_and_gpus_are_capped() {
        let mut h = GpuHistory::new(8);
        for i in 0..100 {
            h.push(i as f64, vec![(id("0"), vals(1.0, None))], false);
        }
        h.push(100.0, vec![(id("0"), vals(1.0, None))], true);
        assert!(h.points().len() <= 9);
        assert_eq!(h.points().last().unwrap().t_s, 100.0);
        let mut many = GpuHistory::default();
        let gpus: Vec<_> = (0..MAX_GPUS + 5)
            .map(|i| (id(&i.to_string()), vals(1.0, None)))
            .collect();
        many.push(0.0, gpus, false);
        assert_eq!(many.ids().len(), MAX_GPUS);
        assert_eq!(many.dropped_gpus, 5);
    }
}
