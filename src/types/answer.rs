//! The run's answer, as `report.json` carries it (top-level `answer`): the
//! highest rate the server held, bracketed by the stages that bound it,
//! beside the peak throughput when flooded. The rules that compute it are
//! in `stats::answer`; every screen and file says it from this one value.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Answer {
    /// The rate the server holds, req/s: between `low` and `high` when the
    /// evidence brackets it; a floor (every stage held) or a ceiling (none
    /// did) otherwise, as `bracketed` and `basis` say. None with no
    /// open-loop stage judged.
    pub requests_per_s: Option<f64>,
    /// The interval the evidence allows (about 95 %): `high` is None when
    /// no stage fell behind (the answer is then a floor).
    pub low: Option<f64>,
    pub high: Option<f64>,
    /// `high − low`, req/s, when both are known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub width_per_s: Option<f64>,
    /// Those two stages, by name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub held: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_held: Option<String>,
    /// Those two stages by their `number` in the run (absent in reports
    /// from before stages were numbered): what code finds them by.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub held_stage: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_held_stage: Option<usize>,
    /// True when the interval is closed (a stage fell behind): the answer
    /// is an estimate, not a floor.
    pub bracketed: bool,
    /// How the answer was reached, in words.
    pub basis: String,
    /// Why no rate is known, when the run ended so that none could be
    /// (the server stopped answering): the answer's line says it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_known: Option<String>,
    /// When the evidence does not bracket the answer: what to run next.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next: Option<String>,
    /// TTFT and ITL p50 (ms) users saw at the stage that held; for a model
    /// that thinks, the time to the first answer token.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttft_p50_ms: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub itl_p50_ms: Option<f64>,
    /// The throughput stage's completion rate (everything sent at once):
    /// the server flat out with an unbounded queue, not a rate it holds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flood_requests_per_s: Option<f64>,
    /// Median request latency in that stage, seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flood_latency_s: Option<f64>,
    /// That flood was cut short (a key, a signal) after this many seconds,
    /// and no whole one ran: its rate may read low (its first wave of
    /// answers may not have come back).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flood_cut_s: Option<f64>,
    /// The run's `--max-concurrency` when the stages the answer rests on
    /// held their requests in flight at it (requests waited in the client
    /// for a slot): the answer is the server's with at most that many
    /// requests at once, not its limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_concurrency: Option<u64>,
    /// The same for the flood quoted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flood_max_concurrency: Option<u64>,
    /// With `--slo`: the highest rate that met the SLOs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slo_requests_per_s: Option<f64>,
    /// That rate is a floor: the highest stage that met the SLOs, with no
    /// stage above it at a set rate to bound the limit.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub slo_floor: bool,
    /// A run of conversations: the requests (turns) a conversation
    /// brought. Its rates are then turns (requests) a second, while `--rate`
    /// and the stages' names count conversations a second (a rate ÷ this).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turns_per_conversation: Option<f64>,
    /// A run with several models (`--model a=70%,b=30%`): the mix the rate
    /// is of, `a 70% · b 30%` (absent with one model).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mix: Option<String>,
}
