//! One vocabulary for what inference servers say about themselves: the
//! metric names of vLLM (`vllm:`), SGLang (`sglang:`), TGI (`tgi_`) and
//! llama.cpp's server (`llamacpp:`) mapped onto the same figures.
//!
//! Aggregating across label sets follows what each figure means:
//!
//! * series whose `model_name` / `model` label names another model are left
//!   out when some series names the model under test;
//! * series that differ only in a parallelism rank label (`tp_rank`,
//!   `pp_rank`, `moe_ep_rank`, ...) are copies of one engine's figure: the
//!   largest is kept, never their sum;
//! * what remains is one series per engine (`engine`, `dp_rank`, ...):
//!   request counts, token counters and histogram buckets add up across
//!   engines, ratios (KV-cache use, a hit-rate gauge) are averaged.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::prom::{parse_value, Page, Sample};

/// Which server's names a page uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Source {
    Vllm,
    Sglang,
    Tgi,
    LlamaCpp,
}

impl Source {
    pub const ALL: [Source; 4] = [Source::Vllm, Source::Sglang, Source::Tgi, Source::LlamaCpp];

    pub fn name(self) -> &'static str {
        match self {
            Source::Vllm => "vllm",
            Source::Sglang => "sglang",
            Source::Tgi => "tgi",
            Source::LlamaCpp => "llamacpp",
        }
    }

    fn prefix(self) -> &'static str {
        match self {
            Source::Vllm => "vllm:",
            Source::Sglang => "sglang:",
            Source::Tgi => "tgi_",
            Source::LlamaCpp => "llamacpp:",
        }
    }

    /// The server whose names the page uses most; None when it uses none.
    pub fn detect(page: &Page) -> Option<Source> {
        Source::ALL
            .into_iter()
            .map(|s| {
                let n = page
                    .samples
                    .iter()
                    .filter(|x| x.name.starts_with(s.prefix()))
                    .count();
                (n, s)
            })
            .filter(|(n, _)| *n > 0)
            .max_by_key(|(n, _)| *n)
            .map(|(_, s)| s)
    }
}

/// Gauges of the vocabulary.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gauge {
    /// Requests in the running batch.
    Running,
    /// Requests waiting for a slot.
    Waiting,
    /// KV-cache use, 0..1.
    KvCacheUsage,
    /// A prefix-cache hit-rate gauge (0..1), for servers without hit counters.
    PrefixHitRate,
}

impl Gauge {
    pub const ALL: [Gauge; 4] = [
        Gauge::Running,
        Gauge::Waiting,
        Gauge::KvCacheUsage,
        Gauge::PrefixHitRate,
    ];
    pub const N: usize = 4;

    fn additive(self) -> bool {
        matches!(self, Gauge::Running | Gauge::Waiting)
    }
}

/// Counters of the vocabulary (cumulative since the server started).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Counter {
    Preemptions,
    /// Prompt tokens as the server counted them (after its chat template),
    /// cached ones included.
    PromptTokens,
    /// Prompt tokens served from the server's prefix cache.
    CachedPromptTokens,
    GenerationTokens,
    /// Finished requests.
    Requests,
    /// Prefix-cache lookups, in tokens (vLLM).
    PrefixQueries,
    /// Prefix-cache hits, in tokens (vLLM).
    PrefixHits,
}

impl Counter {
    pub const ALL: [Counter; 7] = [
        Counter::Preemptions,
        Counter::PromptTokens,
        Counter::CachedPromptTokens,
        Counter::GenerationTokens,
        Counter::Requests,
        Counter::PrefixQueries,
        Counter::PrefixHits,
    ];
    pub const N: usize = 7;
}

/// The server's own latency histograms.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Histo {
    Ttft,
    /// Inter-token latency (TGI: each request's mean time per output token).
    Itl,
    E2e,
    Queue,
}

impl Histo {
    pub const ALL: [Histo; 4] = [Histo::Ttft, Histo::Itl, Histo::E2e, Histo::Queue];
    pub const N: usize = 4;
}

/// Where a counter comes from.
enum CounterSrc {
    /// A counter family (first name present wins).
    Names(&'static [&'static str]),
    /// The `_sum` of a histogram family (TGI counts tokens that way).
    HistSum(&'static str),
}

fn gauge_names(src: Source, g: Gauge) -> &'static [&'static str] {
    use Gauge::*;
    match (src, g) {
        (Source::Vllm, Running) => &["vllm:num_requests_running"],
        (Source::Vllm, Waiting) => &["vllm:num_requests_waiting"],
        (Source::Vllm, KvCacheUsage) => &["vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"],
        (Source::Vllm, PrefixHitRate) => &["vllm:gpu_prefix_cache_hit_rate"],
        (Source::Sglang, Running) => &["sglang:num_running_reqs"],
        (Source::Sglang, Waiting) => &["sglang:num_queue_reqs"],
        (Source::Sglang, KvCacheUsage) => &["sglang:token_usage"],
        (Source::Sglang, PrefixHitRate) => &["sglang:cache_hit_rate"],
        (Source::Tgi, Running) => &["tgi_batch_current_size"],
        (Source::Tgi, Waiting) => &["tgi_queue_size"],
        (Source::Tgi, _) => &[],
        (Source::LlamaCpp, Running) => &["llamacpp:requests_processing"],
        (Source::LlamaCpp, Waiting) => &["llamacpp:requests_deferred"],
        (Source::LlamaCpp, KvCacheUsage) => &["llamacpp:kv_cache_usage_ratio"],
        (Source::LlamaCpp, PrefixHitRate) => &[],
    }
}

fn counter_src(src: Source, c: Counter) -> CounterSrc {
    use Counter::*;
    use CounterSrc::*;
    match (src, c) {
        (Source::Vllm, Preemptions) => Names(&["vllm:num_preemptions_total"]),
        (Source::Vllm, PromptTokens) => Names(&["vllm:prompt_tokens_total"]),
        (Source::Vllm, CachedPromptTokens) => Names(&[
            "vllm:prompt_tokens_cached_total",
            "vllm:prefix_cache_hits_total",
            "vllm:gpu_prefix_cache_hits_total",
        ]),
        (Source::Vllm, GenerationTokens) => Names(&["vllm:generation_tokens_total"]),
        (Source::Vllm, Requests) => Names(&["vllm:request_success_total"]),
        (Source::Vllm, PrefixQueries) => Names(&[
            "vllm:prefix_cache_queries_total",
            "vllm:gpu_prefix_cache_queries_total",
        ]),
        (Source::Vllm, PrefixHits) => Names(&[
            "vllm:prefix_cache_hits_total",
            "vllm:gpu_prefix_cache_hits_total",
        ]),
        (Source::Sglang, Preemptions) => Names(&["sglang:num_retracted_requests_total"]),
        (Source::Sglang, PromptTokens) => Names(&["sglang:prompt_tokens_total"]),
        (Source::Sglang, CachedPromptTokens) => Names(&["sglang:cached_tokens_total"]),
        (Source::Sglang, GenerationTokens) => Names(&["sglang:generation_tokens_total"]),
        (Source::Sglang, Requests) => Names(&["sglang:num_requests_total"]),
        (Source::Tgi, PromptTokens) => HistSum("tgi_request_input_length"),
        (Source::Tgi, GenerationTokens) => HistSum("tgi_request_generated_tokens"),
        (Source::Tgi, Requests) => Names(&["tgi_request_success"]),
        (Source::LlamaCpp, PromptTokens) => Names(&["llamacpp:prompt_tokens_total"]),
        (Source::LlamaCpp, CachedPromptTokens) => Names(&["llamacpp:prompt_tokens_cached_total"]),
        (Source::LlamaCpp, GenerationTokens) => Names(&["llamacpp:tokens_predicted_total"]),
        _ => Names(&[]),
    }
}

fn histo_names(src: Source, h: Histo) -> &'static [&'static str] {
    use Histo::*;
    match (src, h) {
        (Source::Vllm, Ttft) => &["vllm:time_to_first_token_seconds"],
        (Source::Vllm, Itl) => &[
            "vllm:inter_token_latency_seconds",
            "vllm:time_per_output_token_seconds",
        ],
        (Source::Vllm, E2e) => &["vllm:e2e_request_latency_seconds"],
        (Source::Vllm, Queue) => &["vllm:request_queue_time_seconds"],
        (Source::Sglang, Ttft) => &["sglang:time_to_first_token_seconds"],
        (Source::Sglang, Itl) => &[
            "sglang:inter_token_latency_seconds",
            "sglang:time_per_output_token_seconds",
        ],
        (Source::Sglang, E2e) => &["sglang:e2e_request_latency_seconds"],
        (Source::Sglang, Queue) => &["sglang:queue_time_seconds"],
        (Source::Tgi, Ttft) => &[],
        (Source::Tgi, Itl) => &["tgi_request_mean_time_per_token_duration"],
        (Source::Tgi, E2e) => &["tgi_request_duration"],
        (Source::Tgi, Queue) => &["tgi_request_queue_duration"],
        (Source::LlamaCpp, _) => &[],
    }
}

/// A cumulative histogram as a page shows it. Bounds are shared between
/// scrapes (they do not change while a server runs).
#[derive(Debug, Clone, PartialEq)]
pub struct Hist {
    /// Upper bounds, ascending, the last one `+Inf`.
    pub bounds: Arc<[f64]>,
    /// Cumulative counts, one per bound.
    pub cumulative: Vec<f64>,
    /// Sum of observed values (seconds).
    pub sum: f64,
    pub count: f64,
}

/// One scrape in the vocabulary.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Reading {
    pub gauges: [Option<f64>; Gauge::N],
    pub counters: [Option<f64>; Counter::N],
    pub hists: [Option<Hist>; Histo::N],
    /// The series the user named with `--server-metric`, each label set on
    /// its own (`name{a="b"}` → value).
    pub raw: Vec<(String, f64)>,
}

impl Reading {
    pub fn gauge(&self, g: Gauge) -> Option<f64> {
        self.gauges[g as usize]
    }
    pub fn counter(&self, c: Counter) -> Option<f64> {
        self.counters[c as usize]
    }
    pub fn hist(&self, h: Histo) -> Option<&Hist> {
        self.hists[h as usize].as_ref()
    }
    /// True when the page said anything the vocabulary knows.
    pub fn is_empty(&self) -> bool {
        self.gauges.iter().all(Option::is_none)
            && self.counters.iter().all(Option::is_none)
            && self.hists.iter().all(Option::is_none)
            && self.raw.is_empty()
    }
}

/// Labels that number copies of one engine's figures.
const RANK_LABELS: &[&str] = &[
    "tp_rank",
    "pp_rank",
    "moe_ep_rank",
    "ep_rank",
    "attn_tp_rank",
    "rank",
];
/// Labels that name the model.
const MODEL_LABELS: &[&str] = &["model_name", "model"];
/// At most this many label sets of one `--server-metric` name are kept.
pub const RAW_SERIES_CAP: usize = 16;

/// Reads a page in the vocabulary of `source`. `model` (the model under
/// test) selects among series of several models; `raw` are the user's
/// `--server-metric` names.
pub fn read(page: &Page, source: Option<Source>, model: Option<&str>, raw: &[String]) -> Reading {
    let mut r = Reading::default();
    if let Some(src) = source {
        for g in Gauge::ALL {
            r.gauges[g as usize] = gauge_names(src, g).iter().find_map(|n| {
                let samples = select(page.series(n), model);
                aggregate(&samples, g.additive())
            });
        }
        for c in Counter::ALL {
            r.counters[c as usize] = match counter_src(src, c) {
                CounterSrc::Names(names) => names
                    .iter()
                    .find_map(|n| aggregate(&select(page.series(n), model), true)),
                CounterSrc::HistSum(family) => {
                    let n = format!("{family}_sum");
                    aggregate(&select(page.series(&n), model), true)
                }
            };
        }
        // llama.cpp counts cached prompt tokens apart from the others (since
        // the version that exports the cached counter).
        if src == Source::LlamaCpp {
            if let (Some(p), Some(c)) = (
                r.counter(Counter::PromptTokens),
                r.counter(Counter::CachedPromptTokens),
            ) {
                r.counters[Counter::PromptTokens as usize] = Some(p + c);
            }
        }
        for h in Histo::ALL {
            r.hists[h as usize] = histo_names(src, h)
                .iter()
                .find_map(|n| histogram(page, n, model));
        }
    }
    for name in raw {
        let mut n = 0;
        for s in page.series(name) {
            if n == RAW_SERIES_CAP {
                break;
            }
            if s.value.is_finite() {
                r.raw.push((series_id(s), s.value));
                n += 1;
            }
        }
    }
    r
}

/// `name{a="b",c="d"}`, or `name` without labels.
pub fn series_id(s: &Sample) -> String {
    if s.labels.is_empty() {
        return s.name.clone();
    }
    let labels: Vec<String> = s.labels.iter().map(|(k, v)| format!("{k}={v:?}")).collect();
    format!("{}{{{}}}", s.name, labels.join(","))
}

/// Keeps the series of the model under test when some series names it.
fn select<'a>(samples: impl Iterator<Item = &'a Sample>, model: Option<&str>) -> Vec<&'a Sample> {
    let all: Vec<&Sample> = samples.filter(|s| !s.value.is_nan()).collect();
    let Some(model) = model else { return all };
    let names_model = |s: &Sample| MODEL_LABELS.iter().any(|k| s.label(k) == Some(model));
    if all.iter().any(|s| names_model(s)) {
        all.into_iter().filter(|s| names_model(s)).collect()
    } else {
        all
    }
}

/// The value of one series per engine (see `engine_key`).
type PerEngine<'a> = BTreeMap<Vec<(&'a str, &'a str)>, f64>;

/// The key of the engine a series belongs to: its labels without rank
/// labels (and without `le`, which the caller handles).
fn engine_key(s: &Sample) -> Vec<(&str, &str)> {
    let mut k: Vec<(&str, &str)> = s
        .labels
        .iter()
        .filter(|(k, _)| !RANK_LABELS.contains(&k.as_str()) && k != "le")
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    k.sort_unstable();
    k
}

/// One figure from the series of one family: the largest of rank copies,
/// then the sum (additive) or the mean (ratios) across engines.
fn aggregate(samples: &[&Sample], additive: bool) -> Option<f64> {
    let mut per_engine = PerEngine::new();
    for s in samples {
        let e = per_engine.entry(engine_key(s)).or_insert(f64::NEG_INFINITY);
        *e = e.max(s.value);
    }
    if per_engine.is_empty() {
        return None;
    }
    let total: f64 = per_engine.values().sum();
    Some(if additive {
        total
    } else {
        total / per_engine.len() as f64
    })
}

/// A histogram family: buckets, sum and count, aggregated across engines.
fn histogram(page: &Page, family: &str, model: Option<&str>) -> Option<Hist> {
    let bucket_name = format!("{family}_bucket");
    let buckets = select(page.series(&bucket_name), model);
    if buckets.is_empty() {
        return None;
    }
    // Per bound: per engine, the largest rank copy; then the sum.
    let mut by_bound: BTreeMap<u64, (f64, PerEngine)> = BTreeMap::new();
    for s in &buckets {
        let Some(le) = s.label("le").and_then(parse_value) else {
            continue;
        };
        if le.is_nan() {
            continue;
        }
        // Order bounds by value (+Inf last); f64 bits sort correctly for non-negative values.
        let key = if le < 0.0 { 0 } else { le.to_bits() };
        let (_, engines) = by_bound.entry(key).or_insert((le, BTreeMap::new()));
        let e = engines.entry(engine_key(s)).or_insert(f64::NEG_INFINITY);
        *e = e.max(s.value);
    }
    if by_bound.is_empty() {
        return None;
    }
    let mut bounds = Vec::with_capacity(by_bound.len());
    let mut cumulative = Vec::with_capacity(by_bound.len());
    for (le, engines) in by_bound.values() {
        bounds.push(*le);
        cumulative.push(engines.values().sum::<f64>());
    }
    let count_total = aggregate(
        &select(page.series(&format!("{family}_count")), model),
        true,
    );
    if bounds.last() != Some(&f64::INFINITY) {
        // A page without the +Inf bucket: its count is the total.
        bounds.push(f64::INFINITY);
        cumulative.push(count_total.unwrap_or(*cumulative.last().unwrap_or(&0.0)));
    }
    let count = count_total.unwrap_or(*cumulative.last().unwrap_or(&0.0));
    let sum = aggregate(&select(page.series(&format!("{family}_sum")), model), true).unwrap_or(0.0);
    Some(Hist {
        bounds: bounds.into(),
        cumulative,
        sum,
        count,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server_metrics::prom::parse;

    #[test]
    fn gauges_are_not_summed_across_rank_copies_and_ratios_are_averaged() {
        let page = parse(
            "sglang:num_running_reqs{model_name=\"m\",tp_rank=\"0\"} 5\n\
             sglang:num_running_reqs{model_name=\"m\",tp_rank=\"1\"} 5\n\
             sglang:token_usage{model_name=\"m\",tp_rank=\"0\"} 0.5\n\
             sglang:token_usage{model_name=\"m\",tp_rank=\"1\"} 0.5\n\
             vllm:num_requests_running{engine=\"0\",model_name=\"m\"} 3\n\
             vllm:num_requests_running{engine=\"1\",model_name=\"m\"} 4\n\
             vllm:kv_cache_usage_perc{engine=\"0\",model_name=\"m\"} 0.2\n\
             vllm:kv_cache_usage_perc{engine=\"1\",model_name=\"m\"} 0.4\n",
        );
        let s = read(&page, Some(Source::Sglang), Some("m"), &[]);
        assert_eq!(s.gauge(Gauge::Running), Some(5.0));
        assert_eq!(s.gauge(Gauge::KvCacheUsage), Some(0.5));
        let v = read(&page, Some(Source::Vllm), Some("m"), &[]);
        assert_eq!(v.gauge(Gauge::Running), Some(7.0), "two engines add up");
        let kv = v.gauge(Gauge::KvCacheUsage).unwrap();
        assert!((kv - 0.3).abs() < 1e-12, "{kv}");
    }

    #[test]
    fn the_model_under_test_is_selected() {
        let page = parse(
            "vllm:num_requests_waiting{model_name=\"a\"} 3\n\
             vllm:num_requests_waiting{model_name=\"b\"} 9\n",
        );
        let r = read(&page, Some(Source::Vllm), Some("b"), &[]);
        assert_eq!(r.gauge(Gauge::Waiting), Some(9.0));
        // An unknown model name selects nothing away.
        let r = read(&page, Some(Source::Vllm), Some("zzz"), &[]);
        assert_eq!(r.gauge(Gauge::Waiting), Some(12.0));
    }

    #[test]
    fn histograms_add_up_across_label_sets_in_bound_order() {
        let page = parse(
            "vllm:e2e_request_latency_seconds_bucket{le=\"+Inf\",engine=\"0\"} 4\n\
             vllm:e2e_request_latency_seconds_bucket{le=\"0.5\",engine=\"0\"} 1\n\
             vllm:e2e_request_latency_seconds_bucket{le=\"1.0\",engine=\"0\"} 3\n\
             vllm:e2e_request_latency_seconds_bucket{le=\"0.5\",engine=\"1\"} 2\n\
             vllm:e2e_request_latency_seconds_bucket{le=\"1.0\",engine=\"1\"} 2\n\
             vllm:e2e_request_latency_seconds_bucket{le=\"+Inf\",engine=\"1\"} 2\n\
             vllm:e2e_request_latency_seconds_sum{engine=\"0\"} 3.5\n\
             vllm:e2e_request_latency_seconds_sum{engine=\"1\"} 0.5\n\
             vllm:e2e_request_latency_seconds_count{engine=\"0\"} 4\n\
             vllm:e2e_request_latency_seconds_count{engine=\"1\"} 2\n",
        );
        let r = read(&page, Some(Source::Vllm), None, &[]);
        let h = r.hist(Histo::E2e).unwrap();
        assert_eq!(&*h.bounds, &[0.5, 1.0, f64::INFINITY]);
        assert_eq!(h.cumulative, vec![3.0, 5.0, 6.0]);
        assert_eq!(h.sum, 4.0);
        assert_eq!(h.count, 6.0);
        assert!(r.hist(Histo::Ttft).is_none());
    }

    #[test]
    fn raw_series_keep_each_label_set() {
        let page = parse("my_gauge{pool=\"a\"} 1\nmy_gauge{pool=\"b\"} 2\nother 3\n");
        let r = read(&page, None, None, &["my_gauge".into(), "other".into()]);
        assert_eq!(
            r.raw,
            vec![
                ("my_gauge{pool=\"a\"}".to_string(), 1.0),
                ("my_gauge{pool=\"b\"}".to_string(), 2.0),
                ("other".to_string(), 3.0)
            ]
        );
        assert_eq!(Source::detect(&page), None);
    }

    #[test]
    fn llama_cpp_prompt_tokens_include_the_cached_ones() {
        let page = parse(
            "llamacpp:prompt_tokens_total 100\nllamacpp:prompt_tokens_cached_total 900\n\
             llamacpp:tokens_predicted_total 50\nllamacpp:requests_processing 2\n",
        );
        assert_eq!(Source::detect(&page), Some(Source::LlamaCpp));
        let r = read(&page, Some(Source::LlamaCpp), None, &[]);
        assert_eq!(r.counter(Counter::PromptTokens), Some(1000.0));
        assert_eq!(r.counter(Counter::CachedPromptTokens), Some(900.0));
        assert_eq!(r.gauge(Gauge::Running), Some(2.0));
    }
}
