//! The summary's lines as keys: what each line says, which the screens
//! and files that show the summary decide by; its label is made only
//! where it is shown. Apart from `summary` so that the sections that give
//! a line of it (`gpu`, `repeats`) name their key without a loop.

/// A line of the summary: what it says, which the screens and files that
/// show it decide by (the dashboard keeps the answer, drops the basis
/// first…); its label is made only where it is shown ([`Key::label`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Key {
    Answer,
    /// `--repeat N`: the answer across the runs.
    Repeats,
    /// How the answer was reached, and what to run next.
    Basis,
    Knee,
    Slos,
    /// What the answer's rate costs (with a price) …
    Cost,
    /// … or draws (GPU figures without one).
    Gpus,
    Saturated,
    Erroring,
    Undecided,
    Errors,
    CutShort,
    Stopped,
    /// Where the reports were written (the dashboard's result screen).
    Reports,
}

impl Key {
    /// The line's label, as every screen and file shows it.
    pub fn label(self) -> &'static str {
        match self {
            Key::Answer => "Answer",
            Key::Repeats => "Repeats",
            Key::Basis => "Basis",
            Key::Knee => "Knee",
            Key::Slos => "SLOs",
            Key::Cost => "Cost",
            Key::Gpus => "GPUs",
            Key::Saturated => "Saturated",
            Key::Erroring => "Erroring",
            Key::Undecided => "Undecided",
            Key::Errors => "Errors",
            Key::CutShort => "Cut short",
            Key::Stopped => "Stopped",
            Key::Reports => "Reports",
        }
    }
}

impl std::fmt::Display for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.pad(self.label())
    }
}
