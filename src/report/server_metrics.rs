//! The server's side for every report format: text tables (console,
//! Markdown and the HTML page, which draws the gauges over time itself) and
//! CSV columns. Each appears only when a report has something from the
//! server, so reports of runs without it look as they always did.

use super::section::{each_stage, fixed, full, Col, PartTable, Section};
use crate::types::server_metrics::{GaugeSummary, ServerDist, ServerStage};
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

/// A figure of the stage's server side.
fn sv<X>(s: &StageReport, get: fn(&ServerStage) -> Option<X>) -> Option<X> {
    s.server.as_ref().and_then(get)
}

fn mean(d: Option<ServerDist>) -> Option<f64> {
    d.map(|d| d.mean_ms)
}

fn p50(d: Option<ServerDist>) -> Option<f64> {
    d.and_then(|d| d.p50_ms_est)
}

fn p99(d: Option<ServerDist>) -> Option<f64> {
    d.and_then(|d| d.p99_ms_est)
}

/// A gauge's mean and max, scaled.
fn g_mean(g: Option<GaugeSummary>, scale: f64, digits: usize) -> String {
    fixed(g.map(|g| g.mean * scale), digits)
}

fn g_max(g: Option<GaugeSummary>, scale: f64, digits: usize) -> String {
    fixed(g.map(|g| g.max * scale), digits)
}

/// The two text tables: the server's token counts beside the requested
/// ones, and its queue, cache and latency figures. None when the report has
/// nothing from the server.
pub fn text_tables(r: &Report) -> Option<String> {
    if !has_server_side(r) {
        return None;
    }
    let mut out = TOKENS.text(r)?;
    if batches(r) {
        out.push_str("Per input: a pooling stage's batches are counted input by input, as vLLM counts each input of a batch as a request.\n");
    }
    if r.stages.iter().any(|s| s.server.is_some()) {
        out.push_str(&STATS.text(r)?);
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

/// Some stage of `r` sent batches.
fn batches(r: &Report) -> bool {
    r.stages.iter().any(|s| batch_of(s).is_some())
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

/// What the token table divides a request's counts by, and the server's
/// `/metrics` counts: a batch's inputs, in the server's unit.
fn per_input(s: &StageReport) -> (f64, f64) {
    match batch_of(s) {
        Some(k) if server_counts_inputs(s, k) => (k as f64, 1.0),
        Some(k) => (k as f64, k as f64),
        None => (1.0, 1.0),
    }
}

/// A `/metrics` count a request in the token table, per input for a batch.
fn per_request(s: &StageReport, get: fn(&ServerStage) -> Option<f64>) -> String {
    fixed(sv(s, get).map(|p| p / per_input(s).1), 1)
}

type C = Col<()>;

/// The server's prompt token counts beside the requested ones, its cache
/// hits and preemptions, a row a stage; the first of report.csv's server
/// columns. A pooling stage's batches are counted per input (vLLM makes
/// each input of a batch a request, and its `/metrics` counts them so; the
/// requested and usage counts are a request's), its rows marked `input`
/// in a column of their own.
#[rustfmt::skip]
pub const TOKENS: PartTable<()> = PartTable {
    parts: each_stage,
    columns: &[
        C::csv_only("server_source", |s, _| s.server.as_ref().map(|v| v.source.clone()).unwrap_or_default()),
        C::text("Tok/Req", "Per", |s, _| if batch_of(s).is_some() { "input" } else { "request" }.into()).when(batches),
        C::text("Prompt Tok/Req", "Requested", |s, _| format!("{:.1}", s.tokens.prompt_mean / per_input(s).0)),
        C::text("Prompt Tok/Req", "Server", |s, _| fixed(s.tokens.prompt_mean_server.map(|p| p / per_input(s).0), 1)),
        C::text("Prompt Tok/Req", "/metrics", |s, _| per_request(s, |v| v.prompt_tokens_per_request))
            .csv("server_prompt_tokens_per_request", |s, _| full(sv(s, |v| v.prompt_tokens_per_request))),
        C::text("Cached Tok/Req", "/metrics", |s, _| per_request(s, |v| v.cached_prompt_tokens_per_request))
            .csv("server_cached_prompt_tokens_per_request", |s, _| full(sv(s, |v| v.cached_prompt_tokens_per_request))),
        C::text("Prefix Cache", "Hit %", |s, _| fixed(sv(s, |v| v.prefix_cache_hit_rate).map(|h| h * 100.0), 1))
            .csv("server_prefix_cache_hit_rate", |s, _| full(sv(s, |v| v.prefix_cache_hit_rate))),
        C::text("Preemptions", "per s", |s, _| fixed(sv(s, |v| v.preemptions).map(|p| p.per_s), 2))
            .csv("server_preemptions_per_s", |s, _| full(sv(s, |v| v.preemptions).map(|p| p.per_s))),
        C::csv_only("server_generation_tokens_per_s", |s, _| full(sv(s, |v| v.generation_tokens).map(|c| c.per_s))),
        C::csv_only("server_requests_per_s", |s, _| full(sv(s, |v| v.requests).map(|c| c.per_s))),
    ],
};

/// The server's queue, KV cache and latency figures, and the client's
/// latency less the server's, a row a stage; report.csv's server columns
/// after [`TOKENS`]'.
#[rustfmt::skip]
pub const STATS: PartTable<()> = PartTable {
    parts: each_stage,
    columns: &[
        C::text("Running", "Mean", |s, _| g_mean(sv(s, |v| v.running), 1.0, 1)).csv("server_running_mean", |s, _| full(sv(s, |v| v.running).map(|g| g.mean))),
        C::text("Running", "Max", |s, _| g_max(sv(s, |v| v.running), 1.0, 0)).csv("server_running_max", |s, _| full(sv(s, |v| v.running).map(|g| g.max))),
        C::text("Waiting", "Mean", |s, _| g_mean(sv(s, |v| v.waiting), 1.0, 1)).csv("server_waiting_mean", |s, _| full(sv(s, |v| v.waiting).map(|g| g.mean))),
        C::text("Waiting", "Max", |s, _| g_max(sv(s, |v| v.waiting), 1.0, 0)).csv("server_waiting_max", |s, _| full(sv(s, |v| v.waiting).map(|g| g.max))),
        C::text("KV Cache %", "Mean", |s, _| g_mean(sv(s, |v| v.kv_cache_usage), 100.0, 1)).csv("server_kv_cache_usage_mean", |s, _| full(sv(s, |v| v.kv_cache_usage).map(|g| g.mean))),
        C::text("KV Cache %", "Max", |s, _| g_max(sv(s, |v| v.kv_cache_usage), 100.0, 1)).csv("server_kv_cache_usage_max", |s, _| full(sv(s, |v| v.kv_cache_usage).map(|g| g.max))),
        C::text("Server TTFT (ms)", "Mean", |s, _| fixed(mean(sv(s, |v| v.ttft_ms)), 1)).csv("server_ttft_mean_ms", |s, _| full(mean(sv(s, |v| v.ttft_ms)))),
        C::text("Server TTFT (ms)", "p50~", |s, _| fixed(p50(sv(s, |v| v.ttft_ms)), 1)).csv("server_ttft_p50_ms_est", |s, _| full(p50(sv(s, |v| v.ttft_ms)))),
        C::text("Server TTFT (ms)", "p99~", |s, _| fixed(p99(sv(s, |v| v.ttft_ms)), 1)).csv("server_ttft_p99_ms_est", |s, _| full(p99(sv(s, |v| v.ttft_ms)))),
        C::text("Server ITL (ms)", "Mean", |s, _| fixed(mean(sv(s, |v| v.itl_ms)), 2)).csv("server_itl_mean_ms", |s, _| full(mean(sv(s, |v| v.itl_ms)))),
        C::csv_only("server_itl_p50_ms_est", |s, _| full(p50(sv(s, |v| v.itl_ms)))),
        C::text("Server Queue (ms)", "Mean", |s, _| fixed(mean(sv(s, |v| v.queue_ms)), 1)).csv("server_queue_mean_ms", |s, _| full(mean(sv(s, |v| v.queue_ms)))),
        C::csv_only("server_queue_p50_ms_est", |s, _| full(p50(sv(s, |v| v.queue_ms)))),
        C::text("Server E2E (s)", "Mean", |s, _| fixed(mean(sv(s, |v| v.e2e_ms)).map(|ms| ms * 0.001), 2)).csv("server_e2e_mean_ms", |s, _| full(mean(sv(s, |v| v.e2e_ms)))),
        C::csv_only("server_e2e_p50_ms_est", |s, _| full(p50(sv(s, |v| v.e2e_ms)))),
        C::text("Client - Server (ms)", "TTFT", |s, _| fixed(sv(s, |v| v.client_minus_server).and_then(|c| c.ttft_mean_ms), 2))
            .csv("client_minus_server_ttft_mean_ms", |s, _| full(sv(s, |v| v.client_minus_server).and_then(|c| c.ttft_mean_ms))),
        C::text("Client - Server (ms)", "E2E", |s, _| fixed(sv(s, |v| v.client_minus_server).and_then(|c| c.e2e_mean_ms), 2))
            .csv("client_minus_server_e2e_mean_ms", |s, _| full(sv(s, |v| v.client_minus_server).and_then(|c| c.e2e_mean_ms))),
    ],
};

pub fn csv_wanted(r: &Report) -> bool {
    r.stages.iter().any(|s| s.server.is_some())
}

/// The server's CSV columns (its tables the text formats show their way):
/// [`TOKENS`]' then [`STATS`]', each in its declared order.
pub struct ServerSection;

impl Section for ServerSection {
    fn wanted(&self, r: &Report) -> bool {
        csv_wanted(r)
    }

    fn csv_columns(&self, r: &Report) -> Vec<String> {
        let mut c = TOKENS.csv_columns(r);
        c.extend(STATS.csv_columns(r));
        c
    }

    fn csv_values(&self, r: &Report, s: &StageReport) -> Vec<String> {
        let mut v = TOKENS.csv_values(r, s);
        v.extend(STATS.csv_values(r, s));
        v
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
        let row = ServerSection.csv_values(&r, &r.stages[0]);
        let columns = ServerSection.csv_columns(&r);
        assert_eq!(row.len(), columns.len());
        let at = |k: &str| &row[columns.iter().position(|c| c == k).unwrap()];
        assert_eq!(at("server_source"), "vllm");
        assert_eq!(at("server_prompt_tokens_per_request"), "73");
        assert_eq!(at("server_waiting_max"), "7");
        assert_eq!(at("server_running_mean"), "", "not exported");
    }
}
