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

use super::synthetic::Synthetic;
use super::{request_body, text_offset};
use crate::client::{Api, Prompt};
use crate::tokenizer::TokenCounter;

/// One conversation: each turn's request (the whole history so far), and
/// the wait between a turn's answer and the next turn.
#[derive(Debug, Clone)]
pub struct Conversation {
    pub turns: Vec<Prompt>,
    pub think: Duration,
}

/// Request bodies of all conversations at most (the history makes them
/// grow with the square of the turns); at least [`super::synthetic::MIN_SAMPLES`]
/// conversations are built.
pub const CONVERSATION_BUDGET_BYTES: usize = 64 << 20;

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
    api: Api,
    model: &str,
    extra: Option<&Map<String, Value>>,
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
    let reply = |n: u64, rng: &mut SmallRng| -> String {
        (0..n)
            .map(|_| pieces[rng.random_range(0..pieces.len())].as_str())
            .collect()
    };
    let think = crate::engine::strategy::seconds(spec.think_time);
    let mut out = Vec::new();
    let mut bytes = 0usize;
    for (c, head) in first.iter().enumerate() {
        if c >= super::synthetic::MIN_SAMPLES && bytes >= CONVERSATION_BUDGET_BYTES {
            break;
        }
        // The messages so far and their tokens.
        let mut texts: Vec<String> = Vec::with_capacity(turns * 2);
        let mut tokens = 0u64;
        let mut conv = Conversation {
            turns: Vec::with_capacity(turns),
            think,
        };
        for k in 0..turns {
            let item = if k == 0 {
                head
            } else {
                match later.get((c * (turns - 1) + k - 1) % later.len()) {
                    Some(it) => it,
                    None => break,
                }
            };
            if k > 0 {
                // The data's reply to the turn before, of its output length.
                let prev = conv.turns[k - 1].output_tokens.unwrap_or(spec.prompt.mean);
                texts.push(reply(prev, &mut rng));
                tokens += prev;
            }
            texts.push(item.text.clone());
            tokens += item.prompt_tokens;
            let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
            let body = request_body(api, model, &refs, item.output_tokens, extra)?;
            // A reused conversation is respelled where its first message
            // begins (after the shared prefix), the same in every turn, so
            // its turns still share their history with each other.
            let tag_at = text_offset(&body, api, &head.text, head.shared_prefix_bytes);
            bytes += body.len();
            conv.turns.push(Prompt {
                body: Bytes::from(body),
                prompt_tokens: tokens,
                output_tokens: item.output_tokens,
                tag_at,
                respell: head.respell.clone().filter(|_| tag_at.is_some()),
            });
        }
        out.push(conv);
    }
    Ok(out)
}

/// Turn `turn` of the run's `seq`-th conversation: conversations are used
/// in order across the run; once all have been sent, a reused one is made
/// new to the server (see [`super::for_request`]) the same way in each of
/// its turns.
pub fn turn_of(convs: &[Conversation], seq: u64, turn: usize) -> Option<Prompt> {
    let n = convs.len().max(1) as u64;
    let conv = convs.get((seq % n) as usize)?;
    let p = conv.turns.get(turn)?;
    Some(if seq < n {
        p.clone()
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
        let convs = synthetic(&spec, 1, Some(9), &Builtin, Api::Chat, "m", None).unwrap();
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
        // Completions: one text that grows.
        let convs = synthetic(&spec, 1, Some(9), &Builtin, Api::Completions, "m", None).unwrap();
        let text = |p: &Prompt| {
            let v: Value = serde_json::from_slice(&p.body).unwrap();
            v["prompt"].as_str().unwrap().to_string()
        };
        let (a, b) = (text(&convs[0].turns[0]), text(&convs[0].turns[1]));
        assert!(b.starts_with(&a));
        assert_eq!(crate::tokenizer::count_tokens(&b), 64);
    }
}
