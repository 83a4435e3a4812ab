//! What a request's parts beside its text (`images=`, `audio=`, `video=`)
//! cost in prompt tokens, found before any load for the context check
//! (`target::check_context`): the server's own count, from its `/tokenize`
//! with chat messages (vLLM counts a chat request's images, audio and
//! video there, as its usage does), else an estimate that says so.
//! Asked once for the run: every request carries parts of one shape
//! (synthetic parts of one size and length; `images_dir` files are the
//! first request's).

use serde_json::Value;

use crate::client::{Client, MediaKind};
use crate::data::images::Attach;

/// The text beside the parts in the messages counted (its tokens are
/// taken off: the count with the text alone).
const SAMPLE_TEXT: &str = "hello";

/// What the parts of one request cost in prompt tokens, and where that
/// count comes from.
#[derive(Debug, Clone, PartialEq)]
pub struct PartTokens {
    /// Prompt tokens the parts of one request add.
    pub tokens: u64,
    /// The parts of a request, counted: `1 image, 2 audio clips`.
    pub parts: String,
    /// What the user may change to make them cost less.
    pub change: String,
    /// The server counted them (else: estimated).
    pub by_server: bool,
}

impl PartTokens {
    /// Where the count comes from, as the messages say it.
    pub fn source(&self) -> String {
        if self.by_server {
            "counted by the server's /tokenize".into()
        } else {
            let c = default_cost();
            format!(
                "estimated at the built-in simulator's charges of {} tokens an image, {} a second of audio, {} a frame of video: the server's /tokenize did not count chat messages with them",
                c.image, c.audio_per_s, c.frame
            )
        }
    }
}

/// The estimate's charges: the built-in simulator's defaults (an image of
/// LLaVA-1.5, a second of Qwen2-Audio, a frame of LLaVA-OneVision).
fn default_cost() -> crate::sim::MediaCost {
    crate::sim::ModelParams::preset(crate::sim::Preset::Realistic).media_cost()
}

/// What to change to send fewer parts' tokens, for the kinds a request
/// carries.
pub fn change_for(layout: &[(MediaKind, u32)]) -> String {
    let said: Vec<&str> = layout
        .iter()
        .map(|(kind, _)| match kind {
            MediaKind::Image => "fewer or smaller images (images=, image_size=)",
            MediaKind::Audio => "fewer or shorter audio clips (audio=, audio_seconds=)",
            MediaKind::Video => "fewer or shorter videos (video=, video_seconds=, video_fps=)",
        })
        .collect();
    said.join(", ")
}

/// The parts' tokens: the count of the messages with them less the count
/// of the same messages with their text alone; None unless both counts
/// came and the parts added tokens (a server that reads no `messages`
/// may count an empty prompt for both).
pub fn server_difference(with: Option<usize>, without: Option<usize>) -> Option<u64> {
    match (with, without) {
        (Some(w), Some(t)) if w > t => Some((w - t) as u64),
        _ => None,
    }
}

/// Chat `messages` with their text parts only.
fn text_only(messages: &Value) -> Value {
    let mut m = messages.clone();
    for msg in m.as_array_mut().into_iter().flatten() {
        if let Some(parts) = msg.get_mut("content").and_then(Value::as_array_mut) {
            parts.retain(|p| p.get("type").and_then(Value::as_str) == Some("text"));
        }
    }
    m
}

/// One request's chat body with its parts drawn (request 0's), as sent.
fn sample_body(model: &str, images: &Attach) -> Option<Value> {
    let item = crate::data::PromptItem {
        text: SAMPLE_TEXT.into(),
        prompt_tokens: 1,
        output_tokens: None,
        shared_prefix_bytes: 0,
        respell: None,
        images: Vec::new(),
    };
    let prompts = crate::data::build_prompts_with(
        vec![item],
        crate::types::Api::Chat,
        model,
        None,
        Some(images),
        None,
    )
    .ok()?;
    let (sent, _) = prompts.first()?.filled();
    serde_json::from_slice(&sent.body).ok()
}

/// What the parts of a request cost: the server's count when its
/// `/tokenize` counts chat messages, else the estimate; None when the
/// requests carry no parts or their body cannot be drawn.
pub async fn part_tokens(client: &Client, model: &str, images: &Attach) -> Option<PartTokens> {
    let layout = images.layout();
    if layout.is_empty() {
        return None;
    }
    let (m, im) = (model.to_string(), images.clone());
    let body = tokio::task::spawn_blocking(move || sample_body(&m, &im))
        .await
        .ok()??;
    let messages = body.get("messages")?;
    let with = client
        .tokenize_messages(model, messages)
        .await
        .ok()
        .flatten();
    let without = match with {
        Some(_) => client
            .tokenize_messages(model, &text_only(messages))
            .await
            .ok()
            .flatten(),
        None => None,
    };
    let server = server_difference(with, without);
    let tokens = match server {
        Some(n) => n,
        None => crate::sim::parts_tokens(&body, &default_cost()).ok()?,
    };
    Some(PartTokens {
        tokens,
        parts: images.counted(),
        change: change_for(&layout),
        by_server: server.is_some(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_parts_cost_what_the_server_counts_beyond_the_text() {
        assert_eq!(server_difference(Some(345), Some(17)), Some(328));
        // No answer, or the same count with and without: not counted.
        assert_eq!(server_difference(None, Some(17)), None);
        assert_eq!(server_difference(Some(345), None), None);
        assert_eq!(server_difference(Some(0), Some(0)), None);
        assert_eq!(server_difference(Some(10), Some(17)), None);
    }

    #[test]
    fn text_only_keeps_the_text_parts_of_each_message() {
        let m = serde_json::json!([{"role": "user", "content": [
            {"type": "text", "text": "hello"},
            {"type": "image_url", "image_url": {"url": "data:"}},
            {"type": "input_audio", "input_audio": {"data": "", "format": "wav"}}
        ]}, {"role": "system", "content": "plain"}]);
        let t = text_only(&m);
        assert_eq!(
            t,
            serde_json::json!([{"role": "user", "content": [{"type": "text", "text": "hello"}]},
                {"role": "system", "content": "plain"}])
        );
    }

    #[test]
    fn the_change_names_the_keys_of_the_parts_sent() {
        let c = change_for(&[(MediaKind::Image, 2), (MediaKind::Audio, 1)]);
        assert_eq!(
            c,
            "fewer or smaller images (images=, image_size=), fewer or shorter audio clips (audio=, audio_seconds=)"
        );
    }

    #[test]
    fn an_estimate_says_its_charges() {
        let p = PartTokens {
            tokens: 576,
            parts: "1 image".into(),
            change: String::new(),
            by_server: false,
        };
        assert!(p.source().contains("576 tokens an image"), "{}", p.source());
        assert!(PartTokens {
            by_server: true,
            ..p
        }
        .source()
        .contains("server's /tokenize"));
    }
}
