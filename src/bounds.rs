//! Every read from the outside has a bound, enforced while reading, not
//! after: a server, a viewer or a file cannot make llmsweep hold more than
//! this. docs/ARCHITECTURE.md lists them; what is cut is said once in the
//! report (a warning) or in the error that refuses it.

/// One line a viewer sends on the control socket (a longer line ends the
/// connection).
pub const CONTROL_LINE: usize = 64 << 10;
/// One `/metrics` page (the rest of a longer page is not read; the report
/// says so once).
pub const METRICS_PAGE: usize = 8 << 20;
/// The `/v1/models` answer (a longer one is refused with the bound named).
pub const MODELS_LIST: usize = 16 << 20;
/// The body of an error answer kept for its message (the rest is not read).
pub const ERROR_BODY: usize = 16 << 10;
/// An entry of the run registry (`attach::runs::registry_dir`): a run
/// directory's path.
pub const REGISTRY_ENTRY: usize = 4 << 10;
/// One row (line) of a JSONL or CSV data file (a longer row is a bad row).
pub const DATA_ROW: usize = 8 << 20;
/// A pooling API's answer (embeddings, rerank, score): a batch of 64
/// inputs of 4,096-dimension embeddings is about 6 MB of JSON.
pub const POOLED_ANSWER: usize = 64 << 20;
/// A `/tokenize` answer (its token ids; prompts llmsweep counts are short).
pub const TOKENIZE_ANSWER: usize = 16 << 20;
/// A `tokenizer.json`: downloaded from the Hugging Face Hub, found in its
/// cache or given by `--tokenizer` (the largest common ones are about
/// 35 MB).
pub const TOKENIZER_FILE: usize = 128 << 20;
/// A `.json` data file, which is one document and read whole (ShareGPT's
/// is about 650 MB).
pub const DATA_JSON_FILE: usize = 2 << 30;

/// A `report.json`, a `stages.jsonl` checkpoint or a `--baseline` read
/// back (llmsweep's own are a few MB; a long sweep's with every
/// histogram, tens).
pub const REPORT_FILE: usize = 256 << 20;
/// A run directory's `run.json` (a few hundred bytes).
pub const RUN_STATE: usize = 64 << 10;
/// A small text file llmsweep reads whole: a profile, a theme, a Hugging
/// Face cache's `refs/main` (a commit hash).
pub const SMALL_FILE: usize = 1 << 20;

/// The most one GPU is believed to draw, in watts: a DCGM energy
/// counter's interval that implies more (the largest accelerators draw
/// under 3 kW) is not counted, as a reset is not.
pub const GPU_WATTS: f64 = 10_000.0;

/// The server's `/tokenize` before the load (building prompts of exact
/// length): at most this many calls and this long in all, the rest counted
/// by the built-in counter. A `/tokenize` that added one to every count
/// cost 191 sequential calls (19.6 s at 0.1 s an answer, 47 minutes at the
/// request timeout); a local server answers all a run needs (about 400)
/// in a few seconds.
pub const TOKENIZE_CALLS: usize = 512;
pub const TOKENIZE_TIME: std::time::Duration = std::time::Duration::from_secs(10);

/// The bytes of images one request carries, all together as sent (data
/// URLs): `images=64,image_size=4096x4096` was 4.3 GB a request (aborted
/// on "memory allocation failed"); each image is also held to
/// `data::images::MAX_FILE_BYTES`. Its audio and video clips
/// (`data::media`) count with them.
pub const IMAGES_A_REQUEST: u64 = 256 << 20;

/// One histogram of a report file (`ttft_us`, …), deflated and inflated
/// alike: llmsweep's own, 3 significant digits from 1 µs to 1 h, are at
/// most 212 KB of counts.
pub const HISTOGRAM: usize = 1 << 20;

/// The text of one viewer's note or stop reason on the control socket, and
/// (`VIEWER_EVENT`) a note's event name: longer ones are cut (`…`). The
/// run's own notes (an export's path, a signal) are a few dozen bytes.
pub const VIEWER_TEXT: usize = 1 << 10;
pub const VIEWER_EVENT: usize = 64;
/// Timeline entries viewers add to a run (their notes, their comings and
/// goings, their exports), all viewers together: past it they are not
/// kept, and a viewer's note is answered with an error naming this bound.
pub const VIEWER_NOTES: usize = 1000;

/// `s` cut to at most `max` bytes on a character boundary, `…` marking a
/// cut.
pub fn cut(s: &str, max: usize) -> std::borrow::Cow<'_, str> {
    if s.len() <= max {
        return s.into();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &s[..end]).into()
}

/// One request's prompt built by llmsweep (synthetic `prompt_tokens` with
/// `prefix_tokens`, a conversation's turn with its history): 1 Mi tokens,
/// above the longest context windows served (1M), 5 to 8 MB of text.
pub const PROMPT_TOKENS: u64 = 1 << 20;
/// Text built as one piece before the run: every group's shared prefix
/// together, or one conversation's requests together (each turn holds the
/// history before it, so they grow with the square of the turns): 8 Mi
/// tokens, about 50 MB.
pub const BUILT_TOKENS: u64 = 8 << 20;

/// A bound as people write it: `64 KiB`, `8 MiB`.
pub fn human(bytes: usize) -> String {
    if bytes >= 1 << 20 && bytes % (1 << 20) == 0 {
        format!("{} MiB", bytes >> 20)
    } else if bytes >= 1 << 10 && bytes % (1 << 10) == 0 {
        format!("{} KiB", bytes >> 10)
    } else {
        format!("{bytes} bytes")
    }
}

/// What kind of thing a path that is not a regular file is, for an error.
fn kind_of(ft: &std::fs::FileType) -> &'static str {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt as _;
        if ft.is_fifo() {
            return "a FIFO (named pipe)";
        }
        if ft.is_char_device() {
            return "a character device";
        }
        if ft.is_block_device() {
            return "a block device";
        }
        if ft.is_socket() {
            return "a socket";
        }
    }
    if ft.is_dir() {
        "a directory"
    } else {
        "not a regular file"
    }
}

/// Opens a file llmsweep reads, refusing at once (without blocking) what is
/// not a regular file: a FIFO would block the open and the read for ever, a
/// device (`/dev/zero`) never ends. Every file llmsweep reads is opened
/// here; the error says what the path is (`it is a FIFO (named pipe), …`),
/// the caller names the path. Returns the file and its size.
pub fn open_regular(path: &std::path::Path) -> std::io::Result<(std::fs::File, u64)> {
    let mut opts = std::fs::OpenOptions::new();
    opts.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt as _;
        // Opening a FIFO for reading blocks until a writer comes; with
        // O_NONBLOCK it returns at once and the check below refuses it.
        opts.custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY);
    }
    let file = opts.open(path)?;
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(std::io::Error::other(format!(
            "it is {}, and llmsweep reads regular files only",
            kind_of(&meta.file_type())
        )));
    }
    Ok((file, meta.len()))
}

/// Reads a whole regular file of at most `cap` bytes (see [`open_regular`]):
/// its size is known before it is read, and a larger file is refused with
/// the bound named (`it is 600 MiB, more than the 128 MiB llmsweep reads
/// of a tokenizer.json`),
/// `of` saying what the bound is for. A file that grows while read is cut
/// at the bound and refused alike.
pub fn read_file(path: &std::path::Path, cap: usize, of: &str) -> std::io::Result<Vec<u8>> {
    use std::io::Read as _;
    let (file, len) = open_regular(path)?;
    let too_big = |n: u64| {
        std::io::Error::other(format!(
            "it is {}, more than the {} llmsweep reads of {of}",
            human_size(n),
            human(cap)
        ))
    };
    if len > cap as u64 {
        return Err(too_big(len));
    }
    let mut out = Vec::with_capacity(len as usize);
    file.take(cap as u64 + 1).read_to_end(&mut out)?;
    if out.len() > cap {
        return Err(too_big(out.len() as u64));
    }
    Ok(out)
}

/// How long a secret given as a pipe (`--api-key-file <(pass show key)`)
/// may take to arrive before it is refused: a password manager asks
/// nothing of the user here, so seconds are plenty; a FIFO no one writes
/// must not hold the run for ever.
pub const SECRET_PIPE_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// Reads a small secret of at most `cap` bytes: a regular file as
/// [`read_file`] does, or a pipe (a shell's process substitution, the way
/// people keep keys out of files), read until its writer closes it for at
/// most `wait`. A FIFO with no writer reads as empty at once; anything
/// else (a device, a socket) is refused.
pub fn read_secret(
    path: &std::path::Path,
    cap: usize,
    of: &str,
    wait: std::time::Duration,
) -> std::io::Result<Vec<u8>> {
    #[cfg(unix)]
    {
        use std::io::Read as _;
        use std::os::unix::fs::{FileTypeExt as _, OpenOptionsExt as _};
        use std::os::unix::io::AsRawFd as _;
        let mut opts = std::fs::OpenOptions::new();
        opts.read(true);
        opts.custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY);
        let mut file = opts.open(path)?;
        let ft = file.metadata()?.file_type();
        if !ft.is_fifo() {
            drop(file);
            return read_file(path, cap, of);
        }
        let deadline = std::time::Instant::now() + wait;
        let mut out = Vec::new();
        let mut buf = [0u8; 4096];
        loop {
            match file.read(&mut buf) {
                Ok(0) => return Ok(out),
                Ok(n) => {
                    out.extend_from_slice(&buf[..n]);
                    if out.len() > cap {
                        return Err(std::io::Error::other(format!(
                            "it is a pipe that gave more than the {} llmsweep reads of {of}",
                            human(cap)
                        )));
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    let left = deadline.saturating_duration_since(std::time::Instant::now());
                    if left.is_zero() {
                        return Err(std::io::Error::other(format!(
                            "it is a pipe that gave nothing to end on within {} s",
                            wait.as_secs()
                        )));
                    }
                    let mut fd = libc::pollfd {
                        fd: file.as_raw_fd(),
                        events: libc::POLLIN,
                        revents: 0,
                    };
                    let ms = left.as_millis().min(1000) as libc::c_int;
                    // SAFETY: one valid pollfd, for the time given.
                    unsafe { libc::poll(&mut fd, 1, ms) };
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = wait;
        read_file(path, cap, of)
    }
}

/// [`read_file`] as UTF-8 text.
pub fn read_text(path: &std::path::Path, cap: usize, of: &str) -> std::io::Result<String> {
    String::from_utf8(read_file(path, cap, of)?)
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidData, "it is not UTF-8 text"))
}

/// A file's size as people say it: `600 MiB`, `3 GiB`, `812 bytes`
/// (rounded down).
fn human_size(n: u64) -> String {
    if n >= 1 << 30 {
        format!("{} GiB", n >> 30)
    } else if n >= 1 << 20 {
        format!("{} MiB", n >> 20)
    } else if n >= 1 << 10 {
        format!("{} KiB", n >> 10)
    } else {
        format!("{n} bytes")
    }
}

/// A body read up to a bound.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Capped {
    /// At most the bound.
    pub bytes: Vec<u8>,
    /// The body went on past the bound (and was not read further).
    pub cut: bool,
}

/// Reads a response body, keeping at most `cap` bytes and reading no more
/// than the chunk that crosses it; the rest of the body is never read (the
/// connection is dropped with the response).
pub async fn read_capped(mut resp: reqwest::Response, cap: usize) -> reqwest::Result<Capped> {
    let mut out = Capped::default();
    if resp.content_length().is_some_and(|n| n > cap as u64) {
        out.cut = true;
    }
    while let Some(chunk) = resp.chunk().await? {
        let room = cap - out.bytes.len();
        if chunk.len() > room {
            out.bytes.extend_from_slice(&chunk[..room]);
            out.cut = true;
            return Ok(out);
        }
        out.bytes.extend_from_slice(&chunk);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_cut_on_a_character_boundary() {
        assert_eq!(cut("abc", 3), "abc");
        assert_eq!(cut("abcd", 3), "abc…");
        assert_eq!(cut("aé", 2), "a…");
    }

    #[test]
    fn bounds_are_written_as_people_write_them() {
        assert_eq!(human(CONTROL_LINE), "64 KiB");
        assert_eq!(human(METRICS_PAGE), "8 MiB");
        assert_eq!(human(1000), "1000 bytes");
    }

    /// A secret may come through a pipe (`--api-key-file <(pass show key)`,
    /// refused when every file had to be regular): it is read until its
    /// writer closes it; a FIFO no one writes reads empty at once, and one
    /// held open without a word is refused after the wait, never hangs.
    #[cfg(unix)]
    #[test]
    fn a_secret_may_come_through_a_pipe_that_never_holds_the_run() {
        use std::io::Write as _;
        use std::time::Duration;
        let dir = std::env::temp_dir().join(format!("llmsweep-secret-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let fifo = dir.join("key");
        let _ = std::fs::remove_file(&fifo);
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let read = |wait: Duration| {
            let (tx, rx) = std::sync::mpsc::channel();
            let f = fifo.clone();
            std::thread::spawn(move || {
                let _ = tx.send(read_secret(&f, 1 << 10, "a key", wait).map_err(|e| e.to_string()));
            });
            rx.recv_timeout(Duration::from_secs(20))
                .expect("reading a pipe blocked")
        };
        // No writer: empty, at once.
        assert_eq!(read(Duration::from_secs(5)), Ok(Vec::new()));
        // A writer that says its key and closes.
        let f = fifo.clone();
        let writer = std::thread::spawn(move || {
            // Opening for writing waits for the reader.
            let mut w = std::fs::OpenOptions::new().write(true).open(&f).unwrap();
            w.write_all(b"sk-from-a-pipe\n").unwrap();
        });
        let mut got = Vec::new();
        for _ in 0..50 {
            got = read(Duration::from_secs(5)).unwrap();
            if !got.is_empty() {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        writer.join().unwrap();
        assert_eq!(got, b"sk-from-a-pipe\n");
        // A writer that holds it open and says nothing: refused after the wait.
        let f = fifo.clone();
        let (hold_tx, hold_rx) = std::sync::mpsc::channel::<()>();
        let holder = std::thread::spawn(move || {
            let _w = std::fs::OpenOptions::new().write(true).open(&f).unwrap();
            let _ = hold_rx.recv_timeout(Duration::from_secs(20));
        });
        let mut said = None;
        for _ in 0..50 {
            match read(Duration::from_millis(300)) {
                Err(e) => {
                    said = Some(e);
                    break;
                }
                Ok(_) => std::thread::sleep(Duration::from_millis(20)),
            }
        }
        let _ = hold_tx.send(());
        holder.join().unwrap();
        let e = said.expect("a silent pipe was refused");
        assert!(e.contains("gave nothing"), "{e}");
        // A regular file reads as read_file does; a device is refused.
        let file = dir.join("file");
        std::fs::write(&file, "sk-file\n").unwrap();
        assert_eq!(
            read_secret(&file, 1 << 10, "a key", Duration::from_secs(1)).unwrap(),
            b"sk-file\n"
        );
        let zero = dir.join("zero");
        let _ = std::fs::remove_file(&zero);
        std::os::unix::fs::symlink("/dev/zero", &zero).unwrap();
        assert!(read_secret(&zero, 1 << 10, "a key", Duration::from_secs(1)).is_err());
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A FIFO is refused at once (the read runs in a thread so a regression
    /// fails on a timeout, not a hung suite); /dev/zero is refused as a
    /// device; a file over the bound is refused before it is read.
    #[cfg(unix)]
    #[test]
    fn only_regular_files_within_their_bound_are_read() {
        let dir = std::env::temp_dir().join(format!("llmsweep-bounds-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let fifo = dir.join("fifo");
        let _ = std::fs::remove_file(&fifo);
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let (tx, rx) = std::sync::mpsc::channel();
        let f = fifo.clone();
        std::thread::spawn(move || {
            let _ = tx.send(read_file(&f, 1 << 10, "a test file").map_err(|e| e.to_string()));
        });
        let e = rx
            .recv_timeout(std::time::Duration::from_secs(20))
            .expect("reading a FIFO blocked")
            .unwrap_err();
        assert!(
            e.contains("FIFO") && e.contains("regular files only"),
            "{e}"
        );

        let zero = dir.join("zero");
        let _ = std::fs::remove_file(&zero);
        std::os::unix::fs::symlink("/dev/zero", &zero).unwrap();
        let e = read_file(&zero, 1 << 10, "a test file")
            .unwrap_err()
            .to_string();
        assert!(e.contains("character device"), "{e}");

        let big = dir.join("big");
        std::fs::write(&big, vec![b'x'; 3 << 20]).unwrap();
        let e = read_file(&big, 1 << 20, "a test file")
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "it is 3 MiB, more than the 1 MiB llmsweep reads of a test file"
        );
        assert_eq!(read_file(&big, 4 << 20, "x").unwrap().len(), 3 << 20);
        let e = read_file(&dir, 1 << 20, "x").unwrap_err().to_string();
        assert!(e.contains("a directory"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
