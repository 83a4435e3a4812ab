//! Many models in one run (`--model a=70%,b=30%`): which model each request
//! goes to. The shares are kept exactly by a deterministic interleave, not by
//! independent draws: one period of the weights (at most 1,000 requests) is
//! laid out by smooth weighted round-robin, so every model's count after any
//! number of requests is within one of its share, and the run's seed picks
//! where in the period the run starts. A request's model is a pure function
//! of its sequence number (the same seed sends the same request to the same
//! model), so constant arrivals split exactly and shards keep the mix.

use anyhow::{bail, Context as _, Result};
use bytes::Bytes;

use crate::client::Prompt;

/// The finest share a weight is kept to: a thousandth of the requests.
const RESOLUTION: u64 = 1000;

/// The largest weight a model may be given: weights are parts of their
/// sum, so a million to one is finer than the shares kept; larger ones
/// (1e308) summed to infinity.
const MAX_WEIGHT: f64 = 1e6;

/// A model and its share of the requests (0..=1).
#[derive(Debug, Clone, PartialEq)]
pub struct Share {
    pub name: String,
    pub share: f64,
    /// The weight as given (1 when none was): kept whole when it is, so
    /// `a=1,b=1,c=5` interleaves in periods of 7, exactly.
    pub weight: f64,
}

/// Reads `--model`: `NAME` (one model), `a,b` (equal shares), or
/// `a=70%,b=30%` (percentages that add up to 100; `a=0.7,b=0.3` and
/// `a=7,b=3` are read as parts of their sum, so `a=2,b=1` is two to one).
/// A name may hold `/` and `:` (Hugging Face ids, adapters); not `,`.
pub fn parse(spec: &str) -> Result<Vec<Share>> {
    // An error quotes the argument cut (10,000 models repeated it whole,
    // 59 KB on one line).
    let shown = crate::bounds::cut(spec, 120);
    let entries: Vec<&str> = spec.split(',').map(str::trim).collect();
    if entries.len() == 1 && !entries[0].contains('=') {
        if entries[0].is_empty() {
            bail!("--model is empty: name a model, or a mix such as a=70%,b=30%");
        }
        return Ok(vec![Share {
            name: entries[0].to_string(),
            share: 1.0,
            weight: 1.0,
        }]);
    }
    let mut named: Vec<(String, Option<f64>, bool)> = Vec::new();
    for e in &entries {
        let (name, weight) = match e.rsplit_once('=') {
            Some((n, w)) => (n.trim(), Some(w.trim())),
            None => (*e, None),
        };
        if name.is_empty() {
            bail!("--model {shown:?}: an entry has no model name (write a=70%,b=30%)");
        }
        if named.iter().any(|(n, _, _)| n == name) {
            bail!("--model {shown:?}: model {name:?} is named twice");
        }
        let (w, percent) = match weight {
            None => (None, false),
            Some(w) => weight_of(&shown, name, w).map(|(v, percent)| (Some(v), percent))?,
        };
        named.push((name.to_string(), w, percent));
    }
    let weighted = named.iter().filter(|(_, w, _)| w.is_some()).count();
    if weighted != 0 && weighted != named.len() {
        bail!(
            "--model {shown:?}: give every model a weight (a=70%,b=30%) or none (a,b: equal shares)"
        );
    }
    let weights: Vec<f64> = named.iter().map(|(_, w, _)| w.unwrap_or(1.0)).collect();
    let sum: f64 = weights.iter().sum();
    let percents: Vec<bool> = named.iter().map(|(_, _, p)| *p).collect();
    check_sum(&shown, &percents, sum)?;
    let shares: Vec<Share> = named
        .into_iter()
        .zip(weights)
        .map(|((name, _, _), w)| Share {
            name,
            share: w / sum,
            weight: w,
        })
        .collect();
    if let Some(s) = shares
        .iter()
        .find(|s| s.share > 0.0 && s.share * (RESOLUTION as f64) < 0.5)
    {
        bail!(
            "--model {shown:?}: {:?}'s share ({}%) is below the finest kept, 0.1%",
            s.name,
            crate::typed::number(s.share * 100.0)
        );
    }
    Ok(shares)
}

/// One entry's weight (`70%`, `0.7`, `7`) and whether it is a percentage;
/// `shown` is the argument as errors quote it.
fn weight_of(shown: &str, name: &str, w: &str) -> Result<(f64, bool)> {
    let (num, percent) = match w.strip_suffix('%') {
        Some(n) => (n.trim(), true),
        None => (w, false),
    };
    let v: f64 = num.parse().with_context(|| {
        format!("--model {shown:?}: the weight of {name:?} ({w:?}) is not a number")
    })?;
    if !v.is_finite() || v < 0.0 {
        bail!("--model {shown:?}: the weight of {name:?} ({w}) must be 0 or more");
    }
    // Weights of 1e308 summed to infinity: every share 0 %, every request
    // to the first model.
    if v > MAX_WEIGHT {
        bail!(
            "--model {shown:?}: the weight of {name:?} ({w}) is above {}, the most a weight may be (weights are parts of their sum: a=2,b=1 is two to one)",
            crate::typed::number(MAX_WEIGHT)
        );
    }
    Ok((v, percent))
}

/// Percentages every one or none, adding up to 100; weights adding up to
/// more than 0.
fn check_sum(shown: &str, percents: &[bool], sum: f64) -> Result<()> {
    if percents.iter().any(|p| *p) {
        if !percents.iter().all(|p| *p) {
            bail!("--model {shown:?}: give every weight as a percentage, or none");
        }
        if (sum - 100.0).abs() > 0.05 {
            bail!(
                "--model {shown:?}: the percentages add up to {}%, not 100%",
                crate::typed::number(sum)
            );
        }
    }
    if sum <= 0.0 {
        bail!("--model {shown:?}: the weights add up to 0; some model must get requests");
    }
    Ok(())
}

/// The run's models and the order requests take them in.
#[derive(Debug, Clone)]
pub struct ModelMix {
    shares: Vec<Share>,
    /// One period: the model index of each request in it.
    period: Vec<u16>,
    /// Where the run starts in the period (from the seed).
    offset: u64,
}

impl ModelMix {
    /// The mix of `shares` (as [`parse`] gives them), started at a place in
    /// the period the seed picks.
    pub fn new(shares: Vec<Share>, seed: u64) -> Result<Self> {
        if shares.is_empty() || shares.len() > usize::from(u16::MAX) {
            bail!("a model mix needs 1 to 65535 models");
        }
        let parts = whole_parts(&shares);
        let g = parts.iter().fold(0, |g, &p| gcd(g, p)).max(1);
        let parts: Vec<u64> = parts.iter().map(|p| p / g).collect();
        let period = interleave(&parts);
        // The shares kept are the period's (exact for whole weights).
        let total = parts.iter().sum::<u64>().max(1) as f64;
        let shares = shares
            .into_iter()
            .zip(&parts)
            .map(|(s, &p)| Share {
                share: p as f64 / total,
                ..s
            })
            .collect();
        let offset =
            crate::data::shard::stable_hash(seed ^ 0x0030_DE15) % period.len().max(1) as u64;
        Ok(ModelMix {
            shares,
            period,
            offset,
        })
    }

    pub fn shares(&self) -> &[Share] {
        &self.shares
    }

    pub fn names(&self) -> Vec<String> {
        self.shares.iter().map(|s| s.name.clone()).collect()
    }

    /// More than one model.
    pub fn is_mix(&self) -> bool {
        self.shares.len() > 1
    }

    /// The model of the run's `seq`-th request (or conversation).
    pub fn index_for(&self, seq: u64) -> u16 {
        let n = self.period.len().max(1) as u64;
        self.period
            .get(((seq.wrapping_add(self.offset)) % n) as usize)
            .copied()
            .unwrap_or(0)
    }

    /// `a 70% · b 30%`: the mix as the answer and the tables name it.
    pub fn describe(&self) -> String {
        describe(&self.shares)
    }

    /// `prompt` sent to model `index`: its body's model replaced. Bodies are
    /// built for the first model; a body whose model is another (an
    /// `--extra-body` that sets one) is sent as it is.
    pub fn apply(&self, prompt: Prompt, index: u16) -> Prompt {
        if index == 0 {
            return prompt;
        }
        let (Some(first), Some(to)) = (self.shares.first(), self.shares.get(usize::from(index)))
        else {
            return prompt;
        };
        match with_model(&prompt.body, &first.name, &to.name) {
            Some(body) => Prompt {
                body: Bytes::from(body),
                ..prompt
            },
            None => prompt,
        }
    }
}

/// `a 70% · b 30%`.
pub fn describe(shares: &[Share]) -> String {
    shares
        .iter()
        .map(|s| {
            format!(
                "{} {}%",
                s.name,
                crate::typed::number(round3(s.share * 100.0))
            )
        })
        .collect::<Vec<_>>()
        .join(" · ")
}

fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

/// The weights as whole numbers: as given when they are (times 10, 100 or
/// 1000 for decimals such as 33.3%), else the shares in thousandths, the
/// largest remainders rounded up so they add up.
fn whole_parts(shares: &[Share]) -> Vec<u64> {
    for scale in [1.0, 10.0, 100.0, 1000.0] {
        let scaled: Vec<f64> = shares.iter().map(|s| s.weight * scale).collect();
        let whole = scaled.iter().all(|w| (w - w.round()).abs() < 1e-6);
        if whole && scaled.iter().sum::<f64>() <= 100_000.0 {
            return scaled.iter().map(|w| w.round() as u64).collect();
        }
    }
    let raw: Vec<f64> = shares.iter().map(|s| s.share * RESOLUTION as f64).collect();
    let mut parts: Vec<u64> = raw.iter().map(|r| r.floor() as u64).collect();
    let mut short = RESOLUTION.saturating_sub(parts.iter().sum());
    let mut order: Vec<usize> = (0..parts.len()).collect();
    order.sort_by(|&a, &b| (raw[b] - raw[b].floor()).total_cmp(&(raw[a] - raw[a].floor())));
    for &i in order.iter().cycle().take(order.len() * 2) {
        if short == 0 {
            break;
        }
        if raw[i] > 0.0 {
            parts[i] += 1;
            short -= 1;
        }
    }
    parts
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

/// Smooth weighted round-robin over one period (`sum(parts)` requests):
/// each step every model gains its part, the one with the most is picked and
/// pays the period. Every prefix keeps each model within one of its share.
fn interleave(parts: &[u64]) -> Vec<u16> {
    let total: u64 = parts.iter().sum();
    let mut credit = vec![0i64; parts.len()];
    let mut out = Vec::with_capacity(total as usize);
    for _ in 0..total {
        for (c, &p) in credit.iter_mut().zip(parts) {
            *c += p as i64;
        }
        let Some((best, _)) = credit
            .iter()
            .enumerate()
            .max_by(|a, b| a.1.cmp(b.1).then(b.0.cmp(&a.0)))
        else {
            break;
        };
        credit[best] -= total as i64;
        out.push(best as u16);
    }
    out
}

/// `body` with its top-level `"model":FROM` made `"model":TO`; None when the
/// body does not name FROM there. A JSON string cannot hold `"model":` with
/// bare quotes, so the first match outside the prompt text is the key.
fn with_model(body: &[u8], from: &str, to: &str) -> Option<Vec<u8>> {
    let key = format!("\"model\":{}", serde_json::to_string(from).ok()?);
    let at = body.windows(key.len()).position(|w| w == key.as_bytes())?;
    let value = serde_json::to_string(to).ok()?;
    let mut out = Vec::with_capacity(body.len() + value.len());
    out.extend_from_slice(&body[..at]);
    out.extend_from_slice(b"\"model\":");
    out.extend_from_slice(value.as_bytes());
    out.extend_from_slice(&body[at + key.len()..]);
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::Api;

    fn mix(spec: &str, seed: u64) -> ModelMix {
        ModelMix::new(parse(spec).unwrap(), seed).unwrap()
    }

    /// `a=1e308,b=1e308` summed to infinity: both shares 0 %, every
    /// request to `a`. A weight past the bound is refused, naming it.
    #[test]
    fn weights_that_would_sum_to_infinity_are_refused_naming_the_limit() {
        let e = parse("a=1e308,b=1e308").unwrap_err().to_string();
        assert!(
            e.contains("is above 1000000, the most a weight may be"),
            "{e}"
        );
        let p = parse("a=1000000,b=1000000").unwrap();
        assert_eq!((p[0].share, p[1].share), (0.5, 0.5));
    }

    #[test]
    fn specs_read_as_shares_or_say_what_is_wrong() {
        let one = parse("Qwen/Qwen3-8B").unwrap();
        assert_eq!(one.len(), 1);
        assert_eq!(one[0].name, "Qwen/Qwen3-8B");
        let p = parse("a=70%, b=30%").unwrap();
        assert_eq!((p[0].share, p[1].share), (0.7, 0.3));
        let eq = parse("a,b,c,d").unwrap();
        assert!(eq.iter().all(|s| (s.share - 0.25).abs() < 1e-12));
        let parts = parse("a=2,b=1").unwrap();
        assert!((parts[0].share - 2.0 / 3.0).abs() < 1e-12);
        let err = |s: &str| format!("{:#}", parse(s).unwrap_err());
        assert!(err("a=70%,b=20%").contains("add up to 90%, not 100%"));
        assert!(err("a=70%,b").contains("every model a weight"));
        assert!(err("a=x,b=1").contains("\"x\") is not a number"));
        assert!(err("a=1,a=2").contains("named twice"));
        assert!(err("a=0,b=0").contains("add up to 0"));
        assert!(err("a=-1,b=2").contains("0 or more"));
        assert!(err("=50%,b=50%").contains("no model name"));
        assert!(err("a=99.99%,b=0.01%").contains("below the finest"));
        assert!(err("a=70%,b=0.3").contains("percentage"));
    }

    #[test]
    fn every_prefix_keeps_the_shares_to_one_request() {
        for (spec, seed) in [
            ("a=70%,b=30%", 1),
            ("a=33.3%,b=33.3%,c=33.4%", 7),
            ("x=1,y=1,z=5", 3),
        ] {
            let m = mix(spec, seed);
            let mut counts = vec![0u64; m.shares().len()];
            for k in 0..5000u64 {
                counts[usize::from(m.index_for(k))] += 1;
                for (c, s) in counts.iter().zip(m.shares()) {
                    let want = (k + 1) as f64 * s.share;
                    assert!(
                        (*c as f64 - want).abs() <= 1.0 + 1e-9 * want,
                        "{spec} after {} requests: {c} against {want}",
                        k + 1
                    );
                }
            }
        }
        // Exact over whole periods: 70 and 30 in every 100.
        let m = mix("a=70%,b=30%", 9);
        let a = (0..1000).filter(|&k| m.index_for(k) == 0).count();
        assert_eq!(a, 700);
    }

    #[test]
    fn the_seed_picks_the_start_and_the_same_seed_the_same_models() {
        let seq = |seed| {
            (0..40)
                .map(|k| mix("a=70%,b=30%", seed).index_for(k))
                .collect::<Vec<_>>()
        };
        assert_eq!(seq(1), seq(1));
        assert!(
            (0..20).any(|s| seq(s) != seq(1)),
            "the seed moves the start"
        );
        // One model: always it.
        let one = mix("m", 5);
        assert!((0..100).all(|k| one.index_for(k) == 0));
        assert!(!one.is_mix());
        assert_eq!(mix("a=70%,b=30%", 0).describe(), "a 70% · b 30%");
        assert_eq!(
            mix("a,b,c", 0).describe(),
            "a 33.333% · b 33.333% · c 33.333%"
        );
    }

    #[test]
    fn a_request_body_names_its_model_and_nothing_else_changes() {
        for api in Api::ALL {
            let body = crate::data::request_body(
                api,
                "base \"q\"",
                &["say \"model\":\"base\" back"],
                Some(4),
                None,
            )
            .unwrap();
            let p = Prompt {
                body: Bytes::from(body.clone()),
                prompt_tokens: 3,
                output_tokens: Some(4),
                tag_at: None,
                respell: None,
                images: None,
                also_tag: None,
            };
            let m = ModelMix::new(parse("base \"q\"=50%,lora/b=50%").unwrap(), 0).unwrap();
            let to_b = m.apply(p.clone(), 1);
            let mut want: serde_json::Value = serde_json::from_slice(&body).unwrap();
            want["model"] = "lora/b".into();
            let got: serde_json::Value = serde_json::from_slice(&to_b.body).unwrap();
            assert_eq!(got, want, "{api:?}");
            assert_eq!(m.apply(p.clone(), 0).body, p.body);
        }
    }
}
