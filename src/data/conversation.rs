//! Multi-turn conversations: each turn sends the history so far (the
//! earlier turns' messages and the data's replies to them) and its own
//! message, so the server sees growing prompts that share a prefix.
//!
//! `--data prompt_tokens=64,output_tokens=32,turns=4,think_time=1`: each
//! sample is a conversation of 4 turns; a turn's message and reply have the
//! spec's lengths; the next turn is sent `think_time` seconds after a
//! turn's answer. The replies in the history are the data's (text of the
//! reply's length), not the server's.

use std::time::Duration;

use anyhow::Result;
use bytes::Bytes;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde_json::{Map, Value};

use super::scripts::Script;
use super::synthetic::Synthetic;
use super::{image_slots, request_body, text_offset, with_image_parts};
use crate::client::{ImageSlot, Images, Prompt};
use crate::tokenizer::TokenCounter;
use crate::types::Api;

/// One conversation: each turn's request (the whole history so far), and
/// the wait between a turn's answer and the next turn.
#[derive(Debug, Clone)]
pub struct Conversation {
    pub turns: Vec<Prompt>,
    pub think: Duration,
    /// Tokens of the data's reply to each turn that has a next one (in
    /// the history of the turns after it).
    pub reply_tokens: Vec<u64>,
}

/// How each turn's request is built: the API, the model, the extra body
/// (tool definitions included), and what the turns carry beside text.
#[derive(Debug, Clone, Copy)]
pub struct Build<'a> {
    pub api: Api,
    pub model: &'a str,
    pub extra: Option<&'a Map<String, Value>>,
    /// `images=N`: in the conversation's first message, so every turn
    /// sends them again in its history, as a chat client does.
    pub images: Option<&'a super::images::Attach>,
    /// `tool_results=K`: K rounds (a call and its result) after each
    /// user message, before the answer to it.
    pub tools: Option<&'a super::tools::ToolSpec>,
    /// A file's conversation: the calls each turn gives, after its user
    /// message (`calls[k]` after the k-th).
    pub calls: Option<&'a [Vec<super::tool_file::Call>]>,
}

impl<'a> Build<'a> {
    /// Text alone.
    pub fn plain(api: Api, model: &'a str) -> Build<'a> {
        Build {
            api,
            model,
            extra: None,
            images: None,
            tools: None,
            calls: None,
        }
    }

    /// A turn's request body from its messages so far, with its images'
    /// places and its tool rounds; and where a reuse's tag goes (at
    /// `head`'s text, after `shared` bytes).
    fn body(
        &self,
        texts: &[&str],
        output: Option<u64>,
        head: &str,
        shared: usize,
    ) -> Result<(Vec<u8>, Option<usize>, Option<Images>)> {
        let mut body = request_body(self.api, self.model, texts, output, self.extra)?;
        if let Some(im) = self.images {
            body = with_image_parts(&body, &im.layout(), self.api)?;
        }
        if let Some(t) = self.tools {
            body = super::tools::with_history_each_turn(&body, t, self.api)?;
        }
        if let Some(calls) = self.calls {
            body = super::tools::with_calls(&body, self.api, calls)?;
        }
        let tag_at = text_offset(&body, self.api, head, shared);
        let slot = match self.api {
            Api::Messages => ImageSlot::Source,
            _ => ImageSlot::Url,
        };
        let images = self.images.map(|im| Images {
            at: image_slots(&body, slot),
            source: im.source.clone(),
            seq: 0,
            slot,
        });
        Ok((body, tag_at, images))
    }
}

/// A think time as a `Duration`: seconds from 0 to an hour (the parsers
/// bound it; anything else is zero).
fn think_duration(s: f64) -> Duration {
    if s.is_finite() && s > 0.0 {
        Duration::from_secs_f64(s.min(3600.0))
    } else {
        Duration::ZERO
    }
}

/// Request bodies of all conversations at most (the history makes them
/// grow with the square of the turns); at least [`super::synthetic::MIN_SAMPLES`]
/// conversations are built.
pub const CONVERSATION_BUDGET_BYTES: usize = 64 << 20;

/// Whether to build another conversation after `c` of them hold `bytes`:
/// at least [`super::synthetic::MIN_SAMPLES`] and up to the budget, but
/// never past twice the budget (conversations of a few large turns).
fn build_more(c: usize, bytes: usize) -> bool {
    bytes < CONVERSATION_BUDGET_BYTES
        || (c < super::synthetic::MIN_SAMPLES && bytes < 2 * CONVERSATION_BUDGET_BYTES)
}

/// One conversation's turn about to be built, against the bounds of what
/// is built before the run: its prompt (`prompt` tokens, history included)
/// within [`bounds::PROMPT_TOKENS`], the conversation's requests so far
/// (`all` tokens) within [`bounds::BUILT_TOKENS`]; `what` names the
/// conversation (a data file's line).
///
/// [`bounds::PROMPT_TOKENS`]: crate::bounds::PROMPT_TOKENS
/// [`bounds::BUILT_TOKENS`]: crate::bounds::BUILT_TOKENS
fn within_bounds(what: &dyn Fn() -> String, turn: usize, prompt: u64, all: u64) -> Result<()> {
    use crate::bounds::{BUILT_TOKENS, PROMPT_TOKENS};
    if prompt > PROMPT_TOKENS {
        anyhow::bail!(
            "{}: turn {turn} would send {prompt} prompt tokens, its history included, over the bound of {PROMPT_TOKENS} a request's prompt may have (bounds::PROMPT_TOKENS)",
            what()
        );
    }
    if all > BUILT_TOKENS {
        anyhow::bail!(
            "{}: its requests up to turn {turn} would hold {all} tokens together (each turn sends the history before it), over the bound of {BUILT_TOKENS} tokens built before the run (bounds::BUILT_TOKENS)",
            what()
        );
    }
    Ok(())
}

/// The synthetic spec of `--data`, when it asks for conversations
/// (`turns` above 1).
pub fn spec_of(data: &str) -> Option<Synthetic> {
    if !data.contains('=') || std::path::Path::new(data.trim()).exists() {
        return None;
    }
    Synthetic::parse(data).ok().filter(|s| s.turns > 1)
}

/// The conversations of a synthetic spec with `turns` > 1.
pub fn synthetic(
    spec: &Synthetic,
    seed: u64,
    run: Option<u64>,
    counter: &dyn TokenCounter,
    build: &Build,
) -> Result<Vec<Conversation>> {
    let turns = spec.turns.max(1);
    // First turns: the spec as it is (its shared prefix, its groups).
    let first = spec.generate_for_run(seed, run, counter)?;
    // Later turns' messages: the same lengths, no prefix.
    let later_spec = Synthetic {
        prefix_tokens: 0,
        prefix_groups: 1,
        samples: first.len().saturating_mul(turns - 1).max(1),
        ..spec.clone()
    };
    let later = later_spec.generate_for_run(seed ^ 0x7E57, run, counter)?;
    let pieces = counter.one_token_pieces();
    let mut rng = SmallRng::seed_from_u64(seed ^ 0xC0DE ^ run.unwrap_or(0));
    let mut out = Vec::new();
    let mut bytes = 0usize;
    for (c, head) in first.iter().enumerate() {
        if !build_more(c, bytes) {
            break;
        }
        let mut replies = Replies {
            pieces: &pieces,
            rng: &mut rng,
        };
        let mut turn_items = (0..turns).map_while(|k| match k {
            0 => Some(head),
            _ => later.get((c * (turns - 1) + k - 1) % later.len()),
        });
        let conv = SyntheticConversation {
            number: c + 1,
            head,
            think: think_duration(spec.think_time),
            reply_mean: spec.prompt.mean,
        };
        out.push(conv.build(&mut turn_items, turns, build, &mut replies, &mut bytes)?);
    }
    Ok(out)
}

/// One synthetic conversation: its number, its first turn (whose text a
/// reused conversation is respelled by), the think time between turns, and
/// the length of a reply whose turn gives none.
struct SyntheticConversation<'a> {
    number: usize,
    head: &'a super::PromptItem,
    think: Duration,
    reply_mean: u64,
}

impl SyntheticConversation<'_> {
    /// Every turn's body with the history so far (`bytes` counts what all
    /// have built).
    fn build(
        &self,
        items: &mut dyn Iterator<Item = &super::PromptItem>,
        turns: usize,
        build: &Build,
        replies: &mut Replies,
        bytes: &mut usize,
    ) -> Result<Conversation> {
        let head = self.head;
        let what = || format!("--data conversation {}", self.number);
        // The messages so far and their tokens; all turns' tokens.
        let mut texts: Vec<String> = Vec::with_capacity(turns * 2);
        let mut tokens = 0u64;
        let mut built = 0u64;
        let mut conv = Conversation {
            turns: Vec::with_capacity(turns),
            think: self.think,
            reply_tokens: Vec::new(),
        };
        for (k, item) in items.enumerate() {
            if k > 0 {
                // The data's reply to the turn before, of its output length.
                let prev = conv.turns[k - 1].output_tokens.unwrap_or(self.reply_mean);
                let next = tokens.saturating_add(prev);
                within_bounds(&what, k + 1, next, built.saturating_add(next))?;
                texts.push(replies.draw(prev));
                tokens += prev;
                conv.reply_tokens.push(prev);
            }
            tokens = tokens.saturating_add(item.prompt_tokens);
            built = built.saturating_add(tokens);
            within_bounds(&what, k + 1, tokens, built)?;
            texts.push(item.text.clone());
            let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
            // A reused conversation is respelled where its first message
            // begins (after the shared prefix), the same in every turn, so
            // its turns still share their history with each other.
            let (body, tag_at, images) = build.body(
                &refs,
                item.output_tokens,
                &head.text,
                head.shared_prefix_bytes,
            )?;
            *bytes += body.len();
            conv.turns.push(Prompt {
                body: Bytes::from(body),
                prompt_tokens: tokens,
                output_tokens: item.output_tokens,
                tag_at,
                respell: head.respell.clone().filter(|_| tag_at.is_some()),
                images,
                also_tag: None,
            });
        }
        Ok(conv)
    }
}

/// A turn's request with the replies in its history replaced by the
/// server's answers to the earlier turns as received (`received`: text and
/// output tokens, one per earlier turn), its prompt tokens adjusted. Chat
/// bodies only: None for anything else (the data's replies stay).
pub fn with_received(
    p: &Prompt,
    conv: &Conversation,
    received: &[(String, u64)],
) -> Option<Prompt> {
    let mut v: Value = serde_json::from_slice(&p.body).ok()?;
    let msgs = v.get_mut("messages")?.as_array_mut()?;
    // The replies: assistant messages of text (a tool round's call is not one).
    let mut replies = msgs.iter_mut().filter(|m| {
        m.get("role").and_then(Value::as_str) == Some("assistant")
            && m.get("content").is_some_and(Value::is_string)
    });
    for (text, _) in received {
        let m = replies.next()?.as_object_mut()?;
        m.insert("content".into(), Value::String(text.clone()));
    }
    let data: u64 = conv.reply_tokens.iter().take(received.len()).sum();
    let got: u64 = received.iter().map(|r| r.1).sum();
    let body = serde_json::to_vec(&v).ok()?;
    // The images' places, in the body as rewritten.
    let images = p.images.clone().map(|mut im| {
        im.at = image_slots(&body, im.slot);
        im
    });
    Some(Prompt {
        body: Bytes::from(body),
        prompt_tokens: (p.prompt_tokens + got).saturating_sub(data),
        images,
        ..p.clone()
    })
}

/// Turn `turn` of the run's `seq`-th conversation: conversations are used
/// in order across the run; once all have been sent, a reused one is made
/// new to the server (see [`super::for_request`]) the same way in each of
/// its turns.
pub fn turn_of(convs: &[Conversation], seq: u64, turn: usize) -> Option<Prompt> {
    let n = convs.len().max(1) as u64;
    let conv = convs.get((seq % n) as usize)?;
    let p = conv.turns.get(turn)?;
    // Its images are drawn for the conversation: the same in every turn.
    Some(if seq < n {
        p.clone().for_seq(seq)
    } else {
        super::for_request(std::slice::from_ref(p), seq)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tokenizer::Builtin;

    fn messages(p: &Prompt) -> Vec<(String, String)> {
        let v: Value = serde_json::from_slice(&p.body).unwrap();
        v["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| {
                (
                    m["role"].as_str().unwrap().to_string(),
                    m["content"].as_str().unwrap().to_string(),
                )
            })
            .collect()
    }

    #[test]
    fn each_turn_sends_the_history_so_far() {
        let spec = Synthetic::parse(
            "prompt_tokens=20,output_tokens=8,turns=3,think_time=1.5,samples=20,prefix_tokens=16",
        )
        .unwrap();
        let convs = synthetic(&spec, 1, Some(9), &Builtin, &Build::plain(Api::Chat, "m")).unwrap();
        assert_eq!(convs.len(), 20);
        let c = &convs[3];
        assert_eq!(c.think, Duration::from_millis(1500));
        assert_eq!(c.turns.len(), 3);
        // Turn k: k + 1 user messages and k replies; 36 + 28 + 28 tokens.
        let tokens: Vec<u64> = c.turns.iter().map(|t| t.prompt_tokens).collect();
        assert_eq!(tokens, [36, 64, 92]);
        let m: Vec<Vec<(String, String)>> = c.turns.iter().map(messages).collect();
        assert_eq!(m[0].len(), 1);
        assert_eq!(m[2].len(), 5);
        assert_eq!(m[2][..3], m[1][..], "a turn's history is the turn before");
        assert_eq!(m[1][..1], m[0][..]);
        let roles: Vec<&str> = m[2].iter().map(|x| x.0.as_str()).collect();
        assert_eq!(roles, ["user", "assistant", "user", "assistant", "user"]);
        for (t, turn) in c.turns.iter().zip(&m) {
            let counted: usize = turn
                .iter()
                .map(|x| crate::tokenizer::count_tokens(&x.1))
                .sum();
            assert_eq!(counted as u64, t.prompt_tokens);
            assert_eq!(t.output_tokens, Some(8));
        }
        // Conversations differ from their first message on.
        assert_ne!(messages(&convs[4].turns[0]), m[0]);
        // A reused conversation: new to the server, the same in each turn.
        let again: Vec<Vec<(String, String)>> = (0..3)
            .map(|k| messages(&turn_of(&convs, 23, k).unwrap()))
            .collect();
        assert_ne!(again[0][0], m[0][0]);
        assert_eq!(again[2][..3], again[1][..]);
        assert_eq!(
            turn_of(&convs, 23, 2).unwrap().prompt_tokens,
            c.turns[2].prompt_tokens
        );
        assert!(turn_of(&convs, 3, 3).is_none());
        // The server's replies as received take the data's place.
        assert_eq!(c.reply_tokens, [8, 8]);
        let got = vec![(" yes indeed".to_string(), 2), (" no".to_string(), 1)];
        let p = with_received(&c.turns[2], c, &got).unwrap();
        assert_eq!(p.prompt_tokens, 92 - 16 + 3);
        let r = messages(&p);
        assert_eq!(r[1].1, " yes indeed");
        assert_eq!(r[3].1, " no");
        assert_eq!(r[0], m[2][0]);
        assert_eq!(r[4], m[2][4]);
        // Completions: one text that grows.
        let convs = synthetic(
            &spec,
            1,
            Some(9),
            &Builtin,
            &Build::plain(Api::Completions, "m"),
        )
        .unwrap();
        let text = |p: &Prompt| {
            let v: Value = serde_json::from_slice(&p.body).unwrap();
            v["prompt"].as_str().unwrap().to_string()
        };
        let (a, b) = (text(&convs[0].turns[0]), text(&convs[0].turns[1]));
        assert!(b.starts_with(&a));
        assert_eq!(crate::tokenizer::count_tokens(&b), 64);
    }
}

#[cfg(test)]
mod parts_tests {
    use super::*;
    use crate::tokenizer::Builtin;

    /// Images go in a conversation's first message, so every turn sends
    /// them (the same ones: drawn for the conversation); tool rounds follow
    /// each user message; the server's replies replace only the replies.
    #[test]
    fn turns_carry_the_first_message_s_images_and_each_turn_s_tool_rounds() {
        let data = "prompt_tokens=8,output_tokens=4,turns=3,samples=4,images=2,image_size=8x8,tools=2,tool_results=1,tool_result_tokens=3";
        let spec = Synthetic::parse(data).unwrap();
        let im =
            super::super::images::attach(&super::super::images::spec_of(data).unwrap().unwrap(), 1)
                .unwrap();
        let tools = super::super::tools::spec_of(data).unwrap().unwrap();
        let build = Build {
            images: Some(&im),
            tools: Some(&tools),
            ..Build::plain(Api::Chat, "m")
        };
        let convs = synthetic(&spec, 1, Some(3), &Builtin, &build).unwrap();
        let last = &convs[1].turns[2];
        let v: Value = serde_json::from_slice(&last.body).unwrap();
        let msgs = v["messages"].as_array().unwrap();
        let roles: Vec<&str> = msgs.iter().map(|m| m["role"].as_str().unwrap()).collect();
        assert_eq!(
            roles,
            [
                "user",
                "assistant",
                "tool",
                "assistant",
                "user",
                "assistant",
                "tool",
                "assistant",
                "user",
                "assistant",
                "tool"
            ]
        );
        assert_eq!(
            msgs[0]["content"].as_array().unwrap().len(),
            3,
            "text and 2 images"
        );
        assert!(msgs[4]["content"].is_string(), "later messages are text");
        // Each turn's messages begin with the turn before's, and its reply.
        let msgs_of = |k: usize| -> Vec<Value> {
            let v: Value = serde_json::from_slice(&convs[1].turns[k].body).unwrap();
            v["messages"].as_array().unwrap().clone()
        };
        for k in 1..3 {
            let (a, b) = (msgs_of(k - 1), msgs_of(k));
            assert_eq!(b[..a.len()], a[..], "turn {k}");
            assert_eq!(b.len(), a.len() + 4, "reply, user, call, result");
        }
        // The same images in every turn of a conversation, others in the next.
        let url = |seq: u64, k: usize| {
            let (sent, carried) = turn_of(&convs, seq, k).unwrap().filled();
            let n = carried.images;
            assert_eq!(n, 2);
            let v: Value = serde_json::from_slice(&sent.body).unwrap();
            v["messages"][0]["content"][1]["image_url"]["url"]
                .as_str()
                .unwrap()
                .to_string()
        };
        assert!(url(1, 0).starts_with("data:image/png;base64,"));
        assert_eq!(url(1, 0), url(1, 2));
        assert_ne!(url(1, 0), url(2, 0));
        assert_eq!(url(5, 0), url(5, 1), "a reused conversation too");
        // The server's answers replace the replies, not the tool calls.
        let got = vec![("first".to_string(), 1), ("second".to_string(), 1)];
        let p = with_received(last, &convs[1], &got).unwrap();
        let v: Value = serde_json::from_slice(&p.body).unwrap();
        assert_eq!(v["messages"][3]["content"], "first");
        assert_eq!(v["messages"][7]["content"], "second");
        assert!(v["messages"][1]["tool_calls"].is_array());
        let (sent, carried) = p.filled();
        let n = carried.images;
        assert_eq!(n, 2);
        let v: Value = serde_json::from_slice(&sent.body).unwrap();
        assert!(v["messages"][0]["content"][2]["image_url"]["url"]
            .as_str()
            .unwrap()
            .starts_with("data:image/png"));
    }
}

/// Reply length in the history when the data gives neither a reply nor an output length.
const DEFAULT_REPLY_TOKENS: u64 = 128;

/// Request bodies for conversations a file gave: each turn sends the
/// messages so far and the data's replies (text of the turn's output
/// length, or of [`DEFAULT_REPLY_TOKENS`], where the data has none).
pub fn from_scripts(
    scripts: &[Script],
    seed: u64,
    counter: &dyn TokenCounter,
    build: &Build,
) -> Result<Vec<Conversation>> {
    let pieces = counter.one_token_pieces();
    let mut rng = SmallRng::seed_from_u64(seed ^ 0xF11E);
    let mut out = Vec::with_capacity(scripts.len());
    let mut bytes = 0usize;
    for (c, s) in scripts.iter().enumerate() {
        if !build_more(c, bytes) {
            break;
        }
        let (extra, images) = script_parts(s, build)?;
        let build = Build {
            extra: extra.as_ref().or(build.extra),
            images: images.as_ref().or(build.images),
            calls: Some(&s.calls),
            ..*build
        };
        let mut replies = Replies {
            pieces: &pieces,
            rng: &mut rng,
        };
        out.push(script_conversation(
            s,
            &build,
            counter,
            &mut replies,
            &mut bytes,
        )?);
    }
    Ok(out)
}

/// A file's row's own body keys (its tools) and images.
type RowParts = (Option<Map<String, Value>>, Option<super::images::Attach>);

/// The row's own tools (with --extra-body's keys over them) and images;
/// an error when the API takes no such parts.
fn script_parts(s: &Script, build: &Build) -> Result<RowParts> {
    let parts = !s.images.is_empty() || s.tools.is_some() || s.calls.iter().any(|c| !c.is_empty());
    if parts && !super::takes_parts(build.api) {
        anyhow::bail!(
            "{}: its images, tools and tool calls go in chat, Messages or Responses requests: use --api chat, messages or responses (not {})",
            s.source,
            build.api
        );
    }
    let extra = s.tools.clone().map(|defs| {
        super::tools::with_definitions(
            &super::tools::ToolSpec::of_file(defs),
            build.api,
            build.extra,
        )
    });
    let images = (!s.images.is_empty()).then(|| super::images::Attach {
        count: s.images.len() as u32,
        bytes_per_request: s.images.iter().map(|u| u.len() as f64).sum(),
        description: String::new(),
        source: std::sync::Arc::new(super::image_column::Listed(s.images.clone().into())),
        clips: Vec::new(),
    });
    Ok((extra, images))
}

/// Where replies the data does not give are drawn from: one-token pieces.
struct Replies<'a> {
    pieces: &'a [String],
    rng: &'a mut SmallRng,
}

impl Replies<'_> {
    /// A reply of `n` pieces.
    fn draw(&mut self, n: u64) -> String {
        (0..n)
            .map(|_| self.pieces[self.rng.random_range(0..self.pieces.len())].as_str())
            .collect()
    }
}

/// One conversation of a file: every turn's body with the history so far
/// (`bytes` counts what all have built).
fn script_conversation(
    s: &Script,
    build: &Build,
    counter: &dyn TokenCounter,
    replies: &mut Replies,
    bytes: &mut usize,
) -> Result<Conversation> {
    let what = || s.source.clone();
    let mut texts: Vec<String> = Vec::new();
    let mut tokens = 0u64;
    let mut built = 0u64;
    let mut conv = Conversation {
        turns: Vec::with_capacity(s.users.len()),
        think: think_duration(s.think_s),
        reply_tokens: Vec::new(),
    };
    for (k, user) in s.users.iter().enumerate() {
        if k > 0 {
            let reply = match &s.replies[k - 1] {
                Some(r) => r.clone(),
                None if replies.pieces.is_empty() => String::new(),
                None => {
                    // A reply of the length the file asks for, built
                    // only within the bounds.
                    let n = s.output_tokens[k - 1].unwrap_or(DEFAULT_REPLY_TOKENS);
                    let next = tokens.saturating_add(n);
                    within_bounds(&what, k + 1, next, built.saturating_add(next))?;
                    replies.draw(n)
                }
            };
            let n = counter.count(&reply) as u64;
            tokens = tokens.saturating_add(n);
            conv.reply_tokens.push(n);
            texts.push(reply);
        }
        tokens = tokens.saturating_add(counter.count(user) as u64);
        built = built.saturating_add(tokens);
        within_bounds(&what, k + 1, tokens, built)?;
        texts.push(user.clone());
        // A turn asks for its own output length, else the reply's.
        let output = s.output_tokens[k].or_else(|| {
            s.replies[k]
                .as_ref()
                .map(|r| (counter.count(r) as u64).max(1))
        });
        let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
        let (body, tag_at, images) = build.body(&refs, output, &s.users[0], 0)?;
        *bytes += body.len();
        conv.turns.push(Prompt {
            body: Bytes::from(body),
            prompt_tokens: tokens,
            output_tokens: output,
            tag_at,
            respell: None,
            images,
            also_tag: None,
        });
    }
    Ok(conv)
}

#[cfg(test)]
mod file_tests {
    use super::*;
    use crate::data::scripts::scripts_from_file;
    use crate::tokenizer::Builtin;

    fn write(name: &str, text: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("llmsweep-conv-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        p
    }

    #[test]
    fn jsonl_and_sharegpt_conversations_and_their_errors() {
        let p = write(
            "c.jsonl",
            "{\"turns\": [\"hello there\", \"and then what\"], \"think_time\": 2}\n\
             {\"turns\": [{\"user\": \"one two\", \"assistant\": \"three four five\"}, {\"user\": \"six\", \"output_tokens\": 7}]}\n",
        );
        let s = scripts_from_file(&p, false).unwrap().unwrap();
        assert_eq!(s.len(), 2);
        assert_eq!(s[0].think_s, 2.0);
        assert_eq!(s[1].replies[0].as_deref(), Some("three four five"));
        let convs = from_scripts(&s, 1, &Builtin, &Build::plain(Api::Chat, "m")).unwrap();
        let t = &convs[1].turns;
        // Turn 2: "one two" + "three four five" + "six".
        assert_eq!(t[1].prompt_tokens, 6);
        assert_eq!(t[0].output_tokens, Some(3), "the reply's length");
        assert_eq!(t[1].output_tokens, Some(7));
        let v: Value = serde_json::from_slice(&t[1].body).unwrap();
        assert_eq!(v["messages"][1]["content"], "three four five");
        assert_eq!(v["messages"][2]["content"], "six");
        // No reply given: the history holds 128 tokens of stand-in.
        assert_eq!(convs[0].turns[1].prompt_tokens, 2 + 128 + 3);
        assert_eq!(convs[0].think, Duration::from_secs(2));
        // Rows of prompts are not conversations.
        let p = write("p.jsonl", "{\"prompt\": \"hi\"}\n");
        assert!(scripts_from_file(&p, false).unwrap().is_none());
        for (text, want) in [
            (
                "{\"turns\": [\"a\"]}\n{\"prompt\": \"b\"}\n",
                "line 2, field `turns`: missing",
            ),
            ("{\"turns\": []}\n", "line 1, field `turns`: empty"),
            (
                "{\"turns\": [{\"assistant\": \"x\"}]}\n",
                "line 1, field `turns[0].user`: missing",
            ),
            (
                "{\"turns\": [{\"user\": \"x\", \"output_tokens\": 0}]}\n",
                "field `turns[0].output_tokens`",
            ),
            ("{\"turns\": [3]}\n", "field `turns[0]`"),
            (
                "{\"turns\": [\"a\"], \"think_time\": -1}\n",
                "field `think_time`",
            ),
            ("{\"turns\": [\"a\"]}\nnot json\n", "line 2: not JSON"),
        ] {
            let p = write("bad.jsonl", text);
            let e = format!("{:#}", scripts_from_file(&p, false).unwrap_err());
            assert!(e.contains("bad.jsonl") && e.contains(want), "{text:?}: {e}");
        }
        // ShareGPT: every human turn, the assistant's answer as the reply.
        let p = write(
            "s.json",
            r#"[{"conversations": [{"from": "system", "value": "be brief"}, {"from": "human", "value": "q one"}, {"from": "gpt", "value": "a one here"}, {"from": "human", "value": "q two"}, {"from": "gpt", "value": "a two"}]}]"#,
        );
        assert!(
            scripts_from_file(&p, false).unwrap().is_none(),
            "only with --multi-turn"
        );
        let s = scripts_from_file(&p, true).unwrap().unwrap();
        assert_eq!(s[0].users, ["q one", "q two"]);
        let convs = from_scripts(&s, 1, &Builtin, &Build::plain(Api::Chat, "m")).unwrap();
        assert_eq!(convs[0].turns[1].prompt_tokens, 2 + 3 + 2);
        assert_eq!(convs[0].turns[1].output_tokens, Some(2));
        let p = write("bad.json", r#"[{"conversations": [{"from": "human"}]}]"#);
        let e = format!("{:#}", scripts_from_file(&p, true).unwrap_err());
        assert!(
            e.contains("bad.json, row 1, field `conversations[0].value`"),
            "{e}"
        );
    }

    /// A file's conversation brings its own tools, images and calls: the
    /// definitions in every turn, the row's images in its first message,
    /// each turn's calls after its user message; faults name line and key.
    #[test]
    fn a_file_s_conversations_carry_their_tools_images_and_calls() {
        let dir = std::env::temp_dir().join(format!("llmsweep-convparts-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("a.png"), super::super::images::png(4, 4, 1)).unwrap();
        let row = r#"{"tools": [{"type": "function", "function": {"name": "weather", "parameters": {"type": "object"}}}], "images": ["a.png"], "turns": [{"user": "rain?", "tool_calls": [{"name": "weather", "arguments": {"city": "Oslo"}, "output": "rain, 9 C"}], "assistant": "Yes."}, "and tomorrow?"]}"#;
        let p = dir.join("agent.jsonl");
        std::fs::write(&p, format!("{row}\n{{\"turns\": [\"plain\"]}}\n")).unwrap();
        let s = scripts_from_file(&p, false).unwrap().unwrap();
        assert_eq!(s[0].calls[0].len(), 1);
        assert!(s[1].tools.is_none() && s[1].images.is_empty());
        let convs = from_scripts(&s, 1, &Builtin, &Build::plain(Api::Chat, "m")).unwrap();
        let (sent, carried) = turn_of(&convs, 0, 1).unwrap().filled();
        let n = carried.images;
        assert_eq!(n, 1);
        let v: Value = serde_json::from_slice(&sent.body).unwrap();
        assert_eq!(v["tools"][0]["function"]["name"], "weather");
        assert_eq!(v["tool_choice"], "auto");
        let msgs = v["messages"].as_array().unwrap();
        let roles: Vec<&str> = msgs.iter().map(|m| m["role"].as_str().unwrap()).collect();
        assert_eq!(roles, ["user", "assistant", "tool", "assistant", "user"]);
        assert!(msgs[0]["content"][1]["image_url"]["url"]
            .as_str()
            .unwrap()
            .starts_with("data:image/png;base64,"));
        assert_eq!(
            msgs[1]["tool_calls"][0]["function"]["arguments"],
            r#"{"city":"Oslo"}"#
        );
        assert_eq!(msgs[2]["content"], "rain, 9 C");
        assert_eq!(msgs[3]["content"], "Yes.");
        // The plain conversation carries none of them.
        let v: Value = serde_json::from_slice(&convs[1].turns[0].body).unwrap();
        assert!(v.get("tools").is_none() && convs[1].turns[0].images.is_none());
        // A text-only API refuses them, naming the line.
        let e = from_scripts(&s, 1, &Builtin, &Build::plain(Api::Completions, "m")).unwrap_err();
        assert!(
            e.to_string()
                .contains("agent.jsonl, line 1: its images, tools and tool calls go in chat"),
            "{e}"
        );
        for (bad, says) in [
            (row.replace(r#""name": "weather", "arguments""#, r#""name": "rain", "arguments""#), "line 1, field `turns[0].tool_calls[0].name`: \"rain\" is not one of the conversation's tools"),
            (row.replace("a.png", "gone.png"), "line 1, key `images[0]`: cannot read gone.png"),
            (row.replace(r#""type": "function", "function""#, r#""type": "tool", "function""#), "line 1, field `tools`: tool 0, key `type`"),
        ] {
            std::fs::write(&p, format!("{bad}\n")).unwrap();
            let e = format!("{:#}", scripts_from_file(&p, false).unwrap_err());
            assert!(e.contains("agent.jsonl") && e.contains(says), "{e}");
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A file's turn asking for a trillion-token reply had it built as
    /// the next turn's history; a row of 2,000 turns built 2,000 histories.
    /// Both are refused before they are built, naming the line and bound.
    #[test]
    fn a_file_s_histories_are_built_within_their_bounds() {
        let p = write(
            "huge.jsonl",
            "{\"turns\": [\"a b\"]}\n{\"turns\": [{\"user\": \"hi\", \"output_tokens\": 1000000000000}, \"and\"]}\n",
        );
        let s = scripts_from_file(&p, false).unwrap().unwrap();
        let e = format!(
            "{:#}",
            from_scripts(&s, 1, &Builtin, &Build::plain(Api::Chat, "m")).unwrap_err()
        );
        assert!(
            e.contains("huge.jsonl, line 2: turn 2 would send 1000000000001 prompt tokens")
                && e.contains("bounds::PROMPT_TOKENS"),
            "{e}"
        );
        let many: Vec<String> = (0..2000)
            .map(|_| "\"one two three four\"".to_string())
            .collect();
        let p = write(
            "long.jsonl",
            &format!("{{\"turns\": [{}]}}\n", many.join(",")),
        );
        let s = scripts_from_file(&p, false).unwrap().unwrap();
        let e = format!(
            "{:#}",
            from_scripts(&s, 1, &Builtin, &Build::plain(Api::Chat, "m")).unwrap_err()
        );
        assert!(
            e.contains("long.jsonl, line 1: its requests up to turn")
                && e.contains("bounds::BUILT_TOKENS"),
            "{e}"
        );
    }

    /// Synthetic conversations whose drawn replies run past the bound stop
    /// there with the bound named (the spec's means were within it).
    #[test]
    fn drawn_replies_past_the_bound_are_refused_before_they_are_built() {
        let spec = Synthetic::parse(
            "prompt_tokens=8,output_tokens=200000,output_tokens_dist=uniform,output_tokens_max=1000000,turns=5,samples=2",
        )
        .unwrap();
        let e = format!(
            "{:#}",
            synthetic(&spec, 1, None, &Builtin, &Build::plain(Api::Chat, "m")).unwrap_err()
        );
        assert!(
            e.contains("--data conversation 1: turn") && e.contains("bounds::"),
            "{e}"
        );
    }
}
