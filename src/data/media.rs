//! Audio and video in chat requests, after the images:
//! `--data …,audio=2,audio_seconds=3` draws that many synthetic WAV clips
//! of that length for every request (16 kHz mono 16-bit PCM: a tone under
//! noise of its own, seeded by the request's number), each an `input_audio`
//! part; `video=1,video_seconds=2,video_size=64x64,video_fps=4` that many
//! synthetic clips, each a `video_url` part whose data URL is
//! `data:video/jpeg;base64,` and the clip's frames in base64, comma
//! separated. That is vLLM's format for a video sent as frames (its
//! `VideoMediaIO` opens each frame as an image, whatever its format; the
//! frames are the PNGs of `data::images`): a real container (MP4) needs a
//! video encoder, and vLLM decodes one only with OpenCV or PyAV installed.
//! Like images, the clips are drawn as a request is sent.

use std::sync::Arc;

use anyhow::{bail, Context as _, Result};
use base64::Engine as _;

use super::images::{self, Attach, Clip};
use crate::client::{ImageSource, MediaKind};

/// The longest clip, in seconds.
pub const MAX_SECONDS: f64 = 600.0;
/// The most frames a second of video.
pub const MAX_FPS: u32 = 60;
/// The sample rate of a synthetic clip: 16 kHz, what speech models take.
pub const SAMPLE_RATE: u32 = 16_000;
/// A WAV header's bytes (RIFF, `fmt `, `data`).
const WAV_HEADER: u64 = 44;

/// The audio and video keys of a `--data` spec.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct MediaSpec {
    pub audio: u32,
    pub audio_seconds: f64,
    pub video: u32,
    pub video_seconds: f64,
    pub video_width: u32,
    pub video_height: u32,
    pub video_fps: u32,
}

/// Whether `key` is one of this module's keys of the `--data` spec.
pub fn is_key(key: &str) -> bool {
    matches!(
        key,
        "audio" | "audio_seconds" | "video" | "video_seconds" | "video_size" | "video_fps"
    )
}

/// The audio and video keys of a synthetic `--data` spec; None when it
/// asks for neither.
pub fn spec_of(spec: &str) -> Result<Option<MediaSpec>> {
    let mut s = MediaSpec {
        audio_seconds: 2.0,
        video_seconds: 2.0,
        video_width: 64,
        video_height: 64,
        video_fps: 4,
        ..Default::default()
    };
    let mut given = Vec::new();
    for part in spec.split(',').map(str::trim) {
        let Some((k, v)) = part.split_once('=') else {
            continue;
        };
        let (k, v) = (k.trim(), v.trim());
        match k {
            "audio" | "video" => {
                let n: u32 = v.parse().with_context(|| {
                    format!("--data {k}: {v:?} is not a whole number of clips a request")
                })?;
                if n > images::MAX_PER_REQUEST {
                    bail!(
                        "--data {k}: {n} clips a request is more than {}",
                        images::MAX_PER_REQUEST
                    );
                }
                *if k == "audio" {
                    &mut s.audio
                } else {
                    &mut s.video
                } = n;
            }
            "audio_seconds" | "video_seconds" => {
                let secs: f64 = v
                    .parse()
                    .ok()
                    .filter(|x: &f64| x.is_finite() && *x > 0.0 && *x <= MAX_SECONDS)
                    .with_context(|| {
                        format!("--data {k}: {v:?} should be seconds, more than 0 and at most {MAX_SECONDS}")
                    })?;
                *if k == "audio_seconds" {
                    &mut s.audio_seconds
                } else {
                    &mut s.video_seconds
                } = secs;
            }
            "video_size" => {
                (s.video_width, s.video_height) = images::parse_size(v)
                    .map_err(|e| anyhow::anyhow!("{}", e.to_string().replace("image_size", k)))?;
            }
            "video_fps" => {
                s.video_fps = v
                    .parse()
                    .ok()
                    .filter(|f| (1..=MAX_FPS).contains(f))
                    .with_context(|| {
                        format!("--data video_fps: {v:?} should be frames a second, from 1 to {MAX_FPS}")
                    })?;
            }
            _ => continue,
        }
        given.push(k);
    }
    for key in ["audio", "video"] {
        let needs = given
            .iter()
            .find(|k| k.starts_with(key) && **k != key && !given.contains(&key));
        if let Some(k) = needs {
            bail!("--data {k} needs {key}=N ({key} clips a request)");
        }
    }
    Ok((s.audio > 0 || s.video > 0).then_some(s))
}

impl MediaSpec {
    /// A video clip's frames: its seconds at its rate, at least one.
    pub fn frames(&self) -> u32 {
        (self.video_seconds * f64::from(self.video_fps))
            .round()
            .max(1.0) as u32
    }

    /// The clips a request, each kind as its source draws them.
    fn kinds(&self, seed: u64) -> Vec<Clips> {
        let samples = (self.audio_seconds * f64::from(SAMPLE_RATE)).round() as u32;
        [
            (MediaKind::Audio, self.audio, Shape::Wav { samples }),
            (
                MediaKind::Video,
                self.video,
                Shape::Frames {
                    width: self.video_width,
                    height: self.video_height,
                    frames: self.frames(),
                },
            ),
        ]
        .into_iter()
        .filter(|(_, n, _)| *n > 0)
        .map(|(kind, count, shape)| Clips {
            kind,
            count,
            shape,
            seed: seed ^ (kind as u64 + 1).rotate_left(40),
        })
        .collect()
    }
}

/// What a synthetic clip is made of.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Shape {
    /// A WAV file of `samples` at [`SAMPLE_RATE`], in base64.
    Wav { samples: u32 },
    /// `frames` PNG images of `width`×`height`, as one data URL.
    Frames {
        width: u32,
        height: u32,
        frames: u32,
    },
}

impl Shape {
    /// The bytes of a clip as it goes in its part.
    fn bytes(self) -> u64 {
        match self {
            Shape::Wav { samples } => (WAV_HEADER + 2 * u64::from(samples)).div_ceil(3) * 4,
            Shape::Frames {
                width,
                height,
                frames,
            } => {
                let frame = images::png_bytes(width, height).div_ceil(3) * 4;
                VIDEO_HEAD.len() as u64 + u64::from(frames) * (frame + 1) - 1
            }
        }
    }
}

/// A video's data URL head: vLLM's media type for a clip sent as frames.
const VIDEO_HEAD: &str = "data:video/jpeg;base64,";

/// One kind of synthetic clip, `count` a request.
#[derive(Debug, Clone)]
pub struct Clips {
    pub kind: MediaKind,
    pub count: u32,
    shape: Shape,
    seed: u64,
}

impl Clips {
    /// The bytes of a request's clips of this kind, as sent.
    pub fn bytes_per_request(&self) -> f64 {
        self.shape.bytes() as f64 * f64::from(self.count)
    }
}

impl ImageSource for Clips {
    fn url(&self, seq: u64, i: usize) -> Arc<str> {
        let seed = images::part_seed(self.seed, seq, self.count, i);
        let b64 = &base64::engine::general_purpose::STANDARD;
        match self.shape {
            Shape::Wav { samples } => b64.encode(wav(samples, seed)).into(),
            Shape::Frames {
                width,
                height,
                frames,
            } => {
                let mut s = String::with_capacity(self.shape.bytes() as usize);
                s.push_str(VIDEO_HEAD);
                for f in 0..frames {
                    if f > 0 {
                        s.push(',');
                    }
                    let png = images::png(width, height, images::part_seed(seed, 0, 1, f as usize));
                    b64.encode_string(png, &mut s);
                }
                s.into()
            }
        }
    }

    fn kind(&self, _i: usize) -> MediaKind {
        self.kind
    }
}

/// Several sources one after another, as their parts follow each other in
/// a message: the images, then the audio clips, then the video clips.
#[derive(Debug)]
struct Mixed(Vec<(u32, Arc<dyn ImageSource>)>);

impl Mixed {
    /// The source of part `i` and its place among that source's parts.
    fn at(&self, mut i: usize) -> Option<(&Arc<dyn ImageSource>, usize)> {
        for (n, s) in &self.0 {
            if i < *n as usize {
                return Some((s, i));
            }
            i -= *n as usize;
        }
        None
    }
}

impl ImageSource for Mixed {
    fn url(&self, seq: u64, i: usize) -> Arc<str> {
        self.at(i)
            .map_or_else(|| Arc::from(""), |(s, j)| s.url(seq, j))
    }

    fn kind(&self, i: usize) -> MediaKind {
        self.at(i).map_or(MediaKind::Image, |(s, j)| s.kind(j))
    }
}

/// The run's images (if any) with `spec`'s audio and video clips after
/// them, as one [`Attach`] whose source gives every part in order; the
/// whole request held to [`crate::bounds::IMAGES_A_REQUEST`].
pub fn attach(spec: &MediaSpec, images: Option<Attach>, seed: u64) -> Result<Attach> {
    let kinds = spec.kinds(seed);
    let clip_bytes: f64 = kinds.iter().map(Clips::bytes_per_request).sum();
    let image_bytes = images.as_ref().map_or(0.0, |i| i.bytes_per_request);
    images::check_bytes(
        (clip_bytes + image_bytes) as u64,
        "images, audio and video",
        || format!("--data {}", spec.describe_keys()),
    )?;
    let mut said: Vec<String> = images.iter().map(|i| i.description.clone()).collect();
    said.extend(kinds.iter().map(|c| describe(spec, c)));
    let mut sources: Vec<(u32, Arc<dyn ImageSource>)> = Vec::new();
    let (count, bytes_per_request) = match images {
        Some(im) => {
            sources.push((im.count, im.source));
            (im.count, im.bytes_per_request)
        }
        None => (0, 0.0),
    };
    let clips = kinds
        .iter()
        .map(|c| Clip {
            kind: c.kind,
            count: c.count,
            bytes_per_request: c.bytes_per_request(),
        })
        .collect();
    sources.extend(
        kinds
            .into_iter()
            .map(|c| (c.count, Arc::new(c) as Arc<dyn ImageSource>)),
    );
    Ok(Attach {
        count,
        bytes_per_request,
        source: Arc::new(Mixed(sources)),
        description: said.join("; "),
        clips,
    })
}

impl MediaSpec {
    /// The spec's audio and video keys, as an error names them.
    fn describe_keys(&self) -> String {
        let mut k = Vec::new();
        if self.audio > 0 {
            k.push(format!(
                "audio={},audio_seconds={}",
                self.audio, self.audio_seconds
            ));
        }
        if self.video > 0 {
            k.push(format!(
                "video={},video_seconds={},video_size={}x{},video_fps={}",
                self.video, self.video_seconds, self.video_width, self.video_height, self.video_fps
            ));
        }
        k.join(",")
    }
}

/// What the run says about a kind of clip.
fn describe(spec: &MediaSpec, c: &Clips) -> String {
    let s = if c.count == 1 { "" } else { "s" };
    match c.kind {
        MediaKind::Video => format!(
            "{} synthetic {} s video clip{s} a request ({} frames of {}x{} PNG, `video/jpeg` frames as vLLM takes them), new to the server in every request",
            c.count,
            crate::typed::number(spec.video_seconds),
            spec.frames(),
            spec.video_width,
            spec.video_height
        ),
        _ => format!(
            "{} synthetic {} s WAV audio clip{s} a request (16 kHz mono PCM), new to the server in every request",
            c.count,
            crate::typed::number(spec.audio_seconds)
        ),
    }
}

/// A WAV file: `samples` of 16-bit mono PCM at [`SAMPLE_RATE`], a tone
/// (its pitch drawn from `seed`) under noise drawn from `seed`.
pub fn wav(samples: u32, seed: u64) -> Vec<u8> {
    let data = 2 * samples;
    let mut out = Vec::with_capacity(WAV_HEADER as usize + data as usize);
    out.extend_from_slice(b"RIFF");
    out.extend_from_slice(&(36 + data).to_le_bytes());
    out.extend_from_slice(b"WAVEfmt ");
    // PCM, one channel, the rate, bytes a second, bytes a frame, bits.
    out.extend_from_slice(&16u32.to_le_bytes());
    out.extend_from_slice(&1u16.to_le_bytes());
    out.extend_from_slice(&1u16.to_le_bytes());
    out.extend_from_slice(&SAMPLE_RATE.to_le_bytes());
    out.extend_from_slice(&(2 * SAMPLE_RATE).to_le_bytes());
    out.extend_from_slice(&2u16.to_le_bytes());
    out.extend_from_slice(&16u16.to_le_bytes());
    out.extend_from_slice(b"data");
    out.extend_from_slice(&data.to_le_bytes());
    let pitch = 200.0 + (seed % 800) as f64;
    let mut state = seed;
    for n in 0..samples {
        state = images::part_seed(state, 0, 1, 0);
        let t = f64::from(n) / f64::from(SAMPLE_RATE);
        let tone = (t * pitch * std::f64::consts::TAU).sin() * 8_000.0;
        let noise = f64::from((state >> 48) as u16 as i16) / 16.0;
        out.extend_from_slice(&((tone + noise) as i16).to_le_bytes());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_spec_reads_counts_lengths_size_and_rate() {
        assert_eq!(spec_of("prompt_tokens=8,images=2").unwrap(), None);
        let s = spec_of("audio=2,audio_seconds=3.5,video=1,video_size=32x16,video_fps=8")
            .unwrap()
            .unwrap();
        assert_eq!((s.audio, s.audio_seconds, s.video), (2, 3.5, 1));
        assert_eq!((s.video_width, s.video_height, s.frames()), (32, 16, 16));
        let s = spec_of("video=1,video_seconds=0.1,video_fps=1")
            .unwrap()
            .unwrap();
        assert_eq!(s.frames(), 1, "at least one frame");
        for (bad, says) in [
            ("audio=two", "whole number"),
            ("video=65", "more than 64"),
            ("audio=1,audio_seconds=0", "more than 0 and at most 600"),
            ("audio=1,audio_seconds=601", "at most 600"),
            ("video=1,video_fps=0", "from 1 to 60"),
            (
                "video=1,video_size=64",
                "video_size: \"64\" should be WIDTHxHEIGHT",
            ),
            ("audio_seconds=3", "audio_seconds needs audio=N"),
            ("video_fps=3", "video_fps needs video=N"),
        ] {
            let e = spec_of(bad).unwrap_err().to_string();
            assert!(e.contains(says), "{bad}: {e}");
        }
    }

    /// A clip is a WAV file a decoder reads back: its header says the
    /// rate, the format and the length asked for.
    #[test]
    fn a_synthetic_clip_is_a_wav_of_its_length() {
        let w = wav(16_000 * 3, 9);
        assert_eq!(&w[..4], b"RIFF");
        assert_eq!(&w[8..16], b"WAVEfmt ");
        let u32_at = |i: usize| u32::from_le_bytes(w[i..i + 4].try_into().unwrap());
        let u16_at = |i: usize| u16::from_le_bytes(w[i..i + 2].try_into().unwrap());
        assert_eq!(u32_at(4) as usize, w.len() - 8);
        assert_eq!((u16_at(20), u16_at(22), u32_at(24)), (1, 1, 16_000));
        assert_eq!((u32_at(28), u16_at(32), u16_at(34)), (32_000, 2, 16));
        assert_eq!(&w[36..40], b"data");
        assert_eq!(f64::from(u32_at(40)) / f64::from(u32_at(28)), 3.0, "3 s");
        assert_eq!(w.len() as u64, WAV_HEADER + 2 * 48_000);
        assert_ne!(wav(100, 1), wav(100, 2));
    }

    #[test]
    fn parts_follow_the_images_each_new_and_of_the_size_said() {
        let im = images::attach(
            &images::spec_of("images=1,image_size=8x8").unwrap().unwrap(),
            3,
        )
        .unwrap();
        let spec =
            spec_of("audio=2,audio_seconds=0.5,video=1,video_seconds=1,video_size=8x4,video_fps=3")
                .unwrap()
                .unwrap();
        let a = attach(&spec, Some(im), 3).unwrap();
        assert_eq!(a.count, 1);
        let kinds: Vec<_> = (0..5).map(|i| a.source.kind(i)).collect();
        use MediaKind::*;
        assert_eq!(kinds, [Image, Audio, Audio, Video, Image]);
        assert!(a.source.url(0, 0).starts_with("data:image/png;base64,"));
        let audio = a.source.url(0, 1);
        let head = base64::engine::general_purpose::STANDARD
            .decode(&audio[..16])
            .unwrap();
        assert_eq!(&head[..4], b"RIFF");
        assert_eq!(audio.len() as f64 * 2.0, a.clips[0].bytes_per_request);
        assert_ne!(a.source.url(0, 2), audio, "each clip its own");
        assert_ne!(a.source.url(1, 1), audio, "each request its own");
        assert_eq!(a.source.url(0, 1), audio, "the same request, the same clip");
        let video = a.source.url(0, 3);
        let frames: Vec<&str> = video.strip_prefix(VIDEO_HEAD).unwrap().split(',').collect();
        assert_eq!(frames.len(), 3);
        for f in &frames {
            let png = base64::engine::general_purpose::STANDARD.decode(f).unwrap();
            assert_eq!(images::image_type(&png), Some("image/png"));
            assert_eq!(png.len(), images::png(8, 4, 0).len(), "8x4");
        }
        assert_ne!(frames[0], frames[1], "frames differ");
        assert_eq!(video.len() as f64, a.clips[1].bytes_per_request);
        assert_eq!(a.source.url(0, 9).as_ref(), "", "past the last part");
        assert!(
            a.description
                .contains("2 synthetic 0.5 s WAV audio clips a request")
                && a.description
                    .contains("1 synthetic 1 s video clip a request (3 frames of 8x4 PNG"),
            "{}",
            a.description
        );
    }

    /// Bounded like images: the whole request's images, audio and video
    /// together, before the run.
    #[test]
    fn a_request_s_clips_are_bounded_with_its_images() {
        let e = attach(
            &spec_of("video=64,video_seconds=600,video_size=512x512,video_fps=60")
                .unwrap()
                .unwrap(),
            None,
            1,
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("of images, audio and video a request, more than the 256 MiB"),
            "{e}"
        );
        assert!(e.contains("video=64,video_seconds=600"), "{e}");
        assert!(attach(
            &spec_of("audio=64,audio_seconds=60").unwrap().unwrap(),
            None,
            1
        )
        .is_ok());
    }
}
