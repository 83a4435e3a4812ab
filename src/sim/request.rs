//! A generation request as the simulator reads it: which API, how long
//! a prompt, how many tokens to answer, or why it is refused.

use hyper::StatusCode;
use rand::rngs::SmallRng;
use rand_distr::{Distribution, Normal};
use serde_json::Value;

use super::config::ModelParams;
use super::media::{clips, is_image, Clips, MediaCost};
use crate::tokenizer;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Api {
    Chat,
    Completions,
    /// `/v1/responses`: the OpenAI Responses API's events, no `[DONE]`.
    Responses,
    /// `/v1/messages`: Anthropic's Messages API, its events, no `[DONE]`.
    Messages,
}

/// What a generation request asks for.
#[derive(Debug)]
pub(super) struct GenRequest {
    pub(super) prompt_tokens: u64,
    pub(super) max_tokens: Option<u64>,
    pub(super) ignore_eos: bool,
    pub(super) stream: bool,
    pub(super) include_usage: bool,
    pub(super) continuous_usage: bool,
    /// `chat_template_kwargs.enable_thinking` (true unless the request says false).
    pub(super) thinking: bool,
    /// Prefix-cache block hashes of the prompt (`batcher::prompt_blocks`).
    pub(super) blocks: Vec<u64>,
    /// The served model it named (index in `AppState::models`; 0 when it named none).
    pub(super) model: usize,
    /// Its image parts (chat), and its audio and video clips.
    pub(super) images: u32,
    pub(super) clips: Clips,
    /// The functions its `tools` define (chat), which an answer may call.
    pub(super) tools: Vec<String>,
}

pub(super) type Refusal = (StatusCode, &'static str, String);

/// `served`: the names a request may use (served names, then adapters);
/// `cost`: what an image, a second of audio, a frame of video cost in
/// prompt tokens.
pub(super) fn parse_request(
    api: Api,
    body: &[u8],
    served: &[&str],
    cost: &MediaCost,
) -> Result<GenRequest, Refusal> {
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
    let images = images(&v).map_err(bad)?;
    let clips = clips(&v, cost).map_err(bad)?;
    let prompt_tokens = prompt_tokens(api, &v).map_err(bad)?
        + u64::from(images).saturating_mul(cost.image)
        + clips.tokens
        + tool_tokens(&v);
    let max_tokens = max_tokens(&v).map_err(bad)?;
    let flag = |name: &str| v.get(name).and_then(Value::as_bool).unwrap_or(false);
    let opts = v.get("stream_options");
    let opt = |name: &str| {
        opts.and_then(|o| o.get(name))
            .and_then(Value::as_bool)
            .unwrap_or(false)
    };
    let tools = tool_names(api, &v);
    Ok(GenRequest {
        model,
        images,
        clips,
        tools,
        blocks: super::batcher::prompt_blocks(&v, cost),
        prompt_tokens,
        max_tokens,
        ignore_eos: flag("ignore_eos"),
        stream: flag("stream"),
        // The Responses and Messages APIs always end with their usage.
        include_usage: opt("include_usage") || matches!(api, Api::Responses | Api::Messages),
        continuous_usage: opt("continuous_usage_stats"),
        thinking: v
            .pointer("/chat_template_kwargs/enable_thinking")
            .and_then(Value::as_bool)
            .unwrap_or(true),
    })
}

/// The answer's most tokens the request asks for (None: no bound), or why
/// it is refused: 0, or more than the model's context (a real server
/// refuses lengths beyond its context; so does this one, rather than
/// overflow its accounting).
fn max_tokens(v: &Value) -> Result<Option<u64>, String> {
    let max_tokens = v
        .get("max_completion_tokens")
        .or_else(|| v.get("max_tokens"))
        .or_else(|| v.get("max_output_tokens"))
        .and_then(Value::as_u64);
    if max_tokens == Some(0) {
        return Err("max_tokens must be at least 1".into());
    }
    if let Some(n) = max_tokens.filter(|n| *n > MAX_TOKENS) {
        return Err(format!(
            "max_tokens {n} is more than this model's context of {MAX_TOKENS} tokens"
        ));
    }
    Ok(max_tokens)
}

/// The names of the tools a request defines: chat names a tool at
/// `function.name`, the Messages and Responses APIs at `name`.
fn tool_names(api: Api, v: &Value) -> Vec<String> {
    let at = match api {
        Api::Chat => "/function/name",
        Api::Messages | Api::Responses => "/name",
        Api::Completions => return Vec::new(),
    };
    v.get("tools")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|t| t.pointer(at).and_then(Value::as_str))
        .map(str::to_string)
        .collect()
}

/// The prompt's length in tokens, from the API's own field (`prompt`,
/// `input` or `messages`); the refusal's message when it is missing.
pub(super) fn prompt_tokens(api: Api, v: &Value) -> Result<u64, String> {
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
        Api::Messages => {
            let Some(msgs) = v.get("messages").and_then(Value::as_array) else {
                return Err("messages: Field required".into());
            };
            if v.get("max_tokens").and_then(Value::as_u64).is_none() {
                return Err("max_tokens: Field required".into());
            }
            // `system` is a string or text blocks.
            let system = v.get("system").map_or(0, |s| match s {
                Value::String(t) => tokenizer::count_tokens(t) as u64,
                other => message_tokens(&serde_json::json!({ "content": other })),
            });
            system + msgs.iter().map(message_tokens).sum::<u64>()
        }
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

/// What a request's tool definitions cost in prompt tokens: a real
/// server's chat template writes them into the prompt, so they are
/// prefilled like text; here, the tokens of their JSON as sent.
pub(super) fn tool_tokens(v: &Value) -> u64 {
    match v.get("tools") {
        Some(Value::Array(tools)) if !tools.is_empty() => tools
            .iter()
            .map(|t| tokenizer::count_tokens(&t.to_string()) as u64)
            .sum(),
        _ => 0,
    }
}

/// What the images, audio and video of a chat request's messages cost at
/// `cost` in prompt tokens, as the simulator charges them; why a server
/// would refuse one when it would.
pub fn parts_tokens(v: &Value, cost: &MediaCost) -> Result<u64, String> {
    let images = images(v)?;
    Ok(u64::from(images)
        .saturating_mul(cost.image)
        .saturating_add(clips(v, cost)?.tokens))
}

/// The image parts of a chat request's messages (`image_url`), each
/// checked as a server that decodes it would: a data URL must be an image
/// (PNG, JPEG, GIF or WebP by its first bytes) in base64; an http(s) URL is
/// taken as it is. The refusal's message names the part.
pub(super) fn images(v: &Value) -> Result<u32, String> {
    // Chat's and the Messages API's messages, the Responses API's input.
    let Some(msgs) = v
        .get("messages")
        .or_else(|| v.get("input"))
        .and_then(Value::as_array)
    else {
        return Ok(0);
    };
    let mut n = 0u32;
    let parts = msgs
        .iter()
        .filter_map(|m| m.get("content").and_then(Value::as_array))
        .flatten();
    for p in parts {
        let data = match p.get("type").and_then(Value::as_str) {
            // Chat's `{"image_url": {"url"}}`, the Responses API's
            // `{"type": "input_image", "image_url": "…"}`.
            Some(kind @ ("image_url" | "input_image")) => {
                n += 1;
                let at = if kind == "image_url" {
                    "/image_url/url"
                } else {
                    "/image_url"
                };
                let url = p.pointer(at).and_then(Value::as_str).ok_or_else(|| {
                    format!("image {n}: `{}` is required", &at[1..].replace('/', "."))
                })?;
                if url.starts_with("http://") || url.starts_with("https://") {
                    continue;
                }
                let Some((head, data)) = url.strip_prefix("data:").and_then(|u| u.split_once(','))
                else {
                    return Err(format!(
                        "image {n}: the URL is neither a data URL nor http(s)"
                    ));
                };
                if !head.ends_with(";base64") {
                    return Err(format!("image {n}: a data URL must be base64 (`;base64,`)"));
                }
                data
            }
            // The Messages API's image block: a base64 or url source.
            Some("image") => {
                n += 1;
                let src = p.get("source").unwrap_or(&Value::Null);
                match src.get("type").and_then(Value::as_str) {
                    Some("url") => continue,
                    Some("base64") => src
                        .get("data")
                        .and_then(Value::as_str)
                        .ok_or_else(|| format!("image {n}: `source.data` is required"))?,
                    _ => return Err(format!("image {n}: source.type must be base64 or url")),
                }
            }
            _ => continue,
        };
        use base64::Engine as _;
        // The first 16 characters are 12 bytes: enough for any signature.
        let start = data.get(..16.min(data.len() / 4 * 4)).unwrap_or_default();
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(start)
            .map_err(|e| format!("image {n}: the data URL is not base64 ({e})"))?;
        if !is_image(&bytes) {
            return Err(format!(
                "image {n}: cannot identify image file (the data URL's bytes are not PNG, JPEG, GIF or WebP)"
            ));
        }
    }
    Ok(n)
}

/// Tokens of one input item of the Responses API: a string, or a message
/// whose content is a string or parts with `text`; a function call's
/// arguments and a call's output.
pub(super) fn message_tokens(item: &Value) -> u64 {
    let call = ["arguments", "output"]
        .iter()
        .filter_map(|k| item.get(k).and_then(Value::as_str))
        .map(|s| tokenizer::count_tokens(s) as u64)
        .sum::<u64>();
    call + match item {
        Value::String(s) => tokenizer::count_tokens(s) as u64,
        _ => match item.get("content") {
            Some(Value::String(s)) => tokenizer::count_tokens(s) as u64,
            // Text parts, and the Messages API's tool results (`content`).
            Some(Value::Array(parts)) => parts
                .iter()
                .filter_map(|p| {
                    p.get("text")
                        .or_else(|| p.get("content").filter(|c| c.is_string()))
                        .and_then(Value::as_str)
                })
                .map(|s| tokenizer::count_tokens(s) as u64)
                .sum(),
            _ => 0,
        },
    }
}

/// The simulated model's context length.
pub(super) const MAX_TOKENS: u64 = 1 << 20;

/// Exact `max_tokens` with `ignore_eos`; otherwise `reasoning` thinking
/// tokens and a sampled answer length, capped by `max_tokens` when given.
pub(super) fn output_length(
    p: &ModelParams,
    g: &GenRequest,
    reasoning: u64,
    rng: &mut SmallRng,
) -> u64 {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_chat_and_completions_requests() {
        let g = parse_request(
            Api::Chat,
            br#"{"model":"m","messages":[{"role":"user","content":"hello there world"}],"max_completion_tokens":7,"ignore_eos":true,"stream":true,"stream_options":{"include_usage":true}}"#,
            &["m"],
            &MediaCost::default(),
        )
        .unwrap();
        assert_eq!(g.prompt_tokens, 3);
        assert_eq!(g.max_tokens, Some(7));
        assert!(g.ignore_eos && g.stream && g.include_usage && !g.continuous_usage);

        let g = parse_request(
            Api::Completions,
            br#"{"prompt":"a b c d","max_tokens":3}"#,
            &["m"],
            &MediaCost::default(),
        )
        .unwrap();
        assert_eq!(g.prompt_tokens, 4);
        assert!(!g.stream);
    }

    #[test]
    fn refuses_unknown_models_and_broken_bodies() {
        let e = parse_request(
            Api::Chat,
            br#"{"model":"x","messages":[]}"#,
            &["m"],
            &MediaCost::images(0),
        )
        .unwrap_err();
        assert_eq!(e.0, StatusCode::NOT_FOUND);
        assert!(e.2.contains("`x`"));
        let e = parse_request(Api::Chat, b"{nope", &["m"], &MediaCost::images(0)).unwrap_err();
        assert_eq!(e.0, StatusCode::BAD_REQUEST);
        let e = parse_request(
            Api::Completions,
            br#"{"model":"m"}"#,
            &["m"],
            &MediaCost::images(0),
        )
        .unwrap_err();
        assert!(e.2.contains("prompt"));
    }

    #[test]
    fn lengths_beyond_the_context_are_refused_not_overflowed() {
        let body =
            br#"{"model":"m","prompt":"hi","max_tokens":18446744073709551615,"ignore_eos":true}"#;
        let e = parse_request(Api::Completions, body, &["m"], &MediaCost::images(0))
            .err()
            .unwrap();
        assert_eq!(e.0, StatusCode::BAD_REQUEST);
        assert!(e.2.contains("context"), "{}", e.2);
        let ok = br#"{"model":"m","prompt":"hi","max_tokens":16}"#;
        assert!(parse_request(Api::Completions, ok, &["m"], &MediaCost::images(0)).is_ok());
    }

    #[test]
    fn tool_definitions_cost_their_tokens_in_every_api() {
        let tools = r#"[{"type":"function","function":{"name":"search_docs","description":"Looks things up in the docs","parameters":{"type":"object","properties":{"query":{"type":"string"}}}}}]"#;
        let defs: Value = serde_json::from_str(tools).unwrap();
        let cost = tokenizer::count_tokens(&defs[0].to_string()) as u64;
        assert!(cost > 10, "{cost}");
        let chat =
            format!(r#"{{"messages":[{{"role":"user","content":"a b c"}}],"tools":{tools}}}"#);
        let g = parse_request(Api::Chat, chat.as_bytes(), &["m"], &MediaCost::images(0)).unwrap();
        assert_eq!(g.prompt_tokens, 3 + cost);
        assert_eq!(g.tools, ["search_docs"]);
        let none = r#"{"messages":[{"role":"user","content":"a b c"}],"tools":[]}"#;
        let g = parse_request(Api::Chat, none.as_bytes(), &["m"], &MediaCost::images(0)).unwrap();
        assert_eq!(g.prompt_tokens, 3);
        let anthropic = r#"[{"name":"search_docs","description":"Looks things up","input_schema":{"type":"object"}}]"#;
        let cost: u64 = tokenizer::count_tokens(
            &serde_json::from_str::<Value>(anthropic).unwrap()[0].to_string(),
        ) as u64;
        let body = format!(
            r#"{{"max_tokens":4,"messages":[{{"role":"user","content":"a b c"}}],"tools":{anthropic}}}"#
        );
        let g = parse_request(
            Api::Messages,
            body.as_bytes(),
            &["m"],
            &MediaCost::images(0),
        )
        .unwrap();
        assert_eq!(g.prompt_tokens, 3 + cost);
    }

    #[test]
    fn responses_input_images_tools_calls_and_outputs_are_read() {
        let png = "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAA";
        let body = format!(
            r#"{{"input":[{{"role":"user","content":[{{"type":"input_text","text":"a b c"}},{{"type":"input_image","image_url":"{png}"}}]}},{{"type":"function_call","call_id":"c1","name":"lookup","arguments":"x y"}},{{"type":"function_call_output","call_id":"c1","output":"d e f g"}}],"tools":[{{"type":"function","name":"lookup","parameters":{{"type":"object"}}}}]}}"#
        );
        let g = parse_request(
            Api::Responses,
            body.as_bytes(),
            &["m"],
            &MediaCost::images(100),
        )
        .unwrap();
        let defs: Value = serde_json::from_str(&body).unwrap();
        let cost = tokenizer::count_tokens(&defs["tools"][0].to_string()) as u64;
        assert_eq!(g.images, 1);
        assert_eq!(g.tools, ["lookup"]);
        assert_eq!(g.prompt_tokens, 3 + 100 + 2 + 4 + cost);
        let bad = body.replace(png, "data:text/plain;base64,aGVsbG8gd29ybGQgaGVsbG8=");
        let e = parse_request(
            Api::Responses,
            bad.as_bytes(),
            &["m"],
            &MediaCost::images(100),
        )
        .unwrap_err();
        assert!(e.2.contains("cannot identify image"), "{}", e.2);
        let none = r#"{"input":[{"role":"user","content":[{"type":"input_image"}]}]}"#;
        let e = parse_request(
            Api::Responses,
            none.as_bytes(),
            &["m"],
            &MediaCost::images(100),
        )
        .unwrap_err();
        assert!(e.2.contains("`image_url` is required"), "{}", e.2);
    }

    #[test]
    fn image_parts_cost_their_tokens_and_a_part_that_is_no_image_is_refused() {
        let body = |url: &str| {
            format!(
                r#"{{"messages":[{{"role":"user","content":[{{"type":"text","text":"a b c"}},{{"type":"image_url","image_url":{{"url":"{url}"}}}},{{"type":"image_url","image_url":{{"url":"https://x/y.png"}}}}]}}]}}"#
            )
        };
        // A PNG's signature in base64.
        let png = "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAA";
        let g = parse_request(
            Api::Chat,
            body(png).as_bytes(),
            &["m"],
            &MediaCost::images(576),
        )
        .unwrap();
        assert_eq!(g.prompt_tokens, 3 + 2 * 576);
        // The Messages API's image blocks.
        let block = |src: &str| {
            format!(
                r#"{{"max_tokens":4,"messages":[{{"role":"user","content":[{{"type":"text","text":"a b c"}},{{"type":"image","source":{src}}}]}}]}}"#
            )
        };
        let b64 = r#"{"type":"base64","media_type":"image/png","data":"iVBORw0KGgoAAAANSUhEUgAA"}"#;
        let g = parse_request(
            Api::Messages,
            block(b64).as_bytes(),
            &["m"],
            &MediaCost::images(100),
        )
        .unwrap();
        assert_eq!((g.images, g.prompt_tokens), (1, 103));
        let text =
            r#"{"type":"base64","media_type":"image/png","data":"aGVsbG8gd29ybGQgaGVsbG8="}"#;
        let e = parse_request(
            Api::Messages,
            block(text).as_bytes(),
            &["m"],
            &MediaCost::images(100),
        )
        .unwrap_err();
        assert!(e.2.contains("cannot identify image"), "{}", e.2);
        let e = parse_request(
            Api::Messages,
            block("null").as_bytes(),
            &["m"],
            &MediaCost::images(100),
        )
        .unwrap_err();
        assert!(e.2.contains("base64 or url"), "{}", e.2);
        for (url, says) in [
            (
                "data:text/plain;base64,aGVsbG8gd29ybGQgaGVsbG8=",
                "cannot identify image",
            ),
            ("data:image/png,rawbytes", "base64"),
            ("file:///etc/passwd", "neither a data URL"),
            ("data:image/png;base64,!!!!!!!!!!!!!!!!", "not base64"),
        ] {
            let e = parse_request(
                Api::Chat,
                body(url).as_bytes(),
                &["m"],
                &MediaCost::images(576),
            )
            .unwrap_err();
            assert_eq!(e.0, StatusCode::BAD_REQUEST);
            assert!(e.2.contains(says), "{url}: {}", e.2);
        }
    }

    /// An `input_audio` WAV costs its seconds' tokens (from its header), a
    /// `video_url` of vLLM's frames its frames'; what a server could not
    /// decode is refused, named.
    #[test]
    fn audio_and_video_parts_are_charged_by_length_and_checked() {
        use base64::Engine as _;
        let b64 = |b: &[u8]| base64::engine::general_purpose::STANDARD.encode(b);
        // 2.5 s of 16 kHz 16-bit mono: a header, then 80,000 bytes.
        let mut wav = b"RIFF\0\0\0\0WAVEfmt \x10\0\0\0\x01\0\x01\0".to_vec();
        wav.extend_from_slice(&16_000u32.to_le_bytes());
        wav.extend_from_slice(&32_000u32.to_le_bytes());
        wav.extend_from_slice(b"\x02\0\x10\0data");
        wav.extend_from_slice(&80_000u32.to_le_bytes());
        wav.resize(44 + 80_000, 0);
        let png = b64(b"\x89PNG\r\n\x1a\n....");
        let body = |audio: &str, video: &str| {
            format!(
                r#"{{"messages":[{{"role":"user","content":[{{"type":"text","text":"a b c"}},{{"type":"input_audio","input_audio":{{"data":"{audio}","format":"wav"}}}},{{"type":"video_url","video_url":{{"url":"{video}"}}}}]}}]}}"#
            )
        };
        let cost = MediaCost {
            image: 0,
            audio_per_s: 10,
            frame: 3,
        };
        let video = format!("data:video/jpeg;base64,{png},{png},{png}");
        let g = parse_request(
            Api::Chat,
            body(&b64(&wav), &video).as_bytes(),
            &["m"],
            &cost,
        )
        .unwrap();
        assert_eq!((g.clips.audio, g.clips.video), (1, 1));
        assert_eq!(
            g.prompt_tokens,
            3 + 25 + 9,
            "text, 2.5 s × 10, 3 frames × 3"
        );
        assert_eq!(g.clips.tokens, 34);
        // A clip in another form counts as one frame.
        let mp4 = format!("data:video/mp4;base64,{}", b64(b"....ftypisom"));
        let g = parse_request(Api::Chat, body(&b64(&wav), &mp4).as_bytes(), &["m"], &cost).unwrap();
        assert_eq!(g.prompt_tokens, 3 + 25 + 3);
        for (audio, video, says) in [
            (
                b64(b"ID3 not a wav file at all, an mp3"),
                video.clone(),
                "audio 1: not a WAV file",
            ),
            (
                b64(&wav),
                "file:///x.mp4".to_string(),
                "video 1: the URL is neither",
            ),
            (
                b64(&wav),
                "data:video/jpeg,abc".to_string(),
                "video 1: a data URL must be base64",
            ),
            (
                b64(&wav),
                format!("data:video/jpeg;base64,{}", b64(b"plain text here")),
                "video 1: its first frame is not an image",
            ),
        ] {
            let e = parse_request(Api::Chat, body(&audio, &video).as_bytes(), &["m"], &cost)
                .unwrap_err();
            assert!(e.2.contains(says), "{says}: {}", e.2);
        }
    }
}
