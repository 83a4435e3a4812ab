//! A stage's multi-turn conversations: how many started, finished, were cut
//! off at the stage's end or failed, and each turn's figures.

use serde::{Deserialize, Serialize};

use super::dist::DistSummary;

/// Conversations of one stage (`--data turns=N`): its target rate counts
/// conversations started, and `started = completed + cut_off + failed`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Conversations {
    pub started: u64,
    /// Every turn completed.
    pub completed: u64,
    /// Still going when the stage ended: a turn cancelled in flight, or the
    /// next turn not yet sent (its think time had not passed).
    pub cut_off: u64,
    /// A turn errored: the conversation went no further.
    pub failed: u64,
    /// Figures per turn (the first turn first), over every completed turn the stage sent.
    pub by_turn: Vec<TurnFigures>,
}

/// One turn index across a stage's conversations.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TurnFigures {
    /// 1 for the first turn.
    pub turn: u32,
    pub completed: u64,
    pub ttft_ms: DistSummary,
    pub itl_ms: DistSummary,
    /// Mean prompt tokens (the history so far and the turn's own message).
    pub prompt_tokens_mean: f64,
    /// Share of those the server said it served from its prefix cache
    /// (None when it never said).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached_share: Option<f64>,
}
