//! The dashboard's keys: one handler per mode (`App::mode`), keys in,
//! commands out. Pure: no terminal, no runtime.

use std::time::Instant;

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

use super::app::{Action, App, Confirm, Mode, View};
use crate::types::live::Control;
use crate::types::Steers;

/// A new rate this many times the highest completion rate measured so far
/// (and more than 1.5× the running stage's target) asks for confirmation
/// first.
pub const FAR_ABOVE: f64 = 3.0;

impl App {
    /// The current stage's rate, as the key commands change it.
    fn rate_word(&self) -> &'static str {
        self.stage_kind().map_or("rate", |k| k.steers().unit())
    }

    /// The rate the running stage runs at now: its target, or what it
    /// achieved so far (synchronous, throughput), the figure the stage
    /// table's running row shows and the engine steps from.
    fn current_rate(&self) -> Option<f64> {
        let st = self.snap.stage.as_ref()?;
        st.target_rate.or_else(|| {
            st.so_far
                .as_ref()
                .map(|r| r.rates.achieved())
                .filter(|r| r.is_finite() && *r > 0.0)
        })
    }

    /// Why `rate` needs a confirmation, if it does.
    fn why_confirm(&self, rate: f64) -> Option<String> {
        if self.steers() == Some(Steers::Streams) {
            return None;
        }
        let top = self.highest_measured_rate()?;
        // A small step from the running target is not a leap, even when the
        // stage has measured little yet.
        let target = self.snap.stage.as_ref().and_then(|s| s.target_rate);
        let leap = target.is_none_or(|t| rate > 1.5 * t);
        (leap && rate > FAR_ABOVE * top).then(|| {
            format!(
                "{rate:.2} req/s is {:.0}× the highest steady rate completed so far ({top:.2} req/s)",
                rate / top
            )
        })
    }

    /// Sends `control` for a new `rate`, or asks first when it is far above
    /// anything measured.
    fn rate_command(
        &mut self,
        control: Control,
        rate: Option<f64>,
        what: String,
    ) -> Option<Action> {
        if let Some(why) = rate.and_then(|r| self.why_confirm(r)) {
            self.confirm = Some(Confirm::Rate { control, why });
            return None;
        }
        self.say(what);
        Some(Action::Send(control))
    }

    /// A key that scales the rate by `f`.
    fn scale(&mut self, f: f64, label: &str) -> Option<Action> {
        let Some(st) = self.snap.stage.as_ref() else {
            self.say(format!("rate {label}: new stage"));
            return Some(Action::Send(Control::ScaleRate(f)));
        };
        if st.strategy.steers() == Steers::Streams {
            // Whole streams, at least one more or fewer: what is shown is what runs.
            let cur = st.target_rate.unwrap_or(1.0).round().max(1.0);
            let next = scaled_streams(cur, f);
            if next == cur {
                self.say(format!("streams stay at {cur:.0}: one is the least"));
                return None;
            }
            self.say(format!("streams {cur:.0} → {next:.0}: new stage"));
            return Some(Action::Send(Control::SetRate(next)));
        }
        match self.current_rate() {
            Some(cur) => {
                let next = cur * f;
                let from = if st.target_rate.is_some() {
                    String::new()
                } else {
                    format!(" (from the {cur:.2} req/s achieved so far)")
                };
                self.rate_command(
                    Control::ScaleRate(f),
                    Some(next),
                    format!("rate {label} → constant {next:.2} req/s{from}: new stage"),
                )
            }
            None => {
                self.say(format!(
                    "nothing completed yet in {}: no rate to change; wait a moment or type one with r",
                    st.name
                ));
                None
            }
        }
    }

    /// A key, by the mode the dashboard is in: the result screen, a rate
    /// being typed, a question, the help, or the running dashboard. Ctrl-C
    /// stops the run from any mode but the result screen.
    pub fn on_key(&mut self, key: KeyEvent) -> Option<Action> {
        let ctrl_c =
            key.modifiers.contains(KeyModifiers::CONTROL) && key.code == KeyCode::Char('c');
        match self.mode() {
            Mode::Result => self.result_key(key.code),
            _ if ctrl_c => self.ctrl_c(),
            Mode::RateEntry => self.rate_entry_key(key.code),
            Mode::Confirm => self.confirm_key(key.code),
            Mode::Help => self.help_key(key.code),
            Mode::Normal => self.normal_key(key.code),
        }
    }

    /// The result screen: Tab between the result and the errors; theme,
    /// chart and scrolling; any other key closes.
    fn result_key(&mut self, code: KeyCode) -> Option<Action> {
        match code {
            KeyCode::Tab => {
                self.view = self.next_view(1);
                None
            }
            KeyCode::BackTab => {
                self.view = self.next_view(-1);
                None
            }
            // Harmless on the result; scrolling is for the errors view.
            code if self.view_key(code) => None,
            _ => Some(Action::Close),
        }
    }

    /// Ctrl-C: as with the signal, the same press seen twice is one; a
    /// deliberate second one, later, leaves at once.
    fn ctrl_c(&mut self) -> Option<Action> {
        if let Some(first) = self.ctrl_c_at {
            if first.elapsed() >= crate::term::REPEAT_WINDOW {
                return Some(Action::ForceExit);
            }
            self.say("stopping… Ctrl-C again in a moment leaves at once, without the report");
            return None;
        }
        self.ctrl_c_at = Some(Instant::now());
        self.stopping = true;
        self.confirm = None;
        self.say("stopping: finishing the stage and writing the reports…");
        Some(Action::Send(Control::Stop {
            reason: "interrupted (Ctrl-C)".into(),
        }))
    }

    /// Typing a rate after `r`: Backspace, Esc cancels, Enter applies what
    /// was typed, read as a number (`1e5` is 100000) or refused as none.
    /// Every character is kept where it shows: dropped quietly, `1e9`
    /// became a rate of 19; refused aloud with the typing going on, `1e5`
    /// became 15 (a user's trial). Letters stay out of the keys meanwhile.
    fn rate_entry_key(&mut self, code: KeyCode) -> Option<Action> {
        let buf = self.input.as_mut()?;
        match code {
            KeyCode::Char(c) if c.is_ascii_digit() || matches!(c, '.' | 'e' | 'E') => buf.push(c),
            KeyCode::Char(c) => {
                buf.push(c);
                self.say(format!(
                    "{c:?} is not part of a rate: Backspace removes it (Enter would apply nothing, Esc cancels)"
                ));
            }
            KeyCode::Backspace => {
                buf.pop();
            }
            KeyCode::Esc => {
                self.input = None;
                self.say("rate entry cancelled");
            }
            KeyCode::Enter => {
                let text = self.input.take().unwrap_or_default();
                return self.apply_typed_rate(&text);
            }
            _ => {}
        }
        None
    }

    /// The typed rate (streams on a concurrent stage), or why it is not one.
    fn apply_typed_rate(&mut self, text: &str) -> Option<Action> {
        match text.parse::<f64>() {
            Ok(r) if r.is_finite() && r > 0.0 => {
                // Refused before any question (seen: 999999999999 asked
                // "Go ahead?" and was refused only after y).
                if let Err(why) = crate::typed::validate_rate(r) {
                    self.say(why);
                    return None;
                }
                if self.steers() == Some(Steers::Streams) {
                    let n = r.round().max(1.0);
                    self.say(format!("streams → {n:.0}: new stage"));
                    return Some(Action::Send(Control::SetRate(n)));
                }
                self.rate_command(
                    Control::SetRate(r),
                    Some(r),
                    format!("rate → constant {r} req/s: new stage"),
                )
            }
            _ => {
                self.say(format!("{text:?} is not a rate: type a positive number"));
                None
            }
        }
    }

    /// A question waits: y (or Enter) does it, any other key cancels.
    fn confirm_key(&mut self, code: KeyCode) -> Option<Action> {
        let q = self.confirm.take()?;
        let yes = matches!(
            code,
            KeyCode::Char('y') | KeyCode::Char('Y') | KeyCode::Enter
        );
        if !yes {
            self.say(match q {
                Confirm::Quit | Confirm::SkipLast => "cancelled; the run goes on",
                Confirm::Rate { .. } => "rate change cancelled; the stage goes on",
            });
            return None;
        }
        match q {
            Confirm::Quit => {
                self.stopping = true;
                self.say("stopping: finishing the stage and writing the reports…");
                Some(Action::Send(Control::Stop {
                    reason: "quit (q)".into(),
                }))
            }
            Confirm::SkipLast => {
                self.say("skipping the last stage: the run ends");
                Some(Action::Send(Control::Skip))
            }
            Confirm::Rate { control, .. } => {
                self.say("new rate: new stage");
                Some(Action::Send(control))
            }
        }
    }

    /// The help is open: `?` closes it, Esc only closes it, any other key
    /// closes it and does what it does.
    fn help_key(&mut self, code: KeyCode) -> Option<Action> {
        if code != KeyCode::Char('?') {
            self.help = false;
            if code == KeyCode::Esc {
                return None;
            }
        }
        self.normal_key(code)
    }

    /// The running dashboard: steering, the run, and the screen.
    fn normal_key(&mut self, code: KeyCode) -> Option<Action> {
        match code {
            KeyCode::Char('+' | '=' | '-' | '_' | '*' | '/' | 'r' | 'p' | ' ' | 'n') => {
                self.steer_key(code)
            }
            KeyCode::Char('e' | 'q' | 'd') | KeyCode::Esc => self.run_key(code),
            _ => {
                self.screen_key(code);
                None
            }
        }
    }

    /// Keys that change what is sent: the rate, a pause, the next stage.
    fn steer_key(&mut self, code: KeyCode) -> Option<Action> {
        if let Some(w) = &self.snap.waiting {
            // No stage runs while the run waits for the server: `n` ends
            // the wait, the rest have nothing to steer.
            let next = w.next().to_string();
            if code == KeyCode::Char('n') {
                self.say(format!("the wait skipped: {next} starts now"));
                return Some(Action::Send(Control::Skip));
            }
            self.say(format!(
                "no stage runs while llmsweep waits for the server: n starts {next} now, q stops"
            ));
            return None;
        }
        match code {
            KeyCode::Char('+' | '=') => self.scale(1.1, "+10%"),
            KeyCode::Char('-' | '_') => self.scale(0.9, "−10%"),
            KeyCode::Char('*') => self.scale(2.0, "×2"),
            KeyCode::Char('/') => self.scale(0.5, "÷2"),
            KeyCode::Char('r') => {
                self.input = Some(String::new());
                let word = self.rate_word();
                self.say(format!(
                    "type the new {word}, Enter to apply, Esc to cancel"
                ));
                None
            }
            KeyCode::Char('p' | ' ') => {
                let pausing = !self.snap.paused;
                self.say(if pausing {
                    "paused: no new requests (in-flight ones finish); p resumes"
                } else {
                    "resumed"
                });
                Some(Action::Send(Control::TogglePause))
            }
            KeyCode::Char('n') if self.on_last_stage() => {
                self.confirm = Some(Confirm::SkipLast);
                None
            }
            KeyCode::Char('n') => {
                self.say("skipping to the next stage");
                Some(Action::Send(Control::Skip))
            }
            _ => None,
        }
    }

    /// Keys about the run as a whole: export, quit, detach.
    fn run_key(&mut self, code: KeyCode) -> Option<Action> {
        match code {
            KeyCode::Char('e') => {
                self.say("exporting…");
                Some(Action::Export)
            }
            KeyCode::Char('q') | KeyCode::Esc => {
                if self.stopping {
                    self.say("already stopping…");
                } else {
                    self.confirm = Some(Confirm::Quit);
                }
                None
            }
            KeyCode::Char('d') => {
                self.say("detaching: the run goes on; `llmsweep attach` opens the dashboard again");
                Some(Action::Detach)
            }
            _ => None,
        }
    }

    /// Keys about the screen: help, views, theme, chart, scrolling.
    fn screen_key(&mut self, code: KeyCode) {
        match code {
            KeyCode::Char('?') => self.help = !self.help,
            KeyCode::Tab => {
                self.view = self.next_view(1);
                self.scroll = 0;
            }
            KeyCode::BackTab => {
                self.view = self.next_view(-1);
                self.scroll = 0;
            }
            code => {
                if self.view_key(code) {
                    match code {
                        KeyCode::Char('t') => {
                            let name = self.theme().name.clone();
                            self.say(format!("theme: {name}"));
                        }
                        KeyCode::Char('m') => {
                            self.say(format!("chart: {}", self.metric.title(self.info.pooled)))
                        }
                        _ => {}
                    }
                }
            }
        }
    }

    /// Keys that change only how the screen looks (theme, chart, scroll),
    /// the same during the run and on the result screen. True if `code`
    /// was one of them.
    fn view_key(&mut self, code: KeyCode) -> bool {
        match code {
            KeyCode::Char('t') => self.theme = (self.theme + 1) % self.themes.len().max(1),
            KeyCode::Char('m') => self.metric = self.metric.next_shown(self.info.pooled),
            KeyCode::Down | KeyCode::Char('j') => {
                // No further than the table has rows (the error log: no limit).
                let rows = match &self.outcome {
                    Some(o) => o.report.stages.len(),
                    None => {
                        let s = &self.snap;
                        s.finished.len() + s.finishing.len() + 1 + s.upcoming.len()
                    }
                };
                let cap = if self.view == View::Errors {
                    isize::MAX
                } else {
                    isize::try_from(rows).unwrap_or(isize::MAX)
                };
                self.scroll = self.scroll.saturating_add(1).min(cap);
            }
            KeyCode::Up | KeyCode::Char('k') => {
                self.scroll = self.scroll.saturating_sub(1);
                // Only the live table scrolls above where it starts.
                let live_table = self.outcome.is_none() && self.view == View::Dashboard;
                if !live_table {
                    self.scroll = self.scroll.max(0);
                }
            }
            _ => return false,
        }
        true
    }
}

/// Streams after scaling `cur` by `f`: whole streams, at least one more
/// (up) or fewer (down), never below one.
pub fn scaled_streams(cur: f64, f: f64) -> f64 {
    let cur = cur.round().max(1.0);
    if f >= 1.0 {
        (cur * f).round().max(cur + 1.0)
    } else {
        (cur * f).round().min(cur - 1.0).max(1.0)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::tui::app::{Metric, RunInfo, RunOutcome};
    use crate::tui::theme;
    use crate::types::EventKind;
    use crate::types::StrategyKind;

    fn app() -> App {
        App::new(RunInfo::default(), theme::builtin())
    }

    fn key(c: char) -> KeyEvent {
        KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE)
    }

    fn press(app: &mut App, keys: &str) -> Vec<Action> {
        keys.chars().filter_map(|c| app.on_key(key(c))).collect()
    }

    #[test]
    fn rate_keys_send_rate_commands() {
        let mut a = app();
        assert_eq!(
            press(&mut a, "+-*/"),
            vec![
                Action::Send(Control::ScaleRate(1.1)),
                Action::Send(Control::ScaleRate(0.9)),
                Action::Send(Control::ScaleRate(2.0)),
                Action::Send(Control::ScaleRate(0.5)),
            ]
        );
        assert!(a.status_text().unwrap().contains("÷2"));
    }

    #[test]
    fn r_types_an_exact_rate() {
        let mut a = app();
        assert!(press(&mut a, "r12.5").is_empty());
        assert_eq!(a.input.as_deref(), Some("12.5"));
        let act = a.on_key(KeyEvent::new(KeyCode::Enter, KeyModifiers::NONE));
        assert_eq!(act, Some(Action::Send(Control::SetRate(12.5))));
        assert!(a.input.is_none());
        // Nonsense is refused with a message, nothing is sent.
        press(&mut a, "r..");
        assert_eq!(
            a.on_key(KeyEvent::new(KeyCode::Enter, KeyModifiers::NONE)),
            None
        );
        assert!(a.status_text().unwrap().contains("not a rate"));
        // A rate past what llmsweep schedules is refused at once, with the
        // bounds, before any question.
        press(&mut a, "r999999999999");
        assert_eq!(
            a.on_key(KeyEvent::new(KeyCode::Enter, KeyModifiers::NONE)),
            None
        );
        assert!(a.confirm.is_none(), "no question for an impossible rate");
        assert!(
            a.status_text().unwrap().contains("is not possible"),
            "{:?}",
            a.status_text()
        );
        // What is typed is kept and read as a number: dropped, `1e9` became
        // 19; refused with the typing going on, `1e5` became 15.
        press(&mut a, "r1e5");
        assert_eq!(a.input.as_deref(), Some("1e5"));
        let _ = a.on_key(KeyEvent::new(KeyCode::Enter, KeyModifiers::NONE));
        assert!(
            !a.status_text().unwrap_or("").contains("15.00"),
            "{:?}",
            a.status_text()
        );
        // A character no number has is said aloud, kept, and refused at Enter.
        a.confirm = None;
        press(&mut a, "r1x5");
        assert_eq!(a.input.as_deref(), Some("1x5"));
        assert!(
            a.status_text()
                .unwrap()
                .contains("'x' is not part of a rate"),
            "{:?}",
            a.status_text()
        );
        assert_eq!(
            a.on_key(KeyEvent::new(KeyCode::Enter, KeyModifiers::NONE)),
            None
        );
        assert!(
            a.status_text().unwrap().contains("not a rate"),
            "{:?}",
            a.status_text()
        );
    }

    #[test]
    fn pause_skip_export() {
        let mut a = app();
        assert_eq!(
            press(&mut a, "pne"),
            vec![
                Action::Send(Control::TogglePause),
                Action::Send(Control::Skip),
                Action::Export
            ]
        );
    }

    #[test]
    fn quit_asks_first() {
        let mut a = app();
        assert!(press(&mut a, "q").is_empty());
        assert_eq!(a.confirm, Some(Confirm::Quit));
        assert!(press(&mut a, "x").is_empty(), "anything but y cancels");
        assert!(a.confirm.is_none() && !a.stopping);
        let acts = press(&mut a, "qy");
        assert!(matches!(&acts[..], [Action::Send(Control::Stop { .. })]));
        assert!(a.stopping);
        let ctrl_c = a.on_key(KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL));
        assert!(matches!(ctrl_c, Some(Action::Send(Control::Stop { .. }))));
        // The same press twice: nothing more. A deliberate one later: leave.
        let again = a.on_key(KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL));
        assert_eq!(again, None);
        a.ctrl_c_at = Some(Instant::now() - Duration::from_secs(2));
        let later = a.on_key(KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL));
        assert_eq!(later, Some(Action::ForceExit));
    }

    #[test]
    fn views_help_and_themes() {
        let mut a = app();
        a.on_key(KeyEvent::new(KeyCode::Tab, KeyModifiers::NONE));
        assert_eq!(a.view, View::Errors);
        a.on_key(KeyEvent::new(KeyCode::Tab, KeyModifiers::NONE));
        assert_eq!(a.view, View::Server);
        a.on_key(KeyEvent::new(KeyCode::BackTab, KeyModifiers::NONE));
        assert_eq!(a.view, View::Errors);
        press(&mut a, "?");
        assert!(a.help);
        press(&mut a, "?");
        assert!(!a.help);
        press(&mut a, "t");
        assert_eq!(a.theme().name, "light");
    }

    #[test]
    fn the_mode_decides_what_a_key_means() {
        let mut a = app();
        assert_eq!(a.mode(), Mode::Normal);
        // The help: Esc only closes it; another key closes it and acts.
        press(&mut a, "?");
        assert_eq!(a.mode(), Mode::Help);
        assert_eq!(
            a.on_key(KeyEvent::new(KeyCode::Esc, KeyModifiers::NONE)),
            None
        );
        assert_eq!(a.mode(), Mode::Normal);
        press(&mut a, "?");
        assert_eq!(press(&mut a, "p"), vec![Action::Send(Control::TogglePause)]);
        assert!(!a.help);
        // Typing a rate: letters are not keys; Ctrl-C still stops.
        press(&mut a, "r");
        assert_eq!(a.mode(), Mode::RateEntry);
        assert!(press(&mut a, "qn").is_empty());
        assert_eq!(a.mode(), Mode::RateEntry);
        let stop = a.on_key(KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL));
        assert!(matches!(stop, Some(Action::Send(Control::Stop { .. }))));
        // A question: only y does it.
        let mut a = app();
        press(&mut a, "q");
        assert_eq!(a.mode(), Mode::Confirm);
        assert!(
            press(&mut a, "p").is_empty(),
            "p answers no, it does not pause"
        );
        assert_eq!(a.mode(), Mode::Normal);
    }

    fn with_stage(strategy: StrategyKind, target: Option<f64>, measured: f64) -> App {
        let mut a = app();
        let mut so_far = crate::types::StageReport::default();
        so_far.rates.requests_per_s = measured;
        a.snap.stage = Some(crate::types::live::LiveStage {
            name: format!("{strategy}@x"),
            strategy,
            target_rate: target,
            so_far: Some(std::sync::Arc::new(so_far)),
            ..Default::default()
        });
        a.snap.stage_number = 1;
        a.snap.stages_total = Some(3);
        a.snap.upcoming = vec![crate::types::live::PlannedStage {
            name: "constant@20.00".into(),
            target_rate: Some(20.0),
        }];
        a
    }

    fn enter(a: &mut App) -> Option<Action> {
        a.on_key(KeyEvent::new(KeyCode::Enter, KeyModifiers::NONE))
    }

    #[test]
    fn the_far_above_check_compares_with_steady_rates_not_a_burst() {
        // Seen: `r 500` compared with 139.06 req/s, one second of a
        // throughput stage on a server that holds about 30.
        let mut a = with_stage(StrategyKind::Constant, Some(30.0), 29.0);
        let mut thr = crate::types::StageReport::default();
        thr.rates.completed_per_s = 31.0;
        thr.rates.steady_s = 8.0;
        thr.rates.requests_per_s = 25.0;
        a.snap.finished = std::sync::Arc::new(vec![thr]);
        let mut burst = crate::types::live::RunHistory::default();
        burst.push(
            1.0,
            1.0,
            &crate::types::live::SeriesPoint {
                requests_per_s: 139.06,
                ..Default::default()
            },
            0,
        );
        a.snap.history = std::sync::Arc::new(burst);
        assert_eq!(a.highest_measured_rate(), Some(31.0));
        press(&mut a, "r500");
        assert_eq!(enter(&mut a), None);
        let q = a.confirm.clone().expect("asks");
        assert!(q.question().contains("(31.00 req/s)"), "{}", q.question());
    }

    #[test]
    fn a_rate_far_above_anything_measured_asks_first_and_says_why() {
        let mut a = with_stage(StrategyKind::Constant, Some(10.0), 9.5);
        // 5000 req/s typed against 9.5 measured: asks, nothing sent yet.
        assert!(press(&mut a, "r5000").is_empty());
        assert_eq!(enter(&mut a), None);
        let q = a.confirm.clone().expect("asks");
        assert!(
            q.question()
                .contains("526× the highest steady rate completed so far"),
            "{}",
            q.question()
        );
        assert_eq!(
            press(&mut a, "y"),
            vec![Action::Send(Control::SetRate(5000.0))]
        );
        // "n" declines; a modest rate goes straight through.
        press(&mut a, "r5000");
        enter(&mut a);
        assert!(press(&mut a, "n").is_empty());
        assert!(a.confirm.is_none());
        press(&mut a, "r20");
        assert_eq!(enter(&mut a), Some(Action::Send(Control::SetRate(20.0))));
        // Doubling from 10 (target) to 20 is fine; from a stage at 15 to 30
        // with 9.5 measured is over 3× and asks.
        assert_eq!(
            press(&mut a, "*"),
            vec![Action::Send(Control::ScaleRate(2.0))]
        );
        a.snap.stage.as_mut().unwrap().target_rate = Some(15.0);
        assert!(press(&mut a, "*").is_empty());
        assert!(matches!(a.confirm, Some(Confirm::Rate { .. })));
    }

    #[test]
    fn a_key_the_engine_refused_says_so_instead_of_new_stage() {
        use crate::types::TimelineEvent;
        let ev = |event, detail: &str| TimelineEvent {
            t_s: 1.0,
            event,
            detail: detail.into(),
            waited_s: None,
        };
        let mut a = with_stage(StrategyKind::Throughput, None, 25.0);
        // A viewer attaching mid-run sees old refusals in the timeline: not news.
        let mut snap = a.snap.clone();
        snap.timeline = std::sync::Arc::new(vec![ev(EventKind::Rejected, "old refusal")]);
        a.set_snapshot(snap.clone());
        assert_eq!(a.status_text(), None);
        // `/` on the stage as drawn: the dashboard expects a new stage …
        assert_eq!(
            press(&mut a, "/"),
            vec![Action::Send(Control::ScaleRate(0.5))]
        );
        assert!(a.status_text().unwrap().ends_with("new stage"));
        // … but the stage had ended and the next one had no rate yet: the
        // engine refused, and the next snapshot says so.
        let why = "throughput has no measured rate yet (0 completed in 0.0 s; 3 and 1 s needed)";
        let mut timeline = (*snap.timeline).clone();
        timeline.push(ev(EventKind::StageStart, "throughput"));
        timeline.push(ev(EventKind::Rejected, why));
        snap.timeline = std::sync::Arc::new(timeline);
        a.set_snapshot(snap.clone());
        assert_eq!(a.status_text(), Some(format!("refused: {why}").as_str()));
        // Said once: later snapshots with no new refusal leave the status alone.
        a.say("something else");
        a.set_snapshot(snap.clone());
        assert_eq!(a.status_text(), Some("something else"));
        // A rate the engine took shows as it ran, not as the dashboard
        // previewed it from an older measurement.
        let mut timeline = (*snap.timeline).clone();
        timeline.push(ev(
            EventKind::SetRate,
            "constant@7.33 → constant@7.93 (manual)",
        ));
        snap.timeline = std::sync::Arc::new(timeline);
        a.set_snapshot(snap);
        assert_eq!(
            a.status_text(),
            Some("new stage: constant@7.33 → constant@7.93 (manual)")
        );
    }

    #[test]
    fn a_small_step_from_the_target_never_asks_even_early_in_a_stage() {
        // 1 s into constant@5: 0.8 req/s measured so far. +10% is not a leap.
        let mut a = with_stage(StrategyKind::Constant, Some(5.0), 0.8);
        assert_eq!(
            press(&mut a, "+"),
            vec![Action::Send(Control::ScaleRate(1.1))]
        );
        // A typed 5000 is.
        press(&mut a, "r5000");
        assert_eq!(enter(&mut a), None);
        assert!(a.confirm.is_some());
    }

    #[test]
    fn synchronous_stages_scale_from_the_measured_rate_or_say_why_not() {
        let mut a = with_stage(StrategyKind::Synchronous, None, 0.8);
        assert_eq!(
            press(&mut a, "+"),
            vec![Action::Send(Control::ScaleRate(1.1))]
        );
        assert!(a
            .status_text()
            .unwrap()
            .contains("0.80 req/s achieved so far"));
        // Issue 34 item 4: the rate on screen (the table's, over the steady
        // window), not completions over the whole running time.
        let mut a = with_stage(StrategyKind::Synchronous, None, 0.8);
        let st = a.snap.stage.as_mut().unwrap();
        let mut so_far = st.so_far.as_deref().cloned().unwrap_or_default();
        so_far.rates.completed_per_s = 0.94;
        so_far.rates.steady_s = 8.0;
        st.so_far = Some(std::sync::Arc::new(so_far));
        press(&mut a, "+");
        let said = a.status_text().unwrap();
        assert!(
            said.contains("constant 1.03 req/s (from the 0.94 req/s achieved so far)"),
            "{said}"
        );
        let mut a = with_stage(StrategyKind::Throughput, None, 0.0);
        assert!(press(&mut a, "*").is_empty());
        assert!(a.status_text().unwrap().contains("nothing completed yet"));
    }

    #[test]
    fn concurrent_stages_change_by_whole_streams() {
        let mut a = with_stage(StrategyKind::Concurrent, Some(4.0), 3.0);
        assert_eq!(
            press(&mut a, "+"),
            vec![Action::Send(Control::SetRate(5.0))]
        );
        assert!(a.status_text().unwrap().contains("streams 4 → 5"));
        assert_eq!(
            press(&mut a, "-"),
            vec![Action::Send(Control::SetRate(3.0))]
        );
        assert_eq!(
            press(&mut a, "*"),
            vec![Action::Send(Control::SetRate(8.0))]
        );
        press(&mut a, "r2.5");
        assert_eq!(enter(&mut a), Some(Action::Send(Control::SetRate(3.0))));
        assert!(a.status_text().unwrap().contains("streams → 3"));
        a.snap.stage.as_mut().unwrap().target_rate = Some(1.0);
        assert!(press(&mut a, "-").is_empty(), "one stream is the least");
        assert_eq!(scaled_streams(1.0, 0.5), 1.0);
        assert_eq!(scaled_streams(10.0, 1.1), 11.0);
        assert_eq!(scaled_streams(40.0, 1.1), 44.0);
        assert_eq!(scaled_streams(10.0, 0.9), 9.0);
    }

    /// Between stages, while the run waits for the server, `n` ends the
    /// wait (even before the plan's last stage) and the steering keys
    /// say why they do nothing: the snapshot's stage is the one that ended.
    #[test]
    fn during_a_wait_for_the_server_n_starts_the_next_stage() {
        let mut a = with_stage(StrategyKind::Constant, Some(10.0), 9.5);
        a.snap.upcoming.clear();
        a.snap.stage_number = 3;
        a.snap.waiting = Some(crate::types::live::Waiting {
            what: "it to finish what constant@10.00 left running".into(),
            next: "stage 3/3 constant@20.00".into(),
            ..Default::default()
        });
        for k in ["+", "p", "*"] {
            assert!(press(&mut a, k).is_empty(), "{k}");
            assert!(
                a.status_text()
                    .unwrap()
                    .contains("n starts stage 3/3 constant@20.00 now"),
                "{:?}",
                a.status_text()
            );
        }
        assert_eq!(press(&mut a, "n"), vec![Action::Send(Control::Skip)]);
        assert_eq!(a.confirm, None);
        assert!(a
            .status_text()
            .unwrap()
            .contains("stage 3/3 constant@20.00 starts now"));
    }

    #[test]
    fn next_on_the_last_stage_asks_like_quit() {
        let mut a = with_stage(StrategyKind::Constant, Some(10.0), 9.5);
        assert_eq!(press(&mut a, "n"), vec![Action::Send(Control::Skip)]);
        a.snap.upcoming.clear();
        a.snap.stage_number = 3;
        assert!(press(&mut a, "n").is_empty());
        assert_eq!(a.confirm, Some(Confirm::SkipLast));
        assert!(a
            .confirm
            .as_ref()
            .unwrap()
            .question()
            .contains("last stage"));
        assert!(press(&mut a, "x").is_empty());
        press(&mut a, "n");
        assert_eq!(press(&mut a, "y"), vec![Action::Send(Control::Skip)]);
    }

    #[test]
    fn m_cycles_the_chart_and_the_result_screen_closes_on_a_key() {
        let mut a = app();
        press(&mut a, "m");
        assert_eq!(a.metric, Metric::Sweep);
        press(&mut a, "mmmmm");
        assert_eq!(a.metric, Metric::Ttft);
        // The stop key's "stopping…" goes when the reports are written.
        a.say("stopping: finishing the stage and writing the reports…");
        a.finished(RunOutcome {
            report: std::sync::Arc::new(
                crate::types::Report::from_json(
                    r#"{"version":1,"tool":"llmsweep","created":"","target":{"url":"u","model":"m","api":"chat","builtin_simulator":false},"config":{},"partial":false,"end_reason":"completed","stages":[],"timeline":[]}"#,
                )
                .unwrap(),
            ),
            paths: vec![],
        });
        assert_eq!(a.status_text(), None);
        assert_eq!(
            a.on_key(KeyEvent::new(KeyCode::Tab, KeyModifiers::NONE)),
            None
        );
        assert_eq!(a.view, View::Errors);
        assert_eq!(press(&mut a, "x"), vec![Action::Close]);
    }
}
