//! One place finishes a report, whoever gathered its stages: a run (its
//! final report and every export), a checkpoint read back, a merge of
//! shards. What is derived from the stages (pooling figures, the SLO
//! summary, the answer) is derived here, the same way for all three. (A
//! run adds the figures across its repeats and its baseline comparison:
//! only a run has them.)

use serde_json::Value;

use crate::types::{Report, RunEnd, SearchSummary, ShardInfo, StageReport, Target, TimelineEvent};

/// What a report is made of before it is finished.
pub struct Parts {
    pub tool: String,
    pub created: String,
    pub target: Target,
    pub config: Value,
    pub stages: Vec<StageReport>,
    pub timeline: Vec<TimelineEvent>,
    pub warnings: Vec<String>,
    pub partial: bool,
    pub end_reason: RunEnd,
    pub search: Option<SearchSummary>,
    pub shard: Option<ShardInfo>,
    pub merged_shards: Option<u32>,
}

impl Parts {
    /// This build of llmsweep's name, for a report it writes.
    pub fn this_tool() -> String {
        format!("llmsweep {}", env!("CARGO_PKG_VERSION"))
    }
}

impl Report {
    /// The finished report: its stages' derived figures, the SLO summary
    /// and the answer.
    pub fn assemble(p: Parts) -> Report {
        let mut stages = p.stages;
        let settings = crate::types::SavedSettings::of(&p.config);
        let calls = stages.iter().any(|s| s.tokens.tool_calls > 0);
        derive_figures(&mut stages, p.target.api, &settings, calls);
        let mut r = Report {
            version: crate::types::SCHEMA_VERSION,
            tool: p.tool,
            created: p.created,
            target: p.target,
            config: p.config,
            partial: p.partial,
            end_reason: p.end_reason,
            slo_summary: crate::profile::slo::summarize(&stages),
            stages,
            timeline: p.timeline,
            warnings: p.warnings,
            search: p.search,
            answer: None,
            shard: p.shard,
            merged_shards: p.merged_shards,
            repeats: None,
            baseline: None,
        };
        r.set_answer();
        r
    }
}

/// The figures a stage's report derives from its counts and the run's
/// settings: pooling (inputs, tokens a second), images, audio and video,
/// and tool calls.
/// `calls`: some stage's answers made tool calls (tools from
/// `--extra-body` or a file), so every stage gets tool figures. For the
/// stages of a report, and for a `--repeat` stage's runs merged.
pub fn derive_figures(
    stages: &mut [StageReport],
    api: crate::types::Api,
    settings: &crate::types::SavedSettings,
    calls: bool,
) {
    if api.pooled() {
        let batch = settings.batch.unwrap_or(1).max(1);
        for s in stages.iter_mut() {
            s.pooling = Some(crate::stats::pooling::figures(s, batch));
        }
    }
    for s in stages.iter_mut() {
        let figures = |count: Option<u32>, bytes: Option<f64>| {
            Some(crate::stats::images::figures(s, count?, bytes?))
        };
        let got = [
            figures(settings.images, settings.image_bytes),
            figures(settings.audio, settings.audio_bytes),
            figures(settings.video, settings.video_bytes),
        ];
        for (slot, got) in [&mut s.images, &mut s.audio, &mut s.video]
            .into_iter()
            .zip(got)
        {
            if got.is_some() {
                *slot = got;
            }
        }
    }
    if settings.tools.is_some() || calls {
        let tools = settings.tools.unwrap_or(0);
        for s in stages.iter_mut() {
            s.tool_calls = Some(crate::stats::tools::figures(s, tools));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::Api;

    fn parts(api: Api, stages: Vec<StageReport>) -> Parts {
        Parts {
            tool: Parts::this_tool(),
            created: "2026-11-26T00:00:00Z".into(),
            target: Target {
                url: "http://127.0.0.1:1".into(),
                model: "m".into(),
                api,
                builtin_simulator: false,
            },
            config: serde_json::json!({"batch": 4}),
            stages,
            timeline: Vec::new(),
            warnings: Vec::new(),
            partial: false,
            end_reason: RunEnd::Completed,
            search: None,
            shard: None,
            merged_shards: Some(2),
        }
    }

    /// A merge of shards of a pooling run lost its stages' pooling figures
    /// (only a run derived them); every report is finished the same way now.
    #[test]
    fn every_report_gets_its_derived_figures_and_its_answer() {
        let stage = StageReport {
            name: "constant@5.00".into(),
            ..Default::default()
        };
        let r = Report::assemble(parts(Api::Embeddings, vec![stage.clone()]));
        assert!(r.stages[0].pooling.is_some());
        assert!(r.answer.is_some());
        assert_eq!(r.merged_shards, Some(2));
        let r = Report::assemble(parts(Api::Chat, vec![stage.clone()]));
        assert!(r.stages[0].pooling.is_none());
        assert!(r.stages[0].images.is_none() && r.stages[0].tool_calls.is_none());
        // What each request carried: images and tools, from the settings.
        let mut p = parts(Api::Chat, vec![stage.clone()]);
        p.config =
            serde_json::json!({"request_parts": {"images": 2, "image_bytes": 1000.0, "tools": 4}});
        let r = Report::assemble(p);
        assert_eq!(r.stages[0].images.as_ref().map(|i| i.per_request), Some(2));
        assert_eq!(
            r.stages[0].tool_calls.as_ref().map(|t| t.tools_per_request),
            Some(4)
        );
        // Tool calls without tools in the data (an --extra-body's) still count.
        let mut called = stage;
        called.tokens.tool_calls = 3;
        let r = Report::assemble(parts(Api::Chat, vec![called]));
        assert_eq!(r.stages[0].tool_calls.as_ref().map(|t| t.calls), Some(3));
    }
}
