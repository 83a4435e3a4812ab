//! The response bodies the simulator sends: whole, streamed as engine
//! emits arrive (with the request's mid-stream fault), or cut; and the
//! JSON errors.

use std::collections::VecDeque;
use std::future::Future as _;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body::Frame;
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper::header::{HeaderValue, CONTENT_TYPE};
use hyper::{Request, Response, StatusCode};
use tokio::sync::mpsc;

use super::answer::{whole_json, StreamCtx, HUGE_CHUNK_BYTES, MALFORMED_LINE, NON_JSON_EVENT};
use super::batcher::Emit;
use super::faults::Fault;
use super::request::Api;
use super::truth::{Ending, RequestTiming, Truth};

/// A stalled stream gives up and closes after this long, so that a client that
/// never hangs up cannot pin a connection for ever.
pub(super) const STALL_LIMIT: Duration = Duration::from_secs(300);

pub(super) fn http_fault(f: Fault) -> Response<SimBody> {
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
    pub(super) fn new(
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
            Api::Messages => queue.push_back(ctx.messages_start()),
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
pub(super) async fn whole_response(
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
    plain(
        StatusCode::OK,
        "application/json",
        whole_json(&mut ctx, generated),
    )
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

pub(super) fn plain(
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
pub(super) fn error(status: StatusCode, kind: &str, message: &str) -> Response<SimBody> {
    let body = serde_json::json!({
        "object": "error",
        "message": message,
        "type": kind,
        "code": status.as_u16(),
    });
    plain(status, "application/json", body.to_string())
}

/// Request bodies larger than this are refused.
pub(super) const MAX_BODY_BYTES: usize = 32 << 20;

/// The request body, refused past [`MAX_BODY_BYTES`].
pub(super) async fn read_body(req: Request<Incoming>) -> Result<Bytes, Response<SimBody>> {
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
