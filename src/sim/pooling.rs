//! The simulator's pooling endpoints (`/v1/embeddings`, `/v1/rerank` and
//! `/rerank`, `/v1/score`), as vLLM serves a pooling model: each request's
//! inputs are read and counted, then wait their turn at one pooling engine
//! that runs one request at a time and takes `step + per_token × tokens`
//! (prefill only: nothing is generated). Its capacity in requests a second
//! is therefore `1 / (step + per_token × tokens a request)`.

use std::time::Duration;

use serde_json::{json, Value};

use crate::tokenizer;

/// Which pooling API a request came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Embeddings,
    Rerank,
    Score,
}

/// The cost of a pooling request.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PoolCost {
    /// Fixed per request (scheduling, the forward pass's launch).
    pub step: Duration,
    /// Per input token (the prefill).
    pub per_token: Duration,
}

impl Default for PoolCost {
    /// A small embedding model on one GPU: 2 ms a request, 20 µs a token
    /// (a batch of 8 inputs of 64 tokens: 12 ms, about 80 requests a second).
    fn default() -> Self {
        PoolCost {
            step: Duration::from_millis(2),
            per_token: Duration::from_micros(20),
        }
    }
}

impl PoolCost {
    /// How long the engine works on a request of `tokens` input tokens.
    pub fn time(&self, tokens: u64) -> Duration {
        self.step
            + self
                .per_token
                .saturating_mul(u32::try_from(tokens).unwrap_or(u32::MAX))
    }
}

/// A pooling request, read: its texts (the query first for rerank and
/// score) and their tokens.
#[derive(Debug, Clone, PartialEq)]
pub struct PoolRequest {
    /// Inputs scored or embedded (documents for rerank and score).
    pub inputs: usize,
    pub tokens: u64,
}

fn texts(v: Option<&Value>, what: &str) -> Result<Vec<String>, String> {
    match v {
        Some(Value::String(s)) => Ok(vec![s.clone()]),
        Some(Value::Array(items)) if !items.is_empty() => items
            .iter()
            .map(|x| match x {
                Value::String(s) => Ok(s.clone()),
                // Token ids count one a token; a document object its text.
                Value::Array(ids) => Ok("x ".repeat(ids.len())),
                Value::Object(o) => Ok(o
                    .get("text")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string()),
                _ => Err(format!("`{what}` holds an item that is not text")),
            })
            .collect(),
        _ => Err(format!("`{what}` is required (a string or a list of them)")),
    }
}

/// Reads a pooling request's body.
pub fn parse(kind: Kind, v: &Value) -> Result<PoolRequest, String> {
    let count = |t: &[String]| {
        t.iter()
            .map(|s| tokenizer::count_tokens(s) as u64)
            .sum::<u64>()
    };
    Ok(match kind {
        Kind::Embeddings => {
            let t = texts(v.get("input"), "input")?;
            PoolRequest {
                inputs: t.len(),
                tokens: count(&t),
            }
        }
        Kind::Rerank | Kind::Score => {
            let (q, d) = match kind {
                Kind::Rerank => ("query", "documents"),
                _ => ("text_1", "text_2"),
            };
            let query = texts(v.get(q), q)?;
            let docs = texts(v.get(d), d)?;
            // Each document is scored with the query beside it.
            PoolRequest {
                inputs: docs.len(),
                tokens: count(&docs) + count(&query) * docs.len() as u64,
            }
        }
    })
}

/// Each input's prompt as the engine sees it: an embedding input alone, a
/// document after the query it is scored with.
pub fn prompts(kind: Kind, v: &Value) -> Vec<String> {
    match kind {
        Kind::Embeddings => texts(v.get("input"), "input").unwrap_or_default(),
        Kind::Rerank | Kind::Score => {
            let (q, d) = match kind {
                Kind::Rerank => ("query", "documents"),
                _ => ("text_1", "text_2"),
            };
            let query = texts(v.get(q), q).unwrap_or_default().join(" ");
            texts(v.get(d), d)
                .unwrap_or_default()
                .into_iter()
                .map(|doc| format!("{query} {doc}"))
                .collect()
        }
    }
}

/// Prompt tokens of `prompts` the prefix cache holds (each input looked up
/// on its own, as vLLM makes each a request), then cached.
pub fn cached_tokens(cache: &mut super::batcher::PrefixCache, prompts: &[String]) -> u64 {
    prompts
        .iter()
        .map(|p| {
            let blocks =
                super::batcher::prompt_blocks(&json!({ "prompt": p }), &Default::default());
            cache.lookup_insert(&blocks, tokenizer::count_tokens(p) as u64)
        })
        .sum()
}

/// The answer vLLM gives, with made-up numbers: `dims`-long embeddings,
/// relevance scores in (0, 1) that fall with the document's index.
pub fn answer(kind: Kind, id: &str, model_json: &str, created: u64, r: &PoolRequest) -> String {
    let model: Value = serde_json::from_str(model_json).unwrap_or(Value::Null);
    let usage = json!({"prompt_tokens": r.tokens, "total_tokens": r.tokens});
    let score = |i: usize| 1.0 / (2.0 + i as f64);
    let v = match kind {
        Kind::Embeddings => json!({
            "id": id, "object": "list", "created": created, "model": model,
            "data": (0..r.inputs).map(|i| json!({
                "index": i, "object": "embedding",
                "embedding": (0..DIMS).map(|d| ((i * DIMS + d) % 7) as f64 / 7.0 - 0.5).collect::<Vec<_>>(),
            })).collect::<Vec<_>>(),
            "usage": usage,
        }),
        Kind::Rerank => json!({
            "id": id, "model": model, "usage": {"total_tokens": r.tokens},
            "results": (0..r.inputs).map(|i| json!({"index": i, "relevance_score": score(i)})).collect::<Vec<_>>(),
        }),
        Kind::Score => json!({
            "id": id, "object": "list", "created": created, "model": model,
            "data": (0..r.inputs).map(|i| json!({"index": i, "object": "score", "score": score(i)})).collect::<Vec<_>>(),
            "usage": usage,
        }),
    };
    v.to_string()
}

/// Length of the simulator's embeddings.
const DIMS: usize = 8;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_counted_and_answered_in_each_api_s_shape() {
        let e = parse(Kind::Embeddings, &json!({"input": ["hello world", "one"]})).unwrap();
        assert_eq!(
            e,
            PoolRequest {
                inputs: 2,
                tokens: 3
            }
        );
        let one = parse(Kind::Embeddings, &json!({"input": "a b c"})).unwrap();
        assert_eq!(one.inputs, 1);
        let r = parse(
            Kind::Rerank,
            &json!({"query": "q", "documents": ["a b", {"text": "c"}]}),
        )
        .unwrap();
        assert_eq!(
            r,
            PoolRequest {
                inputs: 2,
                tokens: 3 + 2
            }
        );
        let s = parse(Kind::Score, &json!({"text_1": "q", "text_2": ["a"]})).unwrap();
        assert_eq!(s.inputs, 1);
        assert!(parse(Kind::Rerank, &json!({"query": "q"}))
            .unwrap_err()
            .contains("documents"));
        assert!(parse(Kind::Embeddings, &json!({"input": [1]})).is_err());

        let a: Value =
            serde_json::from_str(&answer(Kind::Embeddings, "e-1", "\"m\"", 1, &e)).unwrap();
        assert_eq!(a["data"].as_array().unwrap().len(), 2);
        assert_eq!(a["data"][1]["embedding"].as_array().unwrap().len(), DIMS);
        assert_eq!(a["usage"]["prompt_tokens"], 3);
        assert_eq!(a["model"], "m");
        let a: Value = serde_json::from_str(&answer(Kind::Rerank, "r-1", "\"m\"", 1, &r)).unwrap();
        assert_eq!(a["results"][0]["relevance_score"], 0.5);
        let a: Value = serde_json::from_str(&answer(Kind::Score, "s-1", "\"m\"", 1, &s)).unwrap();
        assert_eq!(a["data"][0]["score"], 0.5);
        let c = PoolCost::default();
        assert_eq!(c.time(500), Duration::from_millis(12));

        // Each input is its own prompt to the prefix cache.
        let words = |tag: &str| format!("{tag} {}", "w ".repeat(40));
        let batch = json!({"input": [words("a"), words("b")]});
        let ps = prompts(Kind::Embeddings, &batch);
        assert_eq!(ps.len(), 2);
        let mut cache = super::super::batcher::PrefixCache::new(1 << 10);
        assert_eq!(cached_tokens(&mut cache, &ps), 0);
        assert_eq!(
            cached_tokens(&mut cache, &ps),
            2 * 32,
            "two whole blocks each"
        );
        let r = json!({"query": "q", "documents": ["a b", "c"]});
        assert_eq!(prompts(Kind::Rerank, &r), ["q a b", "q c"]);
    }
}
