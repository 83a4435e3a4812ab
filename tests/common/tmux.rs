//! The real binary in a real terminal: a private tmux server per test.

use std::process::Command;
use std::time::Duration;

use super::wait::poll;

pub struct Tmux {
    pub socket: String,
    pub session: String,
}

impl Tmux {
    pub fn cmd(&self) -> Command {
        let mut c = Command::new("tmux");
        c.args(["-L", &self.socket]);
        c
    }

    pub fn start(name: &str, width: u16, height: u16, command: &str) -> Tmux {
        let t = Tmux {
            socket: format!("llmsweep-{name}-{}", std::process::id()),
            session: name.to_string(),
        };
        let ok = t
            .cmd()
            .args(["new-session", "-d", "-s", &t.session])
            .args(["-x", &width.to_string(), "-y", &height.to_string()])
            .arg(command)
            .status()
            .expect("tmux is installed (apt-get install tmux)");
        assert!(ok.success(), "tmux new-session");
        t
    }

    pub fn screen(&self) -> String {
        let o = self
            .cmd()
            .args(["capture-pane", "-p", "-t", &self.session])
            .output()
            .expect("tmux capture-pane");
        String::from_utf8_lossy(&o.stdout).to_string()
    }

    pub fn keys(&self, keys: &str) {
        assert!(self
            .cmd()
            .args(["send-keys", "-t", &self.session, "-l", keys])
            .status()
            .expect("tmux send-keys")
            .success());
    }

    /// Resizes the window, as a person dragging the terminal's corner.
    pub fn resize(&self, width: u16, height: u16) {
        assert!(self
            .cmd()
            .args(["resize-window", "-t", &self.session])
            .args(["-x", &width.to_string(), "-y", &height.to_string()])
            .status()
            .expect("tmux resize-window")
            .success());
    }

    pub fn kill_session(&self) {
        let _ = self
            .cmd()
            .args(["kill-session", "-t", &self.session])
            .status();
    }

    /// Waits until the screen satisfies `f` (see [`poll`]); returns it.
    pub fn wait_for(&self, what: &str, limit: Duration, f: impl Fn(&str) -> bool) -> String {
        poll(what, limit, || self.screen(), |s| f(s))
    }

    /// Waits until the program has drawn itself at `width` × `height`
    /// after a resize: the screen has `height` rows, the last not blank (a
    /// footer), none wider than `width`, and one box closed at the right
    /// edge (`┘` in column `width`). Before the program redraws, tmux
    /// shows the old frame cut to the new size (no box closes at the new
    /// edge when narrower, none reaches it when wider) or with blank rows
    /// below it (taller).
    pub fn wait_drawn_at(&self, width: u16, height: u16, limit: Duration) -> String {
        let w = usize::from(width);
        self.wait_for(
            &format!("the screen drawn at {width}×{height}"),
            limit,
            |s| {
                let rows: Vec<&str> = s.lines().collect();
                rows.len() == usize::from(height)
                    && rows.last().is_some_and(|l| !l.trim().is_empty())
                    && rows.iter().all(|l| l.chars().count() <= w)
                    && rows
                        .iter()
                        .any(|l| l.chars().count() == w && l.ends_with('┘'))
            },
        )
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.cmd().arg("kill-server").status();
    }
}
