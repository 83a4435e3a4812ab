//! The dashboard's state: what it shows, the mode keys are read in
//! (`tui::keys` handles them), what it asks. Pure: no terminal, no runtime.
//! Drawing reads this state and never changes it.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use super::theme::Theme;
use crate::server_metrics::scrape::LiveView;
use crate::types::live::{Control, Snapshot};
use crate::types::{EventKind, Report, StrategyKind};

/// The server view's state: the server-metrics scraper's latest live view.
pub type ServerMetrics = std::sync::Arc<LiveView>;

/// What the dashboard shows; Tab cycles through them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum View {
    Dashboard,
    Errors,
    Server,
    /// Each stage's figures per model, when the run sends to several
    /// (`--model a=70%,b=30%`).
    Models,
}

/// What keys mean now (`App::mode`), one handler each.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// The running dashboard.
    Normal,
    /// Typing an exact rate after `r`.
    RateEntry,
    /// Waiting for y / n.
    Confirm,
    /// The help overlay is open.
    Help,
    /// The run is over: the result screen.
    Result,
}

/// The metric the main history chart shows; `m` cycles through them. Bigger
/// terminals draw the next ones in extra charts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Metric {
    #[default]
    Ttft,
    /// Not over time: the sweep curve, latency against achieved rate.
    Sweep,
    Itl,
    Rate,
    InFlight,
    Errors,
}

impl Metric {
    pub const ALL: [Metric; 6] = [
        Metric::Ttft,
        Metric::Sweep,
        Metric::Itl,
        Metric::Rate,
        Metric::InFlight,
        Metric::Errors,
    ];

    pub fn next(self) -> Metric {
        let i = Metric::ALL.iter().position(|m| *m == self).unwrap_or(0);
        Metric::ALL[(i + 1) % Metric::ALL.len()]
    }

    /// The charts a run has: a pooling API's answers come whole, so it has
    /// no ITL chart.
    pub fn shown(pooled: bool) -> Vec<Metric> {
        Metric::ALL
            .into_iter()
            .filter(|m| !(pooled && *m == Metric::Itl))
            .collect()
    }

    /// The chart after this one among those the run has (`m`).
    pub fn next_shown(self, pooled: bool) -> Metric {
        let shown = Metric::shown(pooled);
        let i = shown.iter().position(|m| *m == self).unwrap_or(0);
        shown[(i + 1) % shown.len()]
    }

    /// The chart's title, unit included. A pooling API (`pooled`) has a
    /// latency where TTFT is, and no ITL.
    pub fn title(self, pooled: bool) -> &'static str {
        match self {
            Metric::Ttft if pooled => "latency ms (p50, p99)",
            Metric::Itl if pooled => "ITL: none, answers come whole",
            Metric::Ttft => "TTFT ms (p50, p99)",
            Metric::Sweep => "latency vs rate",
            Metric::Itl => "ITL ms (p50, p99)",
            Metric::Rate => "completed req/s",
            Metric::InFlight => "requests in flight",
            Metric::Errors => "errors /s",
        }
    }
}

/// What a key asks the surrounding loop to do.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// Send a command to the engine.
    Send(Control),
    /// Write the reports now; the run goes on.
    Export,
    /// Close the dashboard; the run goes on (`llmsweep attach` opens it again).
    Detach,
    /// Leave the result screen (the run is over).
    Close,
    /// A deliberate second Ctrl-C while stopping: leave at once, without
    /// the report (the terminal is restored first).
    ForceExit,
}

/// Something the dashboard asks before doing (answered with y / n).
#[derive(Debug, Clone, PartialEq)]
pub enum Confirm {
    /// Stop the run and write the reports.
    Quit,
    /// `n` on the last stage: the run ends.
    SkipLast,
    /// A rate far above anything measured so far.
    Rate { control: Control, why: String },
}

impl Confirm {
    /// The question on the status line.
    pub fn question(&self) -> String {
        match self {
            Confirm::Quit => "stop the run and write the reports? y / n".into(),
            Confirm::SkipLast => {
                "this is the last stage: skipping it ends the run. End now? y / n".into()
            }
            Confirm::Rate { why, .. } => format!("{why}. Go ahead? y / n"),
        }
    }
}

/// Fixed facts about the run, shown in the header.
#[derive(Debug, Clone, Default)]
pub struct RunInfo {
    pub target: crate::types::TargetName,
    pub model: String,
    pub profile: String,
    /// A pooling API: answers come whole, with a latency and no TTFT or ITL.
    pub pooled: bool,
}

impl RunInfo {
    /// What the user waits for first, as the screens name it: the first
    /// token, or the whole answer of a pooling API (the live series carry
    /// its latency in the TTFT fields).
    pub fn wait_name(&self) -> &'static str {
        if self.pooled {
            "latency"
        } else {
            "TTFT"
        }
    }
}

/// The finished run, for the result screen.
#[derive(Debug, Clone)]
pub struct RunOutcome {
    pub report: std::sync::Arc<Report>,
    /// Files written, report.json first.
    pub paths: Vec<PathBuf>,
}

pub struct App {
    /// When Ctrl-C was first pressed (the second, a while later, leaves at once).
    pub(super) ctrl_c_at: Option<Instant>,
    pub info: RunInfo,
    pub snap: Snapshot,
    pub view: View,
    pub themes: Vec<Theme>,
    pub theme: usize,
    pub help: bool,
    /// Typing an exact rate after `r`.
    pub input: Option<String>,
    /// Waiting for y / n.
    pub confirm: Option<Confirm>,
    /// Stop was sent; the dashboard closes when the run is done.
    pub stopping: bool,
    pub status: Option<(String, Instant)>,
    pub server: Option<ServerMetrics>,
    /// The GPU scraper's live view (`--gpu-metrics`), for the server view's GPU panel.
    pub gpu: Option<std::sync::Arc<crate::server_metrics::GpuLive>>,
    /// Lines scrolled in the stage table or the error log, down from where
    /// the view starts (the live table may scroll up, above the rows it
    /// keeps in view: then it is negative).
    pub scroll: isize,
    /// The main history chart's metric.
    pub metric: Metric,
    /// Set when the run is over and its reports are written: the result screen.
    pub outcome: Option<RunOutcome>,
    /// `--baseline`: the run this one is held against (None in a viewer).
    pub baseline: Option<std::sync::Arc<Report>>,
    /// Each finished stage against the baseline, computed once as it
    /// finishes (a bootstrap is too much work for every frame).
    pub baseline_changes: Vec<Option<crate::types::StageChange>>,
    /// Timeline events already looked at (None before the first snapshot:
    /// a viewer attaching mid-run does not replay old refusals).
    timeline_seen: Option<usize>,
}

/// How long a status message stays.
const STATUS_FOR: Duration = Duration::from_secs(6);

impl App {
    /// The dashboard of a run held against `baseline` (`--baseline`).
    pub fn with_baseline(mut self, baseline: Option<std::sync::Arc<Report>>) -> Self {
        self.baseline = baseline;
        self
    }

    pub fn new(info: RunInfo, themes: Vec<Theme>) -> Self {
        App {
            info,
            snap: Snapshot::default(),
            view: View::Dashboard,
            themes,
            theme: 0,
            help: false,
            input: None,
            confirm: None,
            stopping: false,
            ctrl_c_at: None,
            status: None,
            server: None,
            gpu: None,
            scroll: 0,
            metric: Metric::default(),
            outcome: None,
            baseline: None,
            baseline_changes: Vec::new(),
            timeline_seen: None,
        }
    }

    /// Takes the engine's newest snapshot. A command the engine refused
    /// (the stage changed before the key arrived, no measured rate yet, …)
    /// replaces the status the key left ("… new stage"), so the screen
    /// never claims a change that did not happen.
    pub fn set_snapshot(&mut self, snap: Snapshot) {
        let seen = self.timeline_seen.unwrap_or(snap.timeline.len());
        // The engine's answer to a rate key replaces the key's preview,
        // which was computed from an older snapshot: what ran, or why not.
        let answer = snap
            .timeline
            .get(seen..)
            .unwrap_or_default()
            .iter()
            .rev()
            .find_map(|e| match e.event {
                EventKind::Rejected => Some(format!("refused: {}", e.detail)),
                EventKind::SetRate => Some(format!("new stage: {}", e.detail)),
                _ => None,
            });
        self.timeline_seen = Some(snap.timeline.len());
        self.snap = snap;
        self.compare_finished();
        if let Some(msg) = answer {
            self.say(msg);
        }
    }

    /// The finished stages not yet held against the baseline, each once.
    fn compare_finished(&mut self) {
        let Some(base) = self.baseline.clone() else {
            return;
        };
        let finished = &self.snap.finished;
        self.baseline_changes.truncate(finished.len());
        let names = crate::types::stage_run_names(finished);
        for i in self.baseline_changes.len()..finished.len() {
            let c = crate::report::baseline::stage_change(&base, &finished[i], &names[i])
                .ok()
                .flatten();
            self.baseline_changes.push(c);
        }
    }

    pub fn theme(&self) -> &Theme {
        &self.themes[self.theme % self.themes.len().max(1)]
    }

    /// The run is over and its reports are written: the result screen,
    /// and no "stopping…" left over from the key that ended it.
    pub fn finished(&mut self, o: RunOutcome) {
        self.outcome = Some(o);
        self.view = View::Dashboard;
        // The result's chart starts at the sweep curve; `m` goes on to the
        // run's history (TTFT, ITL, rate, … over time).
        self.metric = Metric::Sweep;
        self.help = false;
        self.status = None;
    }

    /// The run sends to several models: its stages have a per-model
    /// breakdown, and Tab reaches the models view.
    pub fn has_models(&self) -> bool {
        let finished = || self.snap.finished.iter().any(|s| s.models.len() > 1);
        let so_far = || {
            self.snap
                .stage
                .as_ref()
                .and_then(|s| s.so_far.as_ref())
                .is_some_and(|s| s.models.len() > 1)
        };
        let result = || {
            self.outcome
                .as_ref()
                .is_some_and(|o| o.report.stages.iter().any(|s| s.models.len() > 1))
        };
        finished() || so_far() || result()
    }

    /// The views Tab goes through, in order: the result or the dashboard,
    /// the errors, the server's metrics (during the run), the models (with
    /// several).
    pub fn views(&self) -> Vec<View> {
        let mut v = vec![View::Dashboard, View::Errors];
        if self.outcome.is_none() {
            v.push(View::Server);
        }
        if self.has_models() {
            v.push(View::Models);
        }
        v
    }

    /// The view `step` places after the current one in [`App::views`]
    /// (-1: before), round.
    pub fn next_view(&self, step: isize) -> View {
        let views = self.views();
        let n = views.len() as isize;
        let at = views.iter().position(|v| *v == self.view).unwrap_or(0) as isize;
        views[(at + step).rem_euclid(n) as usize]
    }

    pub fn say(&mut self, msg: impl Into<String>) {
        self.status = Some((msg.into(), Instant::now()));
    }

    /// The status message, while it is fresh.
    pub fn status_text(&self) -> Option<&str> {
        self.status
            .as_ref()
            .filter(|(_, at)| at.elapsed() < STATUS_FOR)
            .map(|(s, _)| s.as_str())
    }

    /// The running stage's kind, if a stage runs.
    pub fn stage_kind(&self) -> Option<StrategyKind> {
        self.snap.stage.as_ref().map(|s| s.strategy)
    }

    /// What the steering keys change on the running stage (None: no stage).
    pub fn steers(&self) -> Option<crate::types::Steers> {
        self.stage_kind().map(StrategyKind::steers)
    }

    /// Is the running stage the plan's last?
    pub fn on_last_stage(&self) -> bool {
        let s = &self.snap;
        s.stage.is_some()
            && s.upcoming.is_empty()
            && s.stages_total.is_some_and(|t| s.stage_number >= t)
    }

    /// The highest steady completion rate measured so far: any finished
    /// stage's achieved rate over its steady window, or the running stage's
    /// so far. Not a single second of the run: a throughput stage's burst
    /// read 139 req/s on a server that holds 30. None before anything
    /// completed.
    pub fn highest_measured_rate(&self) -> Option<f64> {
        let finished = self.snap.finished.iter().map(|s| s.rates.achieved());
        let running = self
            .snap
            .stage
            .as_ref()
            .and_then(|s| s.so_far.as_ref())
            .map(|r| r.rates.achieved());
        finished
            .chain(running)
            .filter(|r| r.is_finite() && *r > 0.0)
            .reduce(f64::max)
    }

    /// What keys mean now.
    pub fn mode(&self) -> Mode {
        if self.outcome.is_some() {
            Mode::Result
        } else if self.input.is_some() {
            Mode::RateEntry
        } else if self.confirm.is_some() {
            Mode::Confirm
        } else if self.help {
            Mode::Help
        } else {
            Mode::Normal
        }
    }
}
