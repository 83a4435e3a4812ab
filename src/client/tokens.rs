//! How many tokens a stream carried, and how many each chunk carried.

use tokio::time::Instant;

use super::record::TokenSource;

/// Settles the output token count and the tokens of each chunk.
///
/// With the server's `usage`, the total is exact; the per-chunk counts (used to
/// split multi-token chunks into ITL gaps) are the tokenizer's estimates scaled
/// to that total, and exactly one per chunk when the total equals the number of
/// chunks. Without usage, the tokenizer's count of the text is used; without
/// any text, one token per chunk.
pub fn finish_token_counts(
    chunks: &mut [(Instant, u32)],
    usage: Option<u64>,
    any_text: bool,
) -> (u64, TokenSource) {
    let n_chunks = chunks.len() as u64;
    match usage {
        Some(total) if total > 0 && n_chunks > 0 => {
            if total <= n_chunks {
                for c in chunks.iter_mut() {
                    c.1 = 1;
                }
            } else {
                scale_to_total(chunks, total);
            }
            (total, TokenSource::Usage)
        }
        Some(total) if n_chunks == 0 => (total, TokenSource::Usage),
        _ if any_text => (
            chunks.iter().map(|c| c.1 as u64).sum(),
            TokenSource::Tokenizer,
        ),
        _ => {
            for c in chunks.iter_mut() {
                c.1 = 1;
            }
            (n_chunks, TokenSource::Chunks)
        }
    }
}

/// [`finish_token_counts`] for a stream that may have carried thinking:
/// `thinking` (per chunk, its estimated thinking tokens; empty without any)
/// is scaled with its chunks, a chunk of thinking only staying all thinking
/// and a chunk with answer text keeping at least one answer token. When the
/// server counts reasoning tokens it did not stream (hidden thinking), the
/// streamed chunks share only the visible rest of `usage`; the output total
/// is `usage` all the same.
pub fn finish_with_thinking(
    chunks: &mut [(Instant, u32)],
    thinking: &mut [u32],
    usage: Option<u64>,
    reasoning_usage: Option<u64>,
    any_text: bool,
) -> (u64, TokenSource) {
    let hidden = match (thinking.is_empty(), reasoning_usage, usage) {
        (true, Some(r), Some(total)) if r > 0 && r < total => r,
        _ => 0,
    };
    let before: Vec<u32> = if thinking.is_empty() {
        Vec::new()
    } else {
        chunks.iter().map(|c| c.1).collect()
    };
    let (total, source) = finish_token_counts(chunks, usage.map(|u| u - hidden), any_text);
    for ((t, c), old) in thinking.iter_mut().zip(chunks.iter()).zip(&before) {
        let (new, old) = (c.1, (*old).max(1));
        *t = if *t >= old {
            new
        } else if *t == 0 || new < 2 {
            // One token for a chunk with answer text: the answer's.
            0
        } else {
            // A chunk that ended the thinking: its share, leaving the answer one.
            ((u64::from(*t) * u64::from(new) + u64::from(old) / 2) / u64::from(old))
                .clamp(1, u64::from(new - 1)) as u32
        };
    }
    (total + hidden, source)
}

/// Scales the per-chunk estimates so they add up to `total` (each at least 1),
/// by largest remainder.
pub(super) fn scale_to_total(chunks: &mut [(Instant, u32)], total: u64) {
    let n = chunks.len() as u64;
    // Give every chunk one token, then share the rest by the estimates.
    let rest = total - n;
    let extra_est: u64 = chunks.iter().map(|c| c.1.max(1) as u64 - 1).sum();
    let mut assigned = 0u64;
    let mut remainders: Vec<(u64, usize)> = Vec::with_capacity(chunks.len());
    for (i, c) in chunks.iter_mut().enumerate() {
        let weight = if extra_est > 0 {
            c.1.max(1) as u64 - 1
        } else {
            1 // no hint: share evenly
        };
        let denom = if extra_est > 0 { extra_est } else { n };
        let share = rest * weight / denom;
        let rem = rest * weight % denom;
        remainders.push((rem, i));
        c.1 = (1 + share) as u32;
        assigned += share;
    }
    remainders.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    for &(_, i) in remainders.iter().take((rest - assigned) as usize) {
        chunks[i].1 += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunks(est: &[u32]) -> Vec<(Instant, u32)> {
        let t = Instant::now();
        est.iter().map(|&e| (t, e)).collect()
    }

    #[test]
    fn usage_wins_and_one_token_per_chunk_when_it_matches() {
        let mut c = chunks(&[2, 1, 3]);
        assert_eq!(
            finish_token_counts(&mut c, Some(3), true),
            (3, TokenSource::Usage)
        );
        assert!(c.iter().all(|x| x.1 == 1));
    }

    #[test]
    fn multi_token_chunks_are_scaled_to_the_usage_total() {
        let mut c = chunks(&[4, 4, 2]);
        assert_eq!(finish_token_counts(&mut c, Some(10), true).0, 10);
        assert_eq!(c.iter().map(|x| x.1).collect::<Vec<_>>(), vec![4, 4, 2]);
        let mut c = chunks(&[1, 1, 1, 1]);
        finish_token_counts(&mut c, Some(10), true);
        assert_eq!(c.iter().map(|x| x.1 as u64).sum::<u64>(), 10);
        assert!(c.iter().all(|x| x.1 >= 2));
    }

    #[test]
    fn thinking_is_scaled_with_its_chunks() {
        // Two chunks of thinking, one that ends it, two of answer; usage agrees.
        let mut c = chunks(&[2, 2, 2, 2, 1]);
        let mut t = vec![2, 2, 1, 0, 0];
        assert_eq!(
            finish_with_thinking(&mut c, &mut t, Some(9), Some(5), true),
            (9, TokenSource::Usage)
        );
        assert_eq!(t, vec![2, 2, 1, 0, 0]);
        // Usage counts one token a chunk: the crossing chunk is the answer's.
        let mut c = chunks(&[2, 2, 2, 2, 1]);
        let mut t = vec![2, 2, 1, 0, 0];
        finish_with_thinking(&mut c, &mut t, Some(5), Some(2), true);
        assert_eq!(t, vec![1, 1, 0, 0, 0]);
        // Thinking the server counted but never streamed (hidden): the
        // streamed chunks share the visible rest.
        let mut c = chunks(&[1, 1, 1, 1]);
        let mut t = vec![];
        assert_eq!(
            finish_with_thinking(&mut c, &mut t, Some(20), Some(16), true),
            (20, TokenSource::Usage)
        );
        assert!(c.iter().all(|x| x.1 == 1), "{c:?}");
    }

    #[test]
    fn without_usage_the_tokenizer_then_the_chunks_count() {
        let mut c = chunks(&[2, 3]);
        assert_eq!(
            finish_token_counts(&mut c, None, true),
            (5, TokenSource::Tokenizer)
        );
        let mut c = chunks(&[2, 3]);
        assert_eq!(
            finish_token_counts(&mut c, None, false),
            (2, TokenSource::Chunks)
        );
    }
}
