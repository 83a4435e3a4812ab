//! The server's side for every report format: text tables (console,
//! Markdown and the HTML page, which draws the gauges over time itself) and
//! CSV columns. Each appears only when a report has something from the
//! server, so reports of runs without it look as they always did.

use super::section::{names, Section};
use super::tables::GroupedTable;
use crate::types::server_metrics::{GaugeSummary, ServerDist};
use crate::types::{Report, StageReport};

/// True when some stage has the server's metrics, or a server prompt-token
/// count (usage) that differs from the requested one.
pub fn has_server_side(r: &Report) -> bool {
    r.stages.iter().any(|s| {
        s.server.is_some()
            || s.tokens
                .prompt_mean_server
                .is_some_and(|p| (p - s.tokens.prompt_mean).abs() >= 0.5)
    })
}

fn opt(v: Option<f64>, digits: usize) -> String {
    match v {
        Some(x) if x.is_finite() => format!("{x:.digits$}"),
        _ => "-".into(),
    }
}

fn g_mean(g: Option<GaugeSummary>, scale: f64, digits: usize) -> String {
    opt(g.map(|g| g.mean * scale), digits)
}

fn g_max(g: Option<GaugeSummary>, scale: f64, digits: usize) -> String {
    opt(g.map(|g| g.max * scale), digits)
}

/// The two text tables: the server's token counts beside the requested
/// ones, and its queue, cache and latency figures. None when the report has
/// nothing from the server.
pub fn text_tables(r: &Report) -> Option<String> {
    if !has_server_side(r) {
        return None;
    }
    let mut out = token_table(r);
    if r.stages.iter().any(|s| s.server.is_some()) {
        out.push_str(&stats_table(r));
        out.push_str(
            "~ estimated from the server's histogram buckets; client - server from the means, only where both sides counted the same requests (else -).\n",
        );
    }
    Some(out)
}

/// A pooling stage's batch: the inputs a request carried, when more than one.
fn batch_of(s: &StageReport) -> Option<u64> {
    s.pooling
        .as_ref()
        .map(|p| p.inputs_per_request)
        .filter(|&k| k > 1)
}

/// Whether the server's `/metrics` counted each input of a batch of `k` as a
/// request, as vLLM does: its request count nearer `k` times the client's
/// completions than once. Without a count, as vLLM does.
fn server_counts_inputs(s: &StageReport, k: u64) -> bool {
    let counted = s.server.as_ref().and_then(|v| v.requests).map(|c| c.total);
    match counted {
        Some(n) if s.requests.completed > 0 => n / s.requests.completed as f64 > (k as f64).sqrt(),
        _ => true,
    }
}

/// The server's prompt token counts beside the requested ones, its cache
/// hits and preemptions. A pooling stage's batches are counted per input
/// (vLLM makes each input of a batch a request, and its `/metrics` counts
/// them so), its rows marked `input` in a column of their own.
fn token_table(r: &Report) -> String {
    let batches = r.stages.iter().any(|s| batch_of(s).is_some());
    let mut columns = vec![("Metadata", "Benchmark")];
    if batches {
        columns.push(("Tok/Req", "Per"));
    }
    columns.extend([
        ("Prompt Tok/Req", "Requested"),
        ("Prompt Tok/Req", "Server"),
        ("Prompt Tok/Req", "/metrics"),
        ("Cached Tok/Req", "/metrics"),
        ("Prefix Cache", "Hit %"),
        ("Preemptions", "per s"),
    ]);
    let tokens = GroupedTable {
        columns,
        rows: r
            .stages
            .iter()
            .zip(crate::types::stage_labels(&r.stages))
            .map(|(s, label)| {
                let sv = s.server.as_ref();
                // Requested and usage counts are a request's; /metrics' are
                // the server's unit: both made per input for a batch.
                let (client, server) = match batch_of(s) {
                    Some(k) if server_counts_inputs(s, k) => (k as f64, 1.0),
                    Some(k) => (k as f64, k as f64),
                    None => (1.0, 1.0),
                };
                let mut row = vec![label];
                if batches {
                    row.push(
                        if batch_of(s).is_some() {
                            "input"
                        } else {
                            "request"
                        }
                        .into(),
                    );
                }
                row.extend([
                    format!("{:.1}", s.tokens.prompt_mean / client),
                    opt(s.tokens.prompt_mean_server.map(|p| p / client), 1),
                    opt(
                        sv.and_then(|v| v.prompt_tokens_per_request)
                            .map(|p| p / server),
                        1,
                    ),
                    opt(
                        sv.and_then(|v| v.cached_prompt_tokens_per_request)
                            .map(|p| p / server),
                        1,
                    ),
                    opt(
                        sv.and_then(|v| v.prefix_cache_hit_rate).map(|h| h * 100.0),
                        1,
                    ),
                    opt(sv.and_then(|v| v.preemptions).map(|p| p.per_s), 2),
                ]);
                row
            })
            .collect(),
    };
    let mut out = tokens.render();
    if batches {
        out.push_str("Per input: a pooling stage's batches are counted input by input, as vLLM counts each input of a batch as a request.\n");
    }
    out
}

/// The server's queue, KV cache and latency figures, and the client's
/// latency less the server's.
fn stats_table(r: &Report) -> String {
    let d = |x: Option<ServerDist>, f: fn(&ServerDist) -> Option<f64>, scale: f64, digits| {
        opt(x.as_ref().and_then(f).map(|v| v * scale), digits)
    };
    let stats = GroupedTable {
        columns: vec![
            ("Metadata", "Benchmark"),
            ("Running", "Mean"),
            ("Running", "Max"),
            ("Waiting", "Mean"),
            ("Waiting", "Max"),
            ("KV Cache %", "Mean"),
            ("KV Cache %", "Max"),
            ("Server TTFT (ms)", "Mean"),
            ("Server TTFT (ms)", "p50~"),
            ("Server TTFT (ms)", "p99~"),
            ("Server ITL (ms)", "Mean"),
            ("Server Queue (ms)", "Mean"),
            ("Server E2E (s)", "Mean"),
            ("Client - Server (ms)", "TTFT"),
            ("Client - Server (ms)", "E2E"),
        ],
        rows: r
            .stages
            .iter()
            .zip(crate::types::stage_labels(&r.stages))
            .map(|(s, label)| {
                let v = s.server.clone().unwrap_or_default();
                let cms = v.client_minus_server.unwrap_or_default();
                vec![
                    label,
                    g_mean(v.running, 1.0, 1),
                    g_max(v.running, 1.0, 0),
                    g_mean(v.waiting, 1.0, 1),
                    g_max(v.waiting, 1.0, 0),
                    g_mean(v.kv_cache_usage, 100.0, 1),
                    g_max(v.kv_cache_usage, 100.0, 1),
                    d(v.ttft_ms, |x| Some(x.mean_ms), 1.0, 1),
                    d(v.ttft_ms, |x| x.p50_ms_est, 1.0, 1),
                    d(v.ttft_ms, |x| x.p99_ms_est, 1.0, 1),
                    d(v.itl_ms, |x| Some(x.mean_ms), 1.0, 2),
                    d(v.queue_ms, |x| Some(x.mean_ms), 1.0, 1),
                    d(v.e2e_ms, |x| Some(x.mean_ms), 0.001, 2),
                    opt(cms.ttft_mean_ms, 2),
                    opt(cms.e2e_mean_ms, 2),
                ]
            })
            .collect(),
    };
    stats.render()
}

/// CSV columns, appended when some stage has the server's metrics.
pub const CSV_COLUMNS: &[&str] = &[
    "server_source",
    "server_running_mean",
    "server_running_max",
    "server_waiting_mean",
    "server_waiting_max",
    "server_kv_cache_usage_mean",
    "server_kv_cache_usage_max",
    "server_preemptions_per_s",
    "server_prompt_tokens_per_request",
    "server_cached_prompt_tokens_per_request",
    "server_prefix_cache_hit_rate",
    "server_generation_tokens_per_s",
    "server_requests_per_s",
    "server_ttft_mean_ms",
    "server_ttft_p50_ms_est",
    "server_ttft_p99_ms_est",
    "server_itl_mean_ms",
    "server_itl_p50_ms_est",
    "server_e2e_mean_ms",
    "server_e2e_p50_ms_est",
    "server_queue_mean_ms",
    "server_queue_p50_ms_est",
    "client_minus_server_ttft_mean_ms",
    "client_minus_server_e2e_mean_ms",
];

pub fn csv_wanted(r: &Report) -> bool {
    r.stages.iter().any(|s| s.server.is_some())
}

/// One stage's values for `CSV_COLUMNS` (empty where unknown).
pub fn csv_values(s: &StageReport) -> Vec<String> {
    let Some(v) = &s.server else {
        return vec![String::new(); CSV_COLUMNS.len()];
    };
    let f = |x: Option<f64>| x.map(|x| format!("{x}")).unwrap_or_default();
    let mean = |d: Option<ServerDist>| f(d.map(|d| d.mean_ms));
    let p50 = |d: Option<ServerDist>| f(d.and_then(|d| d.p50_ms_est));
    let cms = v.client_minus_server.unwrap_or_default();
    vec![
        v.source.clone(),
        f(v.running.map(|g| g.mean)),
        f(v.running.map(|g| g.max)),
        f(v.waiting.map(|g| g.mean)),
        f(v.waiting.map(|g| g.max)),
        f(v.kv_cache_usage.map(|g| g.mean)),
        f(v.kv_cache_usage.map(|g| g.max)),
        f(v.preemptions.map(|c| c.per_s)),
        f(v.prompt_tokens_per_request),
        f(v.cached_prompt_tokens_per_request),
        f(v.prefix_cache_hit_rate),
        f(v.generation_tokens.map(|c| c.per_s)),
        f(v.requests.map(|c| c.per_s)),
        mean(v.ttft_ms),
        p50(v.ttft_ms),
        f(v.ttft_ms.and_then(|d| d.p99_ms_est)),
        mean(v.itl_ms),
        p50(v.itl_ms),
        mean(v.e2e_ms),
        p50(v.e2e_ms),
        mean(v.queue_ms),
        p50(v.queue_ms),
        f(cms.ttft_mean_ms),
        f(cms.e2e_mean_ms),
    ]
}

/// The server's CSV columns (its tables the text formats show their way).
pub struct ServerSection;

impl Section for ServerSection {
    fn wanted(&self, r: &Report) -> bool {
        csv_wanted(r)
    }

    fn csv_columns(&self, _r: &Report) -> Vec<String> {
        names(CSV_COLUMNS)
    }

    fn csv_values(&self, _r: &Report, s: &StageReport) -> Vec<String> {
        csv_values(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::server_metrics::{ClientMinusServer, ServerSeries, ServerStage};

    fn report(server: Option<ServerStage>) -> Report {
        let text = include_str!("../../tests/fixtures/report.json");
        let mut r = Report::from_json(text).unwrap();
        for s in &mut r.stages {
            s.server = server.clone();
        }
        r
    }

    #[test]
    fn nothing_from_the_server_changes_nothing() {
        let r = report(None);
        assert!(!has_server_side(&r));
        assert!(text_tables(&r).is_none());
        assert!(!csv_wanted(&r));
    }

    #[test]
    fn server_figures_reach_every_format() {
        let v = ServerStage {
            source: "vllm".into(),
            samples: 10,
            prompt_tokens_per_request: Some(73.0),
            cached_prompt_tokens_per_request: Some(60.0),
            prefix_cache_hit_rate: Some(0.82),
            waiting: Some(GaugeSummary {
                mean: 2.5,
                p50: 2.0,
                max: 7.0,
            }),
            ttft_ms: Some(ServerDist {
                count: 10.0,
                mean_ms: 14.2,
                p50_ms_est: Some(13.0),
                p99_ms_est: Some(19.5),
            }),
            client_minus_server: Some(ClientMinusServer {
                ttft_mean_ms: Some(1.25),
                e2e_mean_ms: None,
            }),
            series: Some(ServerSeries {
                t_s: vec![0.5, 1.5],
                running: vec![Some(1.0), Some(2.0)],
                waiting: vec![Some(0.0), None],
                kv_cache_usage: vec![Some(0.1), Some(0.2)],
            }),
            ..Default::default()
        };
        let r = report(Some(v));
        let t = text_tables(&r).unwrap();
        for want in [
            "Prompt Tok/Req",
            "73.0",
            "60.0",
            "82.0",
            "14.2",
            "1.25",
            "7",
        ] {
            assert!(t.contains(want), "{want} in\n{t}");
        }
        assert!(csv_wanted(&r));
        let row = csv_values(&r.stages[0]);
        assert_eq!(row.len(), CSV_COLUMNS.len());
        assert_eq!(row[0], "vllm");
        assert_eq!(row[8], "73");
    }
}
