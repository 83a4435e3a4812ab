//! Every section of a report beyond the stage table, in report.csv's
//! order (a new one last, so scripts that count columns keep working): the
//! one list the CSV, the console, report.md and report.html read. A new
//! section is a file implementing `report::section::Section` and one line
//! here.

use super::section::{Place, Section, Shown};
use super::{
    baseline, conversations, gpu, images, models, pooling, reasoning, repeats, server_metrics,
    tools,
};
use crate::types::Report;

pub const ALL: &[&dyn Section] = &[
    &server_metrics::ServerSection,
    &reasoning::ReasoningSection,
    &reasoning::LengthsSection,
    &conversations::ConversationsSection,
    &gpu::GpuSection,
    &models::ModelsSection,
    &baseline::BaselineSection,
    &pooling::PoolingSection,
    &repeats::RepeatsSection,
    &images::ImagesSection,
    &tools::ToolsSection,
];

/// The sections with a table at `place` that `r` has, in [`ALL`]'s order.
pub fn shown(r: &Report, place: Place) -> Vec<Shown> {
    ALL.iter()
        .filter(|s| s.place() == place && s.wanted(r))
        .filter_map(|s| s.shown(r))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::{RepeatedStage, Repeats, StageReport};

    /// A report with every section's figures.
    fn every_section() -> Report {
        let s = StageReport {
            name: "constant@2.00".into(),
            pooling: Some(Default::default()),
            images: Some(Default::default()),
            tool_calls: Some(Default::default()),
            models: vec![Default::default()],
            reasoning: Some(Default::default()),
            output_lengths: Some(Default::default()),
            conversations: Some(Default::default()),
            server: Some(Default::default()),
            gpu: Some(Default::default()),
            ..Default::default()
        };
        Report {
            repeats: Some(Repeats {
                stages: vec![RepeatedStage {
                    merged: s.clone(),
                    ..Default::default()
                }],
                ..Default::default()
            }),
            baseline: Some(Default::default()),
            stages: vec![s],
            ..Default::default()
        }
    }

    #[test]
    fn every_section_gives_a_cell_under_each_of_its_own_columns() {
        let r = every_section();
        let mut keys: Vec<String> = super::super::columns::ALL
            .iter()
            .flat_map(|c| c.headers())
            .collect();
        for sec in ALL {
            assert!(sec.wanted(&r));
            let columns = sec.csv_columns(&r);
            assert!(!columns.is_empty());
            assert_eq!(columns.len(), sec.csv_values(&r, &r.stages[0]).len());
            let st = &r.repeats.as_ref().unwrap().stages[0];
            assert_eq!(columns.len(), sec.csv_merged_values(&r, st).len());
            if let Some(shown) = sec.shown(&r) {
                assert!(!shown.title.is_empty() && !shown.table.is_empty());
            }
            keys.extend(columns);
        }
        let unique: std::collections::BTreeSet<&String> = keys.iter().collect();
        assert_eq!(unique.len(), keys.len(), "a column key twice: {keys:?}");
        assert!(ALL.iter().all(|s| !s.wanted(&Report::default())));
    }
}
