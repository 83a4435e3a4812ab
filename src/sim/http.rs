//! The simulator's HTTP surface: OpenAI-compatible routes, `/metrics`,
//! `/health` and the ground-truth routes under `/sim/`.

use std::convert::Infallible;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use hyper::body::Incoming;
use hyper::header::{HeaderValue, CONTENT_TYPE};
use hyper::{Method, Request, Response, StatusCode};
use rand::rngs::SmallRng;
use serde_json::Value;
use tokio::sync::mpsc;

use super::answer::{answer_id, unix_now, StreamCtx};
use super::batcher::{Emit, SeqRequest};
use super::body::{error, http_fault, plain, read_body, whole_response, SimBody, SseBody};
use super::faults::{self, Fault};
use super::pages::{dcgm_page, metrics, models, tokenize};
use super::pooling::Kind;
use super::request::{output_length, parse_request, Api, GenRequest};
use super::state::AppState;
use super::truth::{Ending, RequestTiming};

pub async fn handle(
    state: Arc<AppState>,
    req: Request<Incoming>,
) -> Result<Response<SimBody>, Infallible> {
    let received = Instant::now();
    let path = req.uri().path().to_string();
    let ids = Ids::of(&req);
    let mut resp = match (req.method(), path.as_str()) {
        (&Method::GET, "/health") => plain(StatusCode::OK, "text/plain", ""),
        (&Method::GET, "/v1/models") => models(&state),
        (&Method::GET, "/metrics") => metrics(&state),
        (&Method::GET, "/dcgm-metrics") => dcgm_page(&state),
        (&Method::GET, "/sim/stats") => sim_stats(&state),
        (&Method::POST, "/reset_prefix_cache") if state.params.cache_reset_route => {
            reset_prefix_cache(&state)
        }
        (&Method::POST, "/sim/reset") => {
            state.truth.reset();
            plain(StatusCode::OK, "application/json", "{}")
        }
        (&Method::POST, "/v1/chat/completions") => {
            generate(state, req, Api::Chat, received, &ids).await
        }
        (&Method::POST, "/v1/completions") => {
            generate(state, req, Api::Completions, received, &ids).await
        }
        (&Method::POST, "/v1/responses") => {
            generate(state, req, Api::Responses, received, &ids).await
        }
        (&Method::POST, "/v1/messages") => {
            generate(state, req, Api::Messages, received, &ids).await
        }
        (&Method::POST, "/tokenize") => tokenize(&state, req).await,
        (&Method::POST, "/v1/embeddings") => {
            pool(state, req, Kind::Embeddings, received, &ids).await
        }
        (&Method::POST, "/v1/rerank" | "/rerank" | "/v2/rerank") => {
            pool(state, req, Kind::Rerank, received, &ids).await
        }
        (&Method::POST, "/v1/score" | "/score") => {
            pool(state, req, Kind::Score, received, &ids).await
        }
        (
            _,
            "/v1/chat/completions"
            | "/v1/completions"
            | "/v1/responses"
            | "/v1/messages"
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
    // As vLLM's --enable-request-id-headers: the id answered back.
    if let Some(v) = ids.header {
        resp.headers_mut().insert("x-request-id", v);
    }
    Ok(resp)
}

/// `/sim/stats`: what the simulator saw, as JSON.
fn sim_stats(state: &AppState) -> Response<SimBody> {
    let body = serde_json::to_string_pretty(&state.truth.report())
        .unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"));
    plain(StatusCode::OK, "application/json", body)
}

/// As vLLM's `/reset_prefix_cache`: the cache emptied, 200 and no body.
fn reset_prefix_cache(state: &AppState) -> Response<SimBody> {
    if let Some(c) = &state.prefix_cache {
        c.lock().unwrap_or_else(|p| p.into_inner()).clear();
    }
    state.truth.on_cache_reset();
    plain(StatusCode::OK, "text/plain", "")
}

/// The ids a request carried: its `x-request-id` when it is one vLLM
/// would take (at most 128 characters of letters, digits and `-_.:`),
/// kept as the header it came in (no copy), and whether its `traceparent`
/// is a valid W3C one.
pub(super) struct Ids {
    header: Option<HeaderValue>,
    pub(super) traced: bool,
}

impl Ids {
    fn of<B>(req: &Request<B>) -> Ids {
        let header = req
            .headers()
            .get("x-request-id")
            .filter(|v| {
                let id = v.as_bytes();
                (1..=128).contains(&id.len())
                    && id
                        .iter()
                        .all(|c| c.is_ascii_alphanumeric() || b"-_.:".contains(c))
            })
            .cloned();
        let traced = req
            .headers()
            .get("traceparent")
            .and_then(|v| v.to_str().ok())
            .is_some_and(crate::client::trace::valid_traceparent);
        Ids { header, traced }
    }

    /// The request's id, when it carried one.
    pub(super) fn request_id(&self) -> Option<&str> {
        self.header.as_ref().and_then(|v| v.to_str().ok())
    }
}

/// A request has arrived at `received`: counted, told to the truth
/// log, its timing started.
fn arrived(state: &AppState, received: Instant, ids: &Ids) -> RequestTiming {
    state.requests_total.fetch_add(1, Ordering::Relaxed);
    state.truth.on_received(ids.request_id(), ids.traced);
    RequestTiming::new(received)
}

async fn generate(
    state: Arc<AppState>,
    req: Request<Incoming>,
    api: Api,
    received: Instant,
    ids: &Ids,
) -> Response<SimBody> {
    let timing = arrived(&state, received, ids);
    let body = match read_body(req).await {
        Ok(b) => b,
        Err(resp) => {
            state.truth.record(&timing, Ending::Rejected);
            return resp;
        }
    };
    let names: Vec<&str> = state.models.iter().map(|m| m.id.as_str()).collect();
    let gen = match parse_request(api, &body, &names, &state.params.media_cost()) {
        Ok(g) => g,
        Err((status, kind, msg)) => {
            state.truth.record(&timing, Ending::Rejected);
            return error(status, kind, &msg);
        }
    };

    note_parsed(&state, &gen);
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

    let cached_tokens = cached_tokens(&state, &gen);
    let Some(rx) = submit(&state, &gen, received, cached_tokens, output_tokens) else {
        state.truth.record(&timing, Ending::Rejected);
        return error(
            StatusCode::SERVICE_UNAVAILABLE,
            "ServiceUnavailable",
            "the engine is shutting down",
        );
    };

    let mut ctx = StreamCtx::new(
        &state,
        api,
        answer_id(api, ids.request_id(), ordinal),
        &gen,
        cached_tokens,
        reasoning_tokens,
        rng,
    );
    draw_tool_call(&mut ctx, &state, &gen);
    // SlowHeaders has already happened; what is left are mid-stream faults.
    let mid_fault = fault.filter(|f| !matches!(f, Fault::SlowHeaders));
    if gen.stream {
        stream_response(ctx, rx, mid_fault, timing, &state)
    } else {
        whole_response(ctx, rx, mid_fault, timing, &state.truth).await
    }
}

/// The prompt's tokens found in the prefix cache (None: no cache).
fn cached_tokens(state: &AppState, gen: &GenRequest) -> Option<u64> {
    state.prefix_cache.as_ref().map(|c| {
        c.lock()
            .map(|mut c| c.lookup_insert(&gen.blocks, gen.prompt_tokens))
            .unwrap_or(0)
    })
}

/// A streamed answer: server-sent events as the engine emits tokens.
fn stream_response(
    ctx: StreamCtx,
    rx: mpsc::UnboundedReceiver<Emit>,
    mid_fault: Option<Fault>,
    timing: RequestTiming,
    state: &AppState,
) -> Response<SimBody> {
    let body = SseBody::new(ctx, rx, mid_fault, timing, state.truth.clone());
    let mut resp = Response::new(SimBody::Sse(Box::new(body)));
    let h = resp.headers_mut();
    h.insert(CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
    h.insert("cache-control", HeaderValue::from_static("no-cache"));
    resp
}

/// The model and the media a request asked for, in the simulator's truth.
fn note_parsed(state: &AppState, gen: &GenRequest) {
    if let Some(m) = state.models.get(gen.model) {
        state.truth.on_model(&m.id);
    }
    if gen.images > 0 || gen.clips.audio > 0 || gen.clips.video > 0 {
        state
            .truth
            .on_media(gen.images, gen.clips.audio, gen.clips.video);
    }
}

/// A request with tools is answered with a call of one of them, at the
/// --tool-call-share (streamed chat, Messages and Responses answers).
fn draw_tool_call(ctx: &mut StreamCtx, state: &AppState, gen: &GenRequest) {
    if gen.stream && !gen.tools.is_empty() && state.params.tool_call_share > 0.0 {
        use rand::Rng as _;
        if ctx.rng.random::<f64>() < state.params.tool_call_share {
            let i = ctx.rng.random_range(0..gen.tools.len());
            ctx.tool_call = gen.tools.get(i).cloned();
            state.truth.on_tool_call();
        }
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
            adapter: state
                .models
                .get(gen.model)
                .filter(|m| m.parent.is_some())
                .map(|_| gen.model),
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
    ids: &Ids,
) -> Response<SimBody> {
    let timing = arrived(&state, received, ids);
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
    serve_pooled(&state, kind, &v, &r, &model_json, timing, ids).await
}

/// A pooling request read and counted: served in turn, and answered.
async fn serve_pooled(
    state: &AppState,
    kind: Kind,
    v: &Value,
    r: &super::pooling::PoolRequest,
    model_json: &str,
    mut timing: RequestTiming,
    ids: &Ids,
) -> Response<SimBody> {
    let received = timing.received;
    let ordinal = state.ordinal.fetch_add(1, Ordering::Relaxed);
    let cached = state.prefix_cache.as_ref().map_or(0, |c| {
        let prompts = super::pooling::prompts(kind, v);
        let mut c = c.lock().unwrap_or_else(|p| p.into_inner());
        super::pooling::cached_tokens(&mut c, &prompts)
    });
    // In turn at the pooling engine; cached tokens are not computed again.
    state.pooler.serve(r.tokens.saturating_sub(cached)).await;
    let done = Instant::now();
    timing.last_token = Some(done);
    state.truth.record(&timing, Ending::Completed);
    // vLLM makes each input of a batch a request of its own: /metrics
    // counts every one, its latency and its prompt tokens.
    let more = r.inputs.saturating_sub(1) as u64;
    let e2e = done.saturating_duration_since(received).as_micros() as u64;
    state.truth.prom.e2e.observe_us(e2e, more);
    state
        .pooled_inputs_beyond_first
        .fetch_add(more, Ordering::Relaxed);
    let g = &state.gauges;
    g.prompt_tokens_total.fetch_add(r.tokens, Ordering::Relaxed);
    g.cached_tokens_total.fetch_add(cached, Ordering::Relaxed);
    let prefix = match kind {
        Kind::Embeddings => "embd",
        Kind::Rerank => "rerank",
        Kind::Score => "score",
    };
    let id = match ids.request_id() {
        Some(r) => format!("{prefix}-{r}"),
        None => format!("{prefix}-{ordinal}"),
    };
    plain(
        StatusCode::OK,
        "application/json",
        super::pooling::answer(kind, &id, model_json, unix_now(), r),
    )
}
