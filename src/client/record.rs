//! What one request is (its prompt) and what was measured about it.

use bytes::Bytes;
use serde::{Deserialize, Serialize};
use tokio::time::Instant;

use super::errors::ErrorCategory;

/// How a request ended.
#[derive(Debug, Clone, PartialEq)]
pub enum RequestOutcome {
    Completed,
    /// Still in flight when its stage ended, and cancelled.
    Incomplete,
    Errored {
        category: ErrorCategory,
        message: String,
    },
}

/// Where an output token count came from, best first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum TokenSource {
    /// The server's `usage.completion_tokens`.
    #[default]
    Usage,
    /// The tokenizer's count of the streamed text.
    Tokenizer,
    /// One token per token-bearing chunk.
    Chunks,
}

impl TokenSource {
    /// The name reports use.
    pub fn name(self) -> &'static str {
        match self {
            TokenSource::Usage => "usage",
            TokenSource::Tokenizer => "tokenizer",
            TokenSource::Chunks => "chunks",
        }
    }
}

/// One request ready to send: the body is built once and shared.
#[derive(Debug, Clone)]
pub struct Prompt {
    pub body: Bytes,
    pub prompt_tokens: u64,
    pub output_tokens: Option<u64>,
    /// Byte offset in `body` where a tag can make a reused prompt unique
    /// (the start of its text, after any prefix the workload shares on
    /// purpose); None: never tag. See `data::for_request`.
    pub tag_at: Option<usize>,
    /// A synthetic prompt is reused by spelling its head anew, which keeps
    /// its token count; None: reuse adds a tag (a few tokens).
    pub respell: Option<Respell>,
    /// Images whose data URLs go into the body as the request is sent
    /// (`Prompt::filled`), each new to the server; None: no images.
    pub images: Option<Images>,
    /// Further byte offsets, ascending and after `tag_at`, where a reuse's
    /// tag also goes: each input of an embeddings batch after the first
    /// (vLLM makes each input a request, with its own prefix-cache lookup).
    pub also_tag: Option<std::sync::Arc<[usize]>>,
}

/// The images of one request: where their data URLs go in the body and
/// where they come from.
#[derive(Debug, Clone)]
pub struct Images {
    /// Byte offsets in the body, ascending, each between the quotes of an
    /// empty `"url":""`.
    pub at: Vec<usize>,
    pub source: std::sync::Arc<dyn ImageSource>,
    /// The request's sequence number in the run: its images' seed.
    pub seq: u64,
    /// How an image goes in its place: a data URL between the quotes of
    /// `"url":""` (OpenAI), or a `source` object in place of `null`
    /// (Anthropic's Messages API).
    pub slot: ImageSlot,
}

/// How an image is written into its place in a body.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ImageSlot {
    /// The data URL, between the quotes of an empty string.
    #[default]
    Url,
    /// `{"type":"base64","media_type":…,"data":…}` in place of a `null`.
    Source,
}

/// A data URL (`data:MIME;base64,DATA`) as the Messages API's image
/// source, an http(s) URL as its url source; None when it is neither.
fn anthropic_source(url: &str) -> Option<String> {
    if url.starts_with("http://") || url.starts_with("https://") {
        let url = serde_json::to_string(url).ok()?;
        return Some(format!(r#"{{"type":"url","url":{url}}}"#));
    }
    let (head, data) = url.strip_prefix("data:")?.split_once(',')?;
    let mime = head.strip_suffix(";base64")?;
    let mime = serde_json::to_string(mime).ok()?;
    Some(format!(
        r#"{{"type":"base64","media_type":{mime},"data":"{data}"}}"#
    ))
}

/// Where a request's images come from (`data::images`): synthetic ones
/// drawn per request, or files; and its audio and video clips
/// (`data::media`), after its images.
pub trait ImageSource: Send + Sync + std::fmt::Debug {
    /// The `i`-th part of request `seq`, as it goes in its place: an
    /// image's or a video's data URL (`data:image/png;base64,…`), an audio
    /// clip's base64 (`input_audio.data`).
    fn url(&self, seq: u64, i: usize) -> std::sync::Arc<str>;

    /// What the `i`-th part is.
    fn kind(&self, _i: usize) -> MediaKind {
        MediaKind::Image
    }
}

/// What a part of a message is beside its text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MediaKind {
    /// `image_url` (chat), `image` (Messages), `input_image` (Responses).
    #[default]
    Image,
    /// Chat's `input_audio`: a WAV clip in base64.
    Audio,
    /// Chat's `video_url`: a clip as a data URL.
    Video,
}

/// The parts one request carried beside its text, as sent: how many of
/// each kind and the bytes of their data (base64, as sent).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Carried {
    pub images: u32,
    pub image_bytes: u64,
    pub audio: u32,
    pub audio_bytes: u64,
    pub video: u32,
    pub video_bytes: u64,
}

impl Carried {
    /// One more part of `kind`, of `bytes` as sent.
    pub fn add(&mut self, kind: MediaKind, bytes: u64) {
        let (n, b) = match kind {
            MediaKind::Image => (&mut self.images, &mut self.image_bytes),
            MediaKind::Audio => (&mut self.audio, &mut self.audio_bytes),
            MediaKind::Video => (&mut self.video, &mut self.video_bytes),
        };
        *n += 1;
        *b += bytes;
    }
}

impl Prompt {
    /// The prompt as sent: its images' data URLs in the body (drawn now,
    /// so a run holds one request's images at a time, not every one's), with
    /// how many images, audio and video clips and how many bytes of their
    /// data it carries.
    pub fn filled(&self) -> (Prompt, Carried) {
        let mut carried = Carried::default();
        let Some(im) = &self.images else {
            return (self.clone(), carried);
        };
        let urls: Vec<std::sync::Arc<str>> =
            (0..im.at.len()).map(|i| im.source.url(im.seq, i)).collect();
        for (i, u) in urls.iter().enumerate() {
            carried.add(im.source.kind(i), u.len() as u64);
        }
        let bytes: usize = urls.iter().map(|u| u.len()).sum();
        let mut body = Vec::with_capacity(self.body.len() + bytes + 64 * urls.len());
        let mut last = 0;
        for (&at, url) in im.at.iter().zip(&urls) {
            let Some(piece) = self.body.get(last..at) else {
                break;
            };
            body.extend_from_slice(piece);
            last = at;
            match im.slot {
                ImageSlot::Url => body.extend_from_slice(url.as_bytes()),
                ImageSlot::Source => match anthropic_source(url) {
                    Some(src) if self.body.get(at..at + 4) == Some(b"null") => {
                        body.extend_from_slice(src.as_bytes());
                        last = at + 4;
                    }
                    // Not a data URL, or no `null` there: left as it is.
                    _ => {}
                },
            }
        }
        body.extend_from_slice(self.body.get(last..).unwrap_or_default());
        let sent = Prompt {
            body: Bytes::from(body),
            images: None,
            ..self.clone()
        };
        (sent, carried)
    }

    /// The same prompt after `removed` bytes at `at` became `added` bytes
    /// (a reuse's tag or respelling): the images' places after them move.
    pub fn shifted(mut self, at: usize, removed: usize, added: usize) -> Self {
        if let Some(im) = self.images.as_mut() {
            for a in im.at.iter_mut().filter(|a| **a >= at + removed) {
                *a = *a - removed + added;
            }
        }
        self
    }

    /// The prompt for request `seq`: its images drawn for it.
    pub fn for_seq(mut self, seq: u64) -> Self {
        if let Some(im) = self.images.as_mut() {
            im.seq = seq;
        }
        self
    }

    /// The same prompt with a head of `bytes` (after a respelling).
    pub fn with_head(mut self, bytes: usize) -> Self {
        if let Some(r) = self.respell.as_mut() {
            r.head_bytes = bytes;
        }
        self
    }
}

/// How a reused synthetic prompt stays new to the server without changing
/// its length: the `head_bytes` at `tag_at` are two one-token pieces (the
/// sample's number); a reuse spells the request's sequence number there
/// with two other pieces of the same list.
#[derive(Debug, Clone, PartialEq)]
pub struct Respell {
    pub head_bytes: usize,
    /// One-token pieces, each plain text that JSON carries as it is.
    pub pieces: std::sync::Arc<[String]>,
}

/// Everything measured about one request. `Instant`s are tokio's, so tests
/// with paused time see consistent values.
#[derive(Debug, Clone)]
pub struct RequestRecord {
    /// When the strategy wanted the request sent.
    pub scheduled_at: Instant,
    pub sent_at: Instant,
    pub ended_at: Instant,
    /// Token-bearing chunks: arrival time and token count (after `finish`).
    pub chunks: Vec<(Instant, u32)>,
    pub output_tokens: u64,
    pub output_source: TokenSource,
    /// Prompt tokens as the data source built them.
    pub prompt_tokens: u64,
    /// Prompt tokens as the server counted them (`usage.prompt_tokens`).
    pub server_prompt_tokens: Option<u64>,
    /// Prompt tokens the server served from its cache (`usage.prompt_tokens_details.cached_tokens`).
    pub server_cached_prompt_tokens: Option<u64>,
    pub outcome: RequestOutcome,
    /// Times the request was sent again on a fresh connection because a
    /// pooled one turned out closed before any answer (0 or 1).
    pub reconnects: u32,
    /// The server's `usage` could not be used (malformed or absurd), and
    /// why; the output tokens were then counted from the stream.
    pub usage_note: Option<String>,
    /// Per chunk of `chunks` (after `finish`): how many of its tokens were
    /// thinking (`reasoning_content`), all of them for a chunk of thinking
    /// only, 0 for an answer chunk. Empty when the stream carried no thinking.
    pub thinking: Vec<u32>,
    /// `usage.completion_tokens_details.reasoning_tokens`, when the server said.
    pub server_reasoning_tokens: Option<u64>,
    /// The client's own count of the output: the tokenizer's count of the
    /// streamed text (thinking included), whatever the server said; None
    /// when the stream carried no text.
    pub client_output_tokens: Option<u64>,
    /// The exact output length the request asked for (`max_tokens` with
    /// `ignore_eos`), if it did.
    pub requested_output_tokens: Option<u64>,
    /// The answer's text, when the client keeps replies and the request
    /// completed (at most [`MAX_REPLY_BYTES`]).
    pub reply: Option<String>,
    /// Images, audio and video clips the request carried, and the bytes
    /// of their data.
    pub media: Carried,
    /// Tool calls the answer streamed (`tool_calls` deltas, each call once).
    pub tool_calls: u32,
    /// The ids the request carried (`traceparent`, `x-request-id`); None
    /// for a backend that sends no HTTP.
    pub ids: Option<super::trace::TraceIds>,
}

/// The most of an answer's text a record keeps (`RequestRecord::reply`).
pub const MAX_REPLY_BYTES: usize = 1 << 20;

impl RequestRecord {
    /// A request sent at `sent_at` (wanted at `scheduled_at`) of which
    /// nothing has come back yet: no chunk, no usage, `Incomplete`. The
    /// client fills it as the answer streams; a backend or a test sets the
    /// fields it knows (`RequestRecord { outcome, ..RequestRecord::sent(…) }`),
    /// so a new field is one line here.
    pub fn sent(scheduled_at: Instant, sent_at: Instant, prompt_tokens: u64) -> RequestRecord {
        RequestRecord {
            scheduled_at,
            sent_at,
            ended_at: sent_at,
            chunks: Vec::new(),
            output_tokens: 0,
            output_source: TokenSource::Usage,
            prompt_tokens,
            server_prompt_tokens: None,
            server_cached_prompt_tokens: None,
            outcome: RequestOutcome::Incomplete,
            reconnects: 0,
            usage_note: None,
            thinking: Vec::new(),
            server_reasoning_tokens: None,
            client_output_tokens: None,
            requested_output_tokens: None,
            reply: None,
            media: Carried::default(),
            tool_calls: 0,
            ids: None,
        }
    }

    pub fn first_token_at(&self) -> Option<Instant> {
        self.chunks.first().map(|c| c.0)
    }

    /// The request was seen to think: reasoning streamed, or reasoning
    /// tokens in its usage.
    pub fn saw_reasoning(&self) -> bool {
        !self.thinking.is_empty() || self.server_reasoning_tokens.is_some_and(|n| n > 0)
    }

    /// Tokens of chunk `i` that were thinking.
    pub fn thinking_in(&self, i: usize) -> u32 {
        self.thinking.get(i).copied().unwrap_or(0)
    }

    /// Thinking tokens: the server's count when it gave one, else the
    /// tokens of the streamed thinking. A server's 0 against streamed
    /// thinking (a usage field it always sends, never fills) is not believed.
    pub fn reasoning_tokens(&self) -> u64 {
        match self.reasoning_from_usage() {
            true => self.server_reasoning_tokens.unwrap_or(0),
            false => self.thinking.iter().map(|&t| u64::from(t)).sum(),
        }
        .min(self.output_tokens)
    }

    /// Whether [`RequestRecord::reasoning_tokens`] is the server's count.
    pub fn reasoning_from_usage(&self) -> bool {
        self.server_reasoning_tokens
            .is_some_and(|n| n > 0 || self.thinking.is_empty())
    }

    /// Answer tokens: the output that was not thinking.
    pub fn answer_tokens(&self) -> u64 {
        self.output_tokens - self.reasoning_tokens()
    }
}

/// A failed request's outcome.
pub(super) fn errored(category: ErrorCategory, message: String) -> RequestOutcome {
    RequestOutcome::Errored { category, message }
}
