//! Prompt sources. Every request body is built once, before the run, so the
//! request path only clones a `Bytes`.

use anyhow::{bail, Context as _, Result};
use bytes::Bytes;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use rand_distr::{Distribution, Normal};
use serde_json::{json, Map, Value};

use crate::client::{Api, Prompt};
use crate::tokenizer;

/// One prompt before it becomes a request body.
#[derive(Debug, Clone, PartialEq)]
pub struct PromptItem {
    pub text: String,
    pub prompt_tokens: u64,
    /// Output tokens to ask for (`max_tokens` + `ignore_eos`); None lets the server decide.
    pub output_tokens: Option<u64>,
}

/// `--data prompt_tokens=256,output_tokens=128[,prompt_tokens_stdev=..,samples=..]`.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Synthetic {
    pub prompt_tokens: u64,
    pub prompt_tokens_stdev: f64,
    pub prompt_tokens_min: u64,
    pub prompt_tokens_max: u64,
    pub output_tokens: Option<u64>,
    pub output_tokens_stdev: f64,
    pub output_tokens_min: u64,
    pub output_tokens_max: u64,
    pub samples: usize,
}

impl Default for Synthetic {
    fn default() -> Self {
        Synthetic {
            prompt_tokens: 256,
            prompt_tokens_stdev: 0.0,
            prompt_tokens_min: 1,
            prompt_tokens_max: u64::MAX,
            output_tokens: Some(128),
            output_tokens_stdev: 0.0,
            output_tokens_min: 1,
            output_tokens_max: u64::MAX,
            samples: 1000,
        }
    }
}

impl Synthetic {
    pub fn parse(spec: &str) -> Result<Synthetic> {
        let mut s = Synthetic::default();
        for part in spec.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (k, v) = part
                .split_once('=')
                .with_context(|| format!("--data: {part:?} should look like prompt_tokens=256"))?;
            let (k, v) = (k.trim(), v.trim());
            let num = || -> Result<f64> {
                let x: f64 = v
                    .parse()
                    .with_context(|| format!("--data {k}: {v:?} is not a number"))?;
                if !(x.is_finite() && x >= 0.0) {
                    bail!("--data {k}: {v} must be a non-negative number");
                }
                Ok(x)
            };
            let int = || -> Result<u64> { Ok(num()?.round() as u64) };
            match k {
                "prompt_tokens" => s.prompt_tokens = int()?,
                "prompt_tokens_stdev" => s.prompt_tokens_stdev = num()?,
                "prompt_tokens_min" => s.prompt_tokens_min = int()?,
                "prompt_tokens_max" => s.prompt_tokens_max = int()?,
                "output_tokens" => {
                    s.output_tokens = if v == "auto" || v == "none" { None } else { Some(int()?) }
                }
                "output_tokens_stdev" => s.output_tokens_stdev = num()?,
                "output_tokens_min" => s.output_tokens_min = int()?,
                "output_tokens_max" => s.output_tokens_max = int()?,
                "samples" => s.samples = int()? as usize,
                other => bail!(
                    "--data: unknown key {other:?} (known: prompt_tokens, output_tokens, their _stdev/_min/_max, samples)"
                ),
            }
        }
        if s.prompt_tokens == 0 {
            bail!("--data prompt_tokens must be at least 1");
        }
        if s.output_tokens == Some(0) {
            bail!("--data output_tokens must be at least 1");
        }
        if s.samples == 0 {
            bail!("--data samples must be at least 1");
        }
        Ok(s)
    }

    /// Generates `samples` prompts of exact built-in token length, seeded.
    pub fn generate(&self, seed: u64) -> Vec<PromptItem> {
        let mut rng = SmallRng::seed_from_u64(seed ^ 0xDA7A);
        let draw = |rng: &mut SmallRng, mean: u64, sd: f64, lo: u64, hi: u64| -> u64 {
            let v = if sd > 0.0 {
                Normal::new(mean as f64, sd)
                    .map(|d| d.sample(rng).round().max(1.0) as u64)
                    .unwrap_or(mean)
            } else {
                mean
            };
            v.clamp(lo.max(1), hi.max(lo.max(1)))
        };
        (0..self.samples)
            .map(|_| {
                let n = draw(
                    &mut rng,
                    self.prompt_tokens,
                    self.prompt_tokens_stdev,
                    self.prompt_tokens_min,
                    self.prompt_tokens_max,
                );
                let out = self.output_tokens.map(|o| {
                    draw(
                        &mut rng,
                        o,
                        self.output_tokens_stdev,
                        self.output_tokens_min,
                        self.output_tokens_max,
                    )
                });
                let mut text = String::with_capacity(n as usize * 7);
                for _ in 0..n {
                    tokenizer::push_vocab_token(
                        &mut text,
                        rng.random_range(0..tokenizer::VOCAB.len()),
                    );
                }
                PromptItem {
                    text,
                    prompt_tokens: n,
                    output_tokens: out,
                }
            })
            .collect()
    }
}

/// Builds the request bodies. `extra` is merged last, so it can override anything.
pub fn build_prompts(
    items: &[PromptItem],
    api: Api,
    model: &str,
    extra: Option<&Map<String, Value>>,
) -> Result<Vec<Prompt>> {
    items
        .iter()
        .map(|it| {
            let mut body = Map::new();
            body.insert("model".into(), json!(model));
            match api {
                Api::Chat => {
                    body.insert(
                        "messages".into(),
                        json!([{"role": "user", "content": it.text}]),
                    );
                }
                Api::Completions => {
                    body.insert("prompt".into(), json!(it.text));
                }
            }
            body.insert("stream".into(), json!(true));
            body.insert("stream_options".into(), json!({"include_usage": true}));
            if let Some(n) = it.output_tokens {
                let key = match api {
                    Api::Chat => "max_completion_tokens",
                    Api::Completions => "max_tokens",
                };
                body.insert(key.into(), json!(n));
                body.insert("ignore_eos".into(), json!(true));
            }
            if let Some(extra) = extra {
                for (k, v) in extra {
                    body.insert(k.clone(), v.clone());
                }
            }
            let bytes =
                serde_json::to_vec(&Value::Object(body)).context("cannot build a request body")?;
            Ok(Prompt {
                body: Bytes::from(bytes),
                prompt_tokens: it.prompt_tokens,
                output_tokens: it.output_tokens,
            })
        })
        .collect()
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
    fn parses_the_data_spec() {
        let s = Synthetic::parse("prompt_tokens=32, output_tokens=128,samples=5").unwrap();
        assert_eq!(s.prompt_tokens, 32);
        assert_eq!(s.output_tokens, Some(128));
        assert_eq!(s.samples, 5);
        assert!(Synthetic::parse("prompt_tokens=x").is_err());
        assert!(Synthetic::parse("colour=red")
            .unwrap_err()
            .to_string()
            .contains("unknown key"));
        assert!(Synthetic::parse("prompt_tokens=0").is_err());
        assert_eq!(
            Synthetic::parse("output_tokens=auto")
                .unwrap()
                .output_tokens,
            None
        );
    }

    #[test]
    fn synthetic_prompts_have_exact_lengths_and_are_seeded() {
        let s = Synthetic::parse("prompt_tokens=300,output_tokens=16,samples=20").unwrap();
        let a = s.generate(1);
        assert_eq!(a.len(), 20);
        for p in &a {
            assert_eq!(crate::tokenizer::count_tokens(&p.text) as u64, 300);
            assert_eq!(p.prompt_tokens, 300);
        }
        assert_eq!(a, s.generate(1));
        assert_ne!(a, s.generate(2));
        assert_ne!(a[0].text, a[1].text, "prompts differ from one another");
    }

    #[test]
    fn bodies_ask_for_exact_output_and_usage() {
        let items = Synthetic::parse("prompt_tokens=4,output_tokens=9,samples=1")
            .unwrap()
            .generate(1);
        let extra = parse_extra_body(r#"{"temperature":0.5}"#).unwrap();
        let p = build_prompts(&items, Api::Chat, "m", Some(&extra)).unwrap();
        let v: Value = serde_json::from_slice(&p[0].body).unwrap();
        assert_eq!(v["max_completion_tokens"], 9);
        assert_eq!(v["ignore_eos"], true);
        assert_eq!(v["stream_options"]["include_usage"], true);
        assert_eq!(v["temperature"], 0.5);
        let p = build_prompts(&items, Api::Completions, "m", None).unwrap();
        let v: Value = serde_json::from_slice(&p[0].body).unwrap();
        assert_eq!(v["max_tokens"], 9);
        assert!(v["prompt"].is_string());
        assert!(parse_extra_body("[1]").is_err());
    }
}
