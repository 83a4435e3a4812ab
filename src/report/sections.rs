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
    &models::SECTION,
    &baseline::BaselineSection,
    &pooling::SECTION,
    &repeats::RepeatsSection,
    &images::ImagesSection,
    &tools::SECTION,
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
    use crate::report::section::PartTable;
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

    /// A text table's rendered cells on a line, split at its `|`.
    fn cells(line: &str) -> Vec<String> {
        line.split('|')
            .map(|c| c.trim().to_string())
            .filter(|c| !c.is_empty())
            .collect()
    }

    /// The group line above the first line of `text` whose cells are
    /// `names`: a text table's two header lines as rendered.
    fn groups_over(text: &str, names: &[String]) -> Option<Vec<String>> {
        let lines: Vec<&str> = text.lines().collect();
        let i = lines.iter().position(|l| cells(l) == names)?;
        Some(cells(lines[i.checked_sub(1)?]))
    }

    /// A table's declared headers for `r`: its names line, and its groups
    /// as the group line shows them (a group once over its columns).
    fn declared<T>(table: &PartTable<T>, r: &Report) -> (Vec<String>, Vec<String>) {
        let headers = table.headers(r);
        let names = headers.iter().map(|h| h.1.to_string()).collect();
        let mut groups: Vec<String> = headers.iter().map(|h| h.0.to_string()).collect();
        groups.dedup();
        (names, groups)
    }

    /// A run with the server's and GPUs' figures, images and audio, a
    /// pooling batch, tool calls and two models.
    fn every_table() -> Report {
        let text = include_str!("../../tests/fixtures/sweep-gpus.json");
        let mut r = Report::from_json(text).unwrap();
        let sent = crate::types::ImagesSent {
            per_request: 2,
            bytes_per_request: 2e6,
            ..Default::default()
        };
        r.stages[1].images = Some(sent.clone());
        r.stages[2].audio = Some(sent);
        r.stages[3].pooling = Some(crate::types::Pooling {
            inputs_per_request: 8,
            ..Default::default()
        });
        r.stages[4].tool_calls = Some(Default::default());
        r.stages[5].models = vec![Default::default(), Default::default()];
        r
    }

    /// Each text format (console, report.md, report.html) renders the
    /// columns declared for the server's, GPUs', images', pooling, tool
    /// calls' and models' tables, no other and in their order, under their
    /// groups; report.csv has each table's declared CSV columns together
    /// and in that order.
    #[test]
    fn each_format_renders_the_columns_declared_for_each_table() {
        use super::super::{console, csv_export, html, markdown};
        let r = every_table();
        let formats = [
            ("console", console::render(&r)),
            ("report.md", markdown::render(&r)),
            (
                "report.html",
                html::render(&r)
                    .replace("&amp;", "&")
                    .replace("<pre>", "\n"),
            ),
        ];
        let csv = csv_export::render(&r).unwrap();
        let csv_header: Vec<&str> = csv.lines().next().unwrap().split(',').collect();
        let check = |name: &str,
                     (names, groups): (Vec<String>, Vec<String>),
                     keys: Vec<String>,
                     csv_header: &[&str]| {
            for (format, text) in &formats {
                assert_eq!(
                    groups_over(text, &names).as_ref(),
                    Some(&groups),
                    "{name} in {format}: {names:?}"
                );
            }
            let at = csv_header
                .iter()
                .position(|h| Some(*h) == keys.first().map(String::as_str));
            let at = at.unwrap_or_else(|| panic!("{name}: {keys:?} in {csv_header:?}"));
            assert_eq!(csv_header[at..at + keys.len()], keys, "{name}");
        };
        fn both<T>(t: &PartTable<T>, r: &Report) -> ((Vec<String>, Vec<String>), Vec<String>) {
            (declared(t, r), t.csv_columns(r))
        }
        let (tokens, stats) = (&server_metrics::TOKENS, &server_metrics::STATS);
        let mut server_keys = tokens.csv_columns(&r);
        server_keys.extend(stats.csv_columns(&r));
        check(
            "server tokens",
            declared(tokens, &r),
            server_keys,
            &csv_header,
        );
        let keys = stats.csv_columns(&r);
        check("server stats", declared(stats, &r), keys, &csv_header);
        // Each GPU's table: its own CSV (report-gpus.csv), a row a GPU.
        let file = csv_export::render_per_gpu(&r).unwrap().unwrap();
        let file_header: Vec<&str> = file.lines().next().unwrap().split(',').collect();
        assert_eq!(file_header[..2], ["stage", "label"]);
        let keys = gpu::PER_GPU.csv_columns(&r);
        assert_eq!(file_header.len(), 2 + keys.len());
        check("each GPU", declared(&gpu::PER_GPU, &r), keys, &file_header);
        for (name, (head, keys)) in [
            ("GPUs", both(&gpu::TOTAL, &r)),
            ("images", both(&images::TABLE, &r)),
            ("pooling", both(&pooling::TABLE, &r)),
            ("tool calls", both(&tools::TABLE, &r)),
            ("models", both(&models::TABLE, &r)),
        ] {
            check(name, head, keys, &csv_header);
        }
        // The columns a report shows by what it has: a batch's, the kinds sent.
        let names = declared(tokens, &r).0;
        assert!(names.contains(&"Per".to_string()), "{names:?}");
        let names = declared(&images::TABLE, &r).0;
        assert_eq!(names.iter().filter(|n| *n == "audio").count(), 2);
        assert!(!names.contains(&"video".to_string()), "{names:?}");
    }
}
