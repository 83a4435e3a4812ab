//! Images in chat requests: `--data …,images=2,image_size=512x512` draws
//! that many synthetic PNG images of that size for every request (its own
//! pixels, seeded by the request's number, so no server cache has seen
//! one), or `images_dir=PATH` sends the image files of a directory in turn.
//! Each goes as a data URL in an OpenAI `image_url` content part, after the
//! prompt's text. The data URLs are made as a request is sent
//! (`client::Prompt::filled`), not before the run.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{bail, Context as _, Result};
use base64::Engine as _;

use crate::client::{ImageSource, MediaKind};

/// The largest side of a synthetic image, in pixels.
pub const MAX_SIDE: u32 = 4096;
/// The most images a request may carry.
pub const MAX_PER_REQUEST: u32 = 64;
/// The largest image file `images_dir` takes.
pub const MAX_FILE_BYTES: u64 = 32 << 20;
/// The most bytes of image files `images_dir` reads before the run.
pub const MAX_DIR_BYTES: u64 = 1 << 30;

/// The image keys of a `--data` spec.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ImageSpec {
    /// Images a request (0: none).
    pub count: u32,
    pub width: u32,
    pub height: u32,
    pub dir: Option<PathBuf>,
}

/// Whether `key` is one of this module's keys of the `--data` spec.
pub fn is_key(key: &str) -> bool {
    matches!(key, "images" | "image_size" | "images_dir")
}

/// The image keys of a synthetic `--data` spec; None when it asks for no
/// images.
pub fn spec_of(spec: &str) -> Result<Option<ImageSpec>> {
    let mut s = ImageSpec {
        count: 0,
        width: 512,
        height: 512,
        dir: None,
    };
    let (mut count, mut size) = (None, false);
    for part in spec.split(',').map(str::trim) {
        let Some((k, v)) = part.split_once('=') else {
            continue;
        };
        let (k, v) = (k.trim(), v.trim());
        match k {
            "images" => {
                let n: u32 = v.parse().with_context(|| {
                    format!("--data images: {v:?} is not a whole number of images a request")
                })?;
                if n > MAX_PER_REQUEST {
                    bail!("--data images: {n} images a request is more than {MAX_PER_REQUEST}");
                }
                count = Some(n);
            }
            "image_size" => {
                (s.width, s.height) = parse_size(v)?;
                size = true;
            }
            "images_dir" => s.dir = Some(PathBuf::from(v)),
            _ => {}
        }
    }
    if size && s.dir.is_some() {
        bail!("--data: image_size draws synthetic images and images_dir sends files: give one");
    }
    s.count = match (count, &s.dir) {
        (Some(n), _) => n,
        (None, Some(_)) => 1,
        (None, None) if size => bail!("--data image_size needs images=N (images a request)"),
        (None, None) => 0,
    };
    if s.count == 0 {
        if s.dir.is_some() {
            bail!("--data images=0 with images_dir: give images=1 or more");
        }
        return Ok(None);
    }
    if s.dir.is_none() {
        let each = synthetic_url_bytes(s.width, s.height);
        check_request_bytes(each, s.count, || {
            format!(
                "--data images={},image_size={}x{}",
                s.count, s.width, s.height
            )
        })?;
    }
    Ok(Some(s))
}

/// The bytes of a synthetic `width`×`height` image's data URL (see [`png`]:
/// its size depends on the dimensions alone), base64 with its header.
pub fn synthetic_url_bytes(width: u32, height: u32) -> u64 {
    png_bytes(width, height).div_ceil(3) * 4 + "data:image/png;base64,".len() as u64
}

/// The bytes of a synthetic `width`×`height` PNG (see [`png`]).
pub fn png_bytes(width: u32, height: u32) -> u64 {
    let (w, h) = (u64::from(width), u64::from(height));
    let raw = (1 + 3 * w) * h;
    raw + raw.div_ceil(65_535).max(1) * 5 + 2 + 4 + 8 + 3 * 12 + 13
}

/// Refuses `count` images of `each` bytes a request when together they
/// pass [`crate::bounds::IMAGES_A_REQUEST`], naming the bound.
pub fn check_request_bytes(each: u64, count: u32, what: impl Fn() -> String) -> Result<()> {
    check_bytes(each.saturating_mul(u64::from(count)), "images", what)
}

/// Refuses `total` bytes of `parts` (images; images, audio and video) a
/// request past [`crate::bounds::IMAGES_A_REQUEST`], naming the bound.
pub fn check_bytes(total: u64, parts: &str, what: impl Fn() -> String) -> Result<()> {
    if total > crate::bounds::IMAGES_A_REQUEST {
        bail!(
            "{}: {} MiB of {parts} a request, more than the {} a request may carry (fewer or smaller {})",
            what(),
            total >> 20,
            crate::bounds::human(crate::bounds::IMAGES_A_REQUEST as usize),
            if parts == "images" { "images" } else { "parts" }
        );
    }
    Ok(())
}

/// `512x512` (or `512X512`, `512×512`): width and height in pixels.
pub fn parse_size(v: &str) -> Result<(u32, u32)> {
    let bad = || {
        anyhow::anyhow!("--data image_size: {v:?} should be WIDTHxHEIGHT in pixels, e.g. 512x512")
    };
    let (w, h) = v
        .split_once(['x', 'X', '×'])
        .ok_or_else(bad)
        .map(|(w, h)| (w.trim().parse::<u32>(), h.trim().parse::<u32>()))?;
    let (w, h) = (w.map_err(|_| bad())?, h.map_err(|_| bad())?);
    if !(1..=MAX_SIDE).contains(&w) || !(1..=MAX_SIDE).contains(&h) {
        bail!("--data image_size: {w}x{h}: each side must be from 1 to {MAX_SIDE} pixels");
    }
    Ok((w, h))
}

/// A request's images, ready for the request bodies: how many, where they
/// come from, and the bytes of their data URLs a request on average.
/// With `audio=N` or `video=N` (`data::media`), its audio and video clips
/// follow its images, and `source` gives every part in that order.
#[derive(Debug, Clone)]
pub struct Attach {
    /// Images a request, and the bytes of their data URLs.
    pub count: u32,
    pub source: Arc<dyn ImageSource>,
    pub bytes_per_request: f64,
    /// What the run says about them.
    pub description: String,
    /// The audio and video clips a request, after the images.
    pub clips: Vec<Clip>,
}

/// Clips of one kind a request (audio, video: `data::media`), as the
/// run's settings keep them.
#[derive(Debug, Clone, PartialEq)]
pub struct Clip {
    pub kind: MediaKind,
    pub count: u32,
    pub bytes_per_request: f64,
}

impl Attach {
    /// The parts of a request's first message beside its text, in order:
    /// each kind and how many.
    pub fn layout(&self) -> Vec<(MediaKind, u32)> {
        std::iter::once((MediaKind::Image, self.count))
            .chain(self.clips.iter().map(|c| (c.kind, c.count)))
            .filter(|(_, n)| *n > 0)
            .collect()
    }

    /// The parts of a request, counted: `1 image, 2 audio clips`.
    pub fn counted(&self) -> String {
        let counted: Vec<String> = self
            .layout()
            .iter()
            .map(|(kind, n)| {
                let s = if *n == 1 { "" } else { "s" };
                match kind {
                    MediaKind::Image => format!("{n} image{s}"),
                    MediaKind::Audio => format!("{n} audio clip{s}"),
                    MediaKind::Video => format!("{n} video clip{s}"),
                }
            })
            .collect();
        counted.join(", ")
    }

    /// What the run says about them in conversations, whose first message
    /// carries them (see `data::conversation::Build`).
    pub fn in_conversations(&self) -> String {
        format!(
            "{} in each conversation's first message, sent again in every turn's history ({})",
            self.counted(),
            self.description.replace(" a request", "").replace(
                "new to the server in every request",
                "new to the server in every conversation"
            )
        )
    }
}

/// The images `spec` asks for, read (files) or set up (synthetic).
pub fn attach(spec: &ImageSpec, seed: u64) -> Result<Attach> {
    match &spec.dir {
        Some(dir) => {
            let files = ImageFiles::read(dir)?.per_request(spec.count);
            // The largest files, `count` of them together.
            let mut sizes: Vec<u64> = files.urls.iter().map(|u| u.len() as u64).collect();
            sizes.sort_unstable_by(|a, b| b.cmp(a));
            let largest: u64 = sizes.iter().take(spec.count as usize).sum();
            check_request_bytes(largest, 1, || {
                format!("--data images={},images_dir={}", spec.count, shown(dir))
            })?;
            let mean = files.urls.iter().map(|u| u.len() as f64).sum::<f64>()
                / files.urls.len().max(1) as f64;
            let description = format!(
                "{} image{} a request from {} ({} files, sent in turn: a file is sent again after {} requests)",
                spec.count,
                if spec.count == 1 { "" } else { "s" },
                dir.display(),
                files.urls.len(),
                files.urls.len().div_ceil(spec.count as usize)
            );
            Ok(Attach {
                count: spec.count,
                bytes_per_request: mean * f64::from(spec.count),
                source: Arc::new(files),
                description,
                clips: Vec::new(),
            })
        }
        None => {
            let s = Synthetic {
                width: spec.width,
                height: spec.height,
                count: spec.count,
                seed,
            };
            let bytes = s.url(0, 0).len() as f64 * f64::from(spec.count);
            Ok(Attach {
                count: spec.count,
                bytes_per_request: bytes,
                description: format!(
                    "{} synthetic {}x{} PNG image{} a request, new to the server in every request",
                    spec.count,
                    spec.width,
                    spec.height,
                    if spec.count == 1 { "" } else { "s" }
                ),
                source: Arc::new(s),
                clips: Vec::new(),
            })
        }
    }
}

/// Synthetic images: noise over a gradient, drawn from the run's seed, the
/// request's number and the image's place in it.
#[derive(Debug, Clone)]
pub struct Synthetic {
    pub width: u32,
    pub height: u32,
    pub count: u32,
    pub seed: u64,
}

impl ImageSource for Synthetic {
    fn url(&self, seq: u64, i: usize) -> Arc<str> {
        let seed = part_seed(self.seed, seq, self.count, i);
        data_url("image/png", &png(self.width, self.height, seed)).into()
    }
}

/// The seed of the `i`-th of `count` parts of request `seq`, from the
/// run's: every part of every request its own.
pub fn part_seed(seed: u64, seq: u64, count: u32, i: usize) -> u64 {
    splitmix(seed ^ splitmix(seq.wrapping_mul(u64::from(count)) + i as u64))
}

/// A path as an error shows it: on one line, control characters escaped
/// (a file name may hold a newline or an escape sequence).
fn shown(p: &Path) -> String {
    crate::safe::line(&p.display().to_string()).into_owned()
}

/// Image files sent in turn: request `seq`'s `i`-th image is file
/// `seq × count + i` (modulo the files), each read and encoded once.
#[derive(Debug, Clone)]
pub struct ImageFiles {
    pub urls: Vec<Arc<str>>,
    count: u32,
}

impl ImageFiles {
    /// Every file of `dir` (sorted by name; subdirectories and hidden
    /// files left out), each checked to be a PNG, JPEG, GIF or WebP image.
    pub fn read(dir: &Path) -> Result<ImageFiles> {
        let entries = std::fs::read_dir(dir)
            .with_context(|| format!("--data images_dir: cannot read {}", shown(dir)))?;
        let mut paths = Vec::new();
        for e in entries {
            let e = e.with_context(|| format!("--data images_dir: cannot read {}", shown(dir)))?;
            let hidden = e.file_name().to_string_lossy().starts_with('.');
            let is_file = e.file_type().map(|t| t.is_file()).unwrap_or(false)
                || std::fs::metadata(e.path()).is_ok_and(|m| m.is_file());
            if is_file && !hidden {
                paths.push(e.path());
            }
        }
        paths.sort();
        if paths.is_empty() {
            bail!("--data images_dir: {} holds no files", shown(dir));
        }
        let mut urls = Vec::with_capacity(paths.len());
        let mut total = 0u64;
        for p in &paths {
            let len = std::fs::metadata(p)
                .with_context(|| format!("--data images_dir: cannot read {}", shown(p)))?
                .len();
            if len > MAX_FILE_BYTES {
                bail!(
                    "--data images_dir: {} is {} MiB, more than the {} MiB an image may have",
                    shown(p),
                    len >> 20,
                    MAX_FILE_BYTES >> 20
                );
            }
            total += len;
            if total > MAX_DIR_BYTES {
                bail!(
                    "--data images_dir: {} holds more than {} MiB of files, the most read before a run",
                    shown(dir),
                    MAX_DIR_BYTES >> 20
                );
            }
            let bytes = crate::bounds::read_file(p, MAX_FILE_BYTES as usize, "an image")
                .with_context(|| format!("--data images_dir: cannot read {}", shown(p)))?;
            let Some(mime) = image_type(&bytes) else {
                bail!(
                    "--data images_dir: {} is not an image (PNG, JPEG, GIF or WebP): it starts with {}",
                    shown(p),
                    crate::safe::line(&String::from_utf8_lossy(
                        &bytes[..bytes.len().min(16)]
                    ))
                );
            };
            urls.push(data_url(mime, &bytes).into());
        }
        Ok(ImageFiles { urls, count: 1 })
    }

    /// The same files, `count` a request.
    pub fn per_request(mut self, count: u32) -> Self {
        self.count = count;
        self
    }
}

impl ImageSource for ImageFiles {
    fn url(&self, seq: u64, i: usize) -> Arc<str> {
        let n = self.urls.len().max(1) as u64;
        let k = seq
            .wrapping_mul(u64::from(self.count.max(1)))
            .wrapping_add(i as u64)
            % n;
        self.urls
            .get(k as usize)
            .cloned()
            .unwrap_or_else(|| Arc::from(""))
    }
}

/// The media type of an image file by its first bytes: PNG, JPEG, GIF or
/// WebP; None for anything else.
pub fn image_type(bytes: &[u8]) -> Option<&'static str> {
    if bytes.starts_with(b"\x89PNG\r\n\x1a\n") {
        Some("image/png")
    } else if bytes.starts_with(&[0xFF, 0xD8, 0xFF]) {
        Some("image/jpeg")
    } else if bytes.starts_with(b"GIF87a") || bytes.starts_with(b"GIF89a") {
        Some("image/gif")
    } else if bytes.len() >= 12 && &bytes[..4] == b"RIFF" && &bytes[8..12] == b"WEBP" {
        Some("image/webp")
    } else {
        None
    }
}

/// `data:MIME;base64,…`.
pub fn data_url(mime: &str, bytes: &[u8]) -> String {
    let mut s = String::with_capacity(mime.len() + 13 + bytes.len().div_ceil(3) * 4);
    s.push_str("data:");
    s.push_str(mime);
    s.push_str(";base64,");
    base64::engine::general_purpose::STANDARD.encode_string(bytes, &mut s);
    s
}

fn splitmix(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// A `width`×`height` RGB PNG, uncompressed (stored deflate blocks): a
/// gradient under noise drawn from `seed`. Its size depends on the
/// dimensions alone: 3 bytes a pixel, one a row, and a few dozen more.
pub fn png(width: u32, height: u32, seed: u64) -> Vec<u8> {
    let (w, h) = (width as usize, height as usize);
    let row = 1 + 3 * w;
    let mut raw = vec![0u8; row * h];
    let mut state = seed;
    for (y, line) in raw.chunks_exact_mut(row).enumerate() {
        // Filter type 0 (none), then the pixels.
        line[0] = 0;
        for (x, px) in line[1..].chunks_exact_mut(3).enumerate() {
            if x % 2 == 0 {
                state = splitmix(state);
            }
            let noise = (state >> (if x % 2 == 0 { 0 } else { 24 })) as u32;
            px[0] = ((x * 255 / w.max(1)) as u32 ^ (noise & 0x3F)) as u8;
            px[1] = ((y * 255 / h.max(1)) as u32 ^ ((noise >> 6) & 0x3F)) as u8;
            px[2] = (noise >> 12) as u8;
        }
    }
    let mut idat = Vec::with_capacity(raw.len() + raw.len() / 65_535 * 5 + 16);
    idat.extend_from_slice(&[0x78, 0x01]);
    let n = raw.len().div_ceil(65_535).max(1);
    for (i, b) in raw.chunks(65_535).enumerate() {
        idat.push(u8::from(i + 1 == n));
        let len = b.len() as u16;
        idat.extend_from_slice(&len.to_le_bytes());
        idat.extend_from_slice(&(!len).to_le_bytes());
        idat.extend_from_slice(b);
    }
    idat.extend_from_slice(&adler32(&raw).to_be_bytes());
    let mut out = Vec::with_capacity(idat.len() + 64);
    out.extend_from_slice(b"\x89PNG\r\n\x1a\n");
    let mut ihdr = Vec::with_capacity(13);
    ihdr.extend_from_slice(&width.to_be_bytes());
    ihdr.extend_from_slice(&height.to_be_bytes());
    // 8 bits a channel, RGB, deflate, adaptive filters, no interlace.
    ihdr.extend_from_slice(&[8, 2, 0, 0, 0]);
    chunk(&mut out, b"IHDR", &ihdr);
    chunk(&mut out, b"IDAT", &idat);
    chunk(&mut out, b"IEND", &[]);
    out
}

fn chunk(out: &mut Vec<u8>, kind: &[u8; 4], data: &[u8]) {
    out.extend_from_slice(&(data.len() as u32).to_be_bytes());
    out.extend_from_slice(kind);
    out.extend_from_slice(data);
    let mut crc = flate2::Crc::new();
    crc.update(kind);
    crc.update(data);
    out.extend_from_slice(&crc.sum().to_be_bytes());
}

fn adler32(data: &[u8]) -> u32 {
    const MOD: u32 = 65_521;
    let (mut a, mut b) = (1u32, 0u32);
    // 5,552 bytes is the most that cannot overflow before the modulo.
    for block in data.chunks(5_552) {
        for &x in block {
            a += u32::from(x);
            b += a;
        }
        a %= MOD;
        b %= MOD;
    }
    (b << 16) | a
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read as _;

    #[test]
    fn the_spec_reads_count_size_and_directory() {
        assert_eq!(spec_of("prompt_tokens=8").unwrap(), None);
        let s = spec_of("prompt_tokens=8,images=2,image_size=64x32")
            .unwrap()
            .unwrap();
        assert_eq!((s.count, s.width, s.height), (2, 64, 32));
        let s = spec_of("images=1").unwrap().unwrap();
        assert_eq!((s.width, s.height), (512, 512));
        let s = spec_of("images_dir=/tmp/x").unwrap().unwrap();
        assert_eq!(s.count, 1);
        for (bad, says) in [
            ("images=2,image_size=512", "WIDTHxHEIGHT"),
            ("images=2,image_size=0x5", "from 1 to 4096"),
            ("images=2,image_size=5000x5", "from 1 to 4096"),
            ("images=two", "whole number"),
            ("images=65", "more than 64"),
            ("image_size=8x8", "needs images=N"),
            ("images=1,image_size=8x8,images_dir=/x", "give one"),
        ] {
            let e = spec_of(bad).unwrap_err().to_string();
            assert!(e.contains(says), "{bad}: {e}");
        }
    }

    /// The PNG is one a decoder reads back: its signature, chunks with
    /// good CRCs, and a zlib stream that inflates to the rows.
    /// 64 images of 4096x4096 were 4.3 GB a request (aborted on a failed
    /// allocation): refused before the run, the bound named; one such
    /// image is allowed, and the size estimate is exact.
    #[test]
    fn images_a_request_are_bounded_together() {
        let e = spec_of("images=64,image_size=4096x4096")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("4096 MiB of images a request, more than the 256 MiB a request may carry"),
            "{e}"
        );
        assert!(spec_of("images=1,image_size=4096x4096").is_ok());
        assert!(spec_of("images=64,image_size=512x512").is_ok());
        for (w, h) in [(1, 1), (512, 512), (300, 7), (4096, 30)] {
            let url = Synthetic {
                width: w,
                height: h,
                count: 1,
                seed: 1,
            }
            .url(0, 0);
            assert_eq!(url.len() as u64, synthetic_url_bytes(w, h), "{w}x{h}");
        }
    }

    #[test]
    fn a_synthetic_png_is_a_valid_png_of_its_size() {
        let (w, h) = (300u32, 257u32);
        let p = png(w, h, 7);
        assert_eq!(image_type(&p), Some("image/png"));
        let mut at = 8;
        let mut idat = Vec::new();
        let mut kinds = Vec::new();
        while at < p.len() {
            let len = u32::from_be_bytes(p[at..at + 4].try_into().unwrap()) as usize;
            let kind = &p[at + 4..at + 8];
            let data = &p[at + 8..at + 8 + len];
            let crc = u32::from_be_bytes(p[at + 8 + len..at + 12 + len].try_into().unwrap());
            let mut c = flate2::Crc::new();
            c.update(kind);
            c.update(data);
            assert_eq!(c.sum(), crc, "{}", String::from_utf8_lossy(kind));
            if kind == b"IHDR" {
                assert_eq!(
                    &data[..8],
                    [&w.to_be_bytes()[..], &h.to_be_bytes()].concat()
                );
            }
            if kind == b"IDAT" {
                idat.extend_from_slice(data);
            }
            kinds.push(String::from_utf8_lossy(kind).into_owned());
            at += 12 + len;
        }
        assert_eq!(kinds, ["IHDR", "IDAT", "IEND"]);
        let mut raw = Vec::new();
        flate2::read::ZlibDecoder::new(&idat[..])
            .read_to_end(&mut raw)
            .unwrap();
        assert_eq!(raw.len(), (1 + 3 * w as usize) * h as usize);
        assert!(raw.chunks(1 + 3 * w as usize).all(|r| r[0] == 0));
        // The size is the dimensions', whatever the seed.
        assert_eq!(png(w, h, 8).len(), p.len());
        assert_ne!(png(w, h, 8), p);
    }

    #[test]
    fn every_request_gets_images_of_its_own() {
        let s = Synthetic {
            width: 16,
            height: 16,
            count: 2,
            seed: 1,
        };
        let a = s.url(0, 0);
        assert!(a.starts_with("data:image/png;base64,iVBORw0KGgo"), "{a}");
        let urls: std::collections::BTreeSet<Arc<str>> = (0..50)
            .flat_map(|seq| [s.url(seq, 0), s.url(seq, 1)])
            .collect();
        assert_eq!(urls.len(), 100, "no image repeats");
        assert_eq!(s.url(3, 1), s.url(3, 1), "the same request, the same image");
    }

    #[test]
    fn a_directory_of_images_is_read_and_a_file_that_is_not_one_refused() {
        let dir = std::env::temp_dir().join(format!("llmsweep-images-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("a.png"), png(4, 4, 1)).unwrap();
        std::fs::write(dir.join("b.jpg"), [0xFF, 0xD8, 0xFF, 0xE0, 0, 16]).unwrap();
        std::fs::write(dir.join(".hidden"), "x").unwrap();
        let spec = spec_of(&format!("images=3,images_dir={}", dir.display()))
            .unwrap()
            .unwrap();
        let a = attach(&spec, 1).unwrap();
        assert!(a.description.contains("2 files"), "{}", a.description);
        let c = a.in_conversations();
        assert!(
            c.starts_with("3 images in each conversation's first message, sent again in every turn's history (3 images from "),
            "{c}"
        );
        assert!(a.source.url(0, 1).starts_with("data:image/jpeg;base64,"));
        assert_eq!(a.source.url(0, 2), a.source.url(0, 0), "in turn");
        std::fs::write(dir.join("notes.txt"), "hello, not a picture").unwrap();
        let e = attach(&spec, 1).unwrap_err().to_string();
        assert!(
            e.contains("notes.txt is not an image (PNG, JPEG, GIF or WebP)") && e.contains("hello"),
            "{e}"
        );
        std::fs::remove_file(dir.join("notes.txt")).unwrap();
        std::fs::write(dir.join("x\u{1b}[31m|\n.png"), "not a picture").unwrap();
        let e = attach(&spec, 1).unwrap_err().to_string();
        assert!(e.lines().count() == 1 && !e.contains('\u{1b}'), "{e:?}");
        std::fs::remove_file(dir.join("x\u{1b}[31m|\n.png")).unwrap();
        let empty = dir.join("empty");
        std::fs::create_dir_all(&empty).unwrap();
        let spec = spec_of(&format!("images_dir={}", empty.display()))
            .unwrap()
            .unwrap();
        assert!(attach(&spec, 1)
            .unwrap_err()
            .to_string()
            .contains("holds no files"));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
