//! The CPU a streamed chunk costs to read: llmsweep's direct reading of the
//! common shape (`client::chunk_plain`) against serde's (`client::chunk`),
//! on the chunks of llmsweep's simulator, vLLM and llama.cpp, and a stream's
//! last chunk with its usage counts.
//!
//!     cargo run --release --example chunk_cost [ROUNDS]
//!
//! Prints thread CPU nanoseconds per chunk for each, and for the chunks of
//! a 16-token answer read as a stream is (`chunk_plain::LastChunk`: each by
//! the last one's shape where it can be); for counts that do not depend on
//! a busy machine, run it under `valgrind --tool=callgrind` and read
//! `chunk_plain::read`, `chunk::parse_chunk` and `LastChunk::parse` per call,
//! and `SseParser::next_made` for the framing of each event (the answer's
//! events each in a read of its own, as a socket delivers them).

use std::hint::black_box;

use llmsweep::client::sse::{SseItem, SseParser, DEFAULT_MAX_LINE};
use llmsweep::client::{chunk, chunk_plain};

#[path = "../benches/common/mod.rs"]
mod common;
use common::thread_cpu_seconds;

const CHUNKS: [&str; 4] = [
    r#"{"id":"chatcmpl-0","object":"chat.completion.chunk","created":1795925892,"model":"llmsweep-sim","choices":[{"index":0,"delta":{"content":" latency"},"logprobs":null,"finish_reason":null}]}"#,
    r#"{"id":"chatcmpl-b84161a7a4d1c0e3","object":"chat.completion.chunk","created":1795930333,"model":"tiny-llama","choices":[{"index":0,"delta":{"content":" oc"},"logprobs":null,"finish_reason":null,"token_ids":null}]}"#,
    r#"{"choices":[{"finish_reason":null,"index":0,"delta":{"content":" winte"}}],"created":1795929117,"id":"chatcmpl-a82R","model":"/work/realsrv/model.gguf","system_fingerprint":"b1-0c1e570","object":"chat.completion.chunk"}"#,
    // The last chunk of a stream: its counts.
    r#"{"id":"chatcmpl-0","object":"chat.completion.chunk","created":1795935207,"model":"llmsweep-sim","choices":[],"usage":{"prompt_tokens":2,"total_tokens":6,"completion_tokens":4}}"#,
];

fn main() {
    let rounds: u32 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(200_000);
    for c in CHUNKS {
        assert!(chunk_plain::read(c).is_some(), "not read directly: {c}");
    }
    let per = |f: &dyn Fn(&str) -> bool| {
        let t0 = thread_cpu_seconds();
        let mut n = 0u32;
        for _ in 0..rounds {
            for c in CHUNKS {
                n += u32::from(f(black_box(c)));
            }
        }
        black_box(n);
        (thread_cpu_seconds() - t0) * 1e9 / f64::from(rounds) / CHUNKS.len() as f64
    };
    let direct = per(&|c| chunk_plain::read(c).is_some_and(|i| i.has_output || i.usage.is_some()));
    let serde = per(&|c| chunk::parse_chunk(c).is_ok_and(|i| i.has_output || i.usage.is_some()));
    // A 16-token answer from llmsweep's simulator read as a stream is:
    // each chunk by the last one's shape where it can be.
    let answer: Vec<String> = (0..16)
        .map(|i| {
            format!(
                r#"{{"id":"chatcmpl-0","object":"chat.completion.chunk","created":1795925892,"model":"llmsweep-sim","choices":[{{"index":0,"delta":{{"content":" w{i}"}},"logprobs":null,"finish_reason":{}}}]}}"#,
                if i == 15 { "\"length\"" } else { "null" }
            )
        })
        .collect();
    let t0 = thread_cpu_seconds();
    for _ in 0..rounds / 4 {
        let mut last = chunk_plain::LastChunk::default();
        for c in &answer {
            black_box(last.parse(black_box(c)).is_ok_and(|i| i.has_output));
        }
    }
    let stream = (thread_cpu_seconds() - t0) * 1e9 / f64::from(rounds / 4) / answer.len() as f64;
    // The same answer as it arrives: each event in a read of its own,
    // framed by the SSE parser, then read.
    let reads: Vec<bytes::Bytes> = answer
        .iter()
        .map(|c| bytes::Bytes::from(format!("data: {c}\n\n")))
        .collect();
    let t0 = thread_cpu_seconds();
    for _ in 0..rounds / 4 {
        let mut sse = SseParser::new(DEFAULT_MAX_LINE);
        let mut last = chunk_plain::LastChunk::default();
        for r in &reads {
            if sse.push_bytes(r.clone()).is_err() {
                break;
            }
            while let Ok(Some(SseItem::Event { data, .. })) = sse.next_item() {
                black_box(last.parse(data).is_ok_and(|i| i.has_output));
            }
        }
    }
    let framed = (thread_cpu_seconds() - t0) * 1e9 / f64::from(rounds / 4) / answer.len() as f64;
    println!(
        "ns per chunk: direct {direct:.0}, serde {serde:.0} ({:.2}x); in a stream, like the last {stream:.0}; framed and read {framed:.0}",
        serde / direct
    );
}
