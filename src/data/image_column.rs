//! Images from a data file's `images` column: each row's own list of
//! image files (a path relative to the data file's directory, or
//! absolute), data URLs, or http(s) URLs, which its request carries after
//! its text, as `data::images` puts synthetic ones. Files are read and
//! checked before the run, each once however many rows name it; a path
//! that cannot be read or is not an image is the row's error, naming the
//! key (`images[1]`).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use base64::Engine as _;
use serde_json::Value;

use super::images::{data_url, image_type, MAX_DIR_BYTES, MAX_FILE_BYTES, MAX_PER_REQUEST};
use crate::client::ImageSource;

/// The column's name.
pub const KEY: &str = "images";

/// A data file's image column as its rows are read: where relative paths
/// start, and the files read so far (a file named by many rows is read
/// and held once).
#[derive(Debug)]
pub struct Column {
    base: PathBuf,
    files: HashMap<PathBuf, Arc<str>>,
    bytes: u64,
}

impl Column {
    /// The column of `data_file`: relative paths start at its directory.
    pub fn new(data_file: &Path) -> Column {
        Column {
            base: data_file
                .parent()
                .map(Path::to_path_buf)
                .unwrap_or_default(),
            files: HashMap::new(),
            bytes: 0,
        }
    }

    /// A row's images: `v` is a list of them or one (a path, a data URL or
    /// an http(s) URL), each as it goes in a request (a file as a data
    /// URL). The error says which entry and why (`key `images[1]`: …`).
    pub fn read(&mut self, v: &Value) -> Result<Vec<Arc<str>>, String> {
        let entries: Vec<&Value> = match v {
            Value::Null => return Ok(Vec::new()),
            Value::Array(a) => a.iter().collect(),
            one => vec![one],
        };
        if entries.len() > MAX_PER_REQUEST as usize {
            return Err(format!(
                "key `{KEY}`: {} images, more than the {MAX_PER_REQUEST} a request may carry",
                entries.len()
            ));
        }
        let single = !v.is_array();
        let urls = entries
            .into_iter()
            .enumerate()
            .map(|(i, e)| {
                let key = if single {
                    KEY.to_string()
                } else {
                    format!("{KEY}[{i}]")
                };
                match e {
                    Value::String(s) if !s.trim().is_empty() => self
                        .one(s.trim())
                        .map_err(|why| format!("key `{key}`: {why}")),
                    other => Err(format!(
                        "key `{key}`: {} is not a file path or URL",
                        brief(other)
                    )),
                }
            })
            .collect::<Result<Vec<Arc<str>>, String>>()?;
        let total: u64 = urls.iter().map(|u| u.len() as u64).sum();
        super::images::check_request_bytes(total, 1, || format!("key `{KEY}`"))
            .map_err(|e| e.to_string())?;
        Ok(urls)
    }

    /// One entry: a data URL checked to be a base64 image, an http(s) URL
    /// as it is, or a file read (once) and checked to be an image.
    fn one(&mut self, s: &str) -> Result<Arc<str>, String> {
        if s.starts_with("http://") || s.starts_with("https://") {
            return Ok(s.into());
        }
        if let Some(rest) = s.strip_prefix("data:") {
            check_data_url(rest)?;
            // Held to the image limit as a file is (a 256 MB one was sent
            // whole), and to the bytes of images held before the run.
            let len = (rest.len() as u64) / 4 * 3;
            if len > MAX_FILE_BYTES {
                return Err(format!(
                    "a data URL of {} MiB, more than the {} MiB an image may have",
                    len >> 20,
                    MAX_FILE_BYTES >> 20
                ));
            }
            if self.bytes + len > MAX_DIR_BYTES {
                return Err(format!(
                    "the file's images together pass {} MiB, the most read before a run",
                    MAX_DIR_BYTES >> 20
                ));
            }
            self.bytes += len;
            return Ok(s.into());
        }
        let path = self.base.join(s);
        if let Some(url) = self.files.get(&path) {
            return Ok(url.clone());
        }
        let shown = crate::safe::line(s).into_owned();
        let len = std::fs::metadata(&path)
            .map_err(|e| format!("cannot read {shown} ({}): {e}", where_(&path)))?
            .len();
        if len > MAX_FILE_BYTES {
            return Err(format!(
                "{shown} is {} MiB, more than the {} MiB an image may have",
                len >> 20,
                MAX_FILE_BYTES >> 20
            ));
        }
        if self.bytes + len > MAX_DIR_BYTES {
            return Err(format!(
                "{shown}: the file's images together pass {} MiB, the most read before a run",
                MAX_DIR_BYTES >> 20
            ));
        }
        let bytes = crate::bounds::read_file(&path, MAX_FILE_BYTES as usize, "an image")
            .map_err(|e| format!("cannot read {shown} ({}): {e}", where_(&path)))?;
        let Some(mime) = image_type(&bytes) else {
            return Err(format!(
                "{shown} is not an image (PNG, JPEG, GIF or WebP): it starts with {}",
                crate::safe::line(&String::from_utf8_lossy(&bytes[..bytes.len().min(16)]))
            ));
        };
        self.bytes += bytes.len() as u64;
        let url: Arc<str> = data_url(mime, &bytes).into();
        self.files.insert(path, url.clone());
        Ok(url)
    }
}

/// A path as an error shows it, on one line.
fn where_(p: &Path) -> String {
    crate::safe::line(&p.display().to_string()).into_owned()
}

fn brief(v: &Value) -> String {
    let s = v.to_string();
    match s.char_indices().nth(60) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s,
    }
}

/// A data URL after its `data:`: base64, of an image by its first bytes.
fn check_data_url(rest: &str) -> Result<(), String> {
    let Some((head, data)) = rest.split_once(',') else {
        return Err("a data URL without its `,`".into());
    };
    if !head.ends_with(";base64") {
        return Err("a data URL must be base64 (`data:image/png;base64,…`)".into());
    }
    // 16 characters are 12 bytes: enough for any signature.
    let start = data.get(..16.min(data.len() / 4 * 4)).unwrap_or_default();
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(start)
        .map_err(|e| format!("the data URL is not base64 ({e})"))?;
    if image_type(&bytes).is_none() {
        return Err("the data URL's bytes are not an image (PNG, JPEG, GIF or WebP)".into());
    }
    Ok(())
}

/// One request's images as its row listed them: image `i` of any request
/// made from the row is the row's `i`-th.
#[derive(Debug, Clone)]
pub struct Listed(pub Arc<[Arc<str>]>);

impl ImageSource for Listed {
    fn url(&self, _seq: u64, i: usize) -> Arc<str> {
        self.0.get(i).cloned().unwrap_or_else(|| Arc::from(""))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// An inline data URL of 256 MB was sent whole (1.03 GB held): it is
    /// held to the 32 MiB an image file may have.
    #[test]
    fn an_inline_data_url_is_held_to_the_image_limit() {
        let mut c = Column::new(Path::new("rows.jsonl"));
        let big = format!(
            "data:image/png;base64,iVBORw0KGgo{}",
            "A".repeat((33 << 20) / 3 * 4)
        );
        let e = c.read(&json!([big])).unwrap_err();
        assert!(
            e.contains(
                "key `images[0]`: a data URL of 33 MiB, more than the 32 MiB an image may have"
            ),
            "{e}"
        );
    }

    #[test]
    fn paths_urls_and_data_urls_are_read_and_bad_ones_named_by_key() {
        let dir = std::env::temp_dir().join(format!("llmsweep-imgcol-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("pics")).unwrap();
        std::fs::write(dir.join("pics/a.png"), super::super::images::png(4, 4, 1)).unwrap();
        std::fs::write(dir.join("pics/notes.txt"), "hello, no picture").unwrap();
        let mut c = Column::new(&dir.join("rows.jsonl"));
        let png = "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAA";
        let got = c
            .read(&json!([
                "pics/a.png",
                "https://x.test/y.jpg",
                png,
                "pics/a.png"
            ]))
            .unwrap();
        assert_eq!(got.len(), 4);
        assert!(got[0].starts_with("data:image/png;base64,iVBORw0KGgo"));
        assert_eq!(&*got[1], "https://x.test/y.jpg");
        assert_eq!(&*got[2], png);
        assert!(Arc::ptr_eq(&got[0], &got[3]), "a file is read once");
        assert_eq!(c.files.len(), 1);
        // One entry alone is a list of one; null is none.
        assert_eq!(c.read(&json!("pics/a.png")).unwrap().len(), 1);
        assert!(c.read(&Value::Null).unwrap().is_empty());
        // An absolute path is taken as it is.
        let abs = dir.join("pics/a.png").display().to_string();
        assert_eq!(c.read(&json!([abs])).unwrap()[0], got[0]);
        for (v, says) in [
            (json!(["pics/a.png", "pics/notes.txt"]), "key `images[1]`: pics/notes.txt is not an image (PNG, JPEG, GIF or WebP): it starts with hello"),
            (json!(["pics/missing.png"]), "key `images[0]`: cannot read pics/missing.png ("),
            (json!("data:text/plain;base64,aGVsbG8gd29ybGQgaGVsbG8="), "key `images`: the data URL's bytes are not an image"),
            (json!(["data:image/png,raw"]), "must be base64"),
            (json!([3]), "key `images[0]`: 3 is not a file path or URL"),
            (json!([""]), "is not a file path or URL"),
        ] {
            let e = c.read(&v).unwrap_err();
            assert!(e.contains(says), "{v}: {e}");
        }
        let many: Vec<&str> = vec![png; 65];
        assert!(c
            .read(&json!(many))
            .unwrap_err()
            .contains("more than the 64"));
        let l = Listed(got.into());
        assert_eq!(l.url(9, 1).as_ref(), "https://x.test/y.jpg");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
