//! The viewer's side: `llmsweep attach` (the dashboard or progress lines on
//! a live run) and `llmsweep stop`.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context as _, Result};
use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _, BufReader};
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::UnixStream;
use tokio::sync::{mpsc, watch};

use super::protocol::{apply_gpu, apply_server, encode, RunHello, RunMsg, ViewerMsg, VERSION};
use super::runs::{self, RunState};
use crate::server_metrics::scrape::LiveView;
use crate::server_metrics::GpuLive;
use crate::types::live::{Control, Snapshot};

/// A connection to a live run, past the greeting.
pub struct Connection {
    pub hello: RunHello,
    lines: BufReader<OwnedReadHalf>,
    writer: OwnedWriteHalf,
}

/// Where a viewer's copy of the run goes: the snapshots, the server view
/// and the GPU panel (nothing arrives for a view the run does not read).
pub struct Feeds {
    pub snapshots: watch::Sender<Snapshot>,
    pub server: watch::Sender<Arc<LiveView>>,
    pub gpu: watch::Sender<Arc<GpuLive>>,
}

impl Feeds {
    /// Feeds with receivers nobody reads (`llmsweep stop`, tests).
    pub fn unread() -> Feeds {
        Feeds {
            snapshots: watch::channel(Snapshot::default()).0,
            server: watch::channel(Default::default()).0,
            gpu: watch::channel(Default::default()).0,
        }
    }
}

/// How a viewer's session ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Ended {
    /// The run finished; its reports are written.
    Finished {
        partial: bool,
        end_reason: String,
        reports: Vec<String>,
    },
    /// The viewer left; the run goes on.
    Detached,
    /// The connection dropped without a word (the run died or was killed).
    Lost,
}

/// Connects to the run in `dir` (or the most recent live one under `root`
/// or in the run registry, wherever `--out` put it).
pub async fn connect(dir: Option<&Path>, root: &Path) -> Result<(PathBuf, Connection)> {
    if let Some(d) = dir {
        wait_while_starting(d).await;
    }
    let registry = runs::registry_dir();
    let (dir, state, note) = runs::pick(dir, root, registry.as_deref())?;
    if let Some(n) = note {
        crate::term::note(&n);
    }
    if !state.is_live() {
        // A run killed before it wrote its reports left its checkpoint
        // (seen: "its reports are there" of a directory holding only
        // stages.jsonl after kill -9).
        let reports = if dir.join("report.json").is_file() {
            "its reports are there".to_string()
        } else if dir.join("stages.jsonl").is_file() {
            format!(
                "it wrote no report; `llmsweep report {}` shows the stages it finished",
                dir.join("stages.jsonl").display()
            )
        } else {
            "it left no report and no finished stage".to_string()
        };
        bail!(
            "the run in {} is not running ({}{}); {reports}",
            dir.display(),
            state.shown_status(),
            // "completed: completed" says nothing twice.
            state
                .end_reason
                .as_deref()
                .filter(|r| *r != state.shown_status())
                .map(|r| format!(": {r}"))
                .unwrap_or_default()
        );
    }
    let conn = connect_socket(&state).await?;
    Ok((dir, conn))
}

/// How long a viewer waits for a starting run's state file.
const STARTING_RUN_WAIT: Duration = Duration::from_secs(10);

/// A run directory that holds the run's socket but not yet its state file
/// is a run starting: it binds the socket, then writes the run.json that
/// names it. Waits a while for that file rather than call the directory no
/// run's (seen: `attach` the moment control.sock appeared failed "… is not
/// an llmsweep run directory (no run.json)", 15 times of 15).
async fn wait_while_starting(dir: &Path) {
    let t0 = tokio::time::Instant::now();
    while !dir.join(runs::STATE_FILE).exists()
        && dir.join(runs::SOCKET_FILE).exists()
        && t0.elapsed() < STARTING_RUN_WAIT
    {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn connect_socket(state: &RunState) -> Result<Connection> {
    let stream = UnixStream::connect(&state.socket).await.with_context(|| {
        format!(
            "cannot connect to the run's socket {}",
            state.socket.display()
        )
    })?;
    let (r, writer) = stream.into_split();
    let mut lines = BufReader::new(r);
    let mut line = String::new();
    tokio::time::timeout(Duration::from_secs(5), lines.read_line(&mut line))
        .await
        .context("the run did not greet within 5 s")?
        .context("cannot read from the run's socket")?;
    match serde_json::from_str::<RunMsg>(&line) {
        Ok(RunMsg::Hello { version, run }) if version == VERSION => Ok(Connection {
            hello: run,
            lines,
            writer,
        }),
        Ok(RunMsg::Hello { version, .. }) => bail!(
            "the run speaks protocol version {version}, this llmsweep speaks {VERSION}: attach with the llmsweep that started it"
        ),
        _ => bail!("{} is not an llmsweep run's socket", state.socket.display()),
    }
}

impl Connection {
    /// Feeds the run's snapshots into `snapshots` and sends `commands` and
    /// export requests to it, until the run finishes or `leave` fires.
    pub async fn pump(
        self,
        feeds: Feeds,
        mut commands: mpsc::UnboundedReceiver<ViewerMsg>,
        exports: std::sync::mpsc::Sender<Result<Vec<String>, String>>,
        mut leave: watch::Receiver<bool>,
    ) -> Ended {
        let Connection {
            mut lines,
            mut writer,
            ..
        } = self;
        let Feeds {
            snapshots,
            server,
            gpu,
        } = feeds;
        let mut view = Snapshot::default();
        let mut line = String::new();
        loop {
            tokio::select! {
                read = lines.read_line(&mut line) => {
                    match read {
                        Ok(0) | Err(_) => {
                            mark_done(&snapshots, &mut view);
                            return Ended::Lost;
                        }
                        Ok(_) => {}
                    }
                    let msg = serde_json::from_str::<RunMsg>(line.trim());
                    line.clear();
                    match msg {
                        Ok(RunMsg::Snapshot { mut snapshot }) => {
                            if let Some(delta) = snapshot.server.take() {
                                let mut copy = (**server.borrow()).clone();
                                apply_server(delta, &mut copy);
                                server.send_replace(Arc::new(copy));
                            }
                            if let Some(delta) = snapshot.gpu.take() {
                                let mut copy = (**gpu.borrow()).clone();
                                apply_gpu(delta, &mut copy);
                                gpu.send_replace(Arc::new(copy));
                            }
                            let mut next = view.clone();
                            snapshot.apply(&mut next);
                            // The dashboard closes on `done`; wait for the
                            // reports before saying the run is over.
                            next.done = false;
                            view = next;
                            snapshots.send_replace(view.clone());
                        }
                        Ok(RunMsg::Exported { paths }) => {
                            let _ = exports.send(Ok(paths));
                        }
                        Ok(RunMsg::Error { message }) => {
                            let _ = exports.send(Err(message));
                        }
                        Ok(RunMsg::Finished { partial, end_reason, reports }) => {
                            mark_done(&snapshots, &mut view);
                            return Ended::Finished { partial, end_reason, reports };
                        }
                        Ok(RunMsg::Hello { .. }) | Err(_) => {}
                    }
                }
                cmd = commands.recv() => {
                    let Some(cmd) = cmd else {
                        return Ended::Detached;
                    };
                    if writer.write_all(&encode(&cmd)).await.is_err() {
                        mark_done(&snapshots, &mut view);
                        return Ended::Lost;
                    }
                }
                _ = leave.changed() => {
                    let _ = writer.shutdown().await;
                    return Ended::Detached;
                }
            }
        }
    }
}

fn mark_done(snapshots: &watch::Sender<Snapshot>, view: &mut Snapshot) {
    view.done = true;
    snapshots.send_replace(view.clone());
}

/// `llmsweep stop`: asks the run to stop and waits for its reports.
pub async fn stop(dir: Option<&Path>, root: &Path) -> Result<Ended> {
    let (_dir, conn) = connect(dir, root).await?;
    let (cmd_tx, cmd_rx) = mpsc::unbounded_channel();
    let (exports, _ex) = std::sync::mpsc::channel();
    let (_leave_tx, leave) = watch::channel(false);
    cmd_tx
        .send(ViewerMsg::Control {
            control: Control::Stop {
                reason: "llmsweep stop".into(),
            },
        })
        .ok();
    // Keep the sender alive so the pump waits for the run's answer.
    let ended = tokio::time::timeout(
        Duration::from_secs(600),
        conn.pump(Feeds::unread(), cmd_rx, exports, leave),
    )
    .await
    .context("the run did not finish within 10 minutes of the stop")?;
    drop(cmd_tx);
    Ok(ended)
}
