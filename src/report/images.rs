//! A run whose chat requests carried images (`--data …,images=N`): each
//! stage's images and bytes sent, a request and a second, and the prompt
//! tokens the server counted (images cost tokens), as a text table
//! (console, Markdown, HTML) and CSV columns.

use super::section::{names, Section, Shown};
use super::tables::GroupedTable;
use crate::types::{Report, StageReport};

fn any_images(r: &Report) -> bool {
    r.stages.iter().any(|s| s.images.is_some())
}

/// `1.05 MB`: bytes in decimal units.
fn bytes(b: f64) -> String {
    match b {
        b if b >= 1e9 => format!("{:.2} GB", b / 1e9),
        b if b >= 1e6 => format!("{:.2} MB", b / 1e6),
        b if b >= 1e3 => format!("{:.1} kB", b / 1e3),
        b => format!("{b:.0} B"),
    }
}

/// One row per stage; None when no request carried an image.
fn table(r: &Report) -> Option<String> {
    if !any_images(r) {
        return None;
    }
    let rows = r
        .stages
        .iter()
        .zip(crate::types::stage_labels(&r.stages))
        .filter_map(|(s, label)| {
            let i = s.images.as_ref()?;
            Some(vec![
                label,
                format!("{:.2}", s.rates.completed_per_s),
                i.per_request.to_string(),
                bytes(i.bytes_per_request),
                format!("{:.1}", i.per_s),
                format!("{}/s", bytes(i.bytes_per_s)),
                format!("{:.0}", i.text_tokens_per_request),
                i.server_prompt_tokens_per_request
                    .map_or("-".into(), |t| format!("{t:.0}")),
            ])
        })
        .collect();
    let t = GroupedTable {
        columns: vec![
            ("Metadata", "Benchmark"),
            ("Achieved", "req/s"),
            ("Per request", "images"),
            ("Per request", "sent"),
            ("Per second", "images"),
            ("Per second", "sent"),
            ("Prompt tok/req", "text"),
            ("Prompt tok/req", "server"),
        ],
        rows,
    };
    Some(t.render())
}

/// What the table's columns mean, under it.
const NOTE: &str = "sent: the images' data URLs (base64), as sent; prompt tokens: the text as built, and the whole prompt as the server counted it (its usage), images included";

/// CSV columns, after the others, when requests carried images.
const CSV_COLUMNS: [&str; 5] = [
    "images_per_request",
    "image_bytes_per_request",
    "images_per_s",
    "image_bytes_per_s",
    // Not `server_prompt_tokens_per_request`: the server's /metrics column
    // of that name stands beside it when the run scraped them.
    "usage_prompt_tokens_per_request",
];

/// A stage's values for [`CSV_COLUMNS`].
fn values(s: &StageReport) -> Vec<String> {
    match &s.images {
        Some(i) => vec![
            i.per_request.to_string(),
            format!("{}", i.bytes_per_request),
            format!("{}", i.per_s),
            format!("{}", i.bytes_per_s),
            i.server_prompt_tokens_per_request
                .map_or(String::new(), |t| format!("{t}")),
        ],
        None => vec![String::new(); CSV_COLUMNS.len()],
    }
}

/// The images' section: its table and CSV columns.
pub struct ImagesSection;

impl Section for ImagesSection {
    fn wanted(&self, r: &Report) -> bool {
        any_images(r)
    }

    fn csv_columns(&self, _r: &Report) -> Vec<String> {
        names(&CSV_COLUMNS)
    }

    fn csv_values(&self, _r: &Report, s: &StageReport) -> Vec<String> {
        values(s)
    }

    fn shown(&self, r: &Report) -> Option<Shown> {
        Some(Shown {
            title: "Images".into(),
            note: Some(format!("{NOTE}.")),
            console: Some(format!("Images ({NOTE})")),
            table: table(r)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::ImagesSent;

    #[test]
    fn image_stages_get_a_row_with_images_bytes_and_tokens() {
        let mut s = StageReport {
            name: "constant@4.00".into(),
            images: Some(ImagesSent {
                per_request: 2,
                bytes_per_request: 2_100_000.0,
                per_s: 8.0,
                bytes_per_s: 8_400_000.0,
                server_prompt_tokens_per_request: Some(1280.0),
                text_tokens_per_request: 128.0,
            }),
            ..Default::default()
        };
        s.rates.completed_per_s = 4.0;
        let mut r = Report {
            stages: vec![s],
            ..Default::default()
        };
        let t = table(&r).unwrap();
        let row = t
            .lines()
            .find(|l| l.contains("constant@4.00"))
            .unwrap_or_default();
        for want in ["4.00", "2.10 MB", "8.0", "8.40 MB/s", "128", "1280"] {
            assert!(row.contains(want), "{want} in {t}");
        }
        assert_eq!(
            values(&r.stages[0]),
            ["2", "2100000", "8", "8400000", "1280"]
        );
        r.stages[0].images = None;
        assert!(table(&r).is_none() && !ImagesSection.wanted(&r));
    }
}
