//! The simulator's HTTP surface: OpenAI-compatible routes, `/metrics`,
//! `/health` and the ground-truth routes under `/sim/`.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::fmt::Write as _;
use std::future::Future as _;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use http_body::Frame;
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper::header::{HeaderValue, CONTENT_TYPE};
use hyper::{Method, Request, Response, StatusCode};
use rand::rngs::SmallRng;
use rand::Rng;
use rand_distr::{Distribution, Normal};
use serde_json::Value;
use tokio::sync::mpsc;

use super::batcher::{Emit, Gauges, SeqRequest};
use super::config::{FaultArgs, ModelParams};
use super::faults::{self, Fault};
use super::pooling::Kind;
use super::truth::{Ending, RequestTiming, Truth};
use crate::tokenizer;

/// A stalled stream gives up and closes after this long, so that a client that
/// never hangs up cannot pin a connection for ever.
const STALL_LIMIT: Duration = Duration::from_secs(300);
/// Request bodies larger than this are refused.
const MAX_BODY_BYTES: usize = 32 << 20;

/// Everything the request handlers share.
pub struct AppState {
    pub model_name: String,
    /// `model_name` as a JSON string literal, quotes included.
    pub model_json: String,
    /// Every name requests may use, `model_name` first: the served names,
    /// then the LoRA adapters (vLLM's `--lora-modules`).
    pub models: Vec<super::config::ServedModel>,
    pub params: ModelParams,
    pub faults: FaultArgs,
    pub seed: u64,
    pub engine: mpsc::UnboundedSender<SeqRequest>,
    pub gauges: Arc<Gauges>,
    pub truth: Arc<Truth>,
    /// `--gpus N`: the simulated GPUs behind `/dcgm-metrics`.
    pub gpus: Option<super::dcgm::GpuMeter>,
    /// The pooling engine (embeddings, rerank, score): one request at a time.
    pub pool: super::pooling::PoolCost,
    pub pooler: tokio::sync::Mutex<()>,
    pub ordinal: AtomicU64,
    pub requests_total: AtomicU64,
    /// With `params.prefix_cache`: the blocks earlier prompts computed.
    pub prefix_cache: Option<std::sync::Mutex<super::batcher::PrefixCache>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Api {
    Chat,
    Completions,
    /// `/v1/responses`: the OpenAI Responses API's events, no `[DONE]`.
    Responses,
}

/// What a generation request asks for.
#[derive(Debug)]
struct GenRequest {
    prompt_tokens: u64,
    max_tokens: Option<u64>,
    ignore_eos: bool,
    stream: bool,
    include_usage: bool,
    continuous_usage: bool,
    /// `chat_template_kwargs.enable_thinking` (true unless the request says false).
    thinking: bool,
    /// Prefix-cache block hashes of the prompt (`batcher::prompt_blocks`).
    blocks: Vec<u64>,
    /// The served model it named (index in `AppState::models`; 0 when it named none).
    model: usize,
}

pub async fn handle(
    state: Arc<AppState>,
    req: Request<Incoming>,
) -> Result<Response<SimBody>, Infallible> {
    let received = Instant::now();
    let path = req.uri().path().to_string();
    let resp = match (req.method(), path.as_str()) {
        (&Method::GET, "/health") => plain(StatusCode::OK, "text/plain", ""),
        (&Method::GET, "/v1/models") => models(&state),
        (&Method::GET, "/metrics") => metrics(&state),
        (&Method::GET, "/dcgm-metrics") => dcgm_page(&state),
        (&Method::GET, "/sim/stats") => {
            let body = serde_json::to_string_pretty(&state.truth.report())
                .unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"));
            plain(StatusCode::OK, "application/json", body)
        }
        (&Method::POST, "/sim/reset") => {
            state.truth.reset();
            plain(StatusCode::OK, "application/json", "{}")
        }
        (&Method::POST, "/v1/chat/completions") => generate(state, req, Api::Chat, received).await,
        (&Method::POST, "/v1/completions") => {
            generate(state, req, Api::Completions, received).await
        }
        (&Method::POST, "/v1/responses") => generate(state, req, Api::Responses, received).await,
        (&Method::POST, "/tokenize") => tokenize(&state, req).await,
        (&Method::POST, "/v1/embeddings") => pool(state, req, Kind::Embeddings, received).await,
        (&Method::POST, "/v1/rerank" | "/rerank" | "/v2/rerank") => {
            pool(state, req, Kind::Rerank, received).await
        }
        (&Method::POST, "/v1/score" | "/score") => pool(state, req, Kind::Score, received).await,
        (
            _,
            "/v1/chat/completions"
            | "/v1/completions"
            | "/v1/responses"
            | "/v1/embeddings"
            | "/v1/rerank"
            | "/rerank"
            | "/v2/rerank"
            | "/v1/score"
            | "/score"
            | "/v1/models"
            | "/tokenize"
            | "/metrics",
        ) => error(
            StatusCode::METHOD_NOT_ALLOWED,
            "MethodNotAllowed",
            "method not allowed",
        ),
        _ => error(
            StatusCode::NOT_FOUND,
            "NotFoundError",
            &format!("no route for {path}"),
        ),
    };
    Ok(resp)
}

/// The simulated GPUs' DCGM exporter page (`/dcgm-metrics`, and `/metrics`
/// of `--dcgm-port`).
fn dcgm_page(state: &AppState) -> Response<SimBody> {
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
/// its `root` and no `parent`; each LoRA adapter with its path as `root`
/// and the base model as `parent`.
fn models(state: &AppState) -> Response<SimBody> {
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
                "max_model_len": len,
            })
        })
        .collect();
    let body = serde_json::json!({"object": "list", "data": data}).to_string();
    plain(StatusCode::OK, "application/json", body)
}

/// `/tokenize`, as vLLM serves it (`{"model", "prompt"}` → `{"count",
/// "max_model_len", "tokens"}`; llama.cpp's `content` too): the count is
/// the built-in counter's, the simulator's own, and the token ids are
/// placeholders (their positions).
async fn tokenize(state: &AppState, req: Request<Incoming>) -> Response<SimBody> {
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
    let count = tokenizer::count_tokens(text);
    let tokens: Vec<usize> = (0..count).collect();
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
fn metrics(state: &AppState) -> Response<SimBody> {
    let g = &state.gauges;
    let mut s = String::with_capacity(8192);
    let m = &state.model_name;
    let labels = format!("model_name=\"{m}\"");
    write_counts(&mut s, state, &labels);
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

/// The gauges and counters of `/metrics`, under vLLM's names and help
/// texts, so that scrapers read the simulator as vLLM.
fn write_counts(s: &mut String, state: &AppState, labels: &str) {
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
            state.truth.completed() as f64,
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

async fn generate(
    state: Arc<AppState>,
    req: Request<Incoming>,
    api: Api,
    received: Instant,
) -> Response<SimBody> {
    state.requests_total.fetch_add(1, Ordering::Relaxed);
    state.truth.on_received();
    let timing = RequestTiming::new(received);
    let body = match read_body(req).await {
        Ok(b) => b,
        Err(resp) => {
            state.truth.record(&timing, Ending::Rejected);
            return resp;
        }
    };
    let names: Vec<&str> = state.models.iter().map(|m| m.id.as_str()).collect();
    let gen = match parse_request(api, &body, &names) {
        Ok(g) => g,
        Err((status, kind, msg)) => {
            state.truth.record(&timing, Ending::Rejected);
            return error(status, kind, &msg);
        }
    };

    if let Some(m) = state.models.get(gen.model) {
        state.truth.on_model(&m.id);
    }
    let ordinal = state.ordinal.fetch_add(1, Ordering::Relaxed);
    let mut rng = faults::request_rng(state.seed, ordinal);
    let (output_tokens, reasoning_tokens) = match lengths(&state, &gen, api, &mut rng) {
        Ok(l) => l,
        Err(msg) => {
            state.truth.record(&timing, Ending::Rejected);
            return error(StatusCode::BAD_REQUEST, "BadRequestError", &msg);
        }
    };

    let fault = faults::draw(&state.faults, &mut rng, output_tokens);
    if let Some(f) = fault {
        state.truth.on_fault(f.name());
    }
    match fault {
        Some(f @ (Fault::Http500 | Fault::Http429 | Fault::Http503)) => {
            state.truth.record(&timing, Ending::Failed);
            return http_fault(f);
        }
        Some(Fault::SlowHeaders) => {
            tokio::time::sleep(Duration::from_millis(state.faults.slow_headers_ms)).await;
        }
        _ => {}
    }

    let cached_tokens = state.prefix_cache.as_ref().map(|c| {
        c.lock()
            .map(|mut c| c.lookup_insert(&gen.blocks, gen.prompt_tokens))
            .unwrap_or(0)
    });
    let Some(rx) = submit(&state, &gen, received, cached_tokens, output_tokens) else {
        state.truth.record(&timing, Ending::Rejected);
        return error(
            StatusCode::SERVICE_UNAVAILABLE,
            "ServiceUnavailable",
            "the engine is shutting down",
        );
    };

    let ctx = StreamCtx::new(
        &state,
        api,
        ordinal,
        &gen,
        cached_tokens,
        reasoning_tokens,
        rng,
    );
    // SlowHeaders has already happened; what is left are mid-stream faults.
    let mid_fault = fault.filter(|f| !matches!(f, Fault::SlowHeaders));
    if gen.stream {
        let body = SseBody::new(ctx, rx, mid_fault, timing, state.truth.clone());
        let mut resp = Response::new(SimBody::Sse(Box::new(body)));
        let h = resp.headers_mut();
        h.insert(CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
        h.insert("cache-control", HeaderValue::from_static("no-cache"));
        resp
    } else {
        whole_response(ctx, rx, mid_fault, timing, &state.truth).await
    }
}

/// How many tokens the answer has, and how many of them are thinking; the
/// server's message when prompt and answer do not fit the context.
fn lengths(
    state: &AppState,
    gen: &GenRequest,
    api: Api,
    rng: &mut SmallRng,
) -> Result<(u64, u64), String> {
    // Thinking comes first and counts in `max_tokens`, as with vLLM's and
    // SGLang's reasoning parsers; /v1/completions has no reasoning parser.
    let thinks = gen.thinking && api != Api::Completions;
    let reasoning_len = if thinks {
        state.params.reasoning_len(rng)
    } else {
        0
    };
    let output_tokens = output_length(&state.params, gen, reasoning_len, rng);
    let context = gen.prompt_tokens + output_tokens;
    if context > state.params.kv_cache_tokens {
        return Err(format!(
            "This model's maximum context length is {} tokens. However, you requested {} tokens ({} in the messages, {} in the completion).",
            state.params.kv_cache_tokens, context, gen.prompt_tokens, output_tokens
        ));
    }
    Ok((output_tokens, reasoning_len.min(output_tokens)))
}

/// The sequence handed to the batcher; its tokens come back on the
/// receiver. `None` when the batcher has stopped.
fn submit(
    state: &AppState,
    gen: &GenRequest,
    received: Instant,
    cached_tokens: Option<u64>,
    output_tokens: u64,
) -> Option<mpsc::UnboundedReceiver<Emit>> {
    let (tx, rx) = mpsc::unbounded_channel();
    state
        .engine
        .send(SeqRequest {
            arrived: tokio::time::Instant::from_std(received),
            cached_tokens: cached_tokens.unwrap_or(0),
            prompt_tokens: gen.prompt_tokens,
            output_tokens,
            tx,
        })
        .ok()
        .map(|_| rx)
}

/// An embeddings, rerank or score request: read, counted, then served by
/// the pooling engine in turn (`sim::pooling`).
async fn pool(
    state: Arc<AppState>,
    req: Request<Incoming>,
    kind: Kind,
    received: Instant,
) -> Response<SimBody> {
    state.requests_total.fetch_add(1, Ordering::Relaxed);
    state.truth.on_received();
    let mut timing = RequestTiming::new(received);
    let reject = |status, kind: &str, msg: &str| {
        state.truth.record(&timing, Ending::Rejected);
        error(status, kind, msg)
    };
    let body = match read_body(req).await {
        Ok(b) => b,
        Err(resp) => {
            state.truth.record(&timing, Ending::Rejected);
            return resp;
        }
    };
    let v: Value = match serde_json::from_slice(&body) {
        Ok(v) => v,
        Err(e) => {
            return reject(
                StatusCode::BAD_REQUEST,
                "BadRequestError",
                &format!("request body is not JSON: {e}"),
            )
        }
    };
    let model = match v.get("model").and_then(Value::as_str) {
        None => state.models.first(),
        Some(m) => match state.models.iter().find(|x| x.id == m) {
            Some(x) => Some(x),
            None => {
                return reject(
                    StatusCode::NOT_FOUND,
                    "NotFoundError",
                    &format!("The model `{m}` does not exist."),
                )
            }
        },
    };
    let r = match super::pooling::parse(kind, &v) {
        Ok(r) => r,
        Err(msg) => return reject(StatusCode::BAD_REQUEST, "BadRequestError", &msg),
    };
    let model_json = match model {
        Some(m) => {
            state.truth.on_model(&m.id);
            serde_json::to_string(&m.id).unwrap_or_else(|_| state.model_json.clone())
        }
        None => state.model_json.clone(),
    };
    let ordinal = state.ordinal.fetch_add(1, Ordering::Relaxed);
    {
        // One request at a time, in arrival order (tokio's mutex is fair).
        let _engine = state.pooler.lock().await;
        tokio::time::sleep(state.pool.time(r.tokens)).await;
    }
    timing.last_token = Some(Instant::now());
    state.truth.record(&timing, Ending::Completed);
    let id = format!(
        "{}-{ordinal}",
        match kind {
            Kind::Embeddings => "embd",
            Kind::Rerank => "rerank",
            Kind::Score => "score",
        }
    );
    plain(
        StatusCode::OK,
        "application/json",
        super::pooling::answer(kind, &id, &model_json, unix_now(), &r),
    )
}

async fn read_body(req: Request<Incoming>) -> Result<Bytes, Response<SimBody>> {
    let limited = http_body_util::Limited::new(req.into_body(), MAX_BODY_BYTES);
    match limited.collect().await {
        Ok(c) => Ok(c.to_bytes()),
        Err(e) => Err(error(
            StatusCode::BAD_REQUEST,
            "BadRequestError",
            &format!("could not read the request body: {e}"),
        )),
    }
}

type Refusal = (StatusCode, &'static str, String);

/// `served`: the names a request may use (served names, then adapters).
fn parse_request(api: Api, body: &[u8], served: &[&str]) -> Result<GenRequest, Refusal> {
    let bad = |msg: String| (StatusCode::BAD_REQUEST, "BadRequestError", msg);
    let v: Value =
        serde_json::from_slice(body).map_err(|e| bad(format!("request body is not JSON: {e}")))?;
    let mut model = 0;
    if let Some(m) = v.get("model").and_then(Value::as_str) {
        model = served.iter().position(|s| *s == m).ok_or_else(|| {
            (
                StatusCode::NOT_FOUND,
                "NotFoundError",
                format!("The model `{m}` does not exist."),
            )
        })?;
    }
    let prompt_tokens = prompt_tokens(api, &v).map_err(bad)?;
    let max_tokens = v
        .get("max_completion_tokens")
        .or_else(|| v.get("max_tokens"))
        .or_else(|| v.get("max_output_tokens"))
        .and_then(Value::as_u64);
    if max_tokens == Some(0) {
        return Err(bad("max_tokens must be at least 1".into()));
    }
    // A real server refuses lengths beyond its context; so does this one,
    // rather than overflow its accounting.
    if let Some(n) = max_tokens.filter(|n| *n > MAX_TOKENS) {
        return Err(bad(format!(
            "max_tokens {n} is more than this model's context of {MAX_TOKENS} tokens"
        )));
    }
    let flag = |name: &str| v.get(name).and_then(Value::as_bool).unwrap_or(false);
    let opts = v.get("stream_options");
    let opt = |name: &str| {
        opts.and_then(|o| o.get(name))
            .and_then(Value::as_bool)
            .unwrap_or(false)
    };
    Ok(GenRequest {
        model,
        blocks: super::batcher::prompt_blocks(&v),
        prompt_tokens,
        max_tokens,
        ignore_eos: flag("ignore_eos"),
        stream: flag("stream"),
        // The Responses API always ends with its usage.
        include_usage: opt("include_usage") || api == Api::Responses,
        continuous_usage: opt("continuous_usage_stats"),
        thinking: v
            .pointer("/chat_template_kwargs/enable_thinking")
            .and_then(Value::as_bool)
            .unwrap_or(true),
    })
}

/// The prompt's length in tokens, from the API's own field (`prompt`,
/// `input` or `messages`); the refusal's message when it is missing.
fn prompt_tokens(api: Api, v: &Value) -> Result<u64, String> {
    Ok(match api {
        Api::Completions => match v.get("prompt") {
            Some(Value::String(s)) => tokenizer::count_tokens(s) as u64,
            Some(Value::Array(items)) => items
                .iter()
                .map(|x| match x {
                    Value::String(s) => tokenizer::count_tokens(s) as u64,
                    Value::Number(_) => 1, // a token id
                    Value::Array(ids) => ids.len() as u64,
                    _ => 0,
                })
                .sum(),
            _ => return Err("`prompt` is required".into()),
        },
        Api::Responses => match v.get("input") {
            Some(Value::String(s)) => tokenizer::count_tokens(s) as u64,
            Some(Value::Array(items)) => items.iter().map(message_tokens).sum(),
            _ => return Err("`input` is required".into()),
        },
        Api::Chat => {
            let Some(msgs) = v.get("messages").and_then(Value::as_array) else {
                return Err("`messages` is required".into());
            };
            msgs.iter()
                .map(|m| match m.get("content") {
                    Some(Value::String(s)) => tokenizer::count_tokens(s) as u64,
                    Some(Value::Array(parts)) => parts
                        .iter()
                        .filter_map(|p| p.get("text").and_then(Value::as_str))
                        .map(|s| tokenizer::count_tokens(s) as u64)
                        .sum(),
                    _ => 0,
                })
                .sum()
        }
    })
}

/// Tokens of one input item of the Responses API: a string, or a message
/// whose content is a string or parts with `text`.
fn message_tokens(item: &Value) -> u64 {
    match item {
        Value::String(s) => tokenizer::count_tokens(s) as u64,
        _ => match item.get("content") {
            Some(Value::String(s)) => tokenizer::count_tokens(s) as u64,
            Some(Value::Array(parts)) => parts
                .iter()
                .filter_map(|p| p.get("text").and_then(Value::as_str))
                .map(|s| tokenizer::count_tokens(s) as u64)
                .sum(),
            _ => 0,
        },
    }
}

/// The simulated model's context length.
const MAX_TOKENS: u64 = 1 << 20;

/// Exact `max_tokens` with `ignore_eos`; otherwise `reasoning` thinking
/// tokens and a sampled answer length, capped by `max_tokens` when given.
fn output_length(p: &ModelParams, g: &GenRequest, reasoning: u64, rng: &mut SmallRng) -> u64 {
    if let (true, Some(n)) = (g.ignore_eos, g.max_tokens) {
        return n;
    }
    let sampled = match Normal::new(p.output_len_mean, p.output_len_stdev) {
        Ok(d) => d.sample(rng).round().max(1.0) as u64,
        Err(_) => p.output_len_mean.round().max(1.0) as u64,
    };
    let sampled = sampled.saturating_add(reasoning);
    match g.max_tokens {
        Some(n) => sampled.min(n),
        None => sampled,
    }
}

fn http_fault(f: Fault) -> Response<SimBody> {
    match f {
        Fault::Http429 => {
            let mut r = error(
                StatusCode::TOO_MANY_REQUESTS,
                "RateLimitError",
                "simulated rate limit",
            );
            r.headers_mut()
                .insert("retry-after", HeaderValue::from_static("1"));
            r
        }
        Fault::Http503 => error(
            StatusCode::SERVICE_UNAVAILABLE,
            "ServiceUnavailableError",
            "simulated overload",
        ),
        _ => error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "InternalServerError",
            "simulated internal error",
        ),
    }
}

/// Per-request values every chunk repeats.
struct StreamCtx {
    api: Api,
    id: String,
    created: u64,
    model_json: String,
    prompt_tokens: u64,
    /// Reported as `prompt_tokens_details.cached_tokens` when the cache is on.
    cached_tokens: Option<u64>,
    include_usage: bool,
    continuous_usage: bool,
    max_tokens: Option<u64>,
    /// The first this many output tokens are thinking (`reasoning_content`).
    reasoning_tokens: u64,
    /// The Responses API numbers its events.
    sequence: u64,
    rng: SmallRng,
}

impl StreamCtx {
    /// What the answer's events carry: its id (`chatcmpl-…`, `cmpl-…`,
    /// `resp-…` numbered by arrival), the model, the prompt's and cached
    /// tokens, the usage options the request asked for.
    fn new(
        state: &AppState,
        api: Api,
        ordinal: u64,
        gen: &GenRequest,
        cached_tokens: Option<u64>,
        reasoning_tokens: u64,
        rng: SmallRng,
    ) -> Self {
        StreamCtx {
            api,
            id: format!(
                "{}-{ordinal}",
                match api {
                    Api::Chat => "chatcmpl",
                    Api::Completions => "cmpl",
                    Api::Responses => "resp",
                }
            ),
            created: unix_now(),
            // The answer names the model the request named (an adapter's own name).
            model_json: state
                .models
                .get(gen.model)
                .and_then(|m| serde_json::to_string(&m.id).ok())
                .unwrap_or_else(|| state.model_json.clone()),
            prompt_tokens: gen.prompt_tokens,
            cached_tokens,
            include_usage: gen.include_usage,
            continuous_usage: gen.continuous_usage,
            max_tokens: gen.max_tokens,
            reasoning_tokens,
            sequence: 0,
            rng,
        }
    }

    fn push_words(&mut self, out: &mut String, k: u32) {
        for _ in 0..k {
            let i = self.rng.random_range(0..tokenizer::VOCAB.len());
            tokenizer::push_vocab_token(out, i);
        }
    }

    fn finish_reason(&self, generated: u64) -> &'static str {
        if self.max_tokens == Some(generated) {
            "length"
        } else {
            "stop"
        }
    }

    fn head(&self, s: &mut String) {
        let object = match self.api {
            Api::Chat => "chat.completion.chunk",
            Api::Completions | Api::Responses => "text_completion",
        };
        let _ = write!(
            s,
            r#"data: {{"id":"{}","object":"{object}","created":{},"model":{},"choices":["#,
            self.id, self.created, self.model_json
        );
    }

    fn usage(&self, s: &mut String, completion: u64) {
        let _ = write!(
            s,
            r#""usage":{{"prompt_tokens":{p},"total_tokens":{t},"completion_tokens":{completion}"#,
            p = self.prompt_tokens,
            t = self.prompt_tokens + completion,
        );
        if let Some(c) = self.cached_tokens {
            let _ = write!(s, r#","prompt_tokens_details":{{"cached_tokens":{c}}}"#);
        }
        if self.reasoning_tokens > 0 {
            let r = self.reasoning_tokens.min(completion);
            let _ = write!(
                s,
                r#","completion_tokens_details":{{"reasoning_tokens":{r}}}"#
            );
        }
        s.push('}');
    }

    /// How many of the `k` tokens that bring the count to `generated` are
    /// thinking: (reasoning, answer).
    fn split(&self, k: u32, generated: u64) -> (u32, u32) {
        let before = generated.saturating_sub(k as u64);
        let r = self.reasoning_tokens.saturating_sub(before).min(k as u64) as u32;
        (r, k - r)
    }

    /// The first chat chunk: the role, no text (not a token).
    fn role_chunk(&self) -> Bytes {
        let mut s = String::with_capacity(256);
        self.head(&mut s);
        s.push_str(r#"{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]"#);
        if self.continuous_usage {
            s.push(',');
            self.usage(&mut s, 0);
        }
        s.push_str("}\n\n");
        Bytes::from(s)
    }

    /// A chunk with `k` new tokens (`generated` counts them already); its text
    /// also carries `padding`, empty except for the huge-chunk fault.
    fn token_chunk(&mut self, k: u32, generated: u64, finished: bool, padding: &str) -> Bytes {
        let (r, a) = self.split(k, generated);
        let mut thought = String::new();
        self.push_words(&mut thought, r);
        let mut text = String::with_capacity(a as usize * 8 + padding.len());
        self.push_words(&mut text, a);
        text.push_str(padding);
        if self.api == Api::Responses {
            // One event per output item: thinking, then the message's text.
            let mut s = String::with_capacity(256 + thought.len() + text.len());
            if r > 0 {
                let seq = self.next_seq();
                let _ = write!(
                    s,
                    "event: response.reasoning_text.delta\ndata: {{\"type\":\"response.reasoning_text.delta\",\"item_id\":\"rs_{id}\",\"output_index\":0,\"content_index\":0,\"delta\":\"{thought}\",\"sequence_number\":{seq}}}\n\n",
                    id = self.id,
                );
            }
            if !text.is_empty() {
                let seq = self.next_seq();
                let index = u32::from(self.reasoning_tokens > 0);
                let _ = write!(
                    s,
                    "event: response.output_text.delta\ndata: {{\"type\":\"response.output_text.delta\",\"item_id\":\"msg_{id}\",\"output_index\":{index},\"content_index\":0,\"delta\":\"{text}\",\"logprobs\":[],\"sequence_number\":{seq}}}\n\n",
                    id = self.id,
                );
            }
            return Bytes::from(s);
        }
        let fr = if finished {
            format!("\"{}\"", self.finish_reason(generated))
        } else {
            "null".to_string()
        };
        let mut s = String::with_capacity(256 + text.len());
        self.head(&mut s);
        match self.api {
            Api::Chat => {
                // A chunk that crosses the end of the thinking carries both
                // fields, as vLLM's reasoning parser sends it.
                let delta = match (r, a) {
                    (0, _) => format!(r#""content":"{text}""#),
                    (_, 0) if padding.is_empty() => format!(r#""reasoning_content":"{thought}""#),
                    _ => format!(r#""reasoning_content":"{thought}","content":"{text}""#),
                };
                let _ = write!(
                    s,
                    r#"{{"index":0,"delta":{{{delta}}},"logprobs":null,"finish_reason":{fr}}}]"#
                );
            }
            Api::Completions | Api::Responses => {
                let _ = write!(
                    s,
                    r#"{{"index":0,"text":"{text}","logprobs":null,"finish_reason":{fr},"stop_reason":null}}]"#
                );
            }
        }
        if self.continuous_usage {
            s.push(',');
            self.usage(&mut s, generated);
        }
        s.push_str("}\n\n");
        Bytes::from(s)
    }

    fn next_seq(&mut self) -> u64 {
        self.sequence += 1;
        self.sequence - 1
    }

    /// The Responses API's `response` object: `status`, and `usage` once done.
    fn response_object(&self, status: &str, completion: Option<u64>, output: &str) -> String {
        let usage = match completion {
            Some(c) => {
                let r = self.reasoning_tokens.min(c);
                let cached = self.cached_tokens.unwrap_or(0);
                format!(
                    r#"{{"input_tokens":{p},"input_tokens_details":{{"cached_tokens":{cached}}},"output_tokens":{c},"output_tokens_details":{{"reasoning_tokens":{r}}},"total_tokens":{t}}}"#,
                    p = self.prompt_tokens,
                    t = self.prompt_tokens + c,
                )
            }
            None => "null".into(),
        };
        let incomplete = if status == "incomplete" {
            r#"{"reason":"max_output_tokens"}"#
        } else {
            "null"
        };
        format!(
            r#"{{"id":"{id}","object":"response","created_at":{c},"status":"{status}","model":{m},"output":[{output}],"incomplete_details":{incomplete},"usage":{usage}}}"#,
            id = self.id,
            c = self.created,
            m = self.model_json,
        )
    }

    /// The Responses API's first event.
    fn created_event(&mut self) -> Bytes {
        let seq = self.next_seq();
        let resp = self.response_object("in_progress", None, "");
        Bytes::from(format!(
            "event: response.created\ndata: {{\"type\":\"response.created\",\"response\":{resp},\"sequence_number\":{seq}}}\n\n"
        ))
    }

    /// The Responses API's last event, with the usage: `response.completed`,
    /// or `response.incomplete` when `max_output_tokens` cut the output.
    fn completed_event(&mut self, completion: u64) -> Bytes {
        let seq = self.next_seq();
        let kind = if self.max_tokens == Some(completion) {
            "incomplete"
        } else {
            "completed"
        };
        let resp = self.response_object(kind, Some(completion), "");
        Bytes::from(format!(
            "event: response.{kind}\ndata: {{\"type\":\"response.{kind}\",\"response\":{resp},\"sequence_number\":{seq}}}\n\n"
        ))
    }

    /// How the stream ends after the last token (or none): usage and
    /// `[DONE]`, or the Responses API's completed event.
    fn end_of_stream(&mut self, completion: u64) -> Vec<Bytes> {
        match self.api {
            Api::Responses => vec![self.completed_event(completion)],
            Api::Chat | Api::Completions => {
                let mut v = Vec::new();
                if self.include_usage && completion > 0 {
                    v.push(self.usage_chunk(completion));
                }
                v.push(Bytes::from_static(DONE));
                v
            }
        }
    }

    /// An in-band error, in the API's framing: chat and completions send an
    /// `error` object then `[DONE]`; the Responses API an `error` event.
    fn error_events(&mut self) -> Vec<Bytes> {
        match self.api {
            Api::Responses => {
                let seq = self.next_seq();
                vec![Bytes::from(format!(
                    "event: error\ndata: {{\"type\":\"error\",\"code\":\"server_error\",\"message\":\"simulated in-band error\",\"param\":null,\"sequence_number\":{seq}}}\n\n"
                ))]
            }
            Api::Chat | Api::Completions => {
                vec![Bytes::from_static(ERROR_EVENT), Bytes::from_static(DONE)]
            }
        }
    }

    /// The final usage chunk (`choices: []`), sent when `include_usage` is set.
    fn usage_chunk(&self, completion: u64) -> Bytes {
        let mut s = String::with_capacity(256);
        self.head(&mut s);
        s.push_str("],");
        self.usage(&mut s, completion);
        s.push_str("}\n\n");
        Bytes::from(s)
    }
}

const DONE: &[u8] = b"data: [DONE]\n\n";
/// Size of the text a huge-chunk fault stuffs into one chunk.
const HUGE_CHUNK_BYTES: usize = 1 << 20;
const ERROR_EVENT: &[u8] = b"data: {\"error\":{\"object\":\"error\",\"message\":\"simulated in-band error\",\"type\":\"InternalServerError\",\"code\":500}}\n\n";
const NON_JSON_EVENT: &[u8] = b"data: this is not json\n\n";
/// An SSE line that is not valid UTF-8, which the SSE format forbids.
const MALFORMED_LINE: &[u8] = b"data: {\"choices\":[{\"delta\":{\"content\":\"\xff\xfe\"}}]}\n\n";

/// The streamed response: turns engine emits into SSE chunks, applies the
/// request's mid-stream fault, and records ground truth exactly once.
pub struct SseBody {
    ctx: StreamCtx,
    rx: Option<mpsc::UnboundedReceiver<Emit>>,
    queue: VecDeque<Bytes>,
    fault: Option<Fault>,
    generated: u64,
    /// Set once a stall fault struck: send nothing until this fires.
    stall: Option<Pin<Box<tokio::time::Sleep>>>,
    done: bool,
    recorded: bool,
    timing: RequestTiming,
    truth: Arc<Truth>,
}

impl SseBody {
    fn new(
        ctx: StreamCtx,
        rx: mpsc::UnboundedReceiver<Emit>,
        fault: Option<Fault>,
        timing: RequestTiming,
        truth: Arc<Truth>,
    ) -> Self {
        let mut ctx = ctx;
        let mut queue = VecDeque::new();
        match ctx.api {
            Api::Chat => queue.push_back(ctx.role_chunk()),
            Api::Responses => queue.push_back(ctx.created_event()),
            Api::Completions => {}
        }
        SseBody {
            ctx,
            rx: Some(rx),
            queue,
            fault,
            generated: 0,
            stall: None,
            done: false,
            recorded: false,
            timing,
            truth,
        }
    }

    fn record(&mut self, ending: Ending) {
        if !self.recorded {
            self.recorded = true;
            self.truth.record(&self.timing, ending);
        }
    }

    /// Stops producing: frees the sequence's batch slot if it still runs.
    fn finish(&mut self, ending: Ending) {
        self.done = true;
        self.rx = None;
        self.record(ending);
    }

    /// Handles one emit from the engine; returns an error to break the connection.
    fn on_emit(&mut self, emit: Emit) -> Result<(), io::Error> {
        let after = self.generated + emit.tokens as u64;
        let mut padding = String::new();
        if self.fault == Some(Fault::Empty) {
            let end = self.ctx.end_of_stream(0);
            self.queue.extend(end);
            self.finish(Ending::Failed);
            return Ok(());
        }
        let strikes = match self.fault {
            Some(
                Fault::Drop { at_token }
                | Fault::Stall { at_token }
                | Fault::Malformed { at_token }
                | Fault::NonJson { at_token }
                | Fault::ErrorEvent { at_token }
                | Fault::HugeChunk { at_token },
            ) => after >= at_token,
            _ => false,
        };
        if strikes {
            match self.fault.take() {
                Some(Fault::Drop { .. }) => {
                    self.finish(Ending::Failed);
                    return Err(io::Error::other("simulated connection drop"));
                }
                Some(Fault::Stall { .. }) => {
                    self.rx = None;
                    self.record(Ending::Failed);
                    self.stall = Some(Box::pin(tokio::time::sleep(STALL_LIMIT)));
                    return Ok(());
                }
                Some(Fault::ErrorEvent { .. }) => {
                    let events = self.ctx.error_events();
                    self.queue.extend(events);
                    self.finish(Ending::Failed);
                    return Ok(());
                }
                // These two spoil one event, then the stream goes on.
                Some(Fault::Malformed { .. }) => {
                    self.queue.push_back(Bytes::from_static(MALFORMED_LINE))
                }
                Some(Fault::NonJson { .. }) => {
                    self.queue.push_back(Bytes::from_static(NON_JSON_EVENT))
                }
                // This emit's tokens arrive buried in 1 MiB of text: valid, just enormous.
                Some(Fault::HugeChunk { .. }) => padding = " the".repeat(HUGE_CHUNK_BYTES / 4),
                _ => {}
            }
        }
        self.generated = after;
        let (thinking, _) = self.ctx.split(emit.tokens, self.generated);
        self.truth
            .on_chunk(&mut self.timing, Instant::now(), emit.tokens, thinking);
        let chunk = self
            .ctx
            .token_chunk(emit.tokens, self.generated, emit.finished, &padding);
        self.queue.push_back(chunk);
        if emit.finished {
            let end = self.ctx.end_of_stream(self.generated);
            self.queue.extend(end);
            self.finish(Ending::Completed);
        }
        Ok(())
    }
}

impl Drop for SseBody {
    fn drop(&mut self) {
        // Dropped before the end: the client hung up (or the server stopped).
        self.record(Ending::Cancelled);
    }
}

impl http_body::Body for SseBody {
    type Data = Bytes;
    type Error = io::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, io::Error>>> {
        let this = &mut *self;
        loop {
            if let Some(b) = this.queue.pop_front() {
                return Poll::Ready(Some(Ok(Frame::data(b))));
            }
            if this.done {
                return Poll::Ready(None);
            }
            if let Some(stall) = this.stall.as_mut() {
                // Send nothing until the client gives up (or the limit passes).
                return match stall.as_mut().poll(cx) {
                    Poll::Ready(()) => Poll::Ready(Some(Err(io::Error::other("stall limit")))),
                    Poll::Pending => Poll::Pending,
                };
            }
            let Some(rx) = this.rx.as_mut() else {
                this.done = true;
                continue;
            };
            match rx.poll_recv(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(None) => {
                    // The engine stopped (shutdown) before this sequence finished.
                    this.finish(Ending::Cancelled);
                    return Poll::Ready(Some(Err(io::Error::other("engine stopped"))));
                }
                Poll::Ready(Some(emit)) => {
                    if let Err(e) = this.on_emit(emit) {
                        return Poll::Ready(Some(Err(e)));
                    }
                }
            }
        }
    }
}

/// Non-streaming responses wait for every token, then answer at once.
async fn whole_response(
    mut ctx: StreamCtx,
    mut rx: mpsc::UnboundedReceiver<Emit>,
    fault: Option<Fault>,
    mut timing: RequestTiming,
    truth: &Truth,
) -> Response<SimBody> {
    let mut generated = 0u64;
    while let Some(e) = rx.recv().await {
        generated += e.tokens as u64;
        if e.finished {
            break;
        }
    }
    drop(rx);
    // No first token is visible to the client before the whole answer, so a
    // non-streamed request counts towards end-to-end latency only.
    timing.last_token = Some(Instant::now());
    timing.tokens = generated;
    timing.reasoning_tokens = ctx.reasoning_tokens.min(generated);
    let ending = match fault {
        Some(_) => Ending::Failed,
        None => Ending::Completed,
    };
    truth.record(&timing, ending);
    match fault {
        Some(Fault::Drop { .. }) => return Response::new(SimBody::Broken),
        Some(Fault::Stall { .. }) => {
            tokio::time::sleep(STALL_LIMIT).await;
            return Response::new(SimBody::Broken);
        }
        Some(Fault::HugeChunk { .. }) => {}
        Some(Fault::Empty) => {
            return plain(StatusCode::OK, "application/json", r#"{"choices":[]}"#);
        }
        Some(Fault::Malformed { .. } | Fault::NonJson { .. }) => {
            return plain(StatusCode::OK, "application/json", "this is not json");
        }
        Some(Fault::ErrorEvent { .. }) => {
            return http_fault(Fault::Http500);
        }
        _ => {}
    }
    whole_body(&mut ctx, generated)
}

/// The answer of a non-streamed request, `generated` tokens long, in the
/// API's own shape (chat, completions, or the Responses API's object).
fn whole_body(ctx: &mut StreamCtx, generated: u64) -> Response<SimBody> {
    let (r, a) = ctx.split(generated as u32, generated);
    let mut thought = String::new();
    ctx.push_words(&mut thought, r);
    let mut text = String::new();
    ctx.push_words(&mut text, a);
    let fr = ctx.finish_reason(generated);
    let reasoning = if r > 0 {
        format!(r#","reasoning_content":"{thought}""#)
    } else {
        String::new()
    };
    let choice = match ctx.api {
        Api::Chat => format!(
            r#"{{"index":0,"message":{{"role":"assistant","content":"{text}"{reasoning}}},"logprobs":null,"finish_reason":"{fr}"}}"#
        ),
        Api::Completions => {
            format!(r#"{{"index":0,"text":"{text}","logprobs":null,"finish_reason":"{fr}"}}"#)
        }
        Api::Responses => {
            // The output items: the thinking, then the message.
            let mut items = Vec::new();
            if r > 0 {
                items.push(format!(
                    r#"{{"type":"reasoning","id":"rs_{id}","content":[{{"type":"reasoning_text","text":"{thought}"}}],"summary":[]}}"#,
                    id = ctx.id
                ));
            }
            items.push(format!(
                r#"{{"type":"message","id":"msg_{id}","role":"assistant","status":"completed","content":[{{"type":"output_text","text":"{text}","annotations":[]}}]}}"#,
                id = ctx.id
            ));
            let status = if ctx.max_tokens == Some(generated) {
                "incomplete"
            } else {
                "completed"
            };
            let body = ctx.response_object(status, Some(generated), &items.join(","));
            return plain(StatusCode::OK, "application/json", body);
        }
    };
    let object = match ctx.api {
        Api::Chat => "chat.completion",
        Api::Completions | Api::Responses => "text_completion",
    };
    // The same usage as a stream's, cached prompt tokens included.
    let mut usage = String::new();
    ctx.usage(&mut usage, generated);
    let body = format!(
        r#"{{"id":"{id}","object":"{object}","created":{c},"model":{m},"choices":[{choice}],{usage}}}"#,
        id = ctx.id,
        c = ctx.created,
        m = ctx.model_json,
    );
    plain(StatusCode::OK, "application/json", body)
}

/// The response bodies the simulator sends.
pub enum SimBody {
    Full(Option<Bytes>),
    Sse(Box<SseBody>),
    /// Fails on first read: the connection is cut.
    Broken,
}

impl http_body::Body for SimBody {
    type Data = Bytes;
    type Error = io::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, io::Error>>> {
        match self.get_mut() {
            SimBody::Full(b) => Poll::Ready(b.take().map(|b| Ok(Frame::data(b)))),
            SimBody::Sse(s) => Pin::new(s.as_mut()).poll_frame(cx),
            SimBody::Broken => Poll::Ready(Some(Err(io::Error::other("simulated drop")))),
        }
    }
}

fn plain(
    status: StatusCode,
    content_type: &'static str,
    body: impl Into<Bytes>,
) -> Response<SimBody> {
    let body: Bytes = body.into();
    let mut r = Response::new(SimBody::Full((!body.is_empty()).then_some(body)));
    *r.status_mut() = status;
    r.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    r
}

/// An OpenAI/vLLM-style JSON error.
fn error(status: StatusCode, kind: &str, message: &str) -> Response<SimBody> {
    let body = serde_json::json!({
        "object": "error",
        "message": message,
        "type": kind,
        "code": status.as_u16(),
    });
    plain(status, "application/json", body.to_string())
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_chat_and_completions_requests() {
        let g = parse_request(
            Api::Chat,
            br#"{"model":"m","messages":[{"role":"user","content":"hello there world"}],"max_completion_tokens":7,"ignore_eos":true,"stream":true,"stream_options":{"include_usage":true}}"#,
            &["m"],
        )
        .unwrap();
        assert_eq!(g.prompt_tokens, 3);
        assert_eq!(g.max_tokens, Some(7));
        assert!(g.ignore_eos && g.stream && g.include_usage && !g.continuous_usage);

        let g = parse_request(
            Api::Completions,
            br#"{"prompt":"a b c d","max_tokens":3}"#,
            &["m"],
        )
        .unwrap();
        assert_eq!(g.prompt_tokens, 4);
        assert!(!g.stream);
    }

    #[test]
    fn refuses_unknown_models_and_broken_bodies() {
        let e = parse_request(Api::Chat, br#"{"model":"x","messages":[]}"#, &["m"]).unwrap_err();
        assert_eq!(e.0, StatusCode::NOT_FOUND);
        assert!(e.2.contains("`x`"));
        let e = parse_request(Api::Chat, b"{nope", &["m"]).unwrap_err();
        assert_eq!(e.0, StatusCode::BAD_REQUEST);
        let e = parse_request(Api::Completions, br#"{"model":"m"}"#, &["m"]).unwrap_err();
        assert!(e.2.contains("prompt"));
    }

    #[test]
    fn chunks_are_valid_json_events() {
        let mut ctx = StreamCtx {
            api: Api::Chat,
            id: "chatcmpl-1".into(),
            created: 1,
            model_json: "\"m\\\"q\"".into(),
            prompt_tokens: 5,
            cached_tokens: Some(2),
            include_usage: true,
            continuous_usage: true,
            max_tokens: Some(3),
            reasoning_tokens: 0,
            sequence: 0,
            rng: faults::request_rng(1, 1),
        };
        for chunk in [
            ctx.role_chunk(),
            ctx.token_chunk(2, 2, false, ""),
            ctx.token_chunk(1, 3, true, ""),
            ctx.usage_chunk(3),
        ] {
            let s = std::str::from_utf8(&chunk).unwrap();
            let payload = s
                .strip_prefix("data: ")
                .unwrap()
                .strip_suffix("\n\n")
                .unwrap();
            let v: Value = serde_json::from_str(payload).unwrap();
            assert_eq!(v["model"], "m\"q");
        }
        let last = ctx.token_chunk(1, 3, true, "");
        let v: Value = serde_json::from_slice(&last[6..last.len() - 2]).unwrap();
        assert_eq!(v["choices"][0]["finish_reason"], "length");
        assert_eq!(v["usage"]["completion_tokens"], 3);
        assert_eq!(v["usage"]["prompt_tokens_details"]["cached_tokens"], 2);
        let text = v["choices"][0]["delta"]["content"].as_str().unwrap();
        assert_eq!(tokenizer::count_tokens(text), 1);
    }
}

#[cfg(test)]
mod limits_tests {
    use super::*;

    #[test]
    fn lengths_beyond_the_context_are_refused_not_overflowed() {
        let body =
            br#"{"model":"m","prompt":"hi","max_tokens":18446744073709551615,"ignore_eos":true}"#;
        let e = parse_request(Api::Completions, body, &["m"]).err().unwrap();
        assert_eq!(e.0, StatusCode::BAD_REQUEST);
        assert!(e.2.contains("context"), "{}", e.2);
        let ok = br#"{"model":"m","prompt":"hi","max_tokens":16}"#;
        assert!(parse_request(Api::Completions, ok, &["m"]).is_ok());
    }
}
