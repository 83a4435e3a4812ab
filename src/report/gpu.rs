//! The GPUs' side for every report format: text tables (console, Markdown
//! and the HTML page, which also draws power against the rate), CSV
//! columns, and the summary's line for the answer's rate. Each appears only
//! when a report has GPU figures or a price, so other reports look as they
//! always did. A figure not exported is `-` (an empty CSV cell), never 0.

use super::section::{each_stage, fixed, full, Col, PartTable, Section};
use crate::types::gpu::{GpuCost, GpuEnergy, GpuFigures, GpuGauge, GpuStage, GpuUnit};
use crate::types::{Report, StageReport};

/// True when some stage has GPU figures or a cost.
pub fn has_gpu_side(r: &Report) -> bool {
    r.stages.iter().any(|s| s.gpu.is_some())
}

fn mean(g: Option<GpuGauge>, scale: f64, digits: usize) -> String {
    fixed(g.map(|g| g.mean * scale), digits)
}

fn max(g: Option<GpuGauge>, scale: f64, digits: usize) -> String {
    fixed(g.map(|g| g.max * scale), digits)
}

const MIB_PER_GIB: f64 = 1.0 / 1024.0;

/// The tables: all GPUs per stage with energy and cost, then each GPU.
/// None when the report has no GPU side.
pub fn text_tables(r: &Report) -> Option<String> {
    if !has_gpu_side(r) {
        return None;
    }
    let mut out = TOTAL.text(r)?;
    out.push_str(NOTE);
    out.push('\n');
    if let Some(per_gpu) = PER_GPU.text(r) {
        out.push_str(&per_gpu);
    }
    Some(out)
}

/// A figure of all the stage's GPUs together.
fn total<X>(s: &StageReport, get: fn(&GpuFigures) -> Option<X>) -> Option<X> {
    s.gpu.as_ref()?.total.as_ref().and_then(get)
}

fn energy<X>(s: &StageReport, get: fn(&GpuEnergy) -> Option<X>) -> Option<X> {
    s.gpu.as_ref()?.energy.as_ref().and_then(get)
}

fn cost<X>(s: &StageReport, get: fn(&GpuCost) -> Option<X>) -> Option<X> {
    s.gpu.as_ref()?.cost.as_ref().and_then(get)
}

/// The GPUs a stage's figures are of: those the exporters showed, else the
/// price's count; `-` for neither.
fn gpus_shown(s: &StageReport) -> String {
    let Some(g) = &s.gpu else { return "-".into() };
    match (g.gpus.len(), g.cost) {
        (0, Some(c)) => c.gpus.to_string(),
        (0, None) => "-".into(),
        (n, _) => n.to_string(),
    }
}

/// Whose output tokens the energy is divided by, as report.csv says it.
fn tokens_source(e: &GpuEnergy) -> &'static str {
    match e.tokens_source {
        crate::types::gpu::TokenSource::Server => "server",
        crate::types::gpu::TokenSource::Client => "client",
    }
}

type C = Col<()>;

/// All GPUs per stage with energy and cost, in the text table and
/// report.csv (`gpu_*` and `cost_*`, all GPUs together; each GPU is in
/// report.json and report-gpus.csv).
#[rustfmt::skip]
pub const TOTAL: PartTable<()> = PartTable {
    parts: each_stage,
    columns: &[
        C::text("GPUs", "n", |s, _| gpus_shown(s))
            .csv("gpu_count", |s, _| s.gpu.as_ref().filter(|g| !g.gpus.is_empty()).map(|g| g.gpus.len().to_string()).unwrap_or_default()),
        C::text("Util %", "Mean", |s, _| mean(total(s, |t| t.util_pct), 1.0, 1)).csv("gpu_util_pct_mean", |s, _| full(total(s, |t| t.util_pct).map(|g| g.mean))),
        C::text("Engine %", "Mean", |s, _| mean(total(s, |t| t.engine_active), 100.0, 1)).csv("gpu_engine_active_mean", |s, _| full(total(s, |t| t.engine_active).map(|g| g.mean))),
        C::csv_only("gpu_sm_active_mean", |s, _| full(total(s, |t| t.sm_active).map(|g| g.mean))),
        C::csv_only("gpu_dram_active_mean", |s, _| full(total(s, |t| t.dram_active).map(|g| g.mean))),
        C::text("Power (W)", "Mean", |s, _| mean(total(s, |t| t.power_w), 1.0, 0)).csv("gpu_power_w_mean", |s, _| full(total(s, |t| t.power_w).map(|g| g.mean))),
        C::text("Power (W)", "Max", |s, _| max(total(s, |t| t.power_w), 1.0, 0)).csv("gpu_power_w_max", |s, _| full(total(s, |t| t.power_w).map(|g| g.max))),
        C::text("Mem Used (GiB)", "Mean", |s, _| mean(total(s, |t| t.fb_used_mib), MIB_PER_GIB, 1)).csv("gpu_fb_used_mib_mean", |s, _| full(total(s, |t| t.fb_used_mib).map(|g| g.mean))),
        C::csv_only("gpu_fb_free_mib_mean", |s, _| full(total(s, |t| t.fb_free_mib).map(|g| g.mean))),
        C::csv_only("gpu_sm_clock_mhz_mean", |s, _| full(total(s, |t| t.sm_clock_mhz).map(|g| g.mean))),
        C::csv_only("gpu_temp_c_max", |s, _| full(total(s, |t| t.temp_c).map(|g| g.max))),
        C::text("Energy", "J", |s, _| fixed(total(s, |t| t.energy_j), 0)).csv("gpu_energy_j", |s, _| full(total(s, |t| t.energy_j))),
        C::csv_only("gpu_energy_covered", |s, _| full(total(s, |t| t.energy_covered))),
        C::text("Energy", "J/Tok", |s, _| fixed(energy(s, |e| e.joules_per_output_token), 3)).csv("gpu_joules_per_output_token", |s, _| full(energy(s, |e| e.joules_per_output_token))),
        C::text("Energy", "Tok/J", |s, _| fixed(energy(s, |e| e.output_tokens_per_joule), 2)).csv("gpu_output_tokens_per_joule", |s, _| full(energy(s, |e| e.output_tokens_per_joule))),
        C::text("Energy", "J/Req", |s, _| fixed(energy(s, |e| e.joules_per_request), 1)).csv("gpu_joules_per_request", |s, _| full(energy(s, |e| e.joules_per_request))),
        C::csv_only("gpu_tokens_source", |s, _| energy(s, |e| Some(tokens_source(e))).unwrap_or_default().into()),
        C::csv_only("cost_gpu_hourly_usd", |s, _| full(cost(s, |c| Some(c.gpu_hourly_usd)))),
        C::csv_only("cost_gpus", |s, _| cost(s, |c| Some(c.gpus.to_string())).unwrap_or_default()),
        C::text("Cost ($)", "/M Out Tok", |s, _| fixed(cost(s, |c| c.usd_per_million_output_tokens), 3)).csv("cost_usd_per_million_output_tokens", |s, _| full(cost(s, |c| c.usd_per_million_output_tokens))),
        C::text("Cost ($)", "/M In Tok", |s, _| fixed(cost(s, |c| c.usd_per_million_input_tokens), 3)).csv("cost_usd_per_million_input_tokens", |s, _| full(cost(s, |c| c.usd_per_million_input_tokens))),
        C::text("Cost ($)", "/1k Req", |s, _| fixed(cost(s, |c| c.usd_per_1000_requests), 3)).csv("cost_usd_per_1000_requests", |s, _| full(cost(s, |c| c.usd_per_1000_requests))),
    ],
};

/// What the figures are, under the first table.
pub const NOTE: &str = "Energy from the DCGM energy counter over each stage's window (not power x time); J/Tok over the output tokens of the same window (the server's count when it exports one); cost at the stage's achieved rate, each figure carrying the whole GPU price; - not exported or not covered.";

/// The stages' GPUs are on more than one host: each is named with its host.
fn several_hosts(r: &Report) -> bool {
    let hosts: std::collections::BTreeSet<&str> = r
        .stages
        .iter()
        .filter_map(|s| s.gpu.as_ref())
        .flat_map(|g| g.gpus.iter().map(|u| u.hostname.as_str()))
        .collect();
    hosts.len() > 1
}

fn units(s: &StageReport) -> &[GpuUnit] {
    s.gpu.as_ref().map_or(&[], |g| g.gpus.as_slice())
}

type U = Col<GpuUnit>;

/// Each GPU of each stage, in the text table and `report-gpus.csv` (a row
/// a stage and GPU, the GPU named by its exporter's labels; empty cells
/// where not exported).
#[rustfmt::skip]
pub const PER_GPU: PartTable<GpuUnit> = PartTable {
    parts: units,
    columns: &[
        U::csv_only("gpu", |_, u| u.gpu.clone()),
        U::csv_only("uuid", |_, u| u.uuid.clone()),
        U::csv_only("model_name", |_, u| u.model_name.clone()),
        U::csv_only("hostname", |_, u| u.hostname.clone()),
        U::csv_only("pod", |_, u| u.pod.clone()),
        U::csv_only("samples", |_, u| u.samples.to_string()),
        U::text("Metadata", "GPU", |_, u| crate::safe::line(&u.gpu).into_owned()).when(|r| !several_hosts(r)),
        U::text("Metadata", "GPU", |_, u| crate::safe::line(&format!("{}:{}", u.hostname, u.gpu)).into_owned()).when(several_hosts),
        U::text("Util %", "Mean", |_, u| mean(u.figures.util_pct, 1.0, 1)).csv("util_pct_mean", |_, u| full(u.figures.util_pct.map(|g| g.mean))),
        U::csv_only("util_pct_max", |_, u| full(u.figures.util_pct.map(|g| g.max))),
        U::csv_only("engine_active_mean", |_, u| full(u.figures.engine_active.map(|g| g.mean))),
        U::text("SM %", "Mean", |_, u| mean(u.figures.sm_active, 100.0, 1)).csv("sm_active_mean", |_, u| full(u.figures.sm_active.map(|g| g.mean))),
        U::text("DRAM %", "Mean", |_, u| mean(u.figures.dram_active, 100.0, 1)).csv("dram_active_mean", |_, u| full(u.figures.dram_active.map(|g| g.mean))),
        U::text("Power (W)", "Mean", |_, u| mean(u.figures.power_w, 1.0, 0)).csv("power_w_mean", |_, u| full(u.figures.power_w.map(|g| g.mean))),
        U::csv_only("power_w_max", |_, u| full(u.figures.power_w.map(|g| g.max))),
        U::text("Energy", "J", |_, u| fixed(u.figures.energy_j, 0)).csv("energy_j", |_, u| full(u.figures.energy_j)),
        U::csv_only("energy_covered", |_, u| full(u.figures.energy_covered)),
        U::text("Mem (GiB)", "Used", |_, u| mean(u.figures.fb_used_mib, MIB_PER_GIB, 1)).csv("fb_used_mib_mean", |_, u| full(u.figures.fb_used_mib.map(|g| g.mean))),
        U::csv_only("fb_used_mib_max", |_, u| full(u.figures.fb_used_mib.map(|g| g.max))),
        U::text("Mem (GiB)", "Free", |_, u| mean(u.figures.fb_free_mib, MIB_PER_GIB, 1)).csv("fb_free_mib_mean", |_, u| full(u.figures.fb_free_mib.map(|g| g.mean))),
        U::text("SM Clock", "MHz", |_, u| mean(u.figures.sm_clock_mhz, 1.0, 0)).csv("sm_clock_mhz_mean", |_, u| full(u.figures.sm_clock_mhz.map(|g| g.mean))),
        U::csv_only("temp_c_mean", |_, u| full(u.figures.temp_c.map(|g| g.mean))),
        U::text("Temp (C)", "Max", |_, u| max(u.figures.temp_c, 1.0, 0)).csv("temp_c_max", |_, u| full(u.figures.temp_c.map(|g| g.max))),
    ],
};

/// The GPUs' model names, once each (for a heading).
pub fn models(r: &Report) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for u in r
        .stages
        .iter()
        .filter_map(|s| s.gpu.as_ref())
        .flat_map(|g| &g.gpus)
    {
        if !u.model_name.is_empty() && !out.contains(&u.model_name) {
            out.push(u.model_name.clone());
        }
    }
    out
}

/// The summary's line for the answer's rate: "at 8.00 req/s
/// (constant@8.00): $0.41 per million output tokens, 310 W, 0.52 J per
/// output token". None without an answer's stage with GPU figures.
pub fn answer_line(r: &Report) -> Option<(super::summary_key::Key, String)> {
    let a = r.answer.as_ref()?;
    let names = crate::types::stage_run_names(&r.stages);
    let mut stages = r.stages.iter().zip(&names).rev();
    // By its number; by its name in reports from before answers kept it.
    let (s, name) = match a.held_stage {
        Some(number) => stages.find(|(s, _)| s.number == number)?,
        None => {
            let held = a.held.as_ref()?;
            stages.find(|(s, n)| *n == held || s.name == *held)?
        }
    };
    let g = s.gpu.as_ref()?;
    let line = stage_line(s, g)?;
    let key = match g.cost {
        Some(_) => super::summary_key::Key::Cost,
        None => super::summary_key::Key::Gpus,
    };
    Some((
        key,
        format!("at {:.2} req/s ({name}): {line}", s.rates.achieved()),
    ))
}

fn stage_line(_s: &StageReport, g: &GpuStage) -> Option<String> {
    let mut parts = Vec::new();
    if let Some(c) = g.cost {
        if let Some(m) = c.usd_per_million_output_tokens {
            parts.push(format!("${m:.2} per million output tokens"));
        }
        if let Some(k) = c.usd_per_1000_requests {
            parts.push(format!("${k:.3} per 1,000 requests"));
        }
    }
    let t: GpuFigures = g.total.clone().unwrap_or_default();
    if let Some(p) = t.power_w {
        parts.push(format!("{:.0} W", p.mean));
    }
    if let Some(j) = g.energy.and_then(|e| e.joules_per_output_token) {
        parts.push(format!("{j:.3} J per output token"));
    }
    (!parts.is_empty()).then(|| parts.join(", "))
}

/// Power (all GPUs, mean) against each stage's achieved rate, for the HTML
/// chart: (rate, W, stage label) of the stages `keep` takes.
pub fn power_vs_rate(r: &Report, keep: impl Fn(&StageReport) -> bool) -> Vec<(f64, f64, String)> {
    r.stages
        .iter()
        .zip(crate::types::stage_labels(&r.stages))
        .filter(|(s, _)| keep(s))
        .filter_map(|(s, label)| {
            let p = s.gpu.as_ref()?.total.as_ref()?.power_w?.mean;
            Some((s.rates.achieved(), p, label))
        })
        .collect()
}

/// The GPUs' CSV columns (their tables the text formats show their way).
pub struct GpuSection;

impl Section for GpuSection {
    fn wanted(&self, r: &Report) -> bool {
        has_gpu_side(r)
    }

    fn csv_columns(&self, r: &Report) -> Vec<String> {
        TOTAL.csv_columns(r)
    }

    fn csv_values(&self, r: &Report, s: &StageReport) -> Vec<String> {
        TOTAL.csv_values(r, s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::gpu::TokenSource;
    use crate::types::Answer;

    fn report() -> Report {
        let gauge = |mean, max| Some(GpuGauge { mean, max });
        let mut s = StageReport {
            name: "constant@8.00".into(),
            ..Default::default()
        };
        s.rates.completed_per_s = 8.0;
        s.rates.steady_s = 10.0;
        s.gpu = Some(GpuStage {
            samples: 10,
            gpus: vec![GpuUnit {
                gpu: "0".into(),
                hostname: "node-1".into(),
                model_name: "NVIDIA H100 80GB HBM3".into(),
                samples: 10,
                figures: GpuFigures {
                    power_w: gauge(310.0, 340.0),
                    energy_j: Some(3100.0),
                    ..Default::default()
                },
                ..Default::default()
            }],
            total: Some(GpuFigures {
                power_w: gauge(310.0, 340.0),
                energy_j: Some(3100.0),
                energy_covered: Some(1.0),
                ..Default::default()
            }),
            energy: Some(GpuEnergy {
                joules: 3100.0,
                output_tokens: 6000.0,
                tokens_source: TokenSource::Server,
                joules_per_output_token: Some(3100.0 / 6000.0),
                output_tokens_per_joule: Some(6000.0 / 3100.0),
                joules_per_request: Some(38.75),
            }),
            cost: Some(GpuCost {
                gpu_hourly_usd: 2.5,
                gpus: 1,
                usd_per_million_output_tokens: Some(0.41),
                usd_per_1000_requests: Some(0.087),
                ..Default::default()
            }),
        });
        let plain = StageReport {
            name: "synchronous".into(),
            ..Default::default()
        };
        Report {
            stages: vec![plain, s],
            answer: Some(Answer {
                held: Some("constant@8.00".into()),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn tables_show_what_was_exported_and_dash_the_rest() {
        let r = report();
        let t = text_tables(&r).unwrap();
        assert!(t.contains("J/Tok") && t.contains("0.517"), "{t}");
        assert!(t.contains("0.410"), "{t}");
        // The synchronous stage had no GPU figures: dashes, not zeros.
        let sync = t.lines().find(|l| l.contains("synchronous")).unwrap();
        assert!(!sync.contains(" 0"), "{sync}");
        assert!(sync.contains('-'));
        assert!(t.contains("SM Clock"), "each GPU has its row: {t}");
        assert!(text_tables(&Report::default()).is_none());
        assert_eq!(models(&r), vec!["NVIDIA H100 80GB HBM3".to_string()]);
    }

    #[test]
    fn the_answers_rate_gets_its_cost_line() {
        let r = report();
        let (label, line) = answer_line(&r).unwrap();
        assert_eq!(label, crate::report::summary_key::Key::Cost);
        assert_eq!(
            line,
            "at 8.00 req/s (constant@8.00): $0.41 per million output tokens, $0.087 per 1,000 requests, 310 W, 0.517 J per output token"
        );
        let mut none = r.clone();
        none.answer = None;
        assert!(answer_line(&none).is_none());
    }

    /// The answer's stage is found by its number, not its words: a stage
    /// run twice under one name is the run the answer meant.
    #[test]
    fn the_answers_stage_is_found_by_its_number() {
        let mut r = report();
        let mut rerun = r.stages[1].clone();
        rerun.number = 3;
        rerun.gpu = None;
        r.stages[1].number = 2;
        r.stages.push(rerun);
        let a = r.answer.as_mut().unwrap();
        a.held = Some("constant@8.00".into());
        a.held_stage = Some(2);
        let (_, line) = answer_line(&r).unwrap();
        assert!(line.contains("$0.41"), "{line}");
        // Asked for the other run, which has no GPU figures: no line.
        r.answer.as_mut().unwrap().held_stage = Some(3);
        assert!(answer_line(&r).is_none());
    }

    #[test]
    fn csv_cells_are_empty_where_unknown() {
        let r = report();
        let columns = GpuSection.csv_columns(&r);
        assert_eq!(
            GpuSection.csv_values(&r, &r.stages[0]),
            vec![String::new(); columns.len()]
        );
        let row = GpuSection.csv_values(&r, &r.stages[1]);
        assert_eq!(row.len(), columns.len());
        let at = |k: &str| &row[columns.iter().position(|c| c == k).unwrap()];
        assert_eq!(at("gpu_count"), "1");
        assert_eq!(at("gpu_power_w_mean"), "310");
        assert_eq!(at("gpu_util_pct_mean"), "", "not exported");
        assert_eq!(at("gpu_tokens_source"), "server");
        assert_eq!(at("cost_usd_per_million_output_tokens"), "0.41");
        assert_eq!(power_vs_rate(&r, |_| true).len(), 1);
    }
}
