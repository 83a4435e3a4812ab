//! What makes a finished stage's numbers doubtful, as data: the rules in
//! `stats::judge` and `stats::thinking` fill it, and its words — each with
//! the fix — are made here, once, for every screen and file. report.json
//! keeps the words (a list of strings, as it always has); a report read back
//! from a file has the words only (`Said`).

use std::fmt;

/// The fewest median request latencies a stage should last: shorter, and
/// at high rates most of its requests are still in flight when it ends and
/// count as incomplete (seed 003: high-rate stages reported zero
/// completed). The sweep's header warns with it, and a stage's warnings.
/// (docs/METRICS.md lists it with the judgement's numbers.)
pub const LATENCIES_PER_STAGE: f64 = 3.0;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

#[derive(Debug, Clone, PartialEq)]
pub enum StageWarning {
    /// The client could not keep the pace: its self-check's words.
    ClientLimited(String),
    /// The client's own timing lagged: its self-check's words.
    ClientTiming(String),
    /// No request completed within the stage.
    NoneCompleted { duration_s: f64, in_flight: u64 },
    /// The stage lasted less than three median latencies.
    ShorterThanLatency { duration_s: f64, latency_s: f64 },
    /// More requests were still in flight at the end than completed.
    MostlyInFlight { incomplete: u64, completed: u64 },
    /// A flood that read below the synchronous stage: it measured the
    /// server's queue, not its capacity.
    FloodQueued {
        rate: f64,
        sync_rate: f64,
        latency_s: f64,
        incomplete: u64,
        sent: u64,
    },
    /// A flood whose requests timed out, so its rate counts answers only.
    FloodTimedOut {
        timeouts: u64,
        sent: u64,
        latency_s: f64,
    },
    /// The server's prefix cache served this share (0–1) of prompt tokens.
    PrefixCache { share: f64 },
    /// The verdict could not decide: its reason (said with the verdict, so
    /// the timeline and judgement lines do not say it twice).
    Inconclusive(String),
    /// Received output lengths differ from those asked for.
    OutputLengths {
        requests: u64,
        asked: f64,
        got: f64,
        change: f64,
    },
    /// The server's usage and llmsweep's tokenizer count output differently.
    TokenCounts {
        requests: u64,
        server: f64,
        client: f64,
        change: f64,
    },
    /// Thinking requests that ran out of tokens before any answer token.
    NoAnswer { no_answer: u64, requests: u64 },
    /// Read back from a saved report: the words only.
    Said(String),
}

impl StageWarning {
    /// True when the stage's verdict already says this: the inconclusive
    /// verdict's own reason. (For a report read from a file only the words
    /// are left, and the same words are the same warning.)
    pub fn is_verdict_reason(&self, reason: Option<&str>) -> bool {
        match self {
            StageWarning::Inconclusive(_) => true,
            StageWarning::Said(w) => Some(w.as_str()) == reason,
            _ => false,
        }
    }
}

impl fmt::Display for StageWarning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StageWarning::ClientLimited(w)
            | StageWarning::ClientTiming(w)
            | StageWarning::Inconclusive(w)
            | StageWarning::Said(w) => f.write_str(w),
            StageWarning::NoneCompleted {
                duration_s,
                in_flight,
            } => write!(
                f,
                "no request completed in {duration_s:.1} s ({in_flight} still in flight at the end): the stage is shorter than one request; lengthen the stages or use --drain"
            ),
            StageWarning::ShorterThanLatency {
                duration_s,
                latency_s,
            } => write!(
                f,
                "the {duration_s:.1} s stage is shorter than {LATENCIES_PER_STAGE:.0} × its median latency ({latency_s:.1} s): use --max-seconds {:.0} or more",
                (LATENCIES_PER_STAGE * latency_s).ceil()
            ),
            StageWarning::MostlyInFlight {
                incomplete,
                completed,
            } => write!(
                f,
                "{incomplete} requests were still in flight at the end against {completed} completed: the numbers describe the stage's first requests, not the server under this load"
            ),
            StageWarning::FloodQueued {
                rate,
                sync_rate,
                latency_s,
                incomplete,
                sent,
            } => write!(
                f,
                "the throughput stage measured queueing, not capacity ({rate:.2} req/s, below the synchronous {sync_rate:.2} req/s; median latency {latency_s:.1} s; {incomplete} of {sent} requests incomplete): the server gains nothing from its queue; a --max-concurrency near its slots measures what it holds"
            ),
            StageWarning::FloodTimedOut {
                timeouts,
                sent,
                latency_s,
            } => write!(
                f,
                "{timeouts} of {sent} requests timed out in the throughput stage (median latency of the rest {latency_s:.1} s): its rate counts answers only, so it reads under the server's capacity and the sweep's rates stop short; raise --request-timeout above the flood's latency"
            ),
            StageWarning::PrefixCache { share } => write!(
                f,
                "the server served {:.0}% of prompt tokens from its prefix cache: TTFT is lower than fresh prompts would see",
                share * 100.0
            ),
            StageWarning::OutputLengths {
                requests,
                asked,
                got,
                change,
            } => output_lengths(f, *requests, *asked, *got, *change),
            StageWarning::TokenCounts {
                server,
                client,
                change,
                ..
            } => token_counts(f, *server, *client, *change),
            StageWarning::NoAnswer {
                no_answer,
                requests,
            } => write!(
                f,
                "{no_answer} of {requests} thinking requests ran out of output tokens before any answer token: raise the output length (max_tokens counts the thinking), or their TTFAT is missing"
            ),
        }
    }
}

/// [`StageWarning::OutputLengths`] in words.
fn output_lengths(
    f: &mut fmt::Formatter<'_>,
    requests: u64,
    asked: f64,
    got: f64,
    change: f64,
) -> fmt::Result {
    let why = if change < 0.0 {
        "the server stopped early (does it ignore `ignore_eos`, or stop at a stop token?)"
    } else {
        "the server generated past max_tokens, or counts tokens differently"
    };
    write!(
        f,
        "output lengths: {requests} requests asked for {asked:.1} tokens on average and received {got:.1} ({:+.1}%): {why}; throughput and TPOT describe other lengths than the data asked for",
        change * 100.0
    )
}

/// [`StageWarning::TokenCounts`] in words.
fn token_counts(f: &mut fmt::Formatter<'_>, server: f64, client: f64, change: f64) -> fmt::Result {
    write!(
        f,
        "token counts: the server counted {server:.1} output tokens per request (usage), llmsweep's tokenizer {client:.1} in the streamed text ({:+.1}%): a tokenizer mismatch (pass --tokenizer with the model's tokenizer.json) or text the server does not count; the report uses the server's count",
        change * 100.0
    )
}

/// Written as its words: report.json's `warnings` stay a list of strings.
impl Serialize for StageWarning {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for StageWarning {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        String::deserialize(d).map(StageWarning::Said)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_warning_is_written_as_its_words_and_read_back_as_them() {
        let w = StageWarning::MostlyInFlight {
            incomplete: 12,
            completed: 3,
        };
        let json = serde_json::to_string(&vec![w.clone()]).unwrap();
        assert_eq!(
            json,
            "[\"12 requests were still in flight at the end against 3 completed: the numbers describe the stage's first requests, not the server under this load\"]"
        );
        let back: Vec<StageWarning> = serde_json::from_str(&json).unwrap();
        assert_eq!(back, vec![StageWarning::Said(w.to_string())]);
    }

    #[test]
    fn the_verdicts_reason_is_known_by_kind_and_read_back_by_its_words() {
        let reason = "stage too short for a verdict";
        assert!(StageWarning::Inconclusive(reason.into()).is_verdict_reason(None));
        assert!(StageWarning::Said(reason.into()).is_verdict_reason(Some(reason)));
        assert!(!StageWarning::Said("other".into()).is_verdict_reason(Some(reason)));
        assert!(!StageWarning::PrefixCache { share: 0.5 }.is_verdict_reason(Some(reason)));
    }

    #[test]
    fn the_fix_follows_the_direction_of_the_difference() {
        let w = |change| StageWarning::OutputLengths {
            requests: 10,
            asked: 100.0,
            got: 100.0 * (1.0 + change),
            change,
        };
        assert!(w(-0.2).to_string().contains("stopped early"));
        assert!(w(0.2).to_string().contains("generated past max_tokens"));
        assert!(w(0.2).to_string().contains("(+20.0%)"));
    }
}
