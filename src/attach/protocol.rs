//! The wire protocol between a run and its viewers (`llmsweep attach`,
//! `llmsweep stop`): one JSON object per line over the run's Unix socket.
//! It carries what already flows inside the process, snapshots out and
//! commands in. Documented in docs/PROTOCOL.md; bump [`VERSION`] on any
//! change a viewer of the previous version would misread.

use std::collections::VecDeque;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::server_metrics::gpu_scrape::{self, GpuLive};
use crate::server_metrics::scrape::{LiveView, LIVE_POINTS};
use crate::types::live::{
    Control, ErrorEntry, HistoryPoint, LiveStage, PlannedStage, RunHistory, Snapshot, StageMark,
};
use crate::types::{StageReport, TimelineEvent};

pub const VERSION: u32 = 1;

/// What a run tells a viewer about itself when it connects.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct RunHello {
    /// What the run is against: the server's address, or `built-in
    /// simulator` (a run from before `target_address` sent the two in one:
    /// `built-in simulator (http://…)`).
    pub target: String,
    /// The built-in simulator's address (absent for a server).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_address: Option<String>,
    pub model: String,
    pub profile: String,
    /// The run directory (reports, run.json, the socket).
    pub dir: String,
    pub pid: u32,
    /// `--baseline`: the report the run is held against, as an absolute
    /// path, which a viewer reads to show the same changes (viewers run on
    /// the run's machine: the socket is a Unix socket).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline: Option<String>,
    /// A pooling API (embeddings, rerank, score): answers come whole, so
    /// the screens show latency where they show TTFT.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub pooled: bool,
}

impl RunHello {
    /// What the run is against, its name and address apart.
    pub fn target_name(&self) -> crate::types::TargetName {
        crate::types::TargetName {
            name: self.target.clone(),
            address: self.target_address.clone(),
        }
    }
}

/// Run → viewer.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum RunMsg {
    Hello {
        version: u32,
        run: RunHello,
    },
    Snapshot {
        snapshot: Box<WireSnapshot>,
    },
    Exported {
        paths: Vec<String>,
    },
    /// A command or export the run could not carry out.
    Error {
        message: String,
    },
    /// The run is over and its reports are written; the connection closes.
    Finished {
        partial: bool,
        end_reason: String,
        reports: Vec<String>,
    },
}

/// Viewer → run.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ViewerMsg {
    /// A command for the engine, exactly as a key in the first terminal sends it.
    Control { control: Control },
    /// Write the reports of what was measured so far.
    Export,
}

/// A snapshot as it travels: finished stages and timeline events are sent
/// once, as the tail the viewer has not seen yet.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct WireSnapshot {
    pub elapsed_s: f64,
    pub stage_number: usize,
    pub stages_total: Option<usize>,
    #[serde(default)]
    pub extra_stages: usize,
    #[serde(default)]
    pub plan_done: usize,
    #[serde(default)]
    pub may_add_s: f64,
    pub stage: Option<LiveStage>,
    pub upcoming: Vec<PlannedStage>,
    pub paused: bool,
    pub done: bool,
    pub recent_errors: Vec<ErrorEntry>,
    pub warnings: Vec<String>,
    /// `finished` holds the stages from this index on.
    pub finished_from: usize,
    pub finished: Vec<StageReport>,
    /// Stages cut short by a rate key whose requests still run, whole each
    /// time (`Snapshot::finishing`: rarely more than one, for seconds).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub finishing: Vec<StageReport>,
    /// `timeline` holds the events from this index on.
    pub timeline_from: usize,
    pub timeline: Vec<TimelineEvent>,
    /// The run's history (the dashboard's charts), sent as it grows: the
    /// downsampled part and the stage marks whole when they change, the
    /// recent seconds as the ones the viewer has not seen.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub history_coarse: Option<Vec<HistoryPoint>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub history_stages: Option<Vec<StageMark>>,
    #[serde(default)]
    pub history_recent: Vec<HistoryPoint>,
    /// How many recent seconds the run holds (the viewer drops older ones).
    #[serde(default)]
    pub history_recent_len: usize,
    /// The server view (what the run reads from the server's /metrics),
    /// when it changed: its header whole, `series` as the points the viewer
    /// has not seen.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<LiveView>,
    /// The GPU panel (what the run reads from `--gpu-metrics`), when it
    /// changed: the GPUs as last read whole, `series` as the new points.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu: Option<GpuLive>,
    /// With `--repeat N`: the run of the plan under way and N.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repeat: Option<(u32, u32)>,
    /// Before the first stage, the run's wait for the server (what, since
    /// when, at most how long); absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waiting: Option<crate::types::live::Waiting>,
}

/// What a viewer has already been sent.
#[derive(Debug, Clone, Default)]
pub struct Sent {
    pub finished: usize,
    pub timeline: usize,
    /// History: `None` until the first message.
    pub coarse: Option<usize>,
    pub marks: Option<usize>,
    pub recent_t: f64,
    /// The server view as last sent: its header, and the time of its last point.
    pub server: Option<(LiveView, Option<f64>)>,
    /// The GPU view as last sent: all but its series, and the time of its last point.
    pub gpu: Option<(GpuLive, Option<f64>)>,
}

/// The part of the run's GPU view a viewer that has `sent` needs (None
/// when nothing changed); updates `sent`.
pub fn gpu_delta(view: &GpuLive, sent: &mut Sent) -> Option<GpuLive> {
    let header = GpuLive {
        series: Default::default(),
        ..view.clone()
    };
    let (header, series) = series_delta(header, &view.series, |p| p.t_s, &mut sent.gpu)?;
    Some(GpuLive { series, ..header })
}

/// Applies a GPU-view delta onto the viewer's copy.
pub fn apply_gpu(delta: GpuLive, into: &mut GpuLive) {
    let series = appended(
        std::mem::take(&mut into.series),
        &delta.series,
        gpu_scrape::LIVE_POINTS,
    );
    *into = GpuLive { series, ..delta };
}

/// The part of the run's server view a viewer that has `sent` needs (None
/// when nothing changed); updates `sent`.
pub fn server_delta(view: &LiveView, sent: &mut Sent) -> Option<LiveView> {
    // The fields a viewer replaces whole; not the series (sent as new
    // points) nor the latest raw reading (never sent).
    let header = LiveView {
        status: view.status.clone(),
        url: view.url.clone(),
        interval_s: view.interval_s,
        source: view.source.clone(),
        scrapes: view.scrapes,
        errors: view.errors,
        last_error: view.last_error.clone(),
        latest: Default::default(),
        series: Default::default(),
    };
    let (header, series) = series_delta(header, &view.series, |p| p.t_s, &mut sent.server)?;
    Some(LiveView { series, ..header })
}

/// Applies a server-view delta onto the viewer's copy.
pub fn apply_server(delta: LiveView, into: &mut LiveView) {
    let series = appended(std::mem::take(&mut into.series), &delta.series, LIVE_POINTS);
    *into = LiveView { series, ..delta };
}

/// A live view as a viewer gets it: its `header` whole when it or the
/// series changed since `sent` (None when nothing did), and the points newer
/// than the last one sent (`t`: a point's time). Updates `sent`.
fn series_delta<H: PartialEq + Clone, P: Copy>(
    header: H,
    series: &VecDeque<P>,
    t: impl Fn(&P) -> f64,
    sent: &mut Option<(H, Option<f64>)>,
) -> Option<(H, VecDeque<P>)> {
    let last_t = series.back().map(&t);
    if let Some((h, t)) = sent.as_ref() {
        if *h == header && *t == last_t {
            return None;
        }
    }
    let seen = sent.as_ref().and_then(|(_, t)| *t);
    let new = series
        .iter()
        .filter(|p| seen.is_none_or(|s| t(p) > s))
        .copied()
        .collect();
    *sent = Some((header.clone(), last_t));
    Some((header, new))
}

/// The viewer's points with `new` ones after them, the last `cap` kept.
fn appended<P: Copy>(mut series: VecDeque<P>, new: &VecDeque<P>, cap: usize) -> VecDeque<P> {
    series.extend(new.iter().copied());
    while series.len() > cap {
        series.pop_front();
    }
    series
}

impl WireSnapshot {
    /// The part of `s` a viewer that has `sent` needs; updates `sent`.
    pub fn delta(s: &Snapshot, sent: &mut Sent) -> Self {
        // A viewer never has more than exists; clamp in case of a restart.
        let f_from = sent.finished.min(s.finished.len());
        let t_from = sent.timeline.min(s.timeline.len());
        sent.finished = s.finished.len();
        sent.timeline = s.timeline.len();
        let h = &s.history;
        let history_coarse = (sent.coarse != Some(h.coarse.len())).then(|| h.coarse.clone());
        sent.coarse = Some(h.coarse.len());
        let history_stages = (sent.marks != Some(h.stages.len())).then(|| h.stages.clone());
        sent.marks = Some(h.stages.len());
        let seen = sent.recent_t;
        let history_recent: Vec<HistoryPoint> =
            h.recent.iter().filter(|p| p.t_s > seen).cloned().collect();
        if let Some(last) = h.recent.back() {
            sent.recent_t = last.t_s;
        }
        WireSnapshot {
            elapsed_s: s.elapsed_s,
            stage_number: s.stage_number,
            stages_total: s.stages_total,
            extra_stages: s.extra_stages,
            plan_done: s.plan_done,
            may_add_s: s.may_add_s,
            stage: s.stage.clone(),
            upcoming: s.upcoming.clone(),
            paused: s.paused,
            done: s.done,
            recent_errors: s.recent_errors.iter().cloned().collect(),
            warnings: s.warnings.to_vec(),
            finished_from: f_from,
            finished: s.finished[f_from..].to_vec(),
            finishing: s.finishing.to_vec(),
            timeline_from: t_from,
            timeline: s.timeline[t_from..].to_vec(),
            history_coarse,
            history_stages,
            history_recent,
            history_recent_len: h.recent.len(),
            server: None,
            gpu: None,
            repeat: s.repeat,
            waiting: s.waiting.clone(),
        }
    }

    /// Applies this delta onto the viewer's copy of the run.
    pub fn apply(self, into: &mut Snapshot) {
        let mut finished = into.finished.to_vec();
        finished.truncate(self.finished_from);
        finished.extend(self.finished);
        let mut timeline = into.timeline.to_vec();
        timeline.truncate(self.timeline_from);
        timeline.extend(self.timeline);
        let mut history: RunHistory = (*into.history).clone();
        if let Some(c) = self.history_coarse {
            history.coarse = c;
        }
        if let Some(m) = self.history_stages {
            history.stages = m;
        }
        history.recent.extend(self.history_recent);
        while history.recent.len() > self.history_recent_len {
            history.recent.pop_front();
        }
        *into = Snapshot {
            elapsed_s: self.elapsed_s,
            stage_number: self.stage_number,
            stages_total: self.stages_total,
            extra_stages: self.extra_stages,
            plan_done: self.plan_done,
            may_add_s: self.may_add_s,
            stage: self.stage,
            upcoming: self.upcoming,
            finished: Arc::new(finished),
            finishing: Arc::new(self.finishing),
            paused: self.paused,
            recent_errors: Arc::new(self.recent_errors.into_iter().collect()),
            timeline: Arc::new(timeline),
            warnings: Arc::new(self.warnings),
            history: Arc::new(history),
            done: self.done,
            repeat: self.repeat,
            waiting: self.waiting,
        };
    }
}

/// One message as a line.
pub fn encode<T: Serialize>(msg: &T) -> Vec<u8> {
    let mut v = serde_json::to_vec(msg).unwrap_or_else(|_| b"{}".to_vec());
    v.push(b'\n');
    v
}

#[cfg(test)]
mod tests {

    #[test]
    fn a_hello_names_the_baseline_only_when_the_run_has_one() {
        let plain = RunHello::default();
        let line = String::from_utf8(encode(&plain)).unwrap();
        assert!(!line.contains("baseline"), "{line}");
        // A hello of a run before baselines reads as one without.
        let old: RunHello =
            serde_json::from_str(r#"{"target":"t","model":"m","profile":"p","dir":"d","pid":1}"#)
                .unwrap();
        assert_eq!(old.baseline, None);
        let held = RunHello {
            baseline: Some("/runs/monday/report.json".into()),
            ..Default::default()
        };
        let back: RunHello = serde_json::from_slice(&encode(&held)).unwrap();
        assert_eq!(back, held);
    }

    /// The built-in simulator's name and address come apart (a narrow
    /// header shows the name); a run from before sent them in one string,
    /// which a viewer shows whole.
    #[test]
    fn a_hello_carries_the_simulators_name_and_address_apart() {
        let sim = crate::types::TargetName::of(true, "http://127.0.0.1:9".into());
        let hello = RunHello {
            target: sim.name.clone(),
            target_address: sim.address.clone(),
            ..Default::default()
        };
        let back: RunHello = serde_json::from_slice(&encode(&hello)).unwrap();
        assert_eq!(back.target_name(), sim);
        assert_eq!(
            back.target_name().to_string(),
            "built-in simulator (http://127.0.0.1:9)"
        );
        let old: RunHello = serde_json::from_str(
            r#"{"target":"built-in simulator (http://127.0.0.1:9)","model":"m","profile":"p","dir":"d","pid":1}"#,
        )
        .unwrap();
        assert_eq!(old.target_name().address, None);
        assert_eq!(
            old.target_name().to_string(),
            "built-in simulator (http://127.0.0.1:9)"
        );
        let server = RunHello {
            target: "http://10.0.0.1:8000".into(),
            ..Default::default()
        };
        let line = String::from_utf8(encode(&server)).unwrap();
        assert!(!line.contains("target_address"), "{line}");
    }

    use super::*;

    fn ev(t: f64) -> TimelineEvent {
        TimelineEvent {
            t_s: t,
            event: crate::types::EventKind::Pause,
            detail: String::new(),
            waited_s: None,
        }
    }

    /// `wire` through JSON, as on the socket.
    fn through_the_socket(wire: WireSnapshot) -> WireSnapshot {
        let line = encode(&RunMsg::Snapshot {
            snapshot: Box::new(wire),
        });
        let RunMsg::Snapshot { snapshot } = serde_json::from_slice(&line).unwrap() else {
            panic!("not a snapshot")
        };
        *snapshot
    }

    #[test]
    fn deltas_rebuild_the_runs_view() {
        let mut run = Snapshot {
            timeline: Arc::new(vec![ev(1.0)]),
            finished: Arc::new(vec![StageReport {
                name: "synchronous".into(),
                ..Default::default()
            }]),
            ..Default::default()
        };
        let mut sent = Sent::default();
        let mut viewer = Snapshot::default();
        let d = WireSnapshot::delta(&run, &mut sent);
        through_the_socket(d).apply(&mut viewer);
        assert_eq!(viewer.finished.len(), 1);
        assert_eq!(viewer.timeline.len(), 1);

        run.timeline = Arc::new(vec![ev(1.0), ev(2.0)]);
        let d = WireSnapshot::delta(&run, &mut sent);
        assert_eq!(d.timeline.len(), 1, "only the new event travels");
        assert!(d.finished.is_empty());
        d.apply(&mut viewer);
        assert_eq!(*viewer.timeline, *run.timeline);
        assert_eq!(viewer.finished.len(), 1);

        // A stage cut short whose requests still run travels whole, and
        // leaves the viewer's view as it joins the finished.
        run.finishing = Arc::new(vec![StageReport {
            name: "constant@5.00".into(),
            cut_short: true,
            ..Default::default()
        }]);
        through_the_socket(WireSnapshot::delta(&run, &mut sent)).apply(&mut viewer);
        assert_eq!(*viewer.finishing, *run.finishing);
        run.finishing = Arc::new(Vec::new());
        through_the_socket(WireSnapshot::delta(&run, &mut sent)).apply(&mut viewer);
        assert!(viewer.finishing.is_empty());
    }

    /// A viewer sees the run's wait for a busy server before the first
    /// stage as the run's own dashboard does, and its end.
    #[test]
    fn a_viewer_sees_the_wait_before_the_first_stage() {
        let mut run = Snapshot {
            elapsed_s: 4.0,
            waiting: Some(crate::types::live::Waiting {
                what: "it to be idle".into(),
                since_s: 1.0,
                at_most_s: 30.0,
                ..Default::default()
            }),
            ..Default::default()
        };
        let mut sent = Sent::default();
        let mut viewer = Snapshot::default();
        through_the_socket(WireSnapshot::delta(&run, &mut sent)).apply(&mut viewer);
        assert_eq!(viewer.waiting, run.waiting);
        run.waiting = None;
        through_the_socket(WireSnapshot::delta(&run, &mut sent)).apply(&mut viewer);
        assert_eq!(viewer.waiting, None);
        // A run of an earlier build sends no `waiting`.
        let old: WireSnapshot = serde_json::from_str(
            r#"{"elapsed_s":1.0,"stage_number":0,"stages_total":null,"stage":null,"upcoming":[],"paused":false,"done":false,"recent_errors":[],"warnings":[],"finished_from":0,"finished":[],"timeline_from":0,"timeline":[]}"#,
        )
        .unwrap();
        assert_eq!(old.waiting, None);
    }

    /// Between stages the wait says what starts next and how it waits, and
    /// travels beside the stage that ended; an earlier build's wait (no
    /// `short`, no `next`) reads as the wait before the first stage.
    #[test]
    fn a_viewer_sees_the_wait_between_stages() {
        let run = Snapshot {
            elapsed_s: 9.0,
            stage_number: 1,
            stage: Some(crate::types::live::LiveStage {
                name: "constant@30.00".into(),
                ..Default::default()
            }),
            waiting: Some(crate::types::live::Waiting {
                what: "it to finish what constant@30.00 left running".into(),
                short: "waiting for it to be idle and fast again".into(),
                next: "stage 2/3 constant@2.00".into(),
                since_s: 3.0,
                at_most_s: 30.0,
            }),
            ..Default::default()
        };
        let mut viewer = Snapshot::default();
        through_the_socket(WireSnapshot::delta(&run, &mut Sent::default())).apply(&mut viewer);
        assert_eq!(viewer.waiting, run.waiting);
        assert_eq!(viewer.stage, run.stage);
        let old: crate::types::live::Waiting =
            serde_json::from_str(r#"{"what":"it to be idle","since_s":1.0,"at_most_s":30.0}"#)
                .unwrap();
        assert_eq!(
            (old.next(), old.short()),
            ("the first stage", "waiting for it to be idle")
        );
    }

    #[test]
    fn commands_round_trip() {
        for c in [
            Control::SetRate(2.5),
            Control::ScaleRate(1.1),
            Control::TogglePause,
            Control::Skip,
            Control::Stop {
                reason: "llmsweep stop".into(),
            },
        ] {
            let line = encode(&ViewerMsg::Control { control: c.clone() });
            let back: ViewerMsg = serde_json::from_slice(&line).unwrap();
            assert_eq!(back, ViewerMsg::Control { control: c });
        }
        // A note, as docs/PROTOCOL.md writes it, and one whose event name
        // this version does not know (a viewer of another version): both
        // reach the engine and go back on the wire as they came.
        for (line, event) in [
            (
                r#"{"type":"control","control":{"note":{"event":"export","detail":"x"}}}"#,
                crate::types::EventKind::Export,
            ),
            (
                r#"{"type":"control","control":{"note":{"event":"bookmark","detail":"x"}}}"#,
                crate::types::EventKind::Other("bookmark".into()),
            ),
        ] {
            let msg: ViewerMsg = serde_json::from_str(line).unwrap();
            let want = ViewerMsg::Control {
                control: Control::Note {
                    event,
                    detail: "x".into(),
                },
            };
            assert_eq!(msg, want);
            assert_eq!(encode(&msg), format!("{line}\n").into_bytes());
        }
        let hello: RunMsg = serde_json::from_str(
            r#"{"type":"hello","version":1,"run":{"target":"t","model":"m","profile":"p","dir":"d","pid":7}}"#,
        )
        .unwrap();
        assert!(matches!(hello, RunMsg::Hello { version: 1, .. }));
    }

    fn point(t: f64) -> crate::server_metrics::scrape::LivePoint {
        crate::server_metrics::scrape::LivePoint {
            t_s: t,
            running: Some(t),
            ..Default::default()
        }
    }

    /// The viewer's copy of the server view equals the run's, though each
    /// point travels once and an unchanged view not at all.
    #[test]
    fn server_view_deltas_rebuild_the_runs_view() {
        use crate::server_metrics::scrape::Status;
        let mut run = LiveView {
            url: "http://127.0.0.1:9/metrics".into(),
            interval_s: 1.0,
            ..Default::default()
        };
        let mut sent = Sent::default();
        let mut viewer = LiveView::default();
        let travel = |run: &LiveView, sent: &mut Sent, viewer: &mut LiveView| {
            let snapshot = through_the_socket(WireSnapshot {
                server: server_delta(run, sent),
                ..Default::default()
            });
            let points = snapshot.server.as_ref().map(|v| v.series.len());
            if let Some(d) = snapshot.server {
                apply_server(d, viewer);
            }
            points
        };
        // Starting, no points: the header travels once.
        assert_eq!(travel(&run, &mut sent, &mut viewer), Some(0));
        assert_eq!(travel(&run, &mut sent, &mut viewer), None);
        run.status = Status::Live;
        run.source = Some("vllm".into());
        for t in 1..=3 {
            run.series.push_back(point(t as f64));
            run.scrapes += 1;
        }
        assert_eq!(travel(&run, &mut sent, &mut viewer), Some(3));
        assert_eq!(viewer, run);
        run.series.push_back(point(4.0));
        run.scrapes += 1;
        assert_eq!(
            travel(&run, &mut sent, &mut viewer),
            Some(1),
            "only the new point"
        );
        assert_eq!(viewer, run);
        // A failed scrape changes the header only.
        run.errors += 1;
        run.last_error = Some("HTTP 503".into());
        assert_eq!(travel(&run, &mut sent, &mut viewer), Some(0));
        assert_eq!(viewer, run);
        // The viewer keeps as many points as the run does.
        for t in 5..(LIVE_POINTS as u32 + 50) {
            if run.series.len() == LIVE_POINTS {
                run.series.pop_front();
            }
            run.series.push_back(point(t as f64));
        }
        travel(&run, &mut sent, &mut viewer);
        assert_eq!(viewer, run);
    }

    /// The viewer's copy of the GPU view equals the run's, though each
    /// point travels once and an unchanged view not at all.
    #[test]
    fn gpu_view_deltas_rebuild_the_runs_view() {
        use crate::server_metrics::gpu_scrape::{GpuLivePoint, GpuNow};
        let gpu = |w: f64| GpuNow {
            label: "0".into(),
            model_name: "NVIDIA H100 80GB HBM3".into(),
            power_w: Some(w),
            ..Default::default()
        };
        let point = |t: f64| GpuLivePoint {
            t_s: t,
            power_w: Some(100.0 + t),
            ..Default::default()
        };
        let mut run = GpuLive {
            urls: vec!["http://127.0.0.1:9400/metrics".into()],
            ..Default::default()
        };
        let mut sent = Sent::default();
        let mut viewer = GpuLive::default();
        let travel = |run: &GpuLive, sent: &mut Sent, viewer: &mut GpuLive| {
            let snapshot = through_the_socket(WireSnapshot {
                gpu: gpu_delta(run, sent),
                ..Default::default()
            });
            let points = snapshot.gpu.as_ref().map(|v| v.series.len());
            if let Some(d) = snapshot.gpu {
                apply_gpu(d, viewer);
            }
            points
        };
        assert_eq!(travel(&run, &mut sent, &mut viewer), Some(0));
        assert_eq!(travel(&run, &mut sent, &mut viewer), None, "unchanged");
        for t in 1..=3 {
            run.series.push_back(point(t as f64));
            run.scrapes += 1;
        }
        run.gpus = vec![gpu(300.0), gpu(310.0)];
        assert_eq!(travel(&run, &mut sent, &mut viewer), Some(3));
        assert_eq!(viewer, run);
        run.series.push_back(point(4.0));
        run.gpus[1].power_w = Some(320.0);
        assert_eq!(
            travel(&run, &mut sent, &mut viewer),
            Some(1),
            "only the new point"
        );
        assert_eq!(viewer, run);
        run.errors += 1;
        run.last_error = Some("HTTP 503".into());
        assert_eq!(travel(&run, &mut sent, &mut viewer), Some(0));
        assert_eq!(viewer, run);
        for t in 5..(gpu_scrape::LIVE_POINTS as u32 + 50) {
            if run.series.len() == gpu_scrape::LIVE_POINTS {
                run.series.pop_front();
            }
            run.series.push_back(point(t as f64));
        }
        travel(&run, &mut sent, &mut viewer);
        assert_eq!(viewer, run);
    }
}
