//! CSV: one row per stage, flat columns, units in the header.

use anyhow::{Context as _, Result};

use super::columns::{Column, ALL};
use super::{
    baseline, conversations, gpu, images, models, pooling, reasoning, repeats, server_metrics,
    tools,
};
use crate::types::{Report, StageReport};

/// The groups of columns after the stage table's, each present when some
/// stage has its figures (after the rest, so scripts that count columns
/// keep working).
struct Extras {
    server: bool,
    talks: bool,
    gpu: bool,
    models: bool,
    pooling: bool,
    images: bool,
    tools: bool,
}

impl Extras {
    fn of(r: &Report) -> Extras {
        Extras {
            server: server_metrics::csv_wanted(r),
            talks: r.stages.iter().any(|s| s.conversations.is_some()),
            gpu: gpu::has_gpu_side(r),
            models: models::csv_wanted(r),
            pooling: pooling::csv_wanted(r),
            images: images::csv_wanted(r),
            tools: tools::csv_wanted(r),
        }
    }

    fn headers(&self, r: &Report) -> Vec<String> {
        let mut h = Vec::new();
        if self.server {
            h.extend(server_metrics::CSV_COLUMNS.iter().map(|c| c.to_string()));
        }
        // Thinking and output lengths, when the report has them.
        h.extend(reasoning::csv_columns(r));
        if self.talks {
            h.extend(conversations::CSV_COLUMNS.iter().map(|c| c.to_string()));
        }
        if self.gpu {
            h.extend(gpu::CSV_COLUMNS.iter().map(|c| c.to_string()));
        }
        if self.models {
            h.extend(models::CSV_COLUMNS.iter().map(|c| c.to_string()));
        }
        h.extend(baseline::csv_columns(r));
        if self.pooling {
            h.extend(pooling::CSV_COLUMNS.iter().map(|c| c.to_string()));
        }
        h.extend(repeats::csv_columns(r));
        if self.images {
            h.extend(images::CSV_COLUMNS.iter().map(|c| c.to_string()));
        }
        if self.tools {
            h.extend(tools::CSV_COLUMNS.iter().map(|c| c.to_string()));
        }
        h
    }

    fn cells(&self, r: &Report, s: &StageReport) -> Vec<String> {
        let mut row = Vec::new();
        if self.server {
            row.extend(server_metrics::csv_values(s));
        }
        row.extend(reasoning::csv_values(r, s));
        if self.talks {
            row.extend(conversations::csv_values(s));
        }
        if self.gpu {
            row.extend(gpu::csv_values(s));
        }
        if self.models {
            row.extend(models::csv_values(s));
        }
        row.extend(baseline::csv_values(r, s));
        if self.pooling {
            row.extend(pooling::csv_values(s));
        }
        row.extend(repeats::csv_values(r, s));
        if self.images {
            row.extend(images::csv_values(s));
        }
        if self.tools {
            row.extend(tools::csv_values(s));
        }
        row
    }
}

pub fn render(r: &Report) -> Result<String> {
    let extras = Extras::of(r);
    let mut header: Vec<String> = ALL.iter().flat_map(Column::headers).collect();
    header.extend(extras.headers(r));
    let mut w = csv::Writer::from_writer(Vec::new());
    w.write_record(&header)?;
    let labels = crate::types::stage_labels(&r.stages);
    for (s, label) in r.stages.iter().zip(&labels) {
        let mut row: Vec<String> = ALL.iter().flat_map(|c| c.cells(s, label)).collect();
        row.extend(extras.cells(r, s));
        w.write_record(&row)?;
    }
    // `--repeat N`: each planned stage's runs merged, after the runs' rows.
    for st in r.repeats.iter().flat_map(|rep| &rep.stages) {
        let label = repeats::merged_label(st);
        let mut row: Vec<String> = ALL
            .iter()
            .flat_map(|c| c.cells(&st.merged, &label))
            .collect();
        let mut cells = extras.cells(r, &st.merged);
        // The last columns are the repeats': this row's are the spreads.
        let n = repeats::csv_columns(r).len();
        cells.truncate(cells.len().saturating_sub(n));
        cells.extend(repeats::csv_merged_values(st));
        row.extend(cells);
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
    let rows = gpu::per_gpu_csv_rows(r);
    if rows.is_empty() {
        return Ok(None);
    }
    let mut w = csv::Writer::from_writer(Vec::new());
    w.write_record(gpu::PER_GPU_CSV_COLUMNS)?;
    for row in rows {
        w.write_record(&row)?;
    }
    let bytes = w.into_inner().context("cannot finish the per-GPU CSV")?;
    String::from_utf8(bytes)
        .context("CSV is not UTF-8")
        .map(Some)
}
