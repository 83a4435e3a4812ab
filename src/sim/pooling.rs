//! The simulator's pooling endpoints (`/v1/embeddings`, `/v1/rerank` and
//! `/rerank`, `/v1/score`), as vLLM serves a pooling model: each request's
//! inputs are read and counted, then wait their turn at one pooling engine
//! that runs one request at a time and takes `step + per_token × tokens`
//! (prefill only: nothing is generated). Its capacity in requests a second
//! is therefore `1 / (step + per_token × tokens a request)`.

use std::time::Duration;

use serde_json::{json, Value};
use tokio::time::Instant;

use super::schedule;
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

/// The pooling engine: one request at a time, in arrival order (tokio's
/// mutex is fair), on an absolute schedule as the decode batcher keeps its
/// steps (`sim::schedule`): a request whose turn came late (the runtime
/// woke the one before late, on a busy machine) starts when the one before
/// was due to end, so the engine holds its stated capacity. Seen before it
/// kept one: 10 ms + 100 µs a token, 8 inputs of 32 tokens (28.09 a
/// second) completed 24.56 a second with a CPU spinner on each core.
pub struct PoolEngine {
    cost: PoolCost,
    /// When the last request was due to end, and how long it took.
    last: tokio::sync::Mutex<Option<(Instant, Duration)>>,
}

impl PoolEngine {
    pub fn new(cost: PoolCost) -> Self {
        PoolEngine {
            cost,
            last: tokio::sync::Mutex::new(None),
        }
    }

    /// Serves a request of `tokens` input tokens to compute: returns when
    /// the engine has, after the requests that came before it.
    pub async fn serve(&self, tokens: u64) {
        let queued = Instant::now();
        let last = self.last.lock().await;
        let now = Instant::now();
        // Its turn: when the one before was due to end, or its arrival at
        // an engine that was free by then.
        let start = match *last {
            Some((due, took)) => schedule::next_start(due.max(queued), now, took),
            None => now,
        };
        let time = self.cost.time(tokens);
        let turn = Turn {
            last,
            end: start + time,
            time,
        };
        tokio::time::sleep_until(turn.end).await;
    }
}

/// A request's turn at the pooling engine: when it ends, or is dropped
/// (its client hung up, and the engine drops it as vLLM aborts it), the
/// engine is free from then.
struct Turn<'a> {
    last: tokio::sync::MutexGuard<'a, Option<(Instant, Duration)>>,
    end: Instant,
    time: Duration,
}

impl Drop for Turn<'_> {
    fn drop(&mut self) {
        *self.last = Some((self.end.min(Instant::now()), self.time));
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

    /// A runtime that wakes the engine late (a busy machine; here the
    /// clock moves 7 ms at a time, so each request ends up to 7 ms late)
    /// does not slow it down, as it does not the decode batcher
    /// (`batcher`'s `a_late_runtime_does_not_slow_the_model`); an engine
    /// idle since does not burst to make up the time it was idle.
    #[tokio::test(start_paused = true)]
    async fn a_late_runtime_does_not_slow_the_pooling_engine() {
        let engine = std::sync::Arc::new(PoolEngine::new(PoolCost {
            step: Duration::from_millis(10),
            per_token: Duration::from_micros(100),
        }));
        let late = tokio::spawn(async {
            loop {
                tokio::time::advance(Duration::from_millis(7)).await;
            }
        });
        let requests: Vec<_> = (0..20)
            .map(|_| {
                let e = engine.clone();
                tokio::spawn(async move {
                    e.serve(256).await;
                    Instant::now()
                })
            })
            .collect();
        let mut done = Vec::new();
        for r in requests {
            done.push(r.await.unwrap());
        }
        let (first, last) = (done[0], done[19]);
        // 19 requests of 35.6 ms after the first: 676.4 ms, each read up to
        // 7 ms late (each one late and its turn taken late: 931 ms).
        let took = last - first;
        assert!(took > Duration::from_micros(676_400 - 7_000), "{took:?}");
        assert!(took < Duration::from_micros(676_400 + 7_000), "{took:?}");
        // A second later, one request takes its whole time.
        tokio::time::sleep(Duration::from_secs(1)).await;
        let t1 = Instant::now();
        engine.serve(256).await;
        late.abort();
        assert!(
            t1.elapsed() >= Duration::from_micros(35_600),
            "{:?}",
            t1.elapsed()
        );
    }

    /// A request dropped in its turn (its client hung up) frees the engine
    /// from then: the next one takes its whole time, none of it made up
    /// from the dropped one's.
    #[tokio::test(start_paused = true)]
    async fn a_request_dropped_in_its_turn_frees_the_engine_from_then() {
        let engine = std::sync::Arc::new(PoolEngine::new(PoolCost {
            step: Duration::from_millis(10),
            per_token: Duration::ZERO,
        }));
        let (a, b, c) = (engine.clone(), engine.clone(), engine.clone());
        let first = tokio::spawn(async move { a.serve(0).await });
        tokio::task::yield_now().await;
        // Queued behind the first; dropped 5 ms into its turn.
        let dropped = tokio::spawn(async move {
            tokio::time::timeout(Duration::from_millis(15), b.serve(0)).await
        });
        tokio::task::yield_now().await;
        let next = tokio::spawn(async move {
            c.serve(0).await;
            Instant::now()
        });
        let t0 = Instant::now();
        first.await.unwrap();
        assert!(dropped.await.unwrap().is_err(), "dropped in its turn");
        let done = next.await.unwrap() - t0;
        assert_eq!(done, Duration::from_millis(25), "10 + 5 dropped + its 10");
    }
}
