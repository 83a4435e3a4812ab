//! CSV: one row per stage, flat columns, units in the header.

use anyhow::{Context as _, Result};

use super::columns::{Column, ALL};
use super::section::Section;
use super::{gpu, repeats, sections};
use crate::types::Report;

/// The sections whose columns follow the stage table's: those `r` has, in
/// `sections::ALL`'s order.
fn extras(r: &Report) -> Vec<&'static dyn Section> {
    sections::ALL
        .iter()
        .copied()
        .filter(|s| s.wanted(r))
        .collect()
}

pub fn render(r: &Report) -> Result<String> {
    let extras = extras(r);
    let mut header: Vec<String> = ALL.iter().flat_map(Column::headers).collect();
    header.extend(extras.iter().flat_map(|x| x.csv_columns(r)));
    let mut w = csv::Writer::from_writer(Vec::new());
    w.write_record(&header)?;
    let labels = crate::types::stage_labels(&r.stages);
    for (s, label) in r.stages.iter().zip(&labels) {
        let mut row: Vec<String> = ALL.iter().flat_map(|c| c.cells(s, label)).collect();
        row.extend(extras.iter().flat_map(|x| x.csv_values(r, s)));
        w.write_record(&row)?;
    }
    // `--repeat N`: each planned stage's runs merged, after the runs' rows.
    for st in r.repeats.iter().flat_map(|rep| &rep.stages) {
        let label = repeats::merged_label(st);
        let mut row: Vec<String> = ALL
            .iter()
            .flat_map(|c| c.cells(&st.merged, &label))
            .collect();
        row.extend(extras.iter().flat_map(|x| x.csv_merged_values(r, st)));
        w.write_record(&row)?;
    }
    let bytes = w.into_inner().context("cannot finish the CSV")?;
    String::from_utf8(bytes).context("CSV is not UTF-8")
}

/// The per-GPU CSV's file name, beside report.csv.
pub const PER_GPU_FILE: &str = "report-gpus.csv";

/// The per-GPU CSV: one row per stage and GPU (`report-gpus.csv`); None
/// when no stage has per-GPU figures.
pub fn render_per_gpu(r: &Report) -> Result<Option<String>> {
    let (header, rows) = gpu::PER_GPU.csv_rows(r);
    if rows.is_empty() {
        return Ok(None);
    }
    let mut w = csv::Writer::from_writer(Vec::new());
    w.write_record(&header)?;
    for row in rows {
        w.write_record(&row)?;
    }
    let bytes = w.into_inner().context("cannot finish the per-GPU CSV")?;
    String::from_utf8(bytes)
        .context("CSV is not UTF-8")
        .map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::{RepeatedStage, Repeats, StageReport, ToolCalls};

    /// A `--repeat` run whose requests made tool calls: the merged row's
    /// cells stand under their own headers (the repeats' columns are not
    /// the last ones).
    #[test]
    fn a_merged_rows_cells_stand_under_their_headers_when_columns_follow_the_repeats() {
        let calls = |n| {
            Some(ToolCalls {
                tools_per_request: 2,
                calls: n,
                share: 0.5,
                per_s: 1.0,
            })
        };
        let stage = StageReport {
            name: "constant@2.00".into(),
            repeat: Some(1),
            tool_calls: calls(3),
            ..Default::default()
        };
        let r = Report {
            stages: vec![stage.clone()],
            repeats: Some(Repeats {
                asked: 1,
                ran: 1,
                stages: vec![RepeatedStage {
                    name: stage.name.clone(),
                    runs: vec![1],
                    merged: StageReport {
                        tool_calls: calls(7),
                        repeat: None,
                        ..stage
                    },
                    ..Default::default()
                }],
                ..Default::default()
            }),
            ..Default::default()
        };
        let csv = render(&r).unwrap();
        let mut rows = csv::Reader::from_reader(csv.as_bytes());
        let header = rows.headers().unwrap().clone();
        let col = |k: &str| header.iter().position(|h| h == k).unwrap();
        let rows: Vec<csv::StringRecord> = rows.records().map(Result::unwrap).collect();
        assert_eq!(rows.len(), 2, "{csv}");
        assert_eq!(&rows[0][col("repeat")], "1");
        assert_eq!(&rows[0][col("tool_calls")], "3");
        assert_eq!(&rows[1][col("repeat")], "all", "{csv}");
        assert_eq!(&rows[1][col("tool_calls")], "7", "{csv}");
    }

    /// report.csv's stage columns are `report::columns::ALL`, in order,
    /// and each row has a cell under every header.
    #[test]
    fn the_csv_renders_the_stage_columns_declared_for_it() {
        let r = Report::from_json(include_str!("../../tests/fixtures/report.json")).unwrap();
        let csv = render(&r).unwrap();
        let mut rows = csv::Reader::from_reader(csv.as_bytes());
        let header: Vec<String> = rows.headers().unwrap().iter().map(String::from).collect();
        let declared: Vec<String> = ALL.iter().flat_map(Column::headers).collect();
        assert_eq!(header[..declared.len()], declared[..]);
        for row in rows.records() {
            assert_eq!(row.unwrap().len(), header.len());
        }
    }
}
