//! A run whose chat requests carried images (`--data …,images=N`), audio
//! or video clips (`audio=N`, `video=N`): each stage's parts and bytes
//! sent, a request and a second, and the prompt tokens the server counted
//! (they cost tokens), as a text table (console, Markdown, HTML) and CSV
//! columns.

use super::section::{names, Section, Shown};
use super::tables::GroupedTable;
use crate::types::{ImagesSent, Report, StageReport};

/// A kind of part a stage's requests carried: its figures in a stage,
/// its word in the table, its CSV columns' names.
struct Kind {
    get: fn(&StageReport) -> Option<&ImagesSent>,
    word: &'static str,
    csv: [&'static str; 4],
}

const KINDS: [Kind; 3] = [
    Kind {
        get: |s| s.images.as_ref(),
        word: "images",
        csv: [
            "images_per_request",
            "image_bytes_per_request",
            "images_per_s",
            "image_bytes_per_s",
        ],
    },
    Kind {
        get: |s| s.audio.as_ref(),
        word: "audio",
        csv: [
            "audio_per_request",
            "audio_bytes_per_request",
            "audio_per_s",
            "audio_bytes_per_s",
        ],
    },
    Kind {
        get: |s| s.video.as_ref(),
        word: "video",
        csv: [
            "video_per_request",
            "video_bytes_per_request",
            "video_per_s",
            "video_bytes_per_s",
        ],
    },
];

/// The kinds some stage of the run carried.
fn kinds(r: &Report) -> Vec<&'static Kind> {
    KINDS
        .iter()
        .filter(|k| r.stages.iter().any(|s| (k.get)(s).is_some()))
        .collect()
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

/// One row per stage; None when no request carried an image or a clip.
fn table(r: &Report) -> Option<String> {
    let kinds = kinds(r);
    if kinds.is_empty() {
        return None;
    }
    let rows = r
        .stages
        .iter()
        .zip(crate::types::stage_labels(&r.stages))
        .filter_map(|(s, label)| {
            let sent: Vec<&ImagesSent> = kinds.iter().filter_map(|k| (k.get)(s)).collect();
            let any = sent.first()?;
            let per_kind = |f: fn(&ImagesSent) -> String| {
                kinds.iter().map(move |k| (k.get)(s).map_or("-".into(), f))
            };
            let mut row = vec![label, format!("{:.2}", s.rates.completed_per_s)];
            row.extend(per_kind(|i| i.per_request.to_string()));
            row.push(bytes(sent.iter().map(|i| i.bytes_per_request).sum()));
            row.extend(per_kind(|i| format!("{:.1}", i.per_s)));
            row.push(format!(
                "{}/s",
                bytes(sent.iter().map(|i| i.bytes_per_s).sum())
            ));
            row.push(format!("{:.0}", any.text_tokens_per_request));
            row.push(
                any.server_prompt_tokens_per_request
                    .map_or("-".into(), |t| format!("{t:.0}")),
            );
            Some(row)
        })
        .collect();
    let mut columns = vec![("Metadata", "Benchmark"), ("Achieved", "req/s")];
    for group in ["Per request", "Per second"] {
        columns.extend(kinds.iter().map(|k| (group, k.word)));
        columns.push((group, "sent"));
    }
    columns.extend([("Prompt tok/req", "text"), ("Prompt tok/req", "server")]);
    Some(GroupedTable { columns, rows }.render())
}

/// What the table's columns mean, under it.
const NOTE: &str = "sent: the images' data URLs (base64), as sent; prompt tokens: the text as built, and the whole prompt as the server counted it (its usage), images included";
/// The same, when requests carried audio or video.
const NOTE_CLIPS: &str = "audio, video: clips a request and a second; sent: their data (base64: the images' and videos' data URLs, the audio's `input_audio` data), as sent; prompt tokens: the text as built, and the whole prompt as the server counted it (its usage), images, audio and video included";

/// The section's title: the kinds the run carried (`Images`, `Audio and
/// video`).
fn title(kinds: &[&Kind]) -> String {
    let words: Vec<&str> = kinds.iter().map(|k| k.word).collect();
    let said = match words.as_slice() {
        [] => String::new(),
        [one] => one.to_string(),
        [init @ .., last] => format!("{} and {last}", init.join(", ")),
    };
    let mut c = said.chars();
    c.next()
        .map(|f| f.to_uppercase().chain(c).collect())
        .unwrap_or_default()
}

/// Not `server_prompt_tokens_per_request`: the server's /metrics column of
/// that name stands beside it when the run scraped them.
const USAGE_COLUMN: &str = "usage_prompt_tokens_per_request";

/// A stage's values for the kinds' CSV columns and the usage column.
fn values(kinds: &[&Kind], s: &StageReport) -> Vec<String> {
    let mut v: Vec<String> = kinds
        .iter()
        .flat_map(|k| match (k.get)(s) {
            Some(i) => vec![
                i.per_request.to_string(),
                format!("{}", i.bytes_per_request),
                format!("{}", i.per_s),
                format!("{}", i.bytes_per_s),
            ],
            None => vec![String::new(); 4],
        })
        .collect();
    let usage = KINDS
        .iter()
        .find_map(|k| (k.get)(s))
        .and_then(|i| i.server_prompt_tokens_per_request);
    v.push(usage.map_or(String::new(), |t| format!("{t}")));
    v
}

/// The images' section (with audio and video): its table and CSV columns.
pub struct ImagesSection;

impl Section for ImagesSection {
    fn wanted(&self, r: &Report) -> bool {
        !kinds(r).is_empty()
    }

    fn csv_columns(&self, r: &Report) -> Vec<String> {
        let mut c: Vec<&str> = kinds(r).iter().flat_map(|k| k.csv).collect();
        c.push(USAGE_COLUMN);
        names(&c)
    }

    fn csv_values(&self, r: &Report, s: &StageReport) -> Vec<String> {
        values(&kinds(r), s)
    }

    fn shown(&self, r: &Report) -> Option<Shown> {
        let kinds = kinds(r);
        let note = if kinds.iter().any(|k| k.word != "images") {
            NOTE_CLIPS
        } else {
            NOTE
        };
        let title = title(&kinds);
        Some(Shown {
            console: Some(format!("{title} ({note})")),
            title,
            note: Some(format!("{note}.")),
            table: table(r)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
            values(&kinds(&r), &r.stages[0]),
            ["2", "2100000", "8", "8400000", "1280"]
        );
        r.stages[0].images = None;
        assert!(table(&r).is_none() && !ImagesSection.wanted(&r));
    }

    /// Audio and video beside the images: a column each a request and a
    /// second, the bytes of all, CSV columns of each kind sent only.
    #[test]
    fn clips_get_columns_beside_the_images_titled_by_what_was_sent() {
        let sent = |n: u64, bytes: f64| ImagesSent {
            per_request: n,
            bytes_per_request: bytes,
            per_s: 2.0 * n as f64,
            bytes_per_s: 2.0 * bytes,
            server_prompt_tokens_per_request: Some(500.0),
            text_tokens_per_request: 32.0,
        };
        let mut s = StageReport {
            name: "constant@2.00".into(),
            audio: Some(sent(2, 300_000.0)),
            video: Some(sent(1, 700_000.0)),
            ..Default::default()
        };
        s.rates.completed_per_s = 2.0;
        let mut r = Report {
            stages: vec![s],
            ..Default::default()
        };
        let shown = ImagesSection.shown(&r).unwrap();
        assert_eq!(shown.title, "Audio and video");
        let t = &shown.table;
        assert!(
            t.contains("audio") && t.contains("video") && !t.contains("images"),
            "{t}"
        );
        let row = t
            .lines()
            .find(|l| l.contains("constant@2.00"))
            .unwrap_or_default();
        for want in ["1.00 MB", "4.0", "2.00 MB/s", "500"] {
            assert!(row.contains(want), "{want} in {t}");
        }
        let cols = ImagesSection.csv_columns(&r);
        assert_eq!(cols.len(), 9, "{cols:?}");
        assert!(
            cols.contains(&"audio_bytes_per_s".to_string())
                && !cols.contains(&"images_per_s".to_string())
        );
        assert_eq!(ImagesSection.csv_values(&r, &r.stages[0]).len(), 9);
        r.stages[0].images = Some(sent(3, 1.0));
        assert_eq!(title(&kinds(&r)), "Images, audio and video");
        r.stages[0].audio = None;
        assert_eq!(title(&kinds(&r)), "Images and video");
    }
}
