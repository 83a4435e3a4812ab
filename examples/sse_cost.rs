//! Client CPU per MB of SSE, before and after the bounded parser.
//!
//! Feeds the same bytes, in 16 KiB reads as a socket delivers them, to the
//! `eventsource-stream` crate the client used before and to
//! `llmsweep::client::sse::SseParser`, and prints thread CPU seconds per MB.
//! Two shapes: one huge line without a newline (what a hostile or broken
//! server sends), and an ordinary stream of small token events.
//!
//! `cargo run --release --example sse_cost [MB ...]` (default 5 10 20)

use std::time::Duration;

use eventsource_stream::Eventsource;
use futures_util::StreamExt;
use llmsweep::client::sse::SseParser;

#[path = "../benches/common/mod.rs"]
mod common;
use common::thread_cpu_seconds;

const READ: usize = 16 << 10;

fn huge_line(mb: usize) -> Vec<u8> {
    let mut v = b"data: {\"choices\":[{\"delta\":{\"content\":\"".to_vec();
    v.resize(mb << 20, b'x');
    v.extend_from_slice(b"\"}}]}\n\ndata: [DONE]\n\n");
    v
}

fn small_events(mb: usize) -> Vec<u8> {
    let ev = b"data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\" word\"},\"finish_reason\":null}]}\n\n";
    let mut v = Vec::with_capacity((mb << 20) + ev.len());
    while v.len() < mb << 20 {
        v.extend_from_slice(ev);
    }
    v
}

/// Seconds of CPU the old parser spends on `bytes` (gives up after `limit`).
fn old_parser(bytes: &[u8], limit: f64) -> Option<f64> {
    let chunks: Vec<Result<bytes::Bytes, std::io::Error>> = bytes
        .chunks(READ)
        .map(|c| Ok(bytes::Bytes::copy_from_slice(c)))
        .collect();
    let rt = tokio::runtime::Builder::new_current_thread().build().ok()?;
    rt.block_on(async {
        let t0 = thread_cpu_seconds();
        let mut events = futures_util::stream::iter(chunks).eventsource();
        let mut n = 0u64;
        while let Some(ev) = events.next().await {
            if ev.is_ok() {
                n += 1;
            }
            if thread_cpu_seconds() - t0 > limit {
                return None;
            }
        }
        std::hint::black_box(n);
        Some(thread_cpu_seconds() - t0)
    })
}

fn new_parser(bytes: &[u8]) -> f64 {
    let t0 = thread_cpu_seconds();
    // A cap above the input: measure the parsing, not the early exit.
    let mut p = SseParser::new(usize::MAX / 2);
    let mut n = 0u64;
    for c in bytes.chunks(READ) {
        p.push(c).expect("push");
        while let Ok(Some(_)) = p.next_item() {
            n += 1;
        }
    }
    while let Ok(Some(_)) = p.finish() {
        n += 1;
    }
    std::hint::black_box(n);
    thread_cpu_seconds() - t0
}

fn main() {
    let sizes: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let sizes = if sizes.is_empty() {
        vec![5, 10, 20]
    } else {
        sizes
    };
    let limit = Duration::from_secs(60).as_secs_f64();
    println!(
        "{:<14} {:>5} {:>14} {:>14} {:>12} {:>12}",
        "shape", "MB", "old CPU s", "new CPU s", "old s/MB", "new s/MB"
    );
    for (shape, make) in [
        ("one line", huge_line as fn(usize) -> Vec<u8>),
        ("small events", small_events),
    ] {
        for &mb in &sizes {
            let bytes = make(mb);
            let old = old_parser(&bytes, limit);
            let new = new_parser(&bytes);
            let old_s = old.map_or(format!(">{limit:.0}"), |s| format!("{s:.3}"));
            let old_per = old.map_or("-".into(), |s| format!("{:.4}", s / mb as f64));
            println!(
                "{shape:<14} {mb:>5} {old_s:>14} {new:>14.3} {old_per:>12} {:>12.4}",
                new / mb as f64
            );
        }
    }
}
