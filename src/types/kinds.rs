//! Domain values that travel as strings in `report.json` and over the
//! control socket, typed here: the API, why a run or a stage ended, and the
//! kind of a timeline event (a stage's strategy is in `types::strategy`).
//! Their serde names are the strings earlier versions wrote, so old
//! reports load and new ones read the same.

use std::fmt;

use serde::{Deserialize, Serialize};

/// Which OpenAI endpoint a run loads (`--api`; `report.json`'s `target.api`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Api {
    /// `/v1/chat/completions`
    #[default]
    Chat,
    /// `/v1/completions`
    Completions,
    /// `/v1/responses`: the OpenAI Responses API (vLLM serves it too).
    Responses,
    /// `/v1/embeddings`: batched inputs, one non-streamed answer.
    Embeddings,
    /// `/v1/rerank`: a query and documents (vLLM, Jina and Cohere's shape),
    /// one non-streamed answer.
    Rerank,
    /// `/v1/score`: vLLM's scoring of `text_1` against each `text_2`.
    Score,
    /// `/v1/messages`: Anthropic's Messages API (its `message_start`,
    /// `content_block_delta`, … events), as gateways in front of vLLM and
    /// vLLM itself serve it.
    Messages,
}

impl Api {
    pub const ALL: [Api; 7] = [
        Api::Chat,
        Api::Completions,
        Api::Responses,
        Api::Embeddings,
        Api::Rerank,
        Api::Score,
        Api::Messages,
    ];

    pub fn path(self) -> &'static str {
        match self {
            Api::Chat => "/v1/chat/completions",
            Api::Completions => "/v1/completions",
            Api::Responses => "/v1/responses",
            Api::Embeddings => "/v1/embeddings",
            Api::Rerank => "/v1/rerank",
            Api::Score => "/v1/score",
            Api::Messages => "/v1/messages",
        }
    }

    /// The name the report and the command line use.
    pub fn name(self) -> &'static str {
        match self {
            Api::Chat => "chat",
            Api::Completions => "completions",
            Api::Responses => "responses",
            Api::Embeddings => "embeddings",
            Api::Rerank => "rerank",
            Api::Score => "score",
            Api::Messages => "messages",
        }
    }

    /// A pooling API (embeddings, rerank, score): inputs in, one answer
    /// out, nothing generated or streamed (no TTFT, no ITL).
    pub fn pooled(self) -> bool {
        matches!(self, Api::Embeddings | Api::Rerank | Api::Score)
    }
}

impl fmt::Display for Api {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Why a run ended (`report.json`'s `end_reason`), written as the words
/// earlier versions wrote, so old reports read the same; words that name
/// no known end are an operator's or a signal's stop.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(into = "String", from = "String")]
pub enum RunEnd {
    /// The plan is done (`completed`).
    #[default]
    Completed,
    /// A stage reached `--max-errors` (`max_errors`).
    MaxErrors,
    /// The data gave no prompts (`no_data`).
    NoData,
    /// The sweep ended before its plan, and why (`sweep stopped: why`).
    SweepStopped(String),
    /// The server stopped answering: when and how ([`RunEnd::SERVER_GONE`]
    /// then this text). The answer is then "not known".
    ServerGone(String),
    /// A report rebuilt from a checkpoint: the run itself never ended.
    Checkpoint,
    /// Stopped by the operator, a viewer or a signal, in their words.
    Stopped(String),
}

impl RunEnd {
    /// How a server-gone end reads.
    pub const SERVER_GONE: &'static str = "the server stopped answering at ";
    const SWEEP_STOPPED: &'static str = "sweep stopped: ";
    const CHECKPOINT: &'static str = "checkpoint: the stages finished before the run ended";

    /// The plan ran to its end.
    pub fn is_completed(&self) -> bool {
        *self == RunEnd::Completed
    }
}

impl fmt::Display for RunEnd {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RunEnd::Completed => f.write_str("completed"),
            RunEnd::MaxErrors => f.write_str("max_errors"),
            RunEnd::NoData => f.write_str("no_data"),
            RunEnd::SweepStopped(why) => write!(f, "{}{why}", Self::SWEEP_STOPPED),
            RunEnd::ServerGone(how) => write!(f, "{}{how}", Self::SERVER_GONE),
            RunEnd::Checkpoint => f.write_str(Self::CHECKPOINT),
            RunEnd::Stopped(why) => f.write_str(why),
        }
    }
}

impl From<String> for RunEnd {
    fn from(s: String) -> Self {
        match s.as_str() {
            "completed" => return RunEnd::Completed,
            "max_errors" => return RunEnd::MaxErrors,
            "no_data" => return RunEnd::NoData,
            Self::CHECKPOINT => return RunEnd::Checkpoint,
            _ => {}
        }
        if let Some(why) = s.strip_prefix(Self::SWEEP_STOPPED) {
            return RunEnd::SweepStopped(why.to_string());
        }
        match s.strip_prefix(Self::SERVER_GONE) {
            Some(how) => RunEnd::ServerGone(how.to_string()),
            None => RunEnd::Stopped(s),
        }
    }
}

impl From<RunEnd> for String {
    fn from(e: RunEnd) -> Self {
        e.to_string()
    }
}

/// Why a stage ended (`report.json`'s stage `end_reason`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StageEndReason {
    /// It ran its length (`--max-seconds`). (The default only fills
    /// `Default` reports.)
    #[default]
    MaxSeconds,
    /// It sent its `--max-requests`.
    MaxRequests,
    /// It reached `--max-errors` (the run stops).
    MaxErrors,
    /// The operator skipped it (`n`).
    Skipped,
    /// The operator set a new rate; the stage that rate opened follows.
    RateChanged,
    /// The run stopped during it (a key, a signal, a viewer, the server gone).
    Stopped,
    /// The over-saturation guard ended it.
    OverSaturated,
    /// `--max-seconds auto`: its evidence was conclusive.
    Conclusive,
    /// Still running: a report exported mid-stage.
    Running,
    /// Its data ran out (reports written by earlier versions).
    DataExhausted,
    /// Finished, its limit not recorded (reports written by earlier versions).
    Completed,
}

impl StageEndReason {
    /// The name `report.json` and the CSV write.
    pub fn name(self) -> &'static str {
        match self {
            StageEndReason::MaxSeconds => "max_seconds",
            StageEndReason::MaxRequests => "max_requests",
            StageEndReason::MaxErrors => "max_errors",
            StageEndReason::Skipped => "skipped",
            StageEndReason::RateChanged => "rate_changed",
            StageEndReason::Stopped => "stopped",
            StageEndReason::OverSaturated => "over_saturated",
            StageEndReason::Conclusive => "conclusive",
            StageEndReason::Running => "running",
            StageEndReason::DataExhausted => "data_exhausted",
            StageEndReason::Completed => "completed",
        }
    }

    /// Cut short: ended before its limit by the operator (a key, a new
    /// rate, a stop) or by the error limit, not by anything it measured.
    /// The one notion of "cut short": its rates fall back to plain counts
    /// (`stats::verdict::capacity`), its label says "(cut short)", a flood
    /// cut short is quoted only when no whole one ran, and the sweep plans
    /// from a whole stage before one cut short.
    pub fn cut_short(self) -> bool {
        matches!(
            self,
            StageEndReason::Skipped
                | StageEndReason::RateChanged
                | StageEndReason::Stopped
                | StageEndReason::MaxErrors
        )
    }

    /// Ended before its planned length: cut short, or ended by the
    /// over-saturation guard on its own evidence. Its numbers describe a
    /// fragment of what was planned (no length advice, no "mostly in
    /// flight" warning; a merged stage ended early if any shard's did).
    pub fn ended_early(self) -> bool {
        self.cut_short() || self == StageEndReason::OverSaturated
    }

    /// Ended by its own limit or its evidence: a whole stage.
    pub fn ran_its_course(self) -> bool {
        matches!(
            self,
            StageEndReason::MaxSeconds | StageEndReason::MaxRequests | StageEndReason::Conclusive
        )
    }
}

impl fmt::Display for StageEndReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What a timeline entry records (docs/REPORT.md lists them). A name this
/// version does not know, from a newer report or a viewer of another
/// version, loads as `Other` and is written back as it came.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EventKind {
    StageStart,
    StageEnd,
    /// A planner message: rates planned, the sweep's end, search brackets.
    Plan,
    /// An open-loop stage's verdict.
    Verdict,
    /// One per entry of a stage's `warnings`.
    StageWarning,
    /// The wait for the server between stages.
    Settle,
    /// The over-saturation guard ended a stage.
    OverSaturation,
    SetRate,
    Pause,
    Resume,
    Skip,
    Stop,
    /// A command that could not apply, with the reason.
    Rejected,
    /// A planned stage cut short by a rate change runs again.
    Rerun,
    /// What a signal did.
    Signal,
    /// A viewer attached or left.
    Viewer,
    Warning,
    /// A front end wrote the report files.
    Export,
    /// A stage's ramp (`--ramp-up`) began or ended.
    Ramp,
    /// The server's prefix cache was emptied before a stage (`--reset-prefix-cache`).
    CacheReset,
    /// Any other name, kept as written.
    #[serde(untagged)]
    Other(String),
}

impl EventKind {
    /// Every kind this version writes (all but `Other`).
    pub const KNOWN: [EventKind; 20] = [
        EventKind::StageStart,
        EventKind::StageEnd,
        EventKind::Plan,
        EventKind::Verdict,
        EventKind::StageWarning,
        EventKind::Settle,
        EventKind::OverSaturation,
        EventKind::SetRate,
        EventKind::Pause,
        EventKind::Resume,
        EventKind::Skip,
        EventKind::Stop,
        EventKind::Rejected,
        EventKind::Rerun,
        EventKind::Signal,
        EventKind::Viewer,
        EventKind::Warning,
        EventKind::Export,
        EventKind::Ramp,
        EventKind::CacheReset,
    ];

    /// The name on the wire.
    pub fn name(&self) -> &str {
        match self {
            EventKind::StageStart => "stage_start",
            EventKind::StageEnd => "stage_end",
            EventKind::Plan => "plan",
            EventKind::Verdict => "verdict",
            EventKind::StageWarning => "stage_warning",
            EventKind::Settle => "settle",
            EventKind::OverSaturation => "over_saturation",
            EventKind::SetRate => "set_rate",
            EventKind::Pause => "pause",
            EventKind::Resume => "resume",
            EventKind::Skip => "skip",
            EventKind::Stop => "stop",
            EventKind::Rejected => "rejected",
            EventKind::Rerun => "rerun",
            EventKind::Signal => "signal",
            EventKind::Viewer => "viewer",
            EventKind::Warning => "warning",
            EventKind::Export => "export",
            EventKind::Ramp => "ramp",
            EventKind::CacheReset => "cache_reset",
            EventKind::Other(name) => name,
        }
    }

    /// The kind with this name: a known one, else `Other`.
    pub fn from_name(name: &str) -> EventKind {
        EventKind::KNOWN
            .into_iter()
            .find(|k| k.name() == name)
            .unwrap_or_else(|| EventKind::Other(name.to_string()))
    }
}

impl fmt::Display for EventKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_ends_read_and_write_the_words_earlier_versions_wrote() {
        for words in [
            "completed",
            "max_errors",
            "no_data",
            "sweep stopped: no completed requests to plan from",
            "the server stopped answering at 6.0 s (connection refused)",
            "checkpoint: the stages finished before the run ended",
            "quit (q)",
            "signal SIGTERM",
        ] {
            let e = RunEnd::from(words.to_string());
            assert_eq!(e.to_string(), words);
            let json = serde_json::to_string(&e).unwrap();
            assert_eq!(serde_json::from_str::<RunEnd>(&json).unwrap(), e);
        }
        assert!(matches!(
            RunEnd::from("the server stopped answering at 6.0 s (x)".to_string()),
            RunEnd::ServerGone(_)
        ));
        assert_eq!(
            RunEnd::from("quit (q)".to_string()),
            RunEnd::Stopped("quit (q)".into())
        );
    }

    #[test]
    fn stage_ends_are_the_names_earlier_versions_wrote() {
        for e in [
            StageEndReason::MaxSeconds,
            StageEndReason::MaxRequests,
            StageEndReason::MaxErrors,
            StageEndReason::Skipped,
            StageEndReason::RateChanged,
            StageEndReason::Stopped,
            StageEndReason::OverSaturated,
            StageEndReason::Conclusive,
            StageEndReason::Running,
            StageEndReason::DataExhausted,
            StageEndReason::Completed,
        ] {
            let json = serde_json::to_string(&e).unwrap();
            assert_eq!(json, format!("\"{}\"", e.name()));
            assert_eq!(serde_json::from_str::<StageEndReason>(&json).unwrap(), e);
        }
        // A name no version wrote is refused, not guessed.
        assert!(serde_json::from_str::<StageEndReason>("\"exploded\"").is_err());
    }

    /// The strings the code wrote before these types existed, literally.
    const OLD_EVENTS: [&str; 20] = [
        "stage_start",
        "stage_end",
        "plan",
        "verdict",
        "stage_warning",
        "settle",
        "over_saturation",
        "set_rate",
        "pause",
        "resume",
        "skip",
        "stop",
        "rejected",
        "rerun",
        "signal",
        "viewer",
        "warning",
        "export",
        "ramp",
        "cache_reset",
    ];

    /// Fails to compile when a variant is added, as a reminder to list it
    /// in `KNOWN` (the test below checks the list is complete).
    fn event_index(k: &EventKind) -> usize {
        match k {
            EventKind::StageStart => 0,
            EventKind::StageEnd => 1,
            EventKind::Plan => 2,
            EventKind::Verdict => 3,
            EventKind::StageWarning => 4,
            EventKind::Settle => 5,
            EventKind::OverSaturation => 6,
            EventKind::SetRate => 7,
            EventKind::Pause => 8,
            EventKind::Resume => 9,
            EventKind::Skip => 10,
            EventKind::Stop => 11,
            EventKind::Rejected => 12,
            EventKind::Rerun => 13,
            EventKind::Signal => 14,
            EventKind::Viewer => 15,
            EventKind::Warning => 16,
            EventKind::Export => 17,
            EventKind::Ramp => 18,
            EventKind::CacheReset => 19,
            EventKind::Other(_) => usize::MAX,
        }
    }

    #[test]
    fn event_kinds_keep_the_old_names_on_the_wire() {
        let idx: Vec<usize> = EventKind::KNOWN.iter().map(event_index).collect();
        assert_eq!(
            idx,
            (0..20).collect::<Vec<_>>(),
            "KNOWN lists every kind once"
        );
        for (k, old) in EventKind::KNOWN.into_iter().zip(OLD_EVENTS) {
            assert_eq!(k.name(), old);
            assert_eq!(k.to_string(), old);
            let json = serde_json::to_string(&k).unwrap();
            assert_eq!(json, format!("\"{old}\""));
            assert_eq!(serde_json::from_str::<EventKind>(&json).unwrap(), k);
            assert_eq!(EventKind::from_name(old), k);
        }
    }

    #[test]
    fn an_unknown_event_name_loads_and_is_written_back_as_it_came() {
        for name in ["checkpoint", "other", "Other", "", "stage start"] {
            let json = serde_json::to_string(name).unwrap();
            let k: EventKind = serde_json::from_str(&json).unwrap();
            assert_eq!(k, EventKind::Other(name.to_string()));
            assert_eq!(k.name(), name);
            assert_eq!(serde_json::to_string(&k).unwrap(), json);
            assert_eq!(EventKind::from_name(name), k);
        }
        // Not a string at all is still an error.
        assert!(serde_json::from_str::<EventKind>("3").is_err());
        assert!(serde_json::from_str::<EventKind>("{\"plan\": 1}").is_err());
    }
}
