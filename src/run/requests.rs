//! `--save-requests`: every request of the run, one JSON line each, in
//! `requests.jsonl` beside the reports (layout: `types::RequestLine`,
//! docs/REPORT.md). Written on a thread of its own, flushed every second,
//! so `tail -f` follows it and a slow disk never holds up the run.

use std::fs::File;
use std::io::{BufWriter, Write as _};
use std::path::{Path, PathBuf};
use std::sync::mpsc::{sync_channel, Receiver, RecvTimeoutError, SyncSender};
use std::time::Duration;

use anyhow::{Context as _, Result};

use crate::types::RequestLine;

pub const FILE: &str = "requests.jsonl";
/// Lines waiting for the writer; beyond this the run drops (and counts) them.
const QUEUE: usize = 65_536;

/// The file being written.
pub struct RequestFile {
    pub path: PathBuf,
    writer: std::thread::JoinHandle<Result<u64>>,
}

/// Creates `DIR/requests.jsonl` and the thread that writes it; the run
/// sends lines to the returned sender and drops it when it is over.
pub fn start(dir: &Path) -> Result<(SyncSender<RequestLine>, RequestFile)> {
    let path = dir.join(FILE);
    let file = File::create(&path).with_context(|| format!("cannot create {}", path.display()))?;
    let (tx, rx) = sync_channel(QUEUE);
    let shown = path.clone();
    let writer = std::thread::Builder::new()
        .name("requests.jsonl".into())
        .spawn(move || {
            write_lines(rx, file).with_context(|| format!("cannot write {}", shown.display()))
        })
        .context("cannot start the writer of requests.jsonl")?;
    Ok((tx, RequestFile { path, writer }))
}

impl RequestFile {
    /// Waits until every line is on disk; returns how many were written.
    pub fn finish(self) -> Result<u64> {
        self.writer
            .join()
            .map_err(|_| anyhow::anyhow!("the writer of {} panicked", self.path.display()))?
    }
}

fn write_lines(rx: Receiver<RequestLine>, file: File) -> Result<u64> {
    let mut out = BufWriter::new(file);
    let mut n = 0;
    loop {
        match rx.recv_timeout(Duration::from_secs(1)) {
            Ok(line) => {
                serde_json::to_writer(&mut out, &line)?;
                out.write_all(b"\n")?;
                n += 1;
            }
            Err(RecvTimeoutError::Timeout) => out.flush()?,
            Err(RecvTimeoutError::Disconnected) => break,
        }
    }
    out.flush()?;
    out.get_ref().sync_all()?;
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_line_sent_is_written_once_the_sender_is_dropped() {
        let dir = std::env::temp_dir().join(format!("llmsweep-requests-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (tx, file) = start(&dir).unwrap();
        for i in 0..1000 {
            tx.send(RequestLine {
                stage: "constant@5.00".into(),
                index: i,
                chunks: vec![(1.5, 1), (2.5, 3)],
                ..Default::default()
            })
            .unwrap();
        }
        drop(tx);
        assert_eq!(file.finish().unwrap(), 1000);
        let text = std::fs::read_to_string(dir.join(FILE)).unwrap();
        let lines: Vec<RequestLine> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len(), 1000);
        assert_eq!(lines[999].index, 999);
        assert_eq!(lines[0].chunks, [(1.5, 1), (2.5, 3)]);
        std::fs::remove_dir_all(&dir).ok();
    }
}
