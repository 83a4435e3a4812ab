//! A run whose chat requests carried images (`--data …,images=N`), audio
//! or video clips (`audio=N`, `video=N`): each stage's parts and bytes
//! sent, a request and a second, and the prompt tokens the server counted
//! (they cost tokens), as a text table (console, Markdown, HTML) and CSV
//! columns.

use super::section::{Col, PartTable, Section, Shown};
use crate::types::{ImagesSent, Report, StageReport};

/// A kind of part a stage's requests carried: its figures in a stage, its
/// word in the title, and whether it is a clip (audio, video: the note
/// under the table says how clips are sent).
struct Kind {
    get: fn(&StageReport) -> Option<&ImagesSent>,
    word: &'static str,
    clip: bool,
}

const KINDS: [Kind; 3] = [
    Kind {
        get: |s| s.images.as_ref(),
        word: "images",
        clip: false,
    },
    Kind {
        get: |s| s.audio.as_ref(),
        word: "audio",
        clip: true,
    },
    Kind {
        get: |s| s.video.as_ref(),
        word: "video",
        clip: true,
    },
];

/// [`KINDS`]' places.
const IMAGES: usize = 0;
const AUDIO: usize = 1;
const VIDEO: usize = 2;

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

/// Some stage of the run carried kind `K`: its columns are shown.
fn carried<const K: usize>(r: &Report) -> bool {
    r.stages.iter().any(|s| (KINDS[K].get)(s).is_some())
}

/// The stage's figures of kind `K`.
fn sent<const K: usize>(s: &StageReport) -> Option<&ImagesSent> {
    (KINDS[K].get)(s)
}

/// Every kind the stage's requests carried.
fn all_sent(s: &StageReport) -> impl Iterator<Item = &ImagesSent> {
    KINDS.iter().filter_map(move |k| (k.get)(s))
}

/// The parts of a row a stage that carried an image or a clip.
fn stages_sent(s: &StageReport) -> &'static [()] {
    if all_sent(s).next().is_some() {
        &[()]
    } else {
        &[]
    }
}

/// A kind's cell in the text table, `-` where the stage did not carry it.
fn text<const K: usize>(s: &StageReport, f: fn(&ImagesSent) -> String) -> String {
    sent::<K>(s).map_or("-".into(), f)
}

/// A kind's cell in report.csv, empty where the stage did not carry it.
fn csv<const K: usize>(s: &StageReport, f: fn(&ImagesSent) -> f64) -> String {
    sent::<K>(s).map_or(String::new(), |i| format!("{}", f(i)))
}

/// A figure every kind the stage carried has alike (the prompt's tokens).
fn any_sent<X>(s: &StageReport, f: fn(&ImagesSent) -> X) -> Option<X> {
    all_sent(s).next().map(f)
}

const PER_REQUEST: fn(&ImagesSent) -> f64 = |i| i.per_request as f64;
const BYTES_PER_REQUEST: fn(&ImagesSent) -> f64 = |i| i.bytes_per_request;
const PER_S: fn(&ImagesSent) -> f64 = |i| i.per_s;
const BYTES_PER_S: fn(&ImagesSent) -> f64 = |i| i.bytes_per_s;

type C = Col<()>;

/// A row a stage that carried images or clips, in the text table and
/// report.csv; a kind's columns only when some stage carried it. report.csv
/// has each kind's parts and bytes where the text table adds the kinds'
/// bytes up (`sent`).
#[rustfmt::skip]
pub const TABLE: PartTable<()> = PartTable {
    parts: stages_sent,
    columns: &[
        C::text("Achieved", "req/s", |s, _| format!("{:.2}", s.rates.completed_per_s)),
        C::text("Per request", "images", |s, _| text::<IMAGES>(s, |i| i.per_request.to_string())).csv("images_per_request", |s, _| csv::<IMAGES>(s, PER_REQUEST)).when(carried::<IMAGES>),
        C::text("Per request", "audio", |s, _| text::<AUDIO>(s, |i| i.per_request.to_string())).csv("audio_per_request", |s, _| csv::<AUDIO>(s, PER_REQUEST)).when(carried::<AUDIO>),
        C::text("Per request", "video", |s, _| text::<VIDEO>(s, |i| i.per_request.to_string())).csv("video_per_request", |s, _| csv::<VIDEO>(s, PER_REQUEST)).when(carried::<VIDEO>),
        C::csv_only("image_bytes_per_request", |s, _| csv::<IMAGES>(s, BYTES_PER_REQUEST)).when(carried::<IMAGES>),
        C::csv_only("audio_bytes_per_request", |s, _| csv::<AUDIO>(s, BYTES_PER_REQUEST)).when(carried::<AUDIO>),
        C::csv_only("video_bytes_per_request", |s, _| csv::<VIDEO>(s, BYTES_PER_REQUEST)).when(carried::<VIDEO>),
        C::text("Per request", "sent", |s, _| bytes(all_sent(s).map(|i| i.bytes_per_request).sum())),
        C::text("Per second", "images", |s, _| text::<IMAGES>(s, |i| format!("{:.1}", i.per_s))).csv("images_per_s", |s, _| csv::<IMAGES>(s, PER_S)).when(carried::<IMAGES>),
        C::text("Per second", "audio", |s, _| text::<AUDIO>(s, |i| format!("{:.1}", i.per_s))).csv("audio_per_s", |s, _| csv::<AUDIO>(s, PER_S)).when(carried::<AUDIO>),
        C::text("Per second", "video", |s, _| text::<VIDEO>(s, |i| format!("{:.1}", i.per_s))).csv("video_per_s", |s, _| csv::<VIDEO>(s, PER_S)).when(carried::<VIDEO>),
        C::csv_only("image_bytes_per_s", |s, _| csv::<IMAGES>(s, BYTES_PER_S)).when(carried::<IMAGES>),
        C::csv_only("audio_bytes_per_s", |s, _| csv::<AUDIO>(s, BYTES_PER_S)).when(carried::<AUDIO>),
        C::csv_only("video_bytes_per_s", |s, _| csv::<VIDEO>(s, BYTES_PER_S)).when(carried::<VIDEO>),
        C::text("Per second", "sent", |s, _| format!("{}/s", bytes(all_sent(s).map(|i| i.bytes_per_s).sum()))),
        C::text("Prompt tok/req", "text", |s, _| any_sent(s, |i| format!("{:.0}", i.text_tokens_per_request)).unwrap_or_default()),
        // Not `server_prompt_tokens_per_request`: the server's /metrics
        // column of that name stands beside it when the run scraped them.
        C::text("Prompt tok/req", "server", |s, _| any_sent(s, |i| i.server_prompt_tokens_per_request).flatten().map_or("-".into(), |t| format!("{t:.0}")))
            .csv("usage_prompt_tokens_per_request", |s, _| any_sent(s, |i| i.server_prompt_tokens_per_request).flatten().map_or(String::new(), |t| format!("{t}"))),
    ],
};

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

/// The images' section (with audio and video): its table and CSV columns.
pub struct ImagesSection;

impl Section for ImagesSection {
    fn wanted(&self, r: &Report) -> bool {
        !kinds(r).is_empty()
    }

    fn csv_columns(&self, r: &Report) -> Vec<String> {
        TABLE.csv_columns(r)
    }

    fn csv_values(&self, r: &Report, s: &StageReport) -> Vec<String> {
        TABLE.csv_values(r, s)
    }

    fn shown(&self, r: &Report) -> Option<Shown> {
        let kinds = kinds(r);
        let note = if kinds.iter().any(|k| k.clip) {
            NOTE_CLIPS
        } else {
            NOTE
        };
        let title = title(&kinds);
        Some(Shown {
            console: Some(format!("{title} ({note})")),
            title,
            note: Some(format!("{note}.")),
            table: TABLE.text(r)?,
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
        let t = TABLE.text(&r).unwrap();
        let row = crate::report::section::row(&t, "constant@4.00");
        for want in ["4.00", "2.10 MB", "8.0", "8.40 MB/s", "128", "1280"] {
            assert!(row.contains(want), "{want} in {t}");
        }
        assert_eq!(
            TABLE.csv_values(&r, &r.stages[0]),
            ["2", "2100000", "8", "8400000", "1280"]
        );
        r.stages[0].images = None;
        assert!(TABLE.text(&r).is_none() && !ImagesSection.wanted(&r));
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
        // Clips sent: the note says how (by the kinds, not their words).
        assert_eq!(shown.note, Some(format!("{NOTE_CLIPS}.")));
        let t = &shown.table;
        assert!(
            t.contains("audio") && t.contains("video") && !t.contains("images"),
            "{t}"
        );
        let row = crate::report::section::row(t, "constant@2.00");
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
        r.stages[0].video = None;
        let images_only = ImagesSection.shown(&r).unwrap();
        assert_eq!(images_only.note, Some(format!("{NOTE}.")));
    }
}
