//! The run's side of the control endpoint: a Unix socket (mode 0600, in the
//! run directory, which is 0700) where viewers attach. Each viewer gets the
//! run's history and then a snapshot four times a second; its commands go
//! to the engine exactly as the first terminal's keys do.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context as _, Result};
use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _, BufReader};
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::{mpsc, watch};

use super::protocol::{
    encode, gpu_delta, server_delta, RunHello, RunMsg, Sent, ViewerMsg, WireSnapshot, VERSION,
};
use super::runs::SOCKET_FILE;
use crate::server_metrics::scrape::LiveView;
use crate::types::live::{Control, Snapshot};
use crate::types::EventKind;

/// The run's server view (its /metrics scraper), when it reads one.
pub type ServerView = watch::Receiver<Arc<LiveView>>;

/// The run's GPU view (its `--gpu-metrics` scraper), when it reads one.
pub type GpuView = watch::Receiver<Arc<crate::server_metrics::GpuLive>>;

/// What the run reads besides the load, for viewers' server view.
#[derive(Clone, Default)]
pub struct Views {
    pub server: Option<ServerView>,
    pub gpu: Option<GpuView>,
}

/// Writes the reports of what was measured so far; returns their paths.
pub type ExportFn = Arc<dyn Fn(&Snapshot) -> Result<Vec<PathBuf>> + Send + Sync>;

/// How often a viewer gets a snapshot.
const VIEWER_EVERY: Duration = Duration::from_millis(250);
/// A viewer's line longer than this is not a command; the viewer is dropped.
const MAX_LINE: usize = crate::bounds::CONTROL_LINE;
/// Unix socket paths are limited to about 108 bytes.
const MAX_SOCKET_PATH: usize = 100;

/// Reads one line (up to and including `\n`) into `buf`, holding at most
/// `cap` bytes: `Ok(true)` for a whole line, `Ok(false)` at the end of the
/// stream, an error for a line longer than `cap`, which is refused as soon
/// as its `cap + 1`st byte arrives, not after it has been read whole.
///
/// Cancel-safe (it sits in a `select!`): what was read stays in `buf`, and
/// the next call goes on from there.
pub async fn read_line_capped<R: tokio::io::AsyncBufRead + Unpin>(
    r: &mut R,
    buf: &mut Vec<u8>,
    cap: usize,
) -> std::io::Result<bool> {
    loop {
        let avail = r.fill_buf().await?;
        if avail.is_empty() {
            return Ok(false);
        }
        let (take, whole) = match avail.iter().position(|&b| b == b'\n') {
            Some(i) => (i + 1, true),
            None => (avail.len(), false),
        };
        // The newline does not count towards the cap.
        let body = take - usize::from(whole);
        if buf.len() + body > cap {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("a line longer than {}", crate::bounds::human(cap)),
            ));
        }
        buf.extend_from_slice(&avail[..take]);
        r.consume(take);
        if whole {
            return Ok(true);
        }
    }
}

/// A listening endpoint; `finish` tells the viewers the run is over.
pub struct Endpoint {
    pub path: PathBuf,
    finished: watch::Sender<Option<RunMsg>>,
    accept: tokio::task::JoinHandle<()>,
    viewers: Arc<tokio::sync::Mutex<tokio::task::JoinSet<()>>>,
}

/// Creates the socket: `control.sock` in the run directory, or, when that
/// path is too long for a Unix socket, in a private directory under /tmp.
pub fn bind(run_dir: &Path) -> Result<(UnixListener, PathBuf)> {
    let path = run_dir.join(SOCKET_FILE);
    if path.as_os_str().len() > MAX_SOCKET_PATH {
        return bind_at(&temp_socket()?);
    }
    // A shared volume (NFS, SMB: a Kubernetes run's results) may not hold
    // sockets: then the socket lives in the temp dir, as for a long path.
    bind_at(&path).or_else(|e| bind_at(&temp_socket()?).map_err(|_| e))
}

/// A socket path of this process's own in a private directory under the temp dir.
fn temp_socket() -> Result<PathBuf> {
    let dir = std::env::temp_dir().join(format!("llmsweep-{}", uid()));
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    private_dir(&dir)?;
    Ok(dir.join(format!("{}.sock", std::process::id())))
}

fn bind_at(path: &Path) -> Result<(UnixListener, PathBuf)> {
    let path = path.to_path_buf();
    let _ = std::fs::remove_file(&path);
    let listener = UnixListener::bind(&path)
        .with_context(|| format!("cannot listen on {}", path.display()))?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))
            .with_context(|| format!("cannot restrict {}", path.display()))?;
    }
    Ok((listener, path))
}

/// Only the owner may enter `dir` (the run directory holds the socket).
pub fn private_dir(dir: &Path) -> Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
            .with_context(|| format!("cannot restrict {}", dir.display()))?;
    }
    Ok(())
}

#[cfg(unix)]
fn uid() -> u32 {
    // SAFETY: getuid has no preconditions and cannot fail.
    unsafe { libc::getuid() }
}

#[cfg(not(unix))]
fn uid() -> u32 {
    0
}

pub fn start(
    listener: UnixListener,
    path: PathBuf,
    hello: RunHello,
    snapshots: watch::Receiver<Snapshot>,
    control: mpsc::UnboundedSender<Control>,
    export: ExportFn,
    views: Views,
) -> Endpoint {
    let (finished, finished_rx) = watch::channel(None);
    let notes = Notes::default();
    let viewers = Arc::new(tokio::sync::Mutex::new(tokio::task::JoinSet::new()));
    let set = viewers.clone();
    let accept = tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                // Out of descriptors or similar: try again shortly.
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            };
            let v = Viewer {
                hello: hello.clone(),
                snapshots: snapshots.clone(),
                control: control.clone(),
                export: export.clone(),
                finished: finished_rx.clone(),
                views: views.clone(),
                notes: notes.clone(),
            };
            set.lock().await.spawn(v.serve(stream));
        }
    });
    Endpoint {
        path,
        finished,
        accept,
        viewers,
    }
}

impl Endpoint {
    /// The reports are written: tell every viewer, give them a moment to
    /// read it, then close the socket.
    pub async fn finish(self, msg: RunMsg) {
        self.accept.abort();
        let _ = self.finished.send(Some(msg));
        let mut set = std::mem::take(&mut *self.viewers.lock().await);
        let _ = tokio::time::timeout(Duration::from_secs(2), async {
            while set.join_next().await.is_some() {}
        })
        .await;
        set.abort_all();
        let _ = std::fs::remove_file(&self.path);
    }
}

struct Viewer {
    hello: RunHello,
    snapshots: watch::Receiver<Snapshot>,
    control: mpsc::UnboundedSender<Control>,
    export: ExportFn,
    finished: watch::Receiver<Option<RunMsg>>,
    views: Views,
    notes: Notes,
}

/// How many timeline entries the run's viewers have added, all together
/// (at most [`crate::bounds::VIEWER_NOTES`] are kept).
#[derive(Clone, Default)]
struct Notes(Arc<AtomicUsize>);

impl Notes {
    /// The note as the run keeps it, or `None` past the bound: its text and
    /// event name cut to their bounds, and the last one kept saying so.
    fn admit(&self, event: EventKind, detail: &str) -> Option<Control> {
        use crate::bounds::{cut, VIEWER_EVENT, VIEWER_NOTES, VIEWER_TEXT};
        let n = self.0.fetch_add(1, Ordering::Relaxed);
        if n >= VIEWER_NOTES {
            self.0.store(VIEWER_NOTES, Ordering::Relaxed);
            return None;
        }
        let event = match event {
            EventKind::Other(name) => EventKind::Other(cut(&name, VIEWER_EVENT).into_owned()),
            known => known,
        };
        let mut detail = cut(detail, VIEWER_TEXT).into_owned();
        if n + 1 == VIEWER_NOTES {
            detail.push_str(&format!(
                " (the last of {VIEWER_NOTES} viewer notes this run keeps: bounds::VIEWER_NOTES)"
            ));
        }
        Some(Control::Note { event, detail })
    }
}

/// A viewer's command as the engine gets it: a note within the run's bound
/// of notes (`Err` with the reason past it), texts cut to their bounds.
fn admitted(control: Control, notes: &Notes) -> Result<Control, String> {
    use crate::bounds::{cut, VIEWER_NOTES, VIEWER_TEXT};
    Ok(match control {
        Control::Note { event, detail } => notes.admit(event, &detail).ok_or_else(|| {
            format!("note not kept: this run keeps at most {VIEWER_NOTES} notes from viewers (bounds::VIEWER_NOTES)")
        })?,
        Control::Stop { reason } => Control::Stop {
            reason: cut(&reason, VIEWER_TEXT).into_owned(),
        },
        other => other,
    })
}

impl Viewer {
    /// The next snapshot message: what the viewer has not been sent yet.
    fn next_snapshot(&mut self, sent: &mut Sent) -> RunMsg {
        let snap = self.snapshots.borrow_and_update().clone();
        let mut wire = WireSnapshot::delta(&snap, sent);
        if let Some(rx) = &self.views.server {
            let view = rx.borrow().clone();
            wire.server = server_delta(&view, sent);
        }
        if let Some(rx) = &self.views.gpu {
            let view = rx.borrow().clone();
            wire.gpu = gpu_delta(&view, sent);
        }
        RunMsg::Snapshot {
            snapshot: Box::new(wire),
        }
    }

    async fn serve(mut self, stream: UnixStream) {
        let (r, mut w) = stream.into_split();
        let mut lines = BufReader::new(r);
        let hello = RunMsg::Hello {
            version: VERSION,
            run: self.hello.clone(),
        };
        if w.write_all(&encode(&hello)).await.is_err() {
            return;
        }
        self.note(EventKind::Viewer, "a viewer attached");
        let mut sent = Sent::default();
        let mut tick = tokio::time::interval(VIEWER_EVERY);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
        let mut buf = Vec::new();
        let left = loop {
            tokio::select! {
                _ = tick.tick() => {
                    let msg = self.next_snapshot(&mut sent);
                    if w.write_all(&encode(&msg)).await.is_err() {
                        break true;
                    }
                }
                read = read_line_capped(&mut lines, &mut buf, MAX_LINE) => {
                    match read {
                        // The end, a broken connection, or a line over the
                        // cap (then not one byte more of it is read).
                        Ok(false) => break true,
                        Err(e) => {
                            if e.kind() == std::io::ErrorKind::InvalidData {
                                self.note(
                                    EventKind::Viewer,
                                    &format!("a viewer sent {e}; its connection was closed"),
                                );
                            }
                            break true;
                        }
                        Ok(true) => {
                            let line = String::from_utf8_lossy(&buf).into_owned();
                            buf.clear();
                            let reply = self.on_line(line.trim()).await;
                            if let Some(reply) = reply {
                                if w.write_all(&encode(&reply)).await.is_err() {
                                    break true;
                                }
                            }
                        }
                    }
                }
                changed = self.finished.changed() => {
                    if changed.is_err() {
                        break false;
                    }
                    let msg = self.finished.borrow().clone();
                    if let Some(msg) = msg {
                        let last = self.next_snapshot(&mut sent);
                        let _ = w.write_all(&encode(&last)).await;
                        let _ = w.write_all(&encode(&msg)).await;
                        let _ = w.shutdown().await;
                        break false;
                    }
                }
            }
        };
        if left {
            self.note(EventKind::Viewer, "a viewer left");
        }
    }

    /// A timeline entry of the viewers' (within their bound, else none).
    fn note(&self, event: EventKind, detail: &str) {
        if let Some(note) = self.notes.admit(event, detail) {
            let _ = self.control.send(note);
        }
    }

    async fn on_line(&mut self, line: &str) -> Option<RunMsg> {
        if line.is_empty() {
            return None;
        }
        match serde_json::from_str::<ViewerMsg>(line) {
            Ok(ViewerMsg::Control { control }) => match admitted(control, &self.notes) {
                Ok(control) => {
                    let _ = self.control.send(control);
                    None
                }
                Err(message) => Some(RunMsg::Error { message }),
            },
            Ok(ViewerMsg::Export) => {
                let snap = self.snapshots.borrow().clone();
                let export = self.export.clone();
                let done = tokio::task::spawn_blocking(move || export(&snap)).await;
                Some(match done {
                    Ok(Ok(paths)) => {
                        let shown = paths
                            .first()
                            .map(|p| p.display().to_string())
                            .unwrap_or_default();
                        self.note(EventKind::Export, &shown);
                        RunMsg::Exported {
                            paths: paths.iter().map(|p| p.display().to_string()).collect(),
                        }
                    }
                    Ok(Err(e)) => RunMsg::Error {
                        message: format!("{e:#}"),
                    },
                    Err(e) => RunMsg::Error {
                        message: e.to_string(),
                    },
                })
            }
            Err(e) => Some(RunMsg::Error {
                message: format!(
                    "not a command this run understands ({e}); is the viewer a newer llmsweep?"
                ),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::read_line_capped;

    /// A run directory that cannot hold the socket (here: the name is
    /// taken by a directory; on a shared volume, sockets unsupported) gets
    /// one in the temp dir instead of failing the run.
    #[tokio::test]
    async fn a_run_dir_that_cannot_hold_a_socket_gets_one_in_the_temp_dir() {
        let dir = std::env::temp_dir().join(format!("llmsweep-sockdir-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join(super::SOCKET_FILE)).unwrap();
        let (_listener, path) = super::bind(&dir).unwrap();
        assert!(!path.starts_with(&dir), "{}", path.display());
        assert!(path.starts_with(std::env::temp_dir()), "{}", path.display());
        let _ = std::fs::remove_file(&path);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[tokio::test]
    async fn lines_are_capped_while_read_and_split_reads_join() {
        let mut r = tokio::io::BufReader::with_capacity(4, &b"ab\ncdefgh\nxyz"[..]);
        let mut buf = Vec::new();
        assert!(read_line_capped(&mut r, &mut buf, 6).await.unwrap());
        assert_eq!(buf, b"ab\n");
        buf.clear();
        // Exactly the cap, read in pieces.
        assert!(read_line_capped(&mut r, &mut buf, 6).await.unwrap());
        assert_eq!(buf, b"cdefgh\n");
        buf.clear();
        // No newline before the end: not a line.
        assert!(!read_line_capped(&mut r, &mut buf, 6).await.unwrap());
        let mut long = tokio::io::BufReader::with_capacity(4, &b"0123456789\n"[..]);
        let mut buf = Vec::new();
        assert!(read_line_capped(&mut long, &mut buf, 6).await.is_err());
        assert!(buf.len() <= 6, "{} bytes held", buf.len());
    }
}
