//! What a prompt's images, audio and video cost the simulator: an audio
//! clip's and a video's length read from its data, each checked as a
//! server that decodes it would.

use serde_json::Value;

/// What the parts of a prompt beside its text cost in prompt tokens.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct MediaCost {
    /// An image.
    pub image: u64,
    /// A second of audio (`input_audio`, by its WAV header).
    pub audio_per_s: u64,
    /// A frame of video (`video_url`: a `video/jpeg` data URL's frames; a
    /// clip in any other form counts as one).
    pub frame: u64,
}

impl MediaCost {
    /// Images of `n` tokens, nothing else.
    pub fn images(n: u64) -> Self {
        MediaCost {
            image: n,
            ..Default::default()
        }
    }
}

/// A request's audio and video clips and what they cost.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(super) struct Clips {
    pub(super) audio: u32,
    pub(super) video: u32,
    pub(super) tokens: u64,
}

/// A chat content part that is an audio clip (`input_audio`) or a video
/// (`video_url`): its data and the prompt tokens it costs; the refusal's
/// message (`kind n: …`, counted in `n`) when it is not one a server
/// decodes: audio that is not a WAV in base64, a video neither a base64
/// data URL nor http(s), or whose first frame is not an image.
/// None for any other part.
pub(super) fn clip<'a>(
    p: &'a Value,
    cost: &MediaCost,
    n: &mut Clips,
) -> Option<Result<(&'a str, u64), String>> {
    use base64::Engine as _;
    let b64 = &base64::engine::general_purpose::STANDARD;
    let head = |data: &str, bytes: usize| {
        let end = (bytes.div_ceil(3) * 4).min(data.len() / 4 * 4);
        b64.decode(data.get(..end).unwrap_or_default()).ok()
    };
    match p.get("type").and_then(Value::as_str)? {
        "input_audio" => {
            n.audio += 1;
            let k = n.audio;
            let Some(data) = p.pointer("/input_audio/data").and_then(Value::as_str) else {
                return Some(Err(format!("audio {k}: `input_audio.data` is required")));
            };
            // RIFF, WAVE, `fmt ` and its bytes a second: the rest is samples.
            let h = head(data, 32).unwrap_or_default();
            let wav = h.len() >= 32 && &h[..4] == b"RIFF" && &h[8..16] == b"WAVEfmt ";
            let rate = h
                .get(28..32)
                .map_or(0, |r| u32::from_le_bytes([r[0], r[1], r[2], r[3]]));
            if !wav || rate == 0 {
                return Some(Err(format!(
                    "audio {k}: not a WAV file in base64 (the simulator decodes WAV only)"
                )));
            }
            let padding = data.bytes().rev().take_while(|&b| b == b'=').count();
            let bytes = (data.len() / 4 * 3).saturating_sub(44 + padding) as f64;
            let tokens = (bytes / f64::from(rate) * cost.audio_per_s as f64).ceil() as u64;
            Some(Ok((data, tokens)))
        }
        "video_url" => {
            n.video += 1;
            let k = n.video;
            let Some(url) = p.pointer("/video_url/url").and_then(Value::as_str) else {
                return Some(Err(format!("video {k}: `video_url.url` is required")));
            };
            if url.starts_with("http://") || url.starts_with("https://") {
                return Some(Ok((url, cost.frame)));
            }
            let Some((kind, data)) = url.strip_prefix("data:").and_then(|u| u.split_once(','))
            else {
                return Some(Err(format!(
                    "video {k}: the URL is neither a data URL nor http(s)"
                )));
            };
            let Some(kind) = kind.strip_suffix(";base64") else {
                return Some(Err(format!(
                    "video {k}: a data URL must be base64 (`;base64,`)"
                )));
            };
            // vLLM's frames: images in base64, comma separated.
            let frames = if kind.eq_ignore_ascii_case("video/jpeg") {
                if !head(data, 12).is_some_and(|h| is_image(&h)) {
                    return Some(Err(format!(
                        "video {k}: its first frame is not an image (PNG, JPEG, GIF or WebP)"
                    )));
                }
                data.split(',').count() as u64
            } else {
                1
            };
            Some(Ok((data, frames.saturating_mul(cost.frame))))
        }
        _ => None,
    }
}

/// The audio and video clips of a chat request's messages, each checked
/// by [`clip`].
pub(super) fn clips(v: &Value, cost: &MediaCost) -> Result<Clips, String> {
    let mut n = Clips::default();
    let parts = v
        .get("messages")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|m| m.get("content").and_then(Value::as_array))
        .flatten();
    for p in parts {
        if let Some(c) = clip(p, cost, &mut n) {
            n.tokens = n.tokens.saturating_add(c?.1);
        }
    }
    Ok(n)
}

/// Whether `b` starts as a PNG, JPEG, GIF or WebP image does.
pub(super) fn is_image(b: &[u8]) -> bool {
    b.starts_with(b"\x89PNG\r\n\x1a\n")
        || b.starts_with(&[0xFF, 0xD8, 0xFF])
        || b.starts_with(b"GIF8")
        || (b.len() >= 12 && &b[..4] == b"RIFF" && &b[8..12] == b"WEBP")
}
