//! Synthetic prompts with exact token lengths.
//!
//! `--data prompt_tokens=256,output_tokens=128[,key=value…]`. Prompts are
//! strung together from pieces that the run's tokenizer counts as exactly one
//! token each, so building 10,000 prompts of 4,096 tokens is string
//! concatenation, not repeated tokenisation. A sample of prompts is counted
//! in full to prove it; if that fails (an unusual tokenizer), every prompt is
//! counted and trimmed to length instead.

use anyhow::{bail, Context as _, Result};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use rand_distr::{Distribution, LogNormal, Normal};

use super::PromptItem;
use crate::tokenizer::TokenCounter;

/// How a length is drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Dist {
    Fixed,
    Normal,
    Uniform,
    LogNormal,
}

/// A token length: mean, spread, bounds and distribution.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Length {
    pub mean: u64,
    pub stdev: f64,
    pub min: u64,
    pub max: u64,
    /// None: fixed when stdev is 0, else normal.
    pub dist: Option<Dist>,
}

impl Length {
    fn fixed(n: u64) -> Self {
        Length {
            mean: n,
            stdev: 0.0,
            min: 1,
            max: u64::MAX,
            dist: None,
        }
    }

    fn dist(&self) -> Dist {
        self.dist.unwrap_or(if self.stdev > 0.0 {
            Dist::Normal
        } else {
            Dist::Fixed
        })
    }

    /// Draws one length, clamped to [min, max] and at least 1.
    pub fn sample(&self, rng: &mut SmallRng) -> u64 {
        let lo = self.min.max(1);
        let hi = self.max.max(lo);
        let m = self.mean as f64;
        let v = match self.dist() {
            Dist::Fixed => m,
            Dist::Normal => Normal::new(m, self.stdev)
                .map(|d| d.sample(rng))
                .unwrap_or(m),
            Dist::Uniform => {
                let hi = if self.max == u64::MAX {
                    self.mean.saturating_mul(2).max(lo)
                } else {
                    hi
                };
                return rng.random_range(lo..=hi);
            }
            Dist::LogNormal => {
                // Parameters chosen so the result has the given mean and stdev.
                let var = (self.stdev / m.max(1.0)).powi(2);
                let sigma2 = (1.0 + var).ln();
                let mu = m.max(1.0).ln() - sigma2 / 2.0;
                LogNormal::new(mu, sigma2.sqrt())
                    .map(|d| d.sample(rng))
                    .unwrap_or(m)
            }
        };
        (v.round().max(1.0) as u64).clamp(lo, hi)
    }
}

/// The `--data` synthetic spec.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Synthetic {
    pub prompt: Length,
    /// None: let the server decide the output length (no max_tokens).
    pub output: Option<Length>,
    /// A prefix of this many tokens shared by every prompt (prefix-cache tests),
    /// in addition to the prompt's own tokens.
    pub prefix_tokens: u64,
    /// Groups of prompts that share a prefix: sample i shares the prefix of
    /// group i mod K; prompts of different groups share nothing (GuideLLM's
    /// and SGLang's generated shared-prefix data). 1: one prefix for all.
    pub prefix_groups: u64,
    pub samples: usize,
    /// Turns per conversation (1: independent prompts). With more, each
    /// sample is a conversation whose turns send the history so far;
    /// `prompt_tokens` and `output_tokens` are each turn's own.
    pub turns: usize,
    /// Seconds between a turn's answer and the next turn.
    pub think_time: f64,
}

impl Default for Synthetic {
    fn default() -> Self {
        Synthetic {
            prompt: Length::fixed(256),
            output: Some(Length::fixed(128)),
            prefix_tokens: 0,
            prefix_groups: 1,
            samples: 1000,
            turns: 1,
            think_time: 0.0,
        }
    }
}

/// Synthetic prompts generated at most up to this much text (and at least
/// [`MIN_SAMPLES`] of them): `prompt_tokens=100000` does not build a thousand
/// half-megabyte prompts before the first request.
pub const PROMPT_BUDGET_BYTES: usize = 32 << 20;
pub const MIN_SAMPLES: usize = 16;

const KEYS: &str = "prompt_tokens, output_tokens (each with _stdev, _min, _max, _dist = fixed|normal|uniform|lognormal), prefix_tokens, prefix_groups, samples, turns, think_time, images, image_size, images_dir, audio, audio_seconds, video, video_seconds, video_size, video_fps, tools, tools_file, tool_results, tool_result_tokens";

/// One value of a `--data` spec, read as its key needs.
struct Value<'a> {
    key: &'a str,
    text: &'a str,
}

impl Value<'_> {
    fn num(&self) -> Result<f64> {
        let (k, v) = (self.key, self.text);
        let x: f64 = v
            .parse()
            .with_context(|| format!("--data {k}: {v:?} is not a number"))?;
        if !(x.is_finite() && x >= 0.0) {
            bail!("--data {k}: {v} must be a non-negative number");
        }
        Ok(x)
    }

    fn int(&self) -> Result<u64> {
        Ok(self.num()?.round() as u64)
    }

    fn dist(&self) -> Result<Dist> {
        Ok(match self.text {
            "fixed" => Dist::Fixed,
            "normal" => Dist::Normal,
            "uniform" => Dist::Uniform,
            "lognormal" => Dist::LogNormal,
            v => bail!(
                "--data {}: {v:?} is not a distribution (fixed, normal, uniform, lognormal)",
                self.key
            ),
        })
    }
}

impl Synthetic {
    pub fn parse(spec: &str) -> Result<Synthetic> {
        let mut s = Synthetic::default();
        let mut out = Length::fixed(128);
        let mut out_auto = false;
        for part in spec.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (k, v) = part
                .split_once('=')
                .with_context(|| format!("--data: {part:?} should look like prompt_tokens=256"))?;
            let (k, v) = (k.trim(), v.trim());
            if k == "output_tokens" && (v == "auto" || v == "none") {
                out_auto = true;
                continue;
            }
            s.set(&mut out, k, &Value { key: k, text: v })?;
        }
        s.check(&out, out_auto)?;
        s.output = (!out_auto).then_some(out);
        Ok(s)
    }

    /// One `key=value` of the spec (`out`: the output length being read).
    fn set(&mut self, out: &mut Length, k: &str, v: &Value) -> Result<()> {
        match k {
            "prompt_tokens" => self.prompt.mean = v.int()?,
            "prompt_tokens_stdev" => self.prompt.stdev = v.num()?,
            "prompt_tokens_min" => self.prompt.min = v.int()?,
            "prompt_tokens_max" => self.prompt.max = v.int()?,
            "prompt_tokens_dist" => self.prompt.dist = Some(v.dist()?),
            "output_tokens" => out.mean = v.int()?,
            "output_tokens_stdev" => out.stdev = v.num()?,
            "output_tokens_min" => out.min = v.int()?,
            "output_tokens_max" => out.max = v.int()?,
            "output_tokens_dist" => out.dist = Some(v.dist()?),
            "prefix_tokens" => self.prefix_tokens = v.int()?,
            "prefix_groups" => self.prefix_groups = v.int()?,
            "samples" => self.samples = v.int()? as usize,
            "turns" => self.turns = v.int()? as usize,
            "think_time" => {
                self.think_time = v.num()?;
                if self.think_time > 3600.0 {
                    bail!("--data think_time: {} s is more than an hour", v.text);
                }
            }
            // GuideLLM 0.8's `--data kind=synthetic_text,prompt_tokens=…`.
            "kind" => bail!(
                "--data: kind={} is GuideLLM's; llmsweep's synthetic spec is the lengths alone: drop kind=…, e.g. --data prompt_tokens=256,output_tokens=128",
                v.text
            ),
            // Read by data::images, data::media and data::tools.
            k if super::images::is_key(k) || super::media::is_key(k) || super::tools::is_key(k) => {}
            other => bail!("--data: unknown key {other:?} (known: {KEYS})"),
        }
        Ok(())
    }

    /// The checks that need the whole spec.
    fn check(&self, out: &Length, out_auto: bool) -> Result<()> {
        if self.prompt.mean == 0 {
            bail!("--data prompt_tokens must be at least 1");
        }
        if !out_auto && out.mean == 0 {
            bail!("--data output_tokens must be at least 1 (or auto)");
        }
        if self.samples == 0 {
            bail!("--data samples must be at least 1");
        }
        if !(1..=1000).contains(&self.turns) {
            bail!("--data turns must be from 1 to 1000");
        }
        if self.prefix_groups == 0 {
            bail!("--data prefix_groups must be at least 1");
        }
        if self.prefix_groups > 1 && self.prefix_tokens == 0 {
            bail!("--data prefix_groups needs prefix_tokens (the length of each group's shared prefix)");
        }
        if self.prefix_groups > self.samples as u64 {
            bail!(
                "--data prefix_groups ({}) is more than samples ({}): some groups would have no prompt",
                self.prefix_groups,
                self.samples
            );
        }
        for (name, l) in [("prompt_tokens", &self.prompt), ("output_tokens", out)] {
            if l.min > l.max {
                bail!(
                    "--data {name}_min ({}) is above {name}_max ({})",
                    l.min,
                    l.max
                );
            }
        }
        self.check_sizes(out, out_auto)
    }

    /// What the prompts would hold, against the bounds of what is built
    /// before the run (each length is allowed on its own; together they
    /// must fit): a prompt with its prefix, all prefixes, and with turns,
    /// the last turn's history and a conversation's requests together.
    fn check_sizes(&self, out: &Length, out_auto: bool) -> Result<()> {
        use crate::bounds::{BUILT_TOKENS, PROMPT_TOKENS};
        let w = u128::from;
        let prefix = w(self.prefix_tokens);
        // The longest prompt the spec asks for: its mean, or its min or
        // max when set (draws past the bound are cut to it).
        let longest = |l: &Length| {
            let max = if l.max == u64::MAX { 0 } else { l.max };
            w(l.mean.max(l.min).max(max))
        };
        let prompt = prefix + longest(&self.prompt);
        if prompt > w(PROMPT_TOKENS) {
            bail!(
                "--data prompt_tokens: a prompt of {prompt} tokens (prefix_tokens included) is over the bound of {PROMPT_TOKENS} a request's prompt may have (bounds::PROMPT_TOKENS)"
            );
        }
        let prefixes = prefix * w(self.prefix_groups);
        if prefixes > w(BUILT_TOKENS) {
            bail!(
                "--data prefix_groups × prefix_tokens: {prefixes} tokens of prefixes is over the bound of {BUILT_TOKENS} tokens built before the run (bounds::BUILT_TOKENS)"
            );
        }
        if self.turns > 1 {
            let turns = self.turns as u128;
            let (msg, reply) = (
                w(self.prompt.mean),
                w(if out_auto { self.prompt.mean } else { out.mean }),
            );
            let last = prefix + turns * msg + (turns - 1) * reply;
            if last > w(PROMPT_TOKENS) {
                bail!(
                    "--data turns={}: the last turn would send {last} prompt tokens, its history included, over the bound of {PROMPT_TOKENS} a request's prompt may have (bounds::PROMPT_TOKENS): fewer turns or shorter messages and replies (output_tokens)",
                    self.turns
                );
            }
            // Turn k (from 1) sends the prefix, k messages and k - 1 replies.
            let all =
                turns * prefix + msg * turns * (turns + 1) / 2 + reply * turns * (turns - 1) / 2;
            if all > w(BUILT_TOKENS) {
                bail!(
                    "--data turns={}: one conversation's requests would hold {all} tokens together (each turn sends the history before it), over the bound of {BUILT_TOKENS} tokens built before the run (bounds::BUILT_TOKENS): fewer turns or shorter messages and replies (output_tokens)",
                    self.turns
                );
            }
        }
        Ok(())
    }

    /// Generates the prompts, seeded, with exact lengths under `counter`.
    pub fn generate(&self, seed: u64, counter: &dyn TokenCounter) -> Result<Vec<PromptItem>> {
        self.generate_for_run(seed, None, counter)
    }

    /// As [`Synthetic::generate`], with `run` (a number drawn per run)
    /// spelled by the two tokens after each prompt's sample number: the same
    /// seed gives the same lengths and text, but no prompt of this run is a
    /// prompt of an earlier run, whose prefix cache would serve it and
    /// flatter TTFT. Token counts are unchanged (the run's tokens replace
    /// random ones).
    pub fn generate_for_run(
        &self,
        seed: u64,
        run: Option<u64>,
        counter: &dyn TokenCounter,
    ) -> Result<Vec<PromptItem>> {
        let pieces = one_token_pieces(
            counter,
            "synthetic prompts; use a data file (--data prompts.jsonl)",
        )?;
        let mut rng = SmallRng::seed_from_u64(seed ^ 0xDA7A);
        let prefixes = self.prefixes(&pieces, &mut rng);
        let mut items = Vec::with_capacity(self.samples.min(MIN_SAMPLES));
        let p = pieces.len();
        // Reuse respells the two pieces after the prefix (data::for_request):
        // only with pieces JSON carries unchanged.
        let plain = pieces
            .iter()
            .all(|w| serde_json::to_string(w).is_ok_and(|j| j.len() == w.len() + 2));
        let shared: std::sync::Arc<[String]> = pieces.clone().into();
        let mut bytes = 0usize;
        for i in 0..self.samples {
            // Memory stays bounded whatever the prompt length (each at most
            // bounds::PROMPT_TOKENS, check_sizes): past the budget
            // the run reuses these, each reuse made unique by a tag in front
            // (`data::for_request`), so no server cache serves one from another.
            if i >= MIN_SAMPLES && bytes >= PROMPT_BUDGET_BYTES {
                break;
            }
            // A draw past the bound of a prompt is cut to it (check_sizes
            // refused a spec whose mean, min or max is past it).
            let n = self.prompt.sample(&mut rng).min(
                crate::bounds::PROMPT_TOKENS
                    .saturating_sub(self.prefix_tokens)
                    .max(1),
            );
            let out = self.output.as_ref().map(|o| o.sample(&mut rng));
            let prefix = &prefixes[i % prefixes.len()];
            let text = prompt_text(prefix, i, n, run, &pieces, &mut rng);
            bytes += text.len();
            let head_bytes = pieces[(i / p) % p].len() + pieces[i % p].len();
            items.push(PromptItem {
                images: Vec::new(),
                text,
                prompt_tokens: self.prefix_tokens + n,
                output_tokens: out,
                shared_prefix_bytes: prefix.len(),
                respell: (plain && n >= 2).then(|| crate::client::Respell {
                    head_bytes,
                    pieces: shared.clone(),
                }),
            });
        }
        prove_lengths(&mut items, counter, &pieces, &mut rng);
        Ok(items)
    }

    /// One prefix per group, drawn before anything else: the first group's
    /// prefix is the one prefix of `prefix_groups=1`.
    fn prefixes(&self, pieces: &[String], rng: &mut SmallRng) -> Vec<String> {
        (0..self.prefix_groups.max(1))
            .map(|_| {
                (0..self.prefix_tokens)
                    .map(|_| pieces[rng.random_range(0..pieces.len())].as_str())
                    .collect()
            })
            .collect()
    }
}

/// Sample `i`'s text: the shared prefix, then `n` pieces. The first two
/// after the prefix spell the sample's number in base `p` (the number of
/// pieces): no two prompts share more than the prefix (unique for p²
/// samples), so no prefix cache serves one prompt from another; the next
/// two spell the run's number, if any; the rest is random.
fn prompt_text(
    prefix: &str,
    i: usize,
    n: u64,
    run: Option<u64>,
    pieces: &[String],
    rng: &mut SmallRng,
) -> String {
    let p = pieces.len();
    let mut text = String::with_capacity(prefix.len() + n as usize * 8);
    text.push_str(prefix);
    for k in 0..n {
        // Drawn whatever the token, so the text after the head is the same
        // with or without a run number.
        let random = &pieces[rng.random_range(0..p)];
        let piece = match (k, run) {
            (0, _) => &pieces[(i / p) % p],
            (1, _) => &pieces[i % p],
            (2, Some(r)) => &pieces[(r as usize) % p],
            (3, Some(r)) => &pieces[(r as usize / p) % p],
            _ => random,
        };
        text.push_str(piece);
    }
    text
}

/// Proves the construction's lengths on a sample; if they do not hold
/// under `counter`, counts and trims every prompt instead.
fn prove_lengths(
    items: &mut [PromptItem],
    counter: &dyn TokenCounter,
    pieces: &[String],
    rng: &mut SmallRng,
) {
    let exact = items
        .iter()
        .take(8)
        .all(|it| counter.count(&it.text) as u64 == it.prompt_tokens);
    if !exact {
        for it in items.iter_mut() {
            trim_to(it, counter, pieces, rng);
            // Lengths were counted, not built: a respelling could move them.
            it.respell = None;
        }
    }
}

/// The plain words `counter` takes as one token each, which synthetic text
/// is built from; an error naming what needed them (`what`) when there are
/// too few.
pub(crate) fn one_token_pieces(counter: &dyn TokenCounter, what: &str) -> Result<Vec<String>> {
    let pieces = counter.one_token_pieces();
    if pieces.len() < 8 {
        bail!(
            "the tokenizer {} takes too few plain English words as single tokens to build {what}",
            counter.name()
        );
    }
    Ok(pieces)
}

/// Adjusts a prompt until `counter` gives its intended length (a few rounds),
/// then records what it really is.
fn trim_to(it: &mut PromptItem, counter: &dyn TokenCounter, pieces: &[String], rng: &mut SmallRng) {
    let want = it.prompt_tokens;
    for _ in 0..64 {
        let have = counter.count(&it.text) as u64;
        if have == want {
            return;
        }
        if have > want {
            // Drop the last piece.
            match it.text.trim_end().rfind(' ') {
                Some(i) if i > 0 => it.text.truncate(i),
                _ => break,
            }
        } else {
            it.text.push_str(&pieces[rng.random_range(0..pieces.len())]);
        }
    }
    it.prompt_tokens = counter.count(&it.text) as u64;
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two runs with the same seed send prompts of the same lengths and
    /// text, but each run's are its own from the first tokens: no prefix
    /// cache serves the second run from the first.
    #[test]
    fn each_run_has_prompts_of_its_own_and_the_same_shape() {
        let spec = Synthetic::parse("prompt_tokens=32,output_tokens=4,samples=50,prefix_tokens=4")
            .unwrap();
        let b = &crate::tokenizer::Builtin;
        let first = spec.generate_for_run(7, Some(1234), b).unwrap();
        let second = spec.generate_for_run(7, Some(98765), b).unwrap();
        let again = spec.generate_for_run(7, Some(1234), b).unwrap();
        assert_eq!(first, again, "the same run number, the same prompts");
        for (a, b) in first.iter().zip(&second) {
            assert_eq!(a.prompt_tokens, b.prompt_tokens);
            assert_eq!(a.shared_prefix_bytes, b.shared_prefix_bytes);
            assert_ne!(a.text, b.text);
            // The shared prefix is shared; after the head (sample number
            // and run number), the text is the same.
            let n = a.shared_prefix_bytes;
            assert_eq!(a.text[..n], b.text[..n]);
            let same_tail = a
                .text
                .bytes()
                .rev()
                .zip(b.text.bytes().rev())
                .take_while(|(x, y)| x == y)
                .count();
            assert!(same_tail * 2 > a.text.len(), "{:?} / {:?}", a.text, b.text);
        }
        // Without a run number: the prompts of every run with this seed.
        assert_eq!(
            spec.generate(7, b).unwrap(),
            spec.generate_for_run(7, None, b).unwrap()
        );
        // Token counts stay exact.
        for item in &first {
            assert_eq!(
                crate::tokenizer::count_tokens(&item.text) as u64,
                item.prompt_tokens
            );
        }
    }
    use crate::tokenizer::{count_tokens, Builtin};

    /// Each allowed on its own, together they built 8 GB of prompts
    /// (prompt_tokens=1e9, aborting), 2.2 GB of prefix (prefix_tokens=1e9),
    /// or every history of 1,000 turns of 100,000-token replies before the
    /// run: refused with the bound named.
    #[test]
    fn prompt_prefix_and_history_sizes_are_checked_against_their_bounds() {
        let e = |spec: &str| format!("{:#}", Synthetic::parse(spec).unwrap_err());
        let m = e("prompt_tokens=1000000000,output_tokens=8");
        assert!(
            m.contains("1000000000 tokens") && m.contains("bounds::PROMPT_TOKENS"),
            "{m}"
        );
        let m = e("prompt_tokens=8,output_tokens=8,prefix_tokens=1e9");
        assert!(
            m.contains("1000000008 tokens") && m.contains("bounds::PROMPT_TOKENS"),
            "{m}"
        );
        let m = e("prompt_tokens=8,prompt_tokens_stdev=4,prompt_tokens_max=1e19");
        assert!(m.contains("bounds::PROMPT_TOKENS"), "{m}");
        let m = e(
            "prompt_tokens=8,output_tokens=8,prefix_tokens=1000000,prefix_groups=100,samples=100",
        );
        assert!(
            m.contains("prefix_groups × prefix_tokens") && m.contains("bounds::BUILT_TOKENS"),
            "{m}"
        );
        let m = e("prompt_tokens=100,output_tokens=100000,turns=1000");
        assert!(
            m.contains("turns=1000: the last turn would send 100000000 prompt tokens"),
            "{m}"
        );
        let m = e("prompt_tokens=100,output_tokens=100,turns=1000");
        assert!(
            m.contains("bounds::BUILT_TOKENS") && m.contains("100000000 tokens together"),
            "{m}"
        );
        // At the bounds, and ordinary conversations, are fine.
        assert!(Synthetic::parse("prompt_tokens=1048576,output_tokens=8").is_ok());
        assert!(Synthetic::parse("prompt_tokens=1000,output_tokens=500,turns=50").is_ok());
        assert!(Synthetic::parse("prompt_tokens=8,prompt_tokens_stdev=1e12").is_ok());
    }

    /// A spread with no max cannot draw a prompt past the bound.
    #[test]
    fn a_draw_past_the_bound_of_a_prompt_is_cut_to_it() {
        let s = Synthetic::parse(
            "prompt_tokens=1000000,prompt_tokens_dist=uniform,output_tokens=8,samples=16,prefix_tokens=8",
        )
        .unwrap();
        let items = s.generate(1, &crate::tokenizer::Builtin).unwrap();
        let longest = items.iter().map(|i| i.prompt_tokens).max().unwrap();
        assert!(longest <= crate::bounds::PROMPT_TOKENS, "{longest}");
        assert!(longest > 1_000_000, "{longest}");
    }

    #[test]
    fn parses_the_data_spec() {
        let s = Synthetic::parse("prompt_tokens=32, output_tokens=128,samples=5,prefix_tokens=4")
            .unwrap();
        assert_eq!(s.prompt.mean, 32);
        assert_eq!(s.output.as_ref().unwrap().mean, 128);
        assert_eq!(s.samples, 5);
        assert_eq!(s.prefix_tokens, 4);
        assert!(Synthetic::parse("prompt_tokens=x").is_err());
        assert!(Synthetic::parse("colour=red")
            .unwrap_err()
            .to_string()
            .contains("unknown key"));
        // GuideLLM 0.8's form names the fix.
        let e = format!(
            "{:#}",
            Synthetic::parse("kind=synthetic_text,prompt_tokens=256").unwrap_err()
        );
        assert!(
            e.contains("kind=synthetic_text is GuideLLM's") && e.contains("drop kind="),
            "{e}"
        );
        assert!(Synthetic::parse("prompt_tokens=0").is_err());
        assert!(Synthetic::parse("prompt_tokens_dist=zipf")
            .unwrap_err()
            .to_string()
            .contains("distribution"));
        assert!(Synthetic::parse("prompt_tokens_min=10,prompt_tokens_max=5").is_err());
        assert!(Synthetic::parse("output_tokens=auto")
            .unwrap()
            .output
            .is_none());
    }

    #[test]
    fn prompts_have_exact_lengths_and_are_seeded() {
        let s = Synthetic::parse("prompt_tokens=300,output_tokens=16,samples=20,prefix_tokens=10")
            .unwrap();
        let a = s.generate(1, &Builtin).unwrap();
        assert_eq!(a.len(), 20);
        for p in &a {
            assert_eq!(count_tokens(&p.text) as u64, 310);
            assert_eq!(p.prompt_tokens, 310);
            assert_eq!(p.output_tokens, Some(16));
        }
        assert_eq!(a, s.generate(1, &Builtin).unwrap());
        assert_ne!(a, s.generate(2, &Builtin).unwrap());
        assert_ne!(a[0].text, a[1].text, "prompts differ from one another");
        // ... from their first token after the shared prefix.
        let s2 = Synthetic::parse("prompt_tokens=8,output_tokens=1,samples=500").unwrap();
        let b = s2.generate(1, &Builtin).unwrap();
        let heads: std::collections::HashSet<String> = b
            .iter()
            .map(|p| p.text.split(' ').take(3).collect::<Vec<_>>().join(" "))
            .collect();
        assert_eq!(heads.len(), 500, "two-token heads are unique");
        // The shared prefix is shared.
        let prefix_len: usize = a[0].text.split(' ').take(11).map(|w| w.len() + 1).sum();
        assert_eq!(a[0].text[..prefix_len], a[1].text[..prefix_len]);
    }

    #[test]
    fn prefix_groups_share_a_prefix_within_a_group_and_nothing_across() {
        let s = Synthetic::parse(
            "prompt_tokens=12,output_tokens=2,samples=9,prefix_tokens=20,prefix_groups=3",
        )
        .unwrap();
        assert_eq!(s.prefix_groups, 3);
        let items = s.generate_for_run(5, Some(77), &Builtin).unwrap();
        let prefix = |i: usize| &items[i].text[..items[i].shared_prefix_bytes];
        for (i, it) in items.iter().enumerate() {
            assert_eq!(it.prompt_tokens, 32);
            assert_eq!(count_tokens(&it.text), 32);
            assert_eq!(prefix(i), prefix(i % 3), "sample {i} is in group {}", i % 3);
        }
        // Groups share not even their first token.
        let first = |i: usize| prefix(i).split_whitespace().next().unwrap().to_string();
        let firsts: std::collections::HashSet<String> = (0..3).map(first).collect();
        assert_eq!(
            firsts.len(),
            3,
            "{:?}",
            (0..3).map(prefix).collect::<Vec<_>>()
        );
        // The prefix is the workload's, the same in every run; what follows is the run's.
        let other = s.generate_for_run(5, Some(78), &Builtin).unwrap();
        assert_eq!(prefix(4), &other[4].text[..other[4].shared_prefix_bytes]);
        assert_ne!(items[4].text, other[4].text);
        // One group is the old single prefix, drawn the same way.
        let one = Synthetic::parse("prompt_tokens=12,output_tokens=2,samples=9,prefix_tokens=20")
            .unwrap()
            .generate(5, &Builtin)
            .unwrap();
        let same = Synthetic::parse(
            "prompt_tokens=12,output_tokens=2,samples=9,prefix_tokens=20,prefix_groups=1",
        )
        .unwrap()
        .generate(5, &Builtin)
        .unwrap();
        assert_eq!(one, same);
        for bad in [
            "prefix_groups=0,prefix_tokens=4",
            "prefix_groups=2",
            "prefix_groups=20,prefix_tokens=4,samples=10",
        ] {
            assert!(Synthetic::parse(bad).is_err(), "{bad}");
        }
    }

    fn stats(v: &[u64]) -> (f64, f64) {
        let m = v.iter().sum::<u64>() as f64 / v.len() as f64;
        let var = v.iter().map(|&x| (x as f64 - m).powi(2)).sum::<f64>() / v.len() as f64;
        (m, var.sqrt())
    }

    #[test]
    fn distributions_have_the_asked_shape() {
        let mut rng = SmallRng::seed_from_u64(3);
        let draw =
            |l: &Length, rng: &mut SmallRng| (0..20_000).map(|_| l.sample(rng)).collect::<Vec<_>>();
        let normal = Length {
            mean: 500,
            stdev: 50.0,
            min: 1,
            max: u64::MAX,
            dist: None,
        };
        let (m, sd) = stats(&draw(&normal, &mut rng));
        assert!(
            (m - 500.0).abs() < 3.0 && (sd - 50.0).abs() < 3.0,
            "{m} {sd}"
        );
        let uni = Length {
            mean: 2048,
            stdev: 0.0,
            min: 1,
            max: 4096,
            dist: Some(Dist::Uniform),
        };
        let v = draw(&uni, &mut rng);
        let (m, _) = stats(&v);
        assert!((m - 2048.0).abs() < 40.0, "{m}");
        assert!(v.iter().all(|&x| (1..=4096).contains(&x)));
        let logn = Length {
            mean: 220,
            stdev: 180.0,
            min: 1,
            max: u64::MAX,
            dist: Some(Dist::LogNormal),
        };
        let (m, sd) = stats(&draw(&logn, &mut rng));
        assert!(
            (m - 220.0).abs() < 10.0 && (sd - 180.0).abs() < 20.0,
            "{m} {sd}"
        );
        let clamped = Length {
            mean: 100,
            stdev: 1000.0,
            min: 50,
            max: 150,
            dist: None,
        };
        assert!(draw(&clamped, &mut rng)
            .iter()
            .all(|&x| (50..=150).contains(&x)));
    }

    #[test]
    fn long_prompts_are_generated_within_a_memory_budget() {
        let s = Synthetic::parse("prompt_tokens=100000,output_tokens=8").unwrap();
        let items = s.generate(1, &crate::tokenizer::Builtin).unwrap();
        let bytes: usize = items.iter().map(|i| i.text.len()).sum();
        assert!(
            items.len() >= MIN_SAMPLES && items.len() < 1000,
            "{}",
            items.len()
        );
        assert!(bytes < PROMPT_BUDGET_BYTES + (2 << 20), "{bytes}");
        assert!(items.iter().all(|i| i.prompt_tokens == 100_000));
        // Short prompts: every sample asked for.
        let s = Synthetic::parse("prompt_tokens=64,output_tokens=8,samples=300").unwrap();
        assert_eq!(
            s.generate(1, &crate::tokenizer::Builtin).unwrap().len(),
            300
        );
    }
}
