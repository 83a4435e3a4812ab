//! One line of `requests.jsonl` (`--save-requests`): every request of the
//! run as it ended, for analyses the report's summaries do not cover.
//! Times are seconds since the run started, or milliseconds relative to
//! the request's own send time.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RequestLine {
    /// The stage's name (`constant@5.00`) and number (1-based, as the dashboard counts).
    pub stage: String,
    /// With several models (`--model a=70%,b=30%`): the model it went to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    pub stage_number: usize,
    /// The request's index within its stage, in sending order.
    pub index: u64,
    /// When the strategy wanted it sent, and when it was (seconds since the run started).
    pub scheduled_s: f64,
    pub sent_s: f64,
    /// `sent − scheduled`: the wait for a slot or for the dispatcher.
    pub queue_ms: f64,
    /// First token-bearing chunk − sent; absent when none came.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttft_ms: Option<f64>,
    /// End − sent.
    pub e2e_ms: f64,
    /// `completed`, `incomplete` (cancelled at its stage's end) or `errored`.
    pub outcome: String,
    /// The error category (`http_503`, `timeout`, ...), for errored requests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    pub prompt_tokens: u64,
    pub output_tokens: u64,
    /// Where `output_tokens` came from: `usage`, `tokenizer` or `chunks`.
    pub output_source: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_prompt_tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_cached_prompt_tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub reconnects: u32,
    /// Each token-bearing chunk: milliseconds after sent, and its token count.
    pub chunks: Vec<(f64, u32)>,
    /// The exact output length the request asked for (`max_tokens` with `ignore_eos`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requested_output_tokens: Option<u64>,
    /// llmsweep's tokenizer count of the streamed text (thinking included),
    /// beside `output_tokens` (the server's count when `output_source` is `usage`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_output_tokens: Option<u64>,
    /// Only for a request that thought: the first reasoning token and the
    /// first answer token (ms after sent), the thinking and answer tokens,
    /// where the thinking count came from (`usage` or `stream`), and per
    /// chunk of `chunks` how many of its tokens were thinking.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttfrt_ms: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttfat_ms: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer_tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_source: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub chunk_thinking: Vec<u32>,
    /// Multi-turn data: the conversation (its number in the run) and the
    /// turn (1 for the first) this request was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conversation: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn: Option<u32>,
    /// Images the request carried and the bytes of their data URLs.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub images: u32,
    #[serde(default, skip_serializing_if = "is_zero_u64")]
    pub image_bytes: u64,
    /// Audio clips (`input_audio`) and the bytes of their base64.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub audio: u32,
    #[serde(default, skip_serializing_if = "is_zero_u64")]
    pub audio_bytes: u64,
    /// Video clips (`video_url`) and the bytes of their data URLs.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub video: u32,
    #[serde(default, skip_serializing_if = "is_zero_u64")]
    pub video_bytes: u64,
    /// Tool calls the answer streamed.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub tool_calls: u32,
    /// The `x-request-id` the request carried (32 hex digits, its trace id):
    /// vLLM names the request `chatcmpl-<id>` (`cmpl-`, `embd-`, …) in its log.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
    /// The W3C `traceparent` it carried (`00-<trace id>-<span id>-01`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub traceparent: Option<String>,
}

fn is_zero_u64(n: &u64) -> bool {
    *n == 0
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}
