//! `--save-requests`: each request, as it ends, as a line of requests.jsonl.

use tokio::time::Instant;

use super::conversation::TurnRef;
use crate::client::{RequestOutcome, RequestRecord};
use crate::types::RequestLine;

/// Where `--save-requests` lines go, and how many were lost.
#[derive(Default)]
pub(super) struct RequestLog {
    pub(super) sink: Option<std::sync::mpsc::SyncSender<RequestLine>>,
    pub(super) dropped: u64,
    /// With a model mix: the names, by index.
    pub(super) models: Vec<String>,
}

/// Which request a line of requests.jsonl is: its stage (name, number),
/// its index there, its conversation's turn and its model, if any.
pub(super) struct LineOf<'a> {
    pub(super) stage: &'a str,
    pub(super) number: usize,
    pub(super) index: u64,
    pub(super) turn: Option<TurnRef>,
    pub(super) model: Option<u16>,
}

impl RequestLog {
    pub(super) fn send(&mut self, run_start: Instant, of: LineOf, r: &RequestRecord) {
        let LineOf {
            stage,
            number,
            index,
            turn,
            model,
        } = of;
        let Some(sink) = &self.sink else {
            return;
        };
        let model = model.and_then(|m| self.models.get(usize::from(m)).cloned());
        let since = |t: Instant| t.saturating_duration_since(run_start).as_secs_f64();
        let ms = |a: Instant, b: Instant| b.saturating_duration_since(a).as_secs_f64() * 1e3;
        let (outcome, error) = match &r.outcome {
            RequestOutcome::Completed => ("completed", None),
            RequestOutcome::Incomplete => ("incomplete", None),
            RequestOutcome::Errored { category, .. } => ("errored", Some(category.to_string())),
        };
        let line = RequestLine {
            stage: stage.to_string(),
            model,
            stage_number: number,
            index,
            scheduled_s: since(r.scheduled_at),
            sent_s: since(r.sent_at),
            queue_ms: ms(r.scheduled_at, r.sent_at),
            ttft_ms: r.first_token_at().map(|t| ms(r.sent_at, t)),
            e2e_ms: ms(r.sent_at, r.ended_at),
            outcome: outcome.to_string(),
            error,
            prompt_tokens: r.prompt_tokens,
            output_tokens: r.output_tokens,
            output_source: r.output_source.name().to_string(),
            server_prompt_tokens: r.server_prompt_tokens,
            server_cached_prompt_tokens: r.server_cached_prompt_tokens,
            reconnects: r.reconnects,
            chunks: r
                .chunks
                .iter()
                .map(|(t, k)| (ms(r.sent_at, *t), *k))
                .collect(),
            requested_output_tokens: r.requested_output_tokens,
            client_output_tokens: r.client_output_tokens,
            conversation: turn.map(|t| t.conv),
            turn: turn.map(|t| t.turn as u32 + 1),
            images: r.media.images,
            image_bytes: r.media.image_bytes,
            audio: r.media.audio,
            audio_bytes: r.media.audio_bytes,
            video: r.media.video,
            video_bytes: r.media.video_bytes,
            tool_calls: r.tool_calls,
            request_id: r.ids.map(|i| i.request_id()),
            traceparent: r.ids.map(|i| i.traceparent()),
            ..Default::default()
        };
        let mut line = line;
        if r.saw_reasoning() {
            let at = |i: usize| line.chunks.get(i).map(|c| c.0);
            line.ttfrt_ms = r.thinking.iter().position(|&t| t > 0).and_then(at);
            line.ttfat_ms = crate::stats::metrics::first_answer(r).and_then(at);
            line.reasoning_tokens = Some(r.reasoning_tokens());
            line.answer_tokens = Some(r.answer_tokens());
            line.reasoning_source = Some(
                if r.reasoning_from_usage() {
                    "usage"
                } else {
                    "stream"
                }
                .into(),
            );
            line.chunk_thinking = r.thinking.clone();
        }
        if sink.try_send(line).is_err() {
            self.dropped += 1;
        }
    }
}
