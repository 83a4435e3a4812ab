//! Multi-turn runs: each stage's conversations and its figures by turn, as
//! plain lines every text report shows (console, Markdown, HTML).

use super::section::{names, Section};
use crate::types::{Conversations, Report, StageReport};

/// One line per stage with conversations, then one per turn.
pub fn lines(stages: &[StageReport]) -> Vec<String> {
    let mut out = Vec::new();
    for (st, label) in stages.iter().zip(crate::types::stage_labels(stages)) {
        let Some(c) = &st.conversations else {
            continue;
        };
        out.push(stage_line(&label, c));
        for t in &c.by_turn {
            out.push(format!(
                "  turn {}: {} completed · TTFT p50 {:.1} ms, mean {:.1} ms · ITL mean {:.2} ms · prompt {:.0} tokens · cached {}",
                t.turn,
                t.completed,
                t.ttft_ms.p50,
                t.ttft_ms.mean,
                t.itl_ms.mean,
                t.prompt_tokens_mean,
                t.cached_share
                    .map_or("-".to_string(), |s| format!("{:.0}%", s * 100.0))
            ));
        }
    }
    out
}

/// CSV columns, after the others, when a stage of the run has conversations;
/// the by-turn columns list one value per turn, `;`-separated.
pub const CSV_COLUMNS: [&str; 7] = [
    "conversations_started",
    "conversations_completed",
    "conversations_cut_off",
    "conversations_failed",
    "ttft_p50_ms_by_turn",
    "prompt_tokens_mean_by_turn",
    "cached_share_by_turn",
];

/// A stage's values for [`CSV_COLUMNS`] (empty without conversations).
pub fn csv_values(st: &StageReport) -> Vec<String> {
    let Some(c) = &st.conversations else {
        return vec![String::new(); CSV_COLUMNS.len()];
    };
    let by = |f: &dyn Fn(&crate::types::TurnFigures) -> String| {
        c.by_turn.iter().map(f).collect::<Vec<_>>().join(";")
    };
    vec![
        c.started.to_string(),
        c.completed.to_string(),
        c.cut_off.to_string(),
        c.failed.to_string(),
        by(&|t| format!("{}", t.ttft_ms.p50)),
        by(&|t| format!("{}", t.prompt_tokens_mean)),
        by(&|t| t.cached_share.map(|x| format!("{x}")).unwrap_or_default()),
    ]
}

fn stage_line(name: &str, c: &Conversations) -> String {
    format!(
        "{name}: {} conversations started (its rate counts conversations started), {} completed, {} cut off at the stage's end, {} failed",
        c.started, c.completed, c.cut_off, c.failed
    )
}

/// The conversations' CSV columns (their lines the text formats show their way).
pub struct ConversationsSection;

impl Section for ConversationsSection {
    fn wanted(&self, r: &Report) -> bool {
        r.stages.iter().any(|s| s.conversations.is_some())
    }

    fn csv_columns(&self, _r: &Report) -> Vec<String> {
        names(&CSV_COLUMNS)
    }

    fn csv_values(&self, _r: &Report, s: &StageReport) -> Vec<String> {
        csv_values(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::TurnFigures;

    #[test]
    fn stages_with_conversations_get_a_line_and_one_per_turn() {
        let stages = vec![
            StageReport {
                name: "constant@2.00".into(),
                conversations: Some(Conversations {
                    started: 10,
                    completed: 6,
                    cut_off: 4,
                    failed: 0,
                    by_turn: vec![
                        TurnFigures {
                            turn: 1,
                            completed: 10,
                            cached_share: Some(0.0),
                            ..Default::default()
                        },
                        TurnFigures {
                            turn: 2,
                            completed: 8,
                            cached_share: Some(0.82),
                            ..Default::default()
                        },
                    ],
                }),
                ..Default::default()
            },
            StageReport::default(),
        ];
        let l = lines(&stages);
        assert_eq!(l.len(), 3);
        assert!(l[0].contains("10 conversations started (its rate counts conversations started), 6 completed, 4 cut off"));
        assert!(
            l[2].contains("turn 2: 8 completed") && l[2].ends_with("cached 82%"),
            "{}",
            l[2]
        );
        let v = csv_values(&stages[0]);
        assert_eq!(v.len(), CSV_COLUMNS.len());
        assert_eq!(v[..4], ["10", "6", "4", "0"]);
        assert_eq!(v[6], "0;0.82");
        assert!(csv_values(&stages[1]).iter().all(String::is_empty));
    }
}
