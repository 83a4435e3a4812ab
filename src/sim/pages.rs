//! The simulator's pages beside generation: `/v1/models`, `/tokenize`,
//! `/metrics` and the simulated GPUs' DCGM page.

use std::convert::Infallible;
use std::fmt::Write as _;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use hyper::body::Incoming;
use hyper::{Method, Request, Response, StatusCode};
use serde_json::Value;

use super::answer::unix_now;
use super::body::{error, plain, read_body, SimBody};
use super::request::Api;
use super::state::AppState;
use crate::tokenizer;

/// The simulated GPUs' DCGM exporter page (`/dcgm-metrics`, and `/metrics`
/// of `--dcgm-port`).
pub(super) fn dcgm_page(state: &AppState) -> Response<SimBody> {
    match &state.gpus {
        Some(g) => plain(
            StatusCode::OK,
            "text/plain; version=0.0.4",
            g.page(&state.gauges, state.params.decode_step.as_secs_f64()),
        ),
        None => error(
            StatusCode::NOT_FOUND,
            "NotFoundError",
            "no simulated GPUs: start the simulator with --gpus N",
        ),
    }
}

/// The exporter's own port (`--dcgm-port`): `/metrics` is the GPUs' page,
/// as on a node where dcgm-exporter listens beside the server.
pub async fn handle_dcgm(
    state: Arc<AppState>,
    req: Request<Incoming>,
) -> Result<Response<SimBody>, Infallible> {
    Ok(match (req.method(), req.uri().path()) {
        (&Method::GET, "/metrics") => dcgm_page(&state),
        _ => error(
            StatusCode::NOT_FOUND,
            "NotFoundError",
            "the DCGM exporter serves /metrics",
        ),
    })
}

/// `/v1/models` as vLLM lists it: each served name with the base model as
/// its `root`, no `parent` and the context as `max_model_len`; each LoRA
/// adapter with its path as `root`, the base model as `parent` and
/// `max_model_len` null (vLLM 0.32 lists adapters so).
pub(super) fn models(state: &AppState) -> Response<SimBody> {
    let (t, len) = (unix_now(), state.params.kv_cache_tokens.min(1 << 31));
    let data: Vec<Value> = state
        .models
        .iter()
        .map(|m| {
            serde_json::json!({
                "id": m.id,
                "object": "model",
                "created": t,
                "owned_by": "llmsweep",
                "root": m.root,
                "parent": m.parent,
                "max_model_len": m.parent.is_none().then_some(len),
            })
        })
        .collect();
    let body = serde_json::json!({"object": "list", "data": data}).to_string();
    plain(StatusCode::OK, "application/json", body)
}

/// `/tokenize`, as vLLM serves it (`{"model", "prompt"}` → `{"count",
/// "max_model_len", "tokens"}`; llama.cpp's `content` too): the count is
/// the built-in counter's, the simulator's own, and the token ids are
/// placeholders (their positions). Chat `messages` (vLLM's other form)
/// are counted as a chat request's prompt: their text, and what their
/// images, audio and video cost (`--image-tokens`, `--audio-tokens`,
/// `--frame-tokens`), refused as the request would be.
pub(super) async fn tokenize(state: &AppState, req: Request<Incoming>) -> Response<SimBody> {
    let body = match read_body(req).await {
        Ok(b) => b,
        Err(resp) => return resp,
    };
    let v: Value = match serde_json::from_slice(&body) {
        Ok(v) => v,
        Err(e) => {
            return error(
                StatusCode::BAD_REQUEST,
                "BadRequestError",
                &format!("body is not JSON: {e}"),
            )
        }
    };
    if v.get("messages").is_some() {
        let names: Vec<&str> = state.models.iter().map(|m| m.id.as_str()).collect();
        let cost = state.params.media_cost();
        return match super::request::parse_request(Api::Chat, &body, &names, &cost) {
            Ok(g) => counted(state, g.prompt_tokens),
            Err((status, kind, msg)) => error(status, kind, &msg),
        };
    }
    let Some(text) = v
        .get("prompt")
        .or_else(|| v.get("content"))
        .and_then(Value::as_str)
    else {
        return error(
            StatusCode::BAD_REQUEST,
            "BadRequestError",
            "give the text to count as \"prompt\" (or \"content\")",
        );
    };
    counted(state, tokenizer::count_tokens(text) as u64)
}

/// A `/tokenize` answer of `count` tokens.
fn counted(state: &AppState, count: u64) -> Response<SimBody> {
    let tokens: Vec<u64> = (0..count).collect();
    let body = serde_json::json!({
        "count": count,
        "max_model_len": state.params.kv_cache_tokens.min(1 << 31),
        "tokens": tokens,
    });
    plain(StatusCode::OK, "application/json", body.to_string())
}

/// `/metrics`: vLLM's names and semantics. The simulator never preempts
/// (it reserves a request's whole KV budget at admission), so that counter
/// stays at zero; its prefix cache counts every admitted prompt token as a
/// query and the ones it served as hits (zero with `--no-prefix-cache`).
pub(super) fn metrics(state: &AppState) -> Response<SimBody> {
    let g = &state.gauges;
    let mut s = String::with_capacity(8192);
    let m = &state.model_name;
    let labels = format!("model_name=\"{m}\"");
    write_counts(&mut s, state, &labels);
    write_lora(&mut s, state, &labels);
    let h = &state.truth.prom;
    h.ttft.write(
        &mut s,
        "vllm:time_to_first_token_seconds",
        "Histogram of time to first token in seconds.",
        &labels,
    );
    h.itl.write(
        &mut s,
        "vllm:inter_token_latency_seconds",
        "Histogram of inter-token latency in seconds.",
        &labels,
    );
    h.e2e.write(
        &mut s,
        "vllm:e2e_request_latency_seconds",
        "Histogram of e2e request latency in seconds.",
        &labels,
    );
    g.queue_time.write(
        &mut s,
        "vllm:request_queue_time_seconds",
        "Histogram of time spent in WAITING phase for request.",
        &labels,
    );
    plain(StatusCode::OK, "text/plain; version=0.0.4", s)
}

/// Why requests wait, and, when it serves adapters, the LoRA info gauge,
/// as vLLM 0.32 writes them: `deferred` are the requests passed over for
/// want of a LoRA slot (`--max-loras`), `capacity` the rest.
fn write_lora(s: &mut String, state: &AppState, labels: &str) {
    let g = &state.gauges;
    let waiting = g.waiting.load(Ordering::Relaxed);
    let deferred = g.deferred.load(Ordering::Relaxed).min(waiting);
    let name = "vllm:num_requests_waiting_by_reason";
    let _ = writeln!(s, "# HELP {name} Number of requests waiting by reason. Reason labels: 'capacity' = waiting for scheduling capacity; 'deferred' = deferred by transient constraints (LoRA budget, KV transfer, blocked status). Sum of all reasons equals vllm:num_requests_waiting.");
    let _ = writeln!(s, "# TYPE {name} gauge");
    let _ = writeln!(
        s,
        "{name}{{{labels},reason=\"capacity\"}} {}",
        waiting - deferred
    );
    let _ = writeln!(s, "{name}{{{labels},reason=\"deferred\"}} {deferred}");
    if state.models.iter().all(|m| m.parent.is_none()) {
        return;
    }
    let bits = g.running_adapters.load(Ordering::Relaxed);
    let running: Vec<&str> = state
        .models
        .iter()
        .enumerate()
        .filter(|(i, _)| *i < 64 && bits & (1 << i) != 0)
        .map(|(_, m)| m.id.as_str())
        .collect();
    let name = "vllm:lora_requests_info";
    let _ = writeln!(s, "# HELP {name} Running stats on lora requests.");
    let _ = writeln!(s, "# TYPE {name} gauge");
    let _ = writeln!(
        s,
        "{name}{{max_lora=\"{}\",running_lora_adapters=\"{}\",waiting_lora_adapters=\"\"}} {}",
        state.params.max_loras,
        running.join(","),
        unix_now()
    );
}

/// The gauges and counters of `/metrics`, under vLLM's names and help
/// texts, so that scrapers read the simulator as vLLM.
pub(super) fn write_counts(s: &mut String, state: &AppState, labels: &str) {
    let g = &state.gauges;
    let prompt_tokens = g.prompt_tokens_total.load(Ordering::Relaxed) as f64;
    let series = [
        (
            "vllm:num_requests_running",
            "Number of requests in model execution batches.",
            "gauge",
            g.running.load(Ordering::Relaxed) as f64,
        ),
        (
            "vllm:num_requests_waiting",
            "Number of requests waiting to be processed.",
            "gauge",
            g.waiting.load(Ordering::Relaxed) as f64,
        ),
        (
            "vllm:kv_cache_usage_perc",
            "KV-cache usage. 1 means 100 percent usage.",
            "gauge",
            g.kv_usage(),
        ),
        (
            "vllm:num_preemptions_total",
            "Cumulative number of preemption from the engine.",
            "counter",
            0.0,
        ),
        (
            "vllm:prefix_cache_queries_total",
            "Prefix cache queries, in terms of number of queried tokens.",
            "counter",
            prompt_tokens,
        ),
        (
            "vllm:prefix_cache_hits_total",
            "Prefix cache hits, in terms of number of cached tokens.",
            "counter",
            g.cached_tokens_total.load(Ordering::Relaxed) as f64,
        ),
        (
            "vllm:prompt_tokens_total",
            "Number of prefill tokens processed.",
            "counter",
            prompt_tokens,
        ),
        (
            "vllm:generation_tokens_total",
            "Number of generation tokens processed.",
            "counter",
            g.generation_tokens_total.load(Ordering::Relaxed) as f64,
        ),
        (
            "vllm:request_success_total",
            "Count of successfully processed requests.",
            "counter",
            (state.truth.completed() + state.pooled_inputs_beyond_first.load(Ordering::Relaxed))
                as f64,
        ),
        (
            "llmsweep_sim:requests_total",
            "Generation requests received.",
            "counter",
            state.requests_total.load(Ordering::Relaxed) as f64,
        ),
    ];
    for (name, help, kind, value) in series {
        let _ = writeln!(s, "# HELP {name} {help}");
        let _ = writeln!(s, "# TYPE {name} {kind}");
        let _ = writeln!(s, "{name}{{{labels}}} {value}");
    }
}
