//! `--shard I/N` over the entries of the data: a trace's rows and the
//! data's conversations. Entry `k` (its position in the whole: a trace row's
//! index in time order, a conversation's index in the run's list after the
//! seeded shuffle) belongs to shard `splitmix64(k) mod N`. Every shard reads
//! the same data with the same seed, so the N subsets partition the whole
//! exactly, each entry keeps its own text (built from its position in the
//! whole), and a trace row keeps its due time from the whole trace's first
//! row: the N shards together replay exactly the trace's requests at its
//! times. The hash (not `k mod N`) spreads entries that recur with a period.

use anyhow::{bail, Result};

/// SplitMix64's finalizer: a fixed, well-spread hash of a 64-bit number
/// (the same on every machine and in every release).
pub fn stable_hash(k: u64) -> u64 {
    let mut z = k.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The shard (of `count`) that entry `k` belongs to.
pub fn owner(k: u64, count: u32) -> u32 {
    (stable_hash(k) % u64::from(count.max(1))) as u32
}

/// Shard `index` of `count`'s entries of `all`, in their order.
pub fn subset<T>(all: Vec<T>, index: u32, count: u32) -> Vec<T> {
    all.into_iter()
        .enumerate()
        .filter(|(k, _)| owner(*k as u64, count) == index)
        .map(|(_, e)| e)
        .collect()
}

/// A replay's prompts and due times (seconds from the whole trace's first
/// row), cut to shard `index` of `count`; refused when that leaves the
/// shard nothing (fewer rows than shards, or an unlucky few).
pub fn replay(
    items: Vec<super::PromptItem>,
    offsets: Vec<f64>,
    index: u32,
    count: u32,
) -> Result<(Vec<super::PromptItem>, Vec<f64>)> {
    let total = offsets.len();
    let items = subset(items, index, count);
    let offsets = subset(offsets, index, count);
    if offsets.is_empty() {
        bail!(
            "--shard {index}/{count}: none of the trace's {total} requests falls to this shard (requests go to shards by a hash of their row): replay a longer trace or run fewer shards"
        );
    }
    Ok((items, offsets))
}

/// The data's conversations for shard `index` of `count`; refused when
/// that leaves the shard none.
pub fn conversations<T>(all: Vec<T>, index: u32, count: u32) -> Result<Vec<T>> {
    let total = all.len();
    let mine = subset(all, index, count);
    if mine.is_empty() {
        bail!(
            "--shard {index}/{count}: none of the data's {total} conversations falls to this shard (conversations go to shards by a hash of their place in the data): give more conversations or run fewer shards"
        );
    }
    Ok(mine)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The N shards' subsets partition the whole exactly: every entry in
    /// one shard, none twice, each shard's in the whole's order; and the
    /// assignment is stable (pinned values).
    #[test]
    fn the_shards_subsets_partition_the_whole_exactly() {
        let whole: Vec<u64> = (0..1000).collect();
        for n in 1..=8u32 {
            let parts: Vec<Vec<u64>> = (0..n).map(|i| subset(whole.clone(), i, n)).collect();
            let mut union: Vec<u64> = parts.iter().flatten().copied().collect();
            assert_eq!(union.len(), whole.len(), "{n} shards");
            union.sort_unstable();
            assert_eq!(union, whole, "{n} shards");
            for p in &parts {
                assert!(p.windows(2).all(|w| w[0] < w[1]), "in order");
                // Spread: each shard near 1000/n.
                let share = 1000.0 / f64::from(n);
                assert!(
                    (p.len() as f64 - share).abs() < share * 0.25 + 10.0,
                    "{n}: {}",
                    p.len()
                );
            }
        }
        let pinned: Vec<u32> = (0..8).map(|k| owner(k, 4)).collect();
        assert_eq!(
            pinned,
            (0..8)
                .map(|k| (stable_hash(k) % 4) as u32)
                .collect::<Vec<_>>()
        );
        assert_eq!(stable_hash(0), 0xE220_A839_7B1D_CDAF);
    }

    #[test]
    fn a_replay_keeps_its_rows_times_and_refuses_an_empty_shard() {
        let items: Vec<super::super::PromptItem> = (0..20)
            .map(|k| super::super::PromptItem {
                images: Vec::new(),
                text: format!("row {k}"),
                prompt_tokens: k,
                output_tokens: Some(1),
                shared_prefix_bytes: 0,
                respell: None,
            })
            .collect();
        let offsets: Vec<f64> = (0..20).map(|k| k as f64 * 0.5).collect();
        let mut seen = Vec::new();
        for i in 0..3 {
            let (it, off) = replay(items.clone(), offsets.clone(), i, 3).unwrap();
            assert_eq!(it.len(), off.len());
            for (p, o) in it.iter().zip(&off) {
                // Each row keeps its own prompt and its time in the whole.
                assert_eq!(*o, p.prompt_tokens as f64 * 0.5);
                seen.push(p.prompt_tokens);
            }
        }
        seen.sort_unstable();
        assert_eq!(seen, (0..20).collect::<Vec<_>>());
        let e = replay(
            items[..1].to_vec(),
            offsets[..1].to_vec(),
            1 - owner(0, 2),
            2,
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("none of the trace's 1 requests"), "{e}");
        assert!(conversations(vec![1], 1 - owner(0, 2), 2).is_err());
    }
}
