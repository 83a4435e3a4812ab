//! Per-request metric formulas (see docs/METRICS.md and DESIGN's timing model).
//! All values are microseconds.

use std::time::Duration;

use crate::client::RequestRecord;
use crate::types::Slo;

fn us(d: Duration) -> u64 {
    d.as_micros().min(u64::MAX as u128) as u64
}

/// TTFT = first token-bearing chunk − sent. A role-only delta is not a token.
pub fn ttft_us(r: &RequestRecord) -> Option<u64> {
    r.first_token_at()
        .map(|t| us(t.saturating_duration_since(r.sent_at)))
}

/// Time to the first reasoning (thinking) token = its chunk − sent; None
/// when the stream carried no thinking.
pub fn ttfrt_us(r: &RequestRecord) -> Option<u64> {
    let i = r.thinking.iter().position(|&t| t > 0)?;
    r.chunks
        .get(i)
        .map(|c| us(c.0.saturating_duration_since(r.sent_at)))
}

/// Index of the first chunk with answer tokens (not only thinking).
pub fn first_answer(r: &RequestRecord) -> Option<usize> {
    (0..r.chunks.len()).find(|&i| r.thinking_in(i) < r.chunks[i].1)
}

/// Time to the first answer token (TTFAT) = the first chunk with answer
/// tokens − sent: what a user waits for. Equals TTFT for a request that
/// did not think (or did not stream its thinking); None when only thinking
/// came (the output ran out before the answer).
pub fn ttfat_us(r: &RequestRecord) -> Option<u64> {
    first_answer(r).map(|i| us(r.chunks[i].0.saturating_duration_since(r.sent_at)))
}

/// ITL over answer tokens: the gap between consecutive chunks with answer
/// tokens, split by the answer tokens of the later one (the thinking between
/// them is part of the wait). The same as [`itl_gaps`] without thinking.
pub fn answer_itl_gaps(r: &RequestRecord) -> impl Iterator<Item = (u64, u64)> + '_ {
    let answer = |i: usize| r.chunks[i].1.saturating_sub(r.thinking_in(i));
    let mut prev: Option<usize> = None;
    (0..r.chunks.len()).filter_map(move |i| {
        if answer(i) == 0 {
            return None;
        }
        let gap = prev.map(|p| {
            let k = answer(i).max(1) as u64;
            (
                us(r.chunks[i].0.saturating_duration_since(r.chunks[p].0)) / k,
                k,
            )
        });
        prev = Some(i);
        gap
    })
}

/// ITL: the gap between consecutive token-bearing chunks; a chunk carrying k
/// tokens contributes k gaps of gap/k (vLLM-style per-gap ITL). Yields
/// `(gap_us, k)` pairs.
pub fn itl_gaps(r: &RequestRecord) -> impl Iterator<Item = (u64, u64)> + '_ {
    r.chunks.windows(2).map(|w| {
        let k = w[1].1.max(1) as u64;
        (us(w[1].0.saturating_duration_since(w[0].0)) / k, k)
    })
}

/// TPOT = (end − first token) / (output tokens − 1); undefined for one token.
pub fn tpot_us(r: &RequestRecord) -> Option<u64> {
    let first = r.first_token_at()?;
    if r.output_tokens < 2 {
        return None;
    }
    Some(us(r.ended_at.saturating_duration_since(first)) / (r.output_tokens - 1))
}

/// End-to-end latency = end − sent.
pub fn latency_us(r: &RequestRecord) -> u64 {
    us(r.ended_at.saturating_duration_since(r.sent_at))
}

/// Client-side queueing = sent − scheduled: how late the load generator was.
/// Open-loop runs keep it so that coordinated omission shows instead of hiding.
pub fn queue_us(r: &RequestRecord) -> u64 {
    us(r.sent_at.saturating_duration_since(r.scheduled_at))
}

/// Mean ITL of one request (for SLO checks): (last − first chunk) / gaps.
pub fn mean_itl_us(r: &RequestRecord) -> Option<u64> {
    let (first, last) = (r.chunks.first()?, r.chunks.last()?);
    let gaps: u64 = r.chunks.iter().skip(1).map(|c| c.1.max(1) as u64).sum();
    if gaps == 0 {
        return None;
    }
    Some(us(last.0.saturating_duration_since(first.0)) / gaps)
}

impl Slo {
    /// Parses `ttft=200ms,itl=50ms,e2e=10s` (units: us, ms, s). A number
    /// without a unit is refused, naming the fix: `ttft=200` was silently
    /// 200 ms, and is 200 s to someone else (vLLM's `--goodput ttft:200`
    /// reads milliseconds, durations elsewhere read seconds).
    pub fn parse(s: &str) -> Result<Slo, String> {
        let mut slo = Slo::default();
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (k, v) = part
                .split_once('=')
                .ok_or_else(|| format!("--slo: {part:?} should look like ttft=200ms"))?;
            let (k, v) = (k.trim(), v.trim());
            if v.parse::<f64>().is_ok() {
                return Err(format!(
                    "--slo: {k}={v} has no unit: write {k}={v}ms for milliseconds or {k}={v}s for seconds"
                ));
            }
            let ms = parse_duration_ms(v)
                .ok_or_else(|| format!("--slo: {v:?} is not a duration (try 200ms or 1.5s)"))?;
            let slot = match k.to_ascii_lowercase().as_str() {
                "ttft" => &mut slo.ttft_ms,
                "ttfat" | "ttfot" => &mut slo.ttfat_ms,
                "itl" => &mut slo.itl_ms,
                "tpot" => &mut slo.tpot_ms,
                "e2e" | "latency" | "e2el" => &mut slo.e2e_ms,
                other => {
                    return Err(format!(
                        "--slo: unknown metric {other:?} (use ttft, ttfat, itl, tpot or e2e)"
                    ))
                }
            };
            *slot = Some(ms);
        }
        if slo == Slo::default() {
            return Err("--slo needs at least one limit, e.g. ttft=200ms".into());
        }
        Ok(slo)
    }

    /// For a request that thinks, a `ttft` limit is checked against the time
    /// to the first answer token, the latency its user waits for (a `ttfat`
    /// limit always is). [`Slo::waited_for`] says so in the report.
    pub fn is_met(&self, r: &RequestRecord) -> bool {
        let ok = |limit: Option<f64>, value: Option<u64>| match (limit, value) {
            (None, _) => true,
            (Some(l), Some(v)) => v as f64 / 1000.0 <= l,
            (Some(_), None) => true, // undefined for this request (e.g. one token)
        };
        let first = if r.saw_reasoning() {
            ttfat_us(r)
        } else {
            ttft_us(r)
        };
        // No first (answer) token at all: the user got no answer in time.
        let ok_first = |limit: Option<f64>, value: Option<u64>| {
            limit.is_none() || value.is_some() && ok(limit, value)
        };
        ok_first(self.ttft_ms, first)
            && ok_first(self.ttfat_ms, ttfat_us(r))
            && ok(self.itl_ms, mean_itl_us(r))
            && ok(self.tpot_ms, tpot_us(r))
            && ok(self.e2e_ms, Some(latency_us(r)))
    }
}

impl Slo {
    /// What the report says about the first-token limit when the server was
    /// seen to think: the limit was checked against the first answer token.
    pub fn waited_for(&self, reasoning_seen: bool) -> Option<&'static str> {
        (reasoning_seen && (self.ttft_ms.is_some() || self.ttfat_ms.is_some())).then_some(
            "reasoning seen: the ttft limit is checked against the time to the first answer token (TTFAT), what users wait for",
        )
    }
}

/// `200ms`, `1.5s`, `800us`, in milliseconds; None without a unit.
pub fn parse_duration_ms(s: &str) -> Option<f64> {
    let (num, scale) = if let Some(n) = s.strip_suffix("ms") {
        (n, 1.0)
    } else if let Some(n) = s.strip_suffix("us").or_else(|| s.strip_suffix("µs")) {
        (n, 0.001)
    } else if let Some(n) = s.strip_suffix('s') {
        (n, 1000.0)
    } else {
        return None;
    };
    let v: f64 = num.trim().parse().ok()?;
    let ms = v * scale;
    (v.is_finite() && v >= 0.0 && ms.is_finite()).then_some(ms)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::RequestOutcome;
    use tokio::time::Instant;

    fn record(chunks_ms: &[(u64, u32)], end_ms: u64, tokens: u64) -> RequestRecord {
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        RequestRecord {
            ended_at: at(end_ms),
            chunks: chunks_ms.iter().map(|&(ms, k)| (at(ms), k)).collect(),
            output_tokens: tokens,
            outcome: RequestOutcome::Completed,
            ..RequestRecord::sent(t0, at(5), 10)
        }
    }

    #[test]
    fn formulas_match_the_timing_model() {
        // sent at 5 ms, first token at 105, a 3-token chunk at 135, last at 155.
        let r = record(&[(105, 1), (135, 3), (155, 1)], 160, 5);
        assert_eq!(ttft_us(&r), Some(100_000));
        let gaps: Vec<_> = itl_gaps(&r).collect();
        assert_eq!(gaps, vec![(10_000, 3), (20_000, 1)]);
        assert_eq!(tpot_us(&r), Some(55_000 / 4));
        assert_eq!(latency_us(&r), 155_000);
        assert_eq!(queue_us(&r), 5_000);
        assert_eq!(mean_itl_us(&r), Some(50_000 / 4));
    }

    #[test]
    fn thinking_moves_the_first_answer_token_not_ttft() {
        // sent at 5 ms; thinking at 105 and 135 (3 tokens), a chunk that ends
        // the thinking at 145 (1 of its 2 tokens thinking), answers at 155, 165.
        let mut r = record(&[(105, 1), (135, 3), (145, 2), (155, 1), (165, 2)], 170, 9);
        r.thinking = vec![1, 3, 1, 0, 0];
        assert_eq!(ttft_us(&r), Some(100_000));
        assert_eq!(ttfrt_us(&r), Some(100_000));
        assert_eq!(ttfat_us(&r), Some(140_000));
        assert_eq!(r.reasoning_tokens(), 5);
        assert_eq!(r.answer_tokens(), 4);
        let gaps: Vec<_> = answer_itl_gaps(&r).collect();
        assert_eq!(gaps, vec![(10_000, 1), (5_000, 2)]);
        // Every token: unchanged.
        assert_eq!(itl_gaps(&r).count(), 4);
        // The usage count wins over the stream's, but not a 0 against
        // streamed thinking.
        r.server_reasoning_tokens = Some(6);
        assert_eq!((r.reasoning_tokens(), r.answer_tokens()), (6, 3));
        r.server_reasoning_tokens = Some(0);
        assert_eq!(r.reasoning_tokens(), 5);
        assert!(!r.reasoning_from_usage());
        r.server_reasoning_tokens = Some(6);
        // A ttft limit judges the first answer token; so does ttfat.
        assert!(Slo::parse("ttft=120ms")
            .unwrap()
            .is_met(&record(&[(105, 1)], 110, 1)));
        assert!(!Slo::parse("ttft=120ms").unwrap().is_met(&r));
        assert!(!Slo::parse("ttfat=120ms").unwrap().is_met(&r));
        assert!(Slo::parse("ttfat=150ms").unwrap().is_met(&r));
        assert!(Slo::parse("ttft=120ms")
            .unwrap()
            .waited_for(true)
            .unwrap()
            .contains("first answer token"));
        assert_eq!(Slo::parse("ttft=120ms").unwrap().waited_for(false), None);
        // Without thinking, the first answer token is the first token.
        let plain = record(&[(105, 1), (135, 3)], 140, 4);
        assert_eq!(ttfat_us(&plain), ttft_us(&plain));
        assert_eq!(ttfrt_us(&plain), None);
        assert_eq!(
            answer_itl_gaps(&plain).collect::<Vec<_>>(),
            itl_gaps(&plain).collect::<Vec<_>>()
        );
        // Only thinking came: no answer.
        let mut cut = record(&[(105, 1), (135, 1)], 140, 2);
        cut.thinking = vec![1, 1];
        assert_eq!(ttfat_us(&cut), None);
        assert_eq!(cut.answer_tokens(), 0);
        assert!(!Slo::parse("ttft=10s").unwrap().is_met(&cut));
    }

    /// The worked example of docs/METRICS.md ("Reasoning models").
    #[test]
    fn the_worked_example_of_the_docs_holds() {
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        let mut r = record(&[], 80, 7);
        r.sent_at = t0;
        r.chunks = [(20, 1), (30, 1), (40, 1), (50, 2), (60, 1), (80, 1)]
            .iter()
            .map(|&(ms, k)| (at(ms), k))
            .collect();
        r.thinking = vec![1, 1, 1, 1, 0, 0];
        r.server_reasoning_tokens = Some(4);
        assert_eq!(
            (ttft_us(&r), ttfrt_us(&r), ttfat_us(&r)),
            (Some(20_000), Some(20_000), Some(50_000))
        );
        assert_eq!((r.reasoning_tokens(), r.answer_tokens()), (4, 3));
        let all: Vec<_> = itl_gaps(&r).collect();
        assert_eq!(all.iter().map(|g| g.1).sum::<u64>(), 6);
        assert_eq!(all.iter().map(|g| g.0 * g.1).sum::<u64>(), 60_000);
        let answer: Vec<_> = answer_itl_gaps(&r).collect();
        assert_eq!(answer, vec![(10_000, 1), (20_000, 1)]);
    }

    #[test]
    fn single_token_requests_have_no_tpot_or_itl() {
        let r = record(&[(50, 1)], 60, 1);
        assert_eq!(tpot_us(&r), None);
        assert_eq!(itl_gaps(&r).count(), 0);
        assert_eq!(mean_itl_us(&r), None);
    }

    #[test]
    fn slo_parsing_and_checks() {
        let slo = Slo::parse("ttft=200ms,itl=50ms,e2e=10s").unwrap();
        assert_eq!(slo.ttft_ms, Some(200.0));
        assert_eq!(slo.e2e_ms, Some(10_000.0));
        let fast = record(&[(105, 1), (115, 1)], 120, 2);
        assert!(slo.is_met(&fast));
        let slow = record(&[(300, 1), (310, 1)], 320, 2);
        assert!(!slo.is_met(&slow));
        assert!(Slo::parse("ttft=abc").is_err());
        assert!(Slo::parse("foo=1ms")
            .unwrap_err()
            .contains("unknown metric"));
        assert!(Slo::parse("").is_err());
        assert_eq!(parse_duration_ms("800us"), Some(0.8));
        assert_eq!(parse_duration_ms("-1"), None);
        assert_eq!(parse_duration_ms("200"), None);
    }

    /// Issue 34 item 8. Seen: `--slo ttft=200` was silently 200 ms.
    #[test]
    fn a_limit_without_a_unit_is_refused_with_the_fix() {
        let e = Slo::parse("ttft=200").unwrap_err();
        assert_eq!(
            e,
            "--slo: ttft=200 has no unit: write ttft=200ms for milliseconds or ttft=200s for seconds"
        );
        let e = Slo::parse("ttft=200ms, itl = 0.05").unwrap_err();
        assert!(e.contains("itl=0.05 has no unit: write itl=0.05ms"), "{e}");
        assert_eq!(Slo::parse("ttft=0.2s").unwrap().ttft_ms, Some(200.0));
    }
}
