//! A run outlives its terminal: it listens on a Unix socket in its run
//! directory, where `llmsweep attach` opens the dashboard (or progress
//! lines) again, `llmsweep stop` ends it, and `llmsweep ls` finds it.

pub mod follow;
pub mod protocol;
pub mod runs;
pub mod serve;
pub mod viewer;

use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context as _, Result};
use tokio::sync::{mpsc, watch};

use crate::types::live::Snapshot;
use protocol::ViewerMsg;
use viewer::Ended;

fn runtime() -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .context("cannot start the async runtime")
}

/// `llmsweep attach`: the dashboard (or progress lines) of a live run. Keys
/// steer it exactly as in the first terminal; `d` leaves it running.
pub fn attach(
    dir: Option<&Path>,
    headless: bool,
    theme: Option<String>,
    fps: f64,
) -> Result<ExitCode> {
    let fps = crate::tui::sane_fps(fps);
    let rt = runtime()?;
    rt.block_on(async move {
        let root = Path::new(runs::RESULTS_DIR);
        let (dir, conn) = viewer::connect(dir, root).await?;
        let hello = conn.hello.clone();
        let (snap_tx, snap_rx) = watch::channel(Snapshot::default());
        let (cmd_tx, cmd_rx) = mpsc::unbounded_channel::<ViewerMsg>();
        let (export_tx, export_rx) = std::sync::mpsc::channel();
        let (leave_tx, leave_rx) = watch::channel(false);
        // The server view comes from the run (it reads /metrics with its
        // own credentials); nothing arrives when it reads none.
        let (server_tx, server_rx) = watch::channel(Default::default());
        // So does the GPU panel (`--gpu-metrics`): it shows once the first
        // reading arrives.
        let (gpu_tx, gpu_rx) = watch::channel(Default::default());
        // A run that finishes while the dashboard watches: the viewer shows
        // the result screen too, from the report.json the run wrote.
        let (outcome_tx, outcome_rx) = tokio::sync::oneshot::channel();
        let pump = tokio::spawn(async move {
            let ended = conn
                .pump(
                    viewer::Feeds {
                        snapshots: snap_tx,
                        server: server_tx,
                        gpu: gpu_tx,
                    },
                    cmd_rx,
                    export_tx,
                    leave_rx,
                )
                .await;
            if let Ended::Finished { reports, .. } = &ended {
                if let Some(o) = outcome_of(reports) {
                    let _ = outcome_tx.send(o);
                }
            }
            ended
        });

        if crate::tui::can_draw(headless) {
            let opts = crate::tui::TuiOptions {
                outcome: Some(outcome_rx),
                fps,
                themes: crate::tui::theme::from_env(theme.as_deref())?,
                info: crate::tui::app::RunInfo {
                    target: hello.target_name(),
                    model: hello.model.clone(),
                    profile: format!("{} (attached)", hello.profile),
                    pooled: hello.pooled,
                },
                server: Some(server_rx),
                // The run's baseline, read here: the same changes as the run's dashboard.
                baseline: viewer_baseline(hello.baseline.as_deref()),
                gpu: Some(gpu_rx),
            };
            dashboard(snap_rx.clone(), opts, cmd_tx.clone(), export_rx).await;
            let _ = leave_tx.send(true);
        } else {
            progress_lines(&dir, &hello, snap_rx.clone(), &leave_tx).await;
        }
        let ended = pump.await.unwrap_or(Ended::Lost);
        drop(cmd_tx);
        Ok(say_how_it_ended(&dir, &ended))
    })
}

/// Progress lines of an attached run, until it ends or Ctrl-C leaves it.
async fn progress_lines(
    dir: &Path,
    hello: &protocol::RunHello,
    snapshots: watch::Receiver<Snapshot>,
    leave: &watch::Sender<bool>,
) {
    crate::term::note(&format!(
        "llmsweep: attached to {} ({} · {}); Ctrl-C leaves, the run goes on",
        dir.display(),
        hello.target_name(),
        hello.profile
    ));
    let progress = tokio::spawn(crate::headless::print_progress(snapshots, hello.pooled));
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {
            let _ = leave.send(true);
        }
        _ = progress => {}
    }
}

/// The dashboard on an attached run, until it is closed: its keys travel to
/// the run as commands, and its exports are written by the run.
async fn dashboard(
    snapshots: watch::Receiver<Snapshot>,
    opts: crate::tui::TuiOptions,
    cmd_tx: mpsc::UnboundedSender<ViewerMsg>,
    export_rx: std::sync::mpsc::Receiver<Result<Vec<String>, String>>,
) {
    let (control_tx, mut control_rx) = mpsc::unbounded_channel();
    let cmds = cmd_tx.clone();
    tokio::spawn(async move {
        while let Some(c) = control_rx.recv().await {
            if cmds.send(ViewerMsg::Control { control: c }).is_err() {
                return;
            }
        }
    });
    let exporter: crate::tui::Exporter = Box::new(move |_s: &Snapshot| {
        cmd_tx
            .send(ViewerMsg::Export)
            .map_err(|_| anyhow::anyhow!("the run is gone"))?;
        match export_rx.recv_timeout(Duration::from_secs(60)) {
            Ok(Ok(paths)) => Ok(paths.into_iter().map(Into::into).collect()),
            Ok(Err(msg)) => Err(anyhow::anyhow!(msg)),
            Err(_) => Err(anyhow::anyhow!("the run did not answer the export")),
        }
    });
    let thread = crate::tui::spawn(snapshots, control_tx, opts, exporter);
    let _ = tokio::task::spawn_blocking(move || thread.join()).await;
}

/// The finished run for the result screen: its report.json, read back.
fn outcome_of(reports: &[String]) -> Option<crate::tui::app::RunOutcome> {
    let json = reports.iter().find(|p| p.ends_with("report.json"))?;
    let text = crate::bounds::read_text(
        std::path::Path::new(json),
        crate::bounds::REPORT_FILE,
        "a report file",
    )
    .ok()?;
    let report = crate::types::Report::from_json(&text).ok()?;
    Some(crate::tui::app::RunOutcome {
        report: std::sync::Arc::new(report),
        paths: reports.iter().map(Into::into).collect(),
    })
}

/// `llmsweep stop`: stops a run, waits for its reports, prints their paths.
pub fn stop(dir: Option<&Path>) -> Result<ExitCode> {
    let rt = runtime()?;
    rt.block_on(async move {
        let root = Path::new(runs::RESULTS_DIR);
        let ended = viewer::stop(dir, root).await?;
        let dir = dir.map(Path::to_path_buf).unwrap_or_default();
        Ok(say_how_it_ended(&dir, &ended))
    })
}

fn say_how_it_ended(dir: &Path, ended: &Ended) -> ExitCode {
    match ended {
        Ended::Finished {
            partial,
            end_reason,
            reports,
        } => {
            crate::term::note(&format!(
                "llmsweep: the run ended ({}{end_reason})",
                if *partial { "partial: " } else { "" }
            ));
            for r in reports {
                crate::term::out(&format!("report: {r}\n"));
            }
            ExitCode::SUCCESS
        }
        Ended::Detached => {
            crate::term::note(&format!(
                "llmsweep: left the run; it goes on (`llmsweep attach {}` to come back)",
                dir.display()
            ));
            ExitCode::SUCCESS
        }
        Ended::Lost => {
            crate::term::note(
                "llmsweep: the connection to the run was lost (did it die? `llmsweep ls` says)",
            );
            ExitCode::from(2)
        }
    }
}

/// The baseline a run is held against (its hello's path), read by the
/// viewer; None, said once, when it cannot be read (moved, or another
/// user's): the dashboard is then without it, as the run's reports are not.
fn viewer_baseline(path: Option<&str>) -> Option<std::sync::Arc<crate::types::Report>> {
    let path = path?;
    match crate::report::baseline::load(std::path::Path::new(path)) {
        Ok(r) => Some(std::sync::Arc::new(r)),
        Err(e) => {
            crate::term::note(&format!(
                "llmsweep: the run's baseline is not shown here: {e:#}"
            ));
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_viewer_reads_the_runs_baseline_or_goes_on_without_it() {
        let dir = std::env::temp_dir().join(format!("llmsweep-viewer-base-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("report.json");
        let base = crate::types::Report {
            created: "2026-11-19T10:00:00Z".into(),
            ..Default::default()
        };
        std::fs::write(&path, base.to_json().unwrap()).unwrap();
        let got = viewer_baseline(Some(&path.display().to_string()));
        assert_eq!(
            got.map(|r| r.created.clone()).as_deref(),
            Some("2026-11-19T10:00:00Z")
        );
        assert!(viewer_baseline(Some(&dir.join("gone.json").display().to_string())).is_none());
        assert!(viewer_baseline(None).is_none());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
