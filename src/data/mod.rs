//! Prompt sources. Every request body is built once, before the run, so the
//! request path only clones a `Bytes`.

pub mod conversation;
pub mod files;
pub mod image_column;
pub mod images;
pub mod media;
pub mod mix;
pub mod scripts;
pub mod shard;
pub mod synthetic;
pub mod tool_file;
pub mod tools;
pub mod trace;

use anyhow::{bail, Context as _, Result};
use bytes::Bytes;
use rand::rngs::SmallRng;
use rand::seq::SliceRandom;
use rand::SeedableRng;
use serde_json::{json, Map, Value};

use crate::client::Prompt;
use crate::tokenizer::TokenCounter;
use crate::types::Api;
pub use synthetic::Synthetic;

/// One prompt before it becomes a request body.
#[derive(Debug, Clone, PartialEq)]
pub struct PromptItem {
    pub text: String,
    pub prompt_tokens: u64,
    /// Output tokens to ask for (`max_tokens` + `ignore_eos`); None lets the server decide.
    pub output_tokens: Option<u64>,
    /// Bytes at the start of `text` that the workload shares on purpose
    /// (synthetic `prefix_tokens`); a reuse tag goes after them.
    pub shared_prefix_bytes: usize,
    /// Synthetic prompts: how a reuse keeps the token count (see
    /// [`for_request`]).
    pub respell: Option<crate::client::Respell>,
    /// Images a data file's row gives its request (its `images` column,
    /// see [`image_column`]), as they go in it: data URLs or http(s) URLs.
    pub images: Vec<std::sync::Arc<str>>,
}

/// Whether `--data` is a synthetic spec (`key=value,…`), not a file.
pub fn is_synthetic(spec: &str) -> bool {
    spec.contains('=') && !std::path::Path::new(spec.trim()).exists()
}

/// Where prompts come from: `--data` is a synthetic spec (`key=value,…`) or a file path.
/// `run`: a number drawn for this run, which makes synthetic prompts new
/// to the server (see [`Synthetic::generate_for_run`]); `None` repeats the
/// prompts of earlier runs with the same seed.
pub fn load_items(
    spec: &str,
    seed: u64,
    run: Option<u64>,
    counter: &dyn TokenCounter,
    skip_bad_rows: bool,
) -> Result<DataSet> {
    let path = std::path::Path::new(spec.trim());
    let is_file = !spec.contains('=') || path.exists();
    if !is_file {
        let synth = Synthetic::parse(spec)?;
        let items = synth.generate_for_run(seed, run, counter)?;
        let mut notes = Vec::new();
        if items.len() < synth.samples {
            notes.push(format!(
                "synthetic data: {} of {} samples built ({} MiB of prompt text at most); later requests reuse them, each made unique by a tag in front",
                items.len(),
                synth.samples,
                synthetic::PROMPT_BUDGET_BYTES >> 20
            ));
        }
        return Ok(DataSet {
            description: format!(
                "synthetic {spec} (tokenizer: {}; {})",
                counter.name(),
                match run {
                    Some(r) => format!("prompts new to the server: run number {r}"),
                    None => "the prompts of every run with this seed".to_string(),
                }
            ),
            items,
            notes,
        });
    }
    let loaded = files::load(path, counter, skip_bad_rows)?;
    let mut items = loaded.items;
    // Shuffle under the seed: a stage that sends fewer requests than the file
    // holds still gets a fair sample; rows are reused when it sends more.
    items.shuffle(&mut SmallRng::seed_from_u64(seed ^ 0x5EED));
    let mut notes = Vec::new();
    if loaded.skipped > 0 {
        let more = loaded.skipped - loaded.skipped_rows.len();
        notes.push(format!(
            "{}: skipped {} malformed rows: {}{}",
            path.display(),
            loaded.skipped,
            loaded.skipped_rows.join("; "),
            if more > 0 {
                format!("; and {more} more (without --skip-bad-rows the run stops at the first)")
            } else {
                String::new()
            }
        ));
    }
    if loaded.filtered > 0 {
        notes.push(format!(
            "{}: left out {} conversations by vLLM's ShareGPT length filters",
            path.display(),
            loaded.filtered
        ));
    }
    Ok(DataSet {
        description: format!(
            "{} ({}, {} prompts)",
            path.display(),
            loaded.format,
            items.len()
        ),
        items,
        notes,
    })
}

/// The prompts of a run and what the report should say about them.
#[derive(Debug)]
pub struct DataSet {
    pub items: Vec<PromptItem>,
    pub description: String,
    /// Things the operator should know (skipped rows, filtered conversations).
    pub notes: Vec<String>,
}

/// Builds the request bodies, consuming the items: each prompt's text is freed
/// once its body holds it, so memory peaks at one copy, not two. `extra` is
/// merged last, so it can override anything.
pub fn build_prompts(
    items: Vec<PromptItem>,
    api: Api,
    model: &str,
    extra: Option<&Map<String, Value>>,
) -> Result<Vec<Prompt>> {
    build_prompts_with(items, api, model, extra, None, None)
}

/// [`build_prompts`], with `images` after each prompt's text (chat):
/// its message's content is a text part and an `image_url` part an image,
/// whose data URL goes in as the request is sent (`Prompt::filled`); and
/// `tools`' earlier rounds (a call and its result) after its message (the
/// tool definitions come in `extra`: see [`tools::with_definitions`]).
pub fn build_prompts_with(
    items: Vec<PromptItem>,
    api: Api,
    model: &str,
    extra: Option<&Map<String, Value>>,
    images: Option<&images::Attach>,
    tools: Option<&tools::ToolSpec>,
) -> Result<Vec<Prompt>> {
    let rows_have_images = images.is_none() && items.iter().any(|it| !it.images.is_empty());
    if rows_have_images && !takes_parts(api) {
        bail!("the data file's `{}` column: images go in chat, Messages or Responses requests' content: use --api chat, messages or responses (not {api})", image_column::KEY);
    }
    if images.is_some() && !takes_parts(api) {
        bail!("images go in chat, Messages or Responses requests' content: use --api chat, messages or responses (not {api})");
    }
    if tools.is_some() && !takes_parts(api) {
        bail!("tools go in chat, Messages or Responses requests: use --api chat, messages or responses (not {api})");
    }
    let slot = match api {
        Api::Messages => crate::client::ImageSlot::Source,
        _ => crate::client::ImageSlot::Url,
    };
    items
        .into_iter()
        .map(|mut it| {
            let mut bytes = request_body(api, model, &[&it.text], it.output_tokens, extra)?;
            // The run's images (`images=N`) and clips, else the row's own.
            let layout = images.map_or_else(
                || vec![(crate::client::MediaKind::Image, it.images.len() as u32)],
                |im| im.layout(),
            );
            let source: Option<std::sync::Arc<dyn crate::client::ImageSource>> = match images {
                Some(im) => Some(im.source.clone()),
                None if !it.images.is_empty() => Some(std::sync::Arc::new(image_column::Listed(
                    std::mem::take(&mut it.images).into(),
                ))),
                None => None,
            };
            if source.is_some() {
                bytes = with_image_parts(&bytes, &layout, api)?;
            }
            if let Some(t) = tools {
                bytes = tools::with_history(&bytes, t, api)?;
            }
            let tag_at = text_offset(&bytes, api, &it.text, it.shared_prefix_bytes);
            let images = source.map(|source| crate::client::Images {
                at: image_slots(&bytes, slot),
                source,
                seq: 0,
                slot,
            });
            Ok(Prompt {
                body: Bytes::from(bytes),
                prompt_tokens: it.prompt_tokens,
                output_tokens: it.output_tokens,
                tag_at,
                respell: it.respell.filter(|_| tag_at.is_some()),
                images,
                also_tag: None,
            })
        })
        .collect()
}

/// The images a data file's rows give their requests (its `images`
/// column): images and bytes (of data URLs or URLs) a request on average
/// over all rows, and how many rows have any. None: no row has one.
pub fn row_images(items: &[PromptItem]) -> Option<RowImages> {
    let with = items.iter().filter(|it| !it.images.is_empty()).count();
    if with == 0 {
        return None;
    }
    let n = items.len().max(1) as f64;
    let count: usize = items.iter().map(|it| it.images.len()).sum();
    let bytes: usize = items
        .iter()
        .flat_map(|it| it.images.iter().map(|u| u.len()))
        .sum();
    Some(RowImages {
        per_request: count as f64 / n,
        bytes_per_request: bytes as f64 / n,
        rows: with,
        of: items.len(),
    })
}

/// What [`row_images`] found.
#[derive(Debug, Clone, PartialEq)]
pub struct RowImages {
    pub per_request: f64,
    pub bytes_per_request: f64,
    /// Rows with images, of all rows.
    pub rows: usize,
    pub of: usize,
}

impl RowImages {
    /// What the run says about them.
    pub fn describe(&self) -> String {
        format!(
            "images from the file's `{}` column: {:.2} a request on average ({} of {} rows have some)",
            image_column::KEY,
            self.per_request,
            self.rows,
            self.of
        )
    }
}

/// Whether an API's requests take images and tools beside their text:
/// chat, Anthropic's Messages and OpenAI's Responses API.
pub fn takes_parts(api: Api) -> bool {
    matches!(api, Api::Chat | Api::Messages | Api::Responses)
}

/// A body whose first message's content becomes a text part and, in
/// `layout`'s order, parts of each kind with empty data (filled as it is
/// sent): images as chat's `image_url`, the Messages API's `image` block,
/// the Responses API's `input_image` (its input made a user message when
/// it was one text); audio as chat's `input_audio` (a WAV's base64), video
/// as chat's `video_url`.
fn with_image_parts(
    body: &[u8],
    layout: &[(crate::client::MediaKind, u32)],
    api: Api,
) -> Result<Vec<u8>> {
    use crate::client::MediaKind;
    let mut v: Value = serde_json::from_slice(body).context("cannot build a request body")?;
    if api == Api::Responses {
        if let Some(Value::String(t)) = v.get("input") {
            v["input"] = json!([{"role": "user", "content": t}]);
        }
    }
    let first = match api {
        Api::Responses => "/input/0",
        _ => "/messages/0",
    };
    let Some(msg) = v.pointer_mut(first) else {
        bail!("images need the request's messages (an --extra-body that replaces them takes none)");
    };
    let text = msg.get("content").cloned().unwrap_or(json!(""));
    let text_part = match api {
        Api::Responses => json!({"type": "input_text", "text": text}),
        _ => json!({"type": "text", "text": text}),
    };
    let mut parts = vec![text_part];
    for &(kind, count) in layout {
        // Anthropic's image block: its `source` filled as the request is sent.
        let part = match (kind, api) {
            (MediaKind::Image, Api::Messages) => json!({"type": "image", "source": null}),
            (MediaKind::Image, Api::Responses) => json!({"type": "input_image", "image_url": ""}),
            (MediaKind::Image, _) => json!({"type": "image_url", "image_url": {"url": ""}}),
            (MediaKind::Audio, Api::Chat) => {
                json!({"type": "input_audio", "input_audio": {"data": "", "format": "wav"}})
            }
            (MediaKind::Video, Api::Chat) => json!({"type": "video_url", "video_url": {"url": ""}}),
            (_, api) => {
                bail!("audio and video go in chat requests' content: use --api chat (not {api})")
            }
        };
        parts.extend((0..count).map(|_| part.clone()));
    }
    msg["content"] = Value::Array(parts);
    serde_json::to_vec(&v).context("cannot build a request body")
}

/// Where each image goes in a body: between the quotes of each empty
/// `"url":""` (chat's images and video) or `"image_url":""` (the Responses
/// API), `"data":""` (chat's audio), or at the `null` of each
/// `"source":null`. A JSON string's quotes are escaped, so no text can
/// hold any of them.
fn image_slots(body: &[u8], slot: crate::client::ImageSlot) -> Vec<usize> {
    let keys: &[(&[u8], usize)] = match slot {
        crate::client::ImageSlot::Url => &[
            (b"\"url\":\"\"", 1),
            (b"\"image_url\":\"\"", 1),
            (b"\"data\":\"\"", 1),
        ],
        crate::client::ImageSlot::Source => &[(b"\"source\":null", 4)],
    };
    let mut at: Vec<usize> = keys
        .iter()
        .flat_map(|(key, back)| {
            body.windows(key.len())
                .enumerate()
                .filter(move |(_, w)| w == key)
                .map(move |(i, _)| i + key.len() - back)
        })
        .collect();
    at.sort_unstable();
    at
}

/// `max_tokens` of a Messages API request whose data leaves the output's
/// length to the server (the API requires one).
pub const MESSAGES_MAX_TOKENS: u64 = 4096;

/// A streamed request body whose messages alternate user and assistant,
/// starting with the user (`texts`; completions: the texts joined), asking
/// for exactly `output_tokens` when given. `extra` is merged last.
pub(crate) fn request_body(
    api: Api,
    model: &str,
    texts: &[&str],
    output_tokens: Option<u64>,
    extra: Option<&Map<String, Value>>,
) -> Result<Vec<u8>> {
    if api.pooled() {
        return pooled_body(api, model, texts, extra);
    }
    let mut body = Map::new();
    body.insert("model".into(), json!(model));
    // The texts alternate user and assistant, starting with the user.
    let messages = || -> Value {
        texts
            .iter()
            .enumerate()
            .map(|(i, t)| {
                let role = if i % 2 == 0 { "user" } else { "assistant" };
                json!({"role": role, "content": t})
            })
            .collect()
    };
    match api {
        Api::Chat => {
            body.insert("messages".into(), messages());
        }
        // Anthropic's Messages API: the same turns; `max_tokens` is
        // required (the server's own limit stands in when the data sets none).
        Api::Messages => {
            body.insert("messages".into(), messages());
            if output_tokens.is_none() {
                body.insert("max_tokens".into(), json!(MESSAGES_MAX_TOKENS));
            }
        }
        Api::Completions => {
            body.insert("prompt".into(), json!(texts.concat()));
        }
        // One text is the input itself; a conversation is its messages.
        Api::Responses if texts.len() == 1 => {
            body.insert("input".into(), json!(texts[0]));
        }
        Api::Responses => {
            body.insert("input".into(), messages());
        }
        Api::Embeddings | Api::Rerank | Api::Score => {}
    }
    body.insert("stream".into(), json!(true));
    // The Responses API always ends with its usage (response.completed);
    // the Messages API's message_start and message_delta carry it.
    if !matches!(api, Api::Responses | Api::Messages) {
        body.insert("stream_options".into(), json!({"include_usage": true}));
    }
    if let Some(n) = output_tokens {
        let key = match api {
            Api::Chat => "max_completion_tokens",
            Api::Completions | Api::Messages => "max_tokens",
            Api::Responses => "max_output_tokens",
            Api::Embeddings | Api::Rerank | Api::Score => return Ok(Vec::new()),
        };
        body.insert(key.into(), json!(n));
        body.insert("ignore_eos".into(), json!(true));
    }
    if let Some(extra) = extra {
        for (k, v) in extra {
            body.insert(k.clone(), v.clone());
        }
    }
    serde_json::to_vec(&Value::Object(body)).context("cannot build a request body")
}

/// A pooling request's body (not streamed): embeddings take every text as
/// an input; rerank and score take the first as the query and the others
/// as the documents scored against it. `extra` is merged last.
fn pooled_body(
    api: Api,
    model: &str,
    texts: &[&str],
    extra: Option<&Map<String, Value>>,
) -> Result<Vec<u8>> {
    let mut body = Map::new();
    body.insert("model".into(), json!(model));
    let (query, docs) = match texts.split_first() {
        Some((q, rest)) if !rest.is_empty() => (*q, rest),
        _ => ("", texts),
    };
    match api {
        Api::Rerank => {
            body.insert("query".into(), json!(query));
            body.insert("documents".into(), json!(docs));
        }
        Api::Score => {
            body.insert("text_1".into(), json!(query));
            body.insert("text_2".into(), json!(docs));
        }
        _ => {
            body.insert("input".into(), json!(texts));
        }
    }
    if let Some(extra) = extra {
        for (k, v) in extra {
            body.insert(k.clone(), v.clone());
        }
    }
    serde_json::to_vec(&Value::Object(body)).context("cannot build a request body")
}

/// A pooling API's requests: `batch` inputs each (embeddings), or a query
/// and `batch` documents (rerank, score: the query is the group's first
/// prompt). Prompt tokens count every text of the request; nothing is
/// asked to be generated.
pub fn build_pooled(
    items: Vec<PromptItem>,
    api: Api,
    model: &str,
    batch: usize,
    extra: Option<&Map<String, Value>>,
) -> Result<Vec<Prompt>> {
    if items.iter().any(|it| !it.images.is_empty()) {
        bail!(
            "the data file's `{}` column: --api {api} takes text alone; images go in chat or Messages requests",
            image_column::KEY
        );
    }
    let per = match api {
        Api::Rerank | Api::Score => batch.max(1) + 1,
        _ => batch.max(1),
    };
    if items.len() < per {
        bail!(
            "--api {api} with --batch {batch} needs {per} prompts a request; the data has {}",
            items.len()
        );
    }
    items
        .chunks(per)
        .filter(|group| group.len() == per)
        .map(|group| {
            let texts: Vec<&str> = group.iter().map(|it| it.text.as_str()).collect();
            let body = pooled_body(api, model, &texts, extra)?;
            let tag_at = pooled_text_offset(&body, api, texts[0]);
            // Every input of an embeddings batch is a request of its own to
            // vLLM, and its own prompt to the prefix cache: each is tagged.
            let also_tag = match (api, tag_at) {
                (Api::Embeddings, Some(at)) => input_offsets(&body, at, &texts[1..]),
                _ => None,
            };
            Ok(Prompt {
                body: Bytes::from(body),
                prompt_tokens: group.iter().map(|it| it.prompt_tokens).sum(),
                output_tokens: None,
                tag_at,
                respell: None,
                images: None,
                also_tag,
            })
        })
        .collect()
}

/// Where a pooling request's first text starts: its first input
/// (embeddings) or its query (rerank, score), so a reused request gets a
/// tag there and is new to the server. A query comes first in every pair a
/// reranker scores, so its tag makes each pair new; of a batch of
/// embedding inputs, only the first is tagged. (Seen on vLLM: 29–50 % of an
/// embeddings sweep's prompt tokens came from its prefix cache once the
/// data's inputs were sent again as they were.) None when it cannot be
/// found (`--extra-body` replaced the text) or needs JSON escaping.
fn pooled_text_offset(body: &[u8], api: Api, first: &str) -> Option<usize> {
    let key: &[u8] = match api {
        Api::Embeddings => b"\"input\":[\"",
        Api::Rerank => b"\"query\":\"",
        Api::Score => b"\"text_1\":\"",
        _ => return None,
    };
    let at = body.windows(key.len()).position(|w| w == key)? + key.len();
    let start = head(first);
    let escaped = serde_json::to_string(start).ok()?;
    if escaped.len() != start.len() + 2 {
        return None;
    }
    body.get(at..)?.starts_with(start.as_bytes()).then_some(at)
}

/// The first 16 bytes of `text` or fewer, cut at a character's start:
/// enough to tell where it begins in a body.
fn head(text: &str) -> &str {
    let mut n = text.len().min(16);
    while !text.is_char_boundary(n) {
        n -= 1;
    }
    &text[..n]
}

/// Where each input after the first starts in an embeddings body whose
/// first input starts at `first` (`"input":["a","b",…]`, written compactly
/// by serde_json): after the end of the string before it, at `","`. None
/// when one cannot be found or its start needs JSON escaping (then the
/// first input alone is tagged).
fn input_offsets(body: &[u8], first: usize, rest: &[&str]) -> Option<std::sync::Arc<[usize]>> {
    let mut at = first;
    let mut out = Vec::with_capacity(rest.len());
    for text in rest {
        // The end of the string that starts at `at`: its first quote not escaped.
        let mut i = at;
        loop {
            match body.get(i)? {
                b'\\' => i += 2,
                b'"' => break,
                _ => i += 1,
            }
        }
        if body.get(i..i + 3)? != b"\",\"" {
            return None;
        }
        at = i + 3;
        let start = head(text);
        let escaped = serde_json::to_string(start).ok()?;
        if escaped.len() != start.len() + 2 || !body.get(at..)?.starts_with(start.as_bytes()) {
            return None;
        }
        out.push(at);
    }
    Some(out.into())
}

/// Where in a built body the prompt's text starts, after its shared prefix:
/// the first `"content":"` (chat) or `"prompt":"` (completions) whose string
/// is the prompt's text. None when it cannot be found (e.g. `--extra-body`
/// replaced the messages), or when the prefix needs JSON escaping.
fn text_offset(body: &[u8], api: Api, text: &str, shared: usize) -> Option<usize> {
    // The first message's text: its content, or its first text part
    // (images or tool rounds beside it); the Responses API's input.
    let keys: &[&[u8]] = match api {
        Api::Chat | Api::Messages | Api::Responses => {
            &[b"\"content\":\"", b"\"text\":\"", b"\"input\":\""]
        }
        Api::Completions => &[b"\"prompt\":\""],
        Api::Embeddings | Api::Rerank | Api::Score => return None,
    };
    let at = keys
        .iter()
        .filter_map(|key| {
            let i = body.windows(key.len()).position(|w| w == *key)?;
            Some(i + key.len())
        })
        .min()?;
    let prefix = text.get(..shared)?;
    let escaped = serde_json::to_string(prefix).ok()?;
    if escaped.len() != prefix.len() + 2 {
        return None;
    }
    let start = serde_json::to_string(text.get(..text.len().min(shared + 16))?).ok()?;
    let start = start.trim_end_matches('"').as_bytes();
    (body.get(at - 1..)?.starts_with(start)).then_some(at + shared)
}

/// The prompt for the run's `seq`-th request. Prompts are used in order
/// across the whole run (never restarted per stage); once every prompt has
/// been sent, a reused prompt is made new to the server, so no prefix cache
/// serves it from an earlier request and flatters TTFT: a synthetic one
/// spells `seq` in the two one-token pieces that began with its sample
/// number (its token count stays exact, so the workload does not drift
/// across a sweep); others get a tag (`#<seq>`) at the start of their text
/// (after any prefix the workload shares on purpose), a few tokens more.
pub fn for_request(prompts: &[Prompt], seq: u64) -> Prompt {
    let n = prompts.len().max(1) as u64;
    let p = &prompts[(seq % n) as usize];
    if let (Some(r), Some(at)) = (&p.respell, p.tag_at) {
        let k = r.pieces.len() as u64;
        if seq >= n && k > 0 && at + r.head_bytes <= p.body.len() {
            let head = [
                r.pieces[((seq / k) % k) as usize].as_str(),
                r.pieces[(seq % k) as usize].as_str(),
            ]
            .concat();
            let mut body = Vec::with_capacity(p.body.len() + head.len());
            body.extend_from_slice(&p.body[..at]);
            body.extend_from_slice(head.as_bytes());
            body.extend_from_slice(&p.body[at + r.head_bytes..]);
            return Prompt {
                body: Bytes::from(body),
                ..p.clone()
            }
            .shifted(at, r.head_bytes, head.len())
            .with_head(head.len())
            .for_seq(seq);
        }
    }
    match p.tag_at {
        Some(at) if seq >= n && at <= p.body.len() => {
            let tag = format!("#{seq} ");
            // The first text's place, and each further input's of a batch.
            let also = p.also_tag.as_deref().unwrap_or_default();
            let places = || std::iter::once(at).chain(also.iter().copied());
            let mut body = Vec::with_capacity(p.body.len() + tag.len() * (1 + also.len()));
            let mut last = 0;
            for place in places() {
                let Some(piece) = p.body.get(last..place) else {
                    break;
                };
                body.extend_from_slice(piece);
                body.extend_from_slice(tag.as_bytes());
                last = place;
            }
            body.extend_from_slice(p.body.get(last..).unwrap_or_default());
            let tags = places().take_while(|&a| a <= p.body.len()).count();
            // Every tag moves the places after it.
            let also_tag = p.also_tag.as_ref().map(|a| {
                a.iter()
                    .enumerate()
                    .map(|(i, &x)| x + tag.len() * (i + 1))
                    .collect()
            });
            Prompt {
                body: Bytes::from(body),
                prompt_tokens: p.prompt_tokens
                    + (crate::tokenizer::count_tokens(&tag) * tags) as u64,
                output_tokens: p.output_tokens,
                tag_at: p.tag_at,
                respell: None,
                images: p.images.clone(),
                also_tag,
            }
            .shifted(at, 0, tag.len())
            .for_seq(seq)
        }
        _ => p.clone().for_seq(seq),
    }
}

/// Parses `--extra-body '{"temperature": 0}'`.
pub fn parse_extra_body(s: &str) -> Result<Map<String, Value>> {
    match serde_json::from_str::<Value>(s) {
        Ok(Value::Object(m)) => Ok(m),
        Ok(_) => bail!("--extra-body must be a JSON object, like '{{\"temperature\": 0}}'"),
        Err(e) => bail!("--extra-body is not valid JSON: {e}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bodies_ask_for_exact_output_and_usage() {
        let items = Synthetic::parse("prompt_tokens=4,output_tokens=9,samples=1")
            .unwrap()
            .generate(1, &crate::tokenizer::Builtin)
            .unwrap();
        let extra = parse_extra_body(r#"{"temperature":0.5}"#).unwrap();
        let p = build_prompts(items.clone(), Api::Chat, "m", Some(&extra)).unwrap();
        let v: Value = serde_json::from_slice(&p[0].body).unwrap();
        assert_eq!(v["max_completion_tokens"], 9);
        assert_eq!(v["ignore_eos"], true);
        assert_eq!(v["stream_options"]["include_usage"], true);
        assert_eq!(v["temperature"], 0.5);
        let p = build_prompts(items, Api::Completions, "m", None).unwrap();
        let v: Value = serde_json::from_slice(&p[0].body).unwrap();
        assert_eq!(v["max_tokens"], 9);
        assert!(v["prompt"].is_string());
        assert!(parse_extra_body("[1]").is_err());
        let p = build_prompts(items_again(), Api::Responses, "m", None).unwrap();
        let v: Value = serde_json::from_slice(&p[0].body).unwrap();
        assert_eq!(v["max_output_tokens"], 9);
        assert!(v["input"].is_string() && v["stream"] == true);
        assert!(v.get("stream_options").is_none(), "{v}");
        assert!(p[0].tag_at.is_some());
    }

    #[test]
    fn pooling_requests_carry_their_batch_and_ask_for_nothing() {
        let items = || {
            Synthetic::parse("prompt_tokens=4,output_tokens=9,samples=9")
                .unwrap()
                .generate(1, &crate::tokenizer::Builtin)
                .unwrap()
        };
        let p = build_pooled(items(), Api::Embeddings, "e", 4, None).unwrap();
        assert_eq!(p.len(), 2, "9 prompts make two whole batches of 4");
        let v: Value = serde_json::from_slice(&p[0].body).unwrap();
        assert_eq!(v["input"].as_array().unwrap().len(), 4);
        assert_eq!(v["model"], "e");
        assert!(
            v.get("stream").is_none() && v.get("max_tokens").is_none(),
            "{v}"
        );
        assert_eq!(p[0].prompt_tokens, 16);
        assert_eq!(p[0].output_tokens, None);
        // Sent again, a request is new to the server: every input tagged
        // (vLLM looks each up in its prefix cache; only the first was
        // tagged, and the other three were served from it), and again
        // the next time, each tag in its place.
        let before: Value = serde_json::from_slice(&p[0].body).unwrap();
        for seq in [2, 4] {
            let again = for_request(&p, seq);
            let v: Value = serde_json::from_slice(&again.body).unwrap();
            for (i, input) in v["input"].as_array().unwrap().iter().enumerate() {
                let was = before["input"][i].as_str().unwrap();
                assert_eq!(input.as_str().unwrap(), format!("#{seq} {was}"), "{v}");
            }
            let tag = crate::tokenizer::count_tokens(&format!("#{seq} ")) as u64;
            assert_eq!(again.prompt_tokens, p[0].prompt_tokens + 4 * tag);
        }
        // A string with an escaped quote is found past; an input whose
        // start needs escaping is not tagged (then the first alone is).
        let body = br#"{"input":["a\"b","c","d"]}"#;
        let at = input_offsets(body, 11, &["c", "d"]).unwrap();
        assert_eq!(&at[..], &[18, 22]);
        let body = br#"{"input":["a","c\\","d"]}"#;
        assert_eq!(input_offsets(body, 11, &["c\\", "d"]), None);
        let p = build_pooled(items(), Api::Rerank, "r", 2, None).unwrap();
        assert_eq!(p.len(), 3, "a query and 2 documents a request");
        let v: Value = serde_json::from_slice(&p[0].body).unwrap();
        assert!(v["query"].is_string());
        assert_eq!(v["documents"].as_array().unwrap().len(), 2);
        let again: Value = serde_json::from_slice(&for_request(&p, 3).body).unwrap();
        assert!(
            again["query"].as_str().unwrap().starts_with("#3 "),
            "{again}"
        );
        let p = build_pooled(items(), Api::Score, "s", 8, None).unwrap();
        let v: Value = serde_json::from_slice(&p[0].body).unwrap();
        assert!(v["text_1"].is_string());
        let again: Value = serde_json::from_slice(&for_request(&p, 1).body).unwrap();
        assert!(
            again["text_1"].as_str().unwrap().starts_with("#1 "),
            "{again}"
        );
        assert_eq!(v["text_2"].as_array().unwrap().len(), 8);
        let e = build_pooled(items(), Api::Score, "s", 9, None).unwrap_err();
        assert!(
            e.to_string()
                .contains("needs 10 prompts a request; the data has 9"),
            "{e}"
        );
    }

    fn items_again() -> Vec<PromptItem> {
        Synthetic::parse("prompt_tokens=4,output_tokens=9,samples=1")
            .unwrap()
            .generate(1, &crate::tokenizer::Builtin)
            .unwrap()
    }

    fn text_of(p: &Prompt) -> String {
        let v: Value = serde_json::from_slice(&p.body).unwrap();
        v["messages"][0]["content"].as_str().unwrap().to_string()
    }

    #[test]
    fn reused_synthetic_prompts_are_new_to_the_server_and_keep_their_length() {
        use crate::tokenizer::TokenCounter as _;
        let items = Synthetic::parse("prompt_tokens=20,output_tokens=4,samples=3")
            .unwrap()
            .generate(1, &crate::tokenizer::Builtin)
            .unwrap();
        let p = build_prompts(items, Api::Chat, "m", None).unwrap();
        // First pass: as built.
        for (i, q) in p.iter().enumerate() {
            assert_eq!(for_request(&p, i as u64).body, q.body);
        }
        // Seen: the 1,001st request of the default data got a `#1000 ` tag,
        // 4 tokens more; prompt tokens drifted 64.0 → 68.0 across a sweep.
        let mut seen = std::collections::BTreeSet::new();
        for seq in 0..3000u64 {
            let q = for_request(&p, seq);
            let t = text_of(&q);
            assert_eq!(q.prompt_tokens, 20, "request {seq}");
            assert_eq!(
                crate::tokenizer::Builtin.count(&t),
                20,
                "request {seq}: {t}"
            );
            // Unique from its first two tokens: no prefix cache serves it.
            let head: Vec<&str> = t.split_whitespace().take(2).collect();
            assert!(
                seen.insert(head.join(" ")),
                "request {seq} repeats a head: {t}"
            );
        }
        let again = text_of(&for_request(&p, 4));
        let orig = text_of(&p[1]);
        let tail = |t: &str| t.split_whitespace().skip(2).collect::<Vec<_>>().join(" ");
        assert_eq!(tail(&again), tail(&orig), "only the head changes");
        // A shared prefix stays shared: the respelling goes after it.
        let items = Synthetic::parse("prompt_tokens=20,output_tokens=4,samples=2,prefix_tokens=5")
            .unwrap()
            .generate(1, &crate::tokenizer::Builtin)
            .unwrap();
        let shared = items[0].shared_prefix_bytes;
        assert!(shared > 0);
        let p = build_prompts(items, Api::Completions, "m", None).unwrap();
        let v: Value = serde_json::from_slice(&for_request(&p, 2).body).unwrap();
        let t = v["prompt"].as_str().unwrap();
        let orig: Value = serde_json::from_slice(&p[0].body).unwrap();
        let o = orig["prompt"].as_str().unwrap();
        assert_eq!(t[..shared], o[..shared]);
        assert_ne!(t[shared..], o[shared..]);
        assert_eq!(for_request(&p, 2).prompt_tokens, 25);
    }

    #[test]
    fn reused_file_prompts_are_tagged_at_their_start() {
        let items = vec![PromptItem {
            images: Vec::new(),
            text: "hello there".into(),
            prompt_tokens: 2,
            output_tokens: None,
            shared_prefix_bytes: 0,
            respell: None,
        }];
        let p = build_prompts(items, Api::Chat, "m", None).unwrap();
        let again = for_request(&p, 4);
        let t = text_of(&again);
        assert_eq!(t, "#4 hello there");
        assert!(again.prompt_tokens > 2);
    }

    #[test]
    fn a_data_file_is_shuffled_the_same_way_under_the_same_seed() {
        let dir = std::env::temp_dir().join(format!("llmsweep-shuffle-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("rows.jsonl");
        let rows: String = (0..40)
            .map(|i| format!("{{\"prompt\": \"row {i}\"}}\n"))
            .collect();
        std::fs::write(&path, rows).unwrap();
        let spec = path.to_string_lossy().into_owned();
        let order = |seed| -> Vec<String> {
            load_items(&spec, seed, None, &crate::tokenizer::Builtin, false)
                .unwrap()
                .items
                .into_iter()
                .map(|p| p.text)
                .collect()
        };
        let (a, b, c) = (order(7), order(7), order(8));
        assert_eq!(a, b, "same seed, same order");
        assert_ne!(a, c, "another seed, another order");
        let unshuffled: Vec<String> = (0..40).map(|i| format!("row {i}")).collect();
        assert_ne!(a, unshuffled, "the rows are shuffled");
        let mut sorted = a.clone();
        sorted.sort();
        let mut expected = unshuffled;
        expected.sort();
        assert_eq!(sorted, expected, "every row once");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
