//! The one shape of a report's sections beyond the stage table, each shown
//! only when some stage has its figures: columns after the stage table's
//! in report.csv and, for most, a table under a heading in the console,
//! report.md and report.html. A section is a file implementing
//! [`Section`] and one line in `report::sections::ALL`, the list every
//! format reads.

use crate::types::{RepeatedStage, Report, StageReport};

/// Where the text formats show a section's table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Place {
    /// With what the load was (pooling, images, tool calls): after the
    /// server's and GPUs' tables in the console and report.md, with the
    /// summary in report.html.
    Load,
    /// Each stage split (by model): right after the load's.
    Split,
    /// With how the answers came (reasoning, output lengths): before the
    /// load's in the console, after the conversations in report.md, after
    /// the GPUs' section in report.html.
    Answers,
}

/// A section's table as the text formats show it.
pub struct Shown {
    /// The heading in report.md and report.html (`Tool calls`).
    pub title: String,
    /// A sentence under that heading.
    pub note: Option<String>,
    /// The console's heading (its note in brackets); None: not on the
    /// console.
    pub console: Option<String>,
    pub table: String,
}

pub trait Section: Sync {
    /// Some stage has its figures: its columns and table are shown.
    fn wanted(&self, r: &Report) -> bool;

    /// Its CSV columns, after the stage table's (when [`Self::wanted`]).
    fn csv_columns(&self, r: &Report) -> Vec<String>;

    /// A stage's cells under [`Self::csv_columns`].
    fn csv_values(&self, r: &Report, s: &StageReport) -> Vec<String>;

    /// The cells of a `--repeat` run's merged row: its merged stage's.
    fn csv_merged_values(&self, r: &Report, st: &RepeatedStage) -> Vec<String> {
        self.csv_values(r, &st.merged)
    }

    /// Its table for the text formats (when [`Self::wanted`]); None for a
    /// section of CSV columns only, whose text the formats show their way.
    fn shown(&self, _r: &Report) -> Option<Shown> {
        None
    }

    /// Where the text formats show its table.
    fn place(&self) -> Place {
        Place::Load
    }
}

/// Column names as the CSV's header cells.
pub fn names(columns: &[&str]) -> Vec<String> {
    columns.iter().map(|c| c.to_string()).collect()
}
