//! The dashboard's state and key handling. Pure: keys in, commands out; no
//! terminal, no runtime. Drawing reads this state and never changes it.

use std::time::{Duration, Instant};

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

use super::server::ServerMetrics;
use super::theme::Theme;
use crate::engine::{Control, Snapshot};

/// What the dashboard shows; Tab cycles through them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum View {
    Dashboard,
    Errors,
    Server,
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
}

/// Fixed facts about the run, shown in the header.
#[derive(Debug, Clone, Default)]
pub struct RunInfo {
    pub target: String,
    pub model: String,
    pub profile: String,
}

pub struct App {
    pub info: RunInfo,
    pub snap: Snapshot,
    pub view: View,
    pub themes: Vec<Theme>,
    pub theme: usize,
    pub help: bool,
    /// Typing an exact rate after `r`.
    pub input: Option<String>,
    /// `q` was pressed; waiting for y/n.
    pub confirm_quit: bool,
    /// Stop was sent; the dashboard closes when the run is done.
    pub stopping: bool,
    pub status: Option<(String, Instant)>,
    pub server: Option<ServerMetrics>,
    /// Lines scrolled in the stage table or the error log.
    pub scroll: usize,
}

/// How long a status message stays.
const STATUS_FOR: Duration = Duration::from_secs(6);

impl App {
    pub fn new(info: RunInfo, themes: Vec<Theme>) -> Self {
        App {
            info,
            snap: Snapshot::default(),
            view: View::Dashboard,
            themes,
            theme: 0,
            help: false,
            input: None,
            confirm_quit: false,
            stopping: false,
            status: None,
            server: None,
            scroll: 0,
        }
    }

    pub fn theme(&self) -> &Theme {
        &self.themes[self.theme % self.themes.len().max(1)]
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

    /// The current stage's rate, as the key commands change it.
    fn rate_word(&self) -> &'static str {
        match self.snap.stage.as_ref().map(|s| s.strategy.as_str()) {
            Some("concurrent") => "streams",
            _ => "rate",
        }
    }

    pub fn on_key(&mut self, key: KeyEvent) -> Option<Action> {
        if key.modifiers.contains(KeyModifiers::CONTROL) && key.code == KeyCode::Char('c') {
            self.stopping = true;
            self.say("stopping: finishing the stage and writing the reports…");
            return Some(Action::Send(Control::Stop {
                reason: "interrupted (Ctrl-C)".into(),
            }));
        }
        if let Some(buf) = self.input.as_mut() {
            match key.code {
                KeyCode::Char(c) if c.is_ascii_digit() || c == '.' => buf.push(c),
                KeyCode::Backspace => {
                    buf.pop();
                }
                KeyCode::Esc => {
                    self.input = None;
                    self.say("rate entry cancelled");
                }
                KeyCode::Enter => {
                    let text = self.input.take().unwrap_or_default();
                    return match text.parse::<f64>() {
                        Ok(r) if r.is_finite() && r > 0.0 => {
                            self.say(format!("{} → {text}: new stage", self.rate_word()));
                            Some(Action::Send(Control::SetRate(r)))
                        }
                        _ => {
                            self.say(format!("{text:?} is not a rate: type a positive number"));
                            None
                        }
                    };
                }
                _ => {}
            }
            return None;
        }
        if self.confirm_quit {
            self.confirm_quit = false;
            return match key.code {
                KeyCode::Char('y') | KeyCode::Char('Y') | KeyCode::Enter => {
                    self.stopping = true;
                    self.say("stopping: finishing the stage and writing the reports…");
                    Some(Action::Send(Control::Stop {
                        reason: "quit (q)".into(),
                    }))
                }
                _ => {
                    self.say("quit cancelled; the run goes on");
                    None
                }
            };
        }
        if self.help && key.code != KeyCode::Char('?') {
            self.help = false;
            if key.code == KeyCode::Esc {
                return None;
            }
        }
        let word = self.rate_word();
        let scale = |app: &mut App, f: f64, label: &str| {
            app.say(format!("{word} {label}: new stage"));
            Some(Action::Send(Control::ScaleRate(f)))
        };
        match key.code {
            KeyCode::Char('+') | KeyCode::Char('=') => scale(self, 1.1, "+10%"),
            KeyCode::Char('-') | KeyCode::Char('_') => scale(self, 0.9, "−10%"),
            KeyCode::Char('*') => scale(self, 2.0, "×2"),
            KeyCode::Char('/') => scale(self, 0.5, "÷2"),
            KeyCode::Char('r') => {
                self.input = Some(String::new());
                self.say(format!(
                    "type the new {word}, Enter to apply, Esc to cancel"
                ));
                None
            }
            KeyCode::Char('p') | KeyCode::Char(' ') => {
                let pausing = !self.snap.paused;
                self.say(if pausing {
                    "paused: no new requests (in-flight ones finish)"
                } else {
                    "resumed"
                });
                Some(Action::Send(Control::TogglePause))
            }
            KeyCode::Char('n') => {
                self.say("skipping to the next stage");
                Some(Action::Send(Control::Skip))
            }
            KeyCode::Char('e') => {
                self.say("exporting…");
                Some(Action::Export)
            }
            KeyCode::Char('q') | KeyCode::Esc => {
                if self.stopping {
                    self.say("already stopping…");
                } else {
                    self.confirm_quit = true;
                    self.say("stop the run and write the reports? y / n");
                }
                None
            }
            KeyCode::Char('d') => {
                self.say("detaching: the run goes on; `llmsweep attach` opens the dashboard again");
                Some(Action::Detach)
            }
            KeyCode::Char('?') => {
                self.help = !self.help;
                None
            }
            KeyCode::Char('t') => {
                self.theme = (self.theme + 1) % self.themes.len().max(1);
                let name = self.theme().name.clone();
                self.say(format!("theme: {name}"));
                None
            }
            KeyCode::Tab => {
                self.view = match self.view {
                    View::Dashboard => View::Errors,
                    View::Errors => View::Server,
                    View::Server => View::Dashboard,
                };
                self.scroll = 0;
                None
            }
            KeyCode::BackTab => {
                self.view = match self.view {
                    View::Dashboard => View::Server,
                    View::Errors => View::Dashboard,
                    View::Server => View::Errors,
                };
                self.scroll = 0;
                None
            }
            KeyCode::Down | KeyCode::Char('j') => {
                self.scroll = self.scroll.saturating_add(1);
                None
            }
            KeyCode::Up | KeyCode::Char('k') => {
                self.scroll = self.scroll.saturating_sub(1);
                None
            }
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tui::theme;

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
        assert!(a.confirm_quit);
        assert!(press(&mut a, "x").is_empty(), "anything but y cancels");
        assert!(!a.confirm_quit && !a.stopping);
        let acts = press(&mut a, "qy");
        assert!(matches!(&acts[..], [Action::Send(Control::Stop { .. })]));
        assert!(a.stopping);
        let ctrl_c = a.on_key(KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL));
        assert!(matches!(ctrl_c, Some(Action::Send(Control::Stop { .. }))));
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
}
