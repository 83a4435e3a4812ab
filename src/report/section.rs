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

/// A figure in a text table: `digits` decimals, `-` where unknown.
pub fn fixed(v: Option<f64>, digits: usize) -> String {
    match v {
        Some(x) if x.is_finite() => format!("{x:.digits$}"),
        _ => "-".into(),
    }
}

/// A figure in report.csv: full precision, empty where unknown.
pub fn full(v: Option<f64>) -> String {
    v.map(|x| format!("{x}")).unwrap_or_default()
}

/// A column of a section's table, declared once: its two header lines in
/// the text table (None: in report.csv only), its cell there, and its
/// CSV column (None: in the text table only), shown in a report `when`
/// says so (by default in all). Read from a stage and one of its parts `T`
/// (its tool calls, a model of its mix; `()` for a row a stage). report.csv
/// gives a table's columns in their declared order, the text table's and
/// its own interleaved.
pub struct Col<T: 'static> {
    pub head: Option<(&'static str, &'static str)>,
    pub text: Get<T>,
    pub csv: Option<(&'static str, Get<T>)>,
    pub when: fn(&Report) -> bool,
}

/// A cell of a stage and its part.
pub type Get<T> = fn(&StageReport, &T) -> String;

impl<T> Col<T> {
    /// A column of the text table: `group` over `name`.
    pub const fn text(
        group: &'static str,
        name: &'static str,
        text: fn(&StageReport, &T) -> String,
    ) -> Self {
        Col {
            head: Some((group, name)),
            text,
            csv: None,
            when: |_| true,
        }
    }

    /// A column of report.csv alone.
    pub const fn csv_only(key: &'static str, csv: fn(&StageReport, &T) -> String) -> Self {
        Col {
            head: None,
            text: |_, _| String::new(),
            csv: Some((key, csv)),
            when: |_| true,
        }
    }

    /// The column in report.csv too, as `key`.
    pub const fn csv(self, key: &'static str, csv: fn(&StageReport, &T) -> String) -> Self {
        Col {
            csv: Some((key, csv)),
            ..self
        }
    }

    /// The column only in a report where `when` holds (the kinds of parts
    /// a run sent, a batch's rows).
    pub const fn when(self, when: fn(&Report) -> bool) -> Self {
        Col { when, ..self }
    }
}

/// The parts of a table with a row a stage.
pub fn each_stage(_: &StageReport) -> &'static [()] {
    &[()]
}

/// A section's table: a row for each part of each stage (its tool calls,
/// each model of its mix; each stage, [`each_stage`]), the columns
/// declared once for the text table and report.csv.
pub struct PartTable<T: 'static> {
    pub parts: fn(&StageReport) -> &[T],
    pub columns: &'static [Col<T>],
}

impl<T> PartTable<T> {
    /// Some stage of `r` has a part.
    pub fn any(&self, r: &Report) -> bool {
        r.stages.iter().any(|s| !(self.parts)(s).is_empty())
    }

    /// The columns `r` shows.
    fn shown<'a>(&'a self, r: &'a Report) -> impl Iterator<Item = &'a Col<T>> + 'a {
        self.columns.iter().filter(move |c| (c.when)(r))
    }

    /// The text table's header lines for `r`: (group, name) a column, the
    /// stage's label first.
    pub fn headers(&self, r: &Report) -> Vec<(&'static str, &'static str)> {
        std::iter::once(("Metadata", "Benchmark"))
            .chain(self.shown(r).filter_map(|c| c.head))
            .collect()
    }

    /// The text table (console, report.md, report.html): the stage's label,
    /// then the columns with a header; None when no stage has a part.
    pub fn text(&self, r: &Report) -> Option<String> {
        if !self.any(r) {
            return None;
        }
        let shown: Vec<&Col<T>> = self.shown(r).filter(|c| c.head.is_some()).collect();
        let mut rows = Vec::new();
        for (s, label) in crate::types::labelled(&r.stages) {
            for part in (self.parts)(s) {
                let cells = shown.iter().map(|c| (c.text)(s, part));
                rows.push(std::iter::once(label.clone()).chain(cells).collect());
            }
        }
        let columns = self.headers(r);
        Some(super::tables::GroupedTable { columns, rows }.render())
    }

    /// report.csv's header cells for `r`.
    pub fn csv_columns(&self, r: &Report) -> Vec<String> {
        let keys: Vec<&str> = self.shown(r).filter_map(|c| Some(c.csv?.0)).collect();
        names(&keys)
    }

    /// A CSV of its own with a row a part (`report-gpus.csv`): its header,
    /// the stage's name and label then [`Self::csv_columns`], and its rows.
    pub fn csv_rows(&self, r: &Report) -> (Vec<String>, Vec<Vec<String>>) {
        let mut header = names(&["stage", "label"]);
        header.extend(self.csv_columns(r));
        let cells: Vec<Get<T>> = self.shown(r).filter_map(|c| Some(c.csv?.1)).collect();
        let mut rows = Vec::new();
        for (s, label) in crate::types::labelled(&r.stages) {
            for part in (self.parts)(s) {
                let row = [s.name.clone(), label.clone()];
                rows.push(
                    row.into_iter()
                        .chain(cells.iter().map(|get| get(s, part)))
                        .collect(),
                );
            }
        }
        (header, rows)
    }

    /// A stage's cells under [`Self::csv_columns`]: each part's value,
    /// `;`-separated; empty without a part.
    pub fn csv_values(&self, r: &Report, s: &StageReport) -> Vec<String> {
        let parts = (self.parts)(s);
        self.shown(r)
            .filter_map(|c| c.csv)
            .map(|(_, get)| {
                let v: Vec<String> = parts.iter().map(|p| get(s, p)).collect();
                v.join(";")
            })
            .collect()
    }
}

/// The line of a text `table` that names `stage`; empty when none does.
#[cfg(test)]
pub fn row<'a>(table: &'a str, stage: &str) -> &'a str {
    table
        .lines()
        .find(|l| l.contains(stage))
        .unwrap_or_default()
}

/// A section that is one [`PartTable`] (pooling, tool calls, models):
/// wanted when some stage has a part, its CSV columns the table's; its
/// headings and place its own.
pub struct TableSection<T: 'static> {
    table: PartTable<T>,
    /// Its headings around the table's text.
    shown: fn(&Report, String) -> Shown,
    place: Place,
}

impl<T> TableSection<T> {
    /// A section of `table` shown with the load ([`Place::Load`]).
    pub const fn new(table: PartTable<T>, shown: fn(&Report, String) -> Shown) -> Self {
        TableSection {
            table,
            shown,
            place: Place::Load,
        }
    }

    /// The section shown at `place` instead.
    pub const fn at(self, place: Place) -> Self {
        TableSection { place, ..self }
    }
}

impl<T> Section for TableSection<T> {
    fn wanted(&self, r: &Report) -> bool {
        self.table.any(r)
    }

    fn csv_columns(&self, r: &Report) -> Vec<String> {
        self.table.csv_columns(r)
    }

    fn csv_values(&self, r: &Report, s: &StageReport) -> Vec<String> {
        self.table.csv_values(r, s)
    }

    /// None when no stage has a part.
    fn shown(&self, r: &Report) -> Option<Shown> {
        Some((self.shown)(r, self.table.text(r)?))
    }

    fn place(&self) -> Place {
        self.place
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::ModelFigures;

    type C = Col<ModelFigures>;

    /// A stage with one model, a stage with two, a stage with none.
    const TABLE: PartTable<ModelFigures> = PartTable {
        parts: |s| &s.models,
        columns: &[
            C::csv_only("first", |s, _| s.name.clone()),
            C::text("Model", "name", |_, m| m.model.clone()).csv("models", |_, m| m.model.clone()),
            C::text("Share", "%", |_, m| format!("{:.0}", m.share * 100.0)),
        ],
    };

    #[test]
    fn a_part_table_shows_its_declared_columns_in_text_and_csv() {
        let model = |m: &str, share| ModelFigures {
            model: m.into(),
            share,
            ..Default::default()
        };
        let stage = |name: &str, models| StageReport {
            name: name.into(),
            models,
            ..Default::default()
        };
        let r = Report {
            stages: vec![
                stage("one", vec![model("a", 1.0)]),
                stage("two", vec![model("a", 0.25), model("b", 0.75)]),
                stage("none", vec![]),
            ],
            ..Default::default()
        };
        assert!(TABLE.any(&r));
        let text = TABLE.text(&r).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert!(
            lines[1].contains("Model") && lines[1].contains("Share"),
            "{text}"
        );
        assert!(
            lines[2].contains("name") && lines[2].contains('%'),
            "{text}"
        );
        // Under the two header lines and the rule, a row a part.
        let rows = &lines[4..lines.len() - 1];
        assert_eq!(rows.len(), 3, "{text}");
        assert!(rows[2].contains("two") && rows[2].contains("b|") && rows[2].ends_with("75"));
        assert!(!text.contains("none"), "{text}");
        assert_eq!(TABLE.csv_columns(&r), ["first", "models"]);
        assert_eq!(TABLE.csv_values(&r, &r.stages[1]), ["two;two", "a;b"]);
        assert_eq!(TABLE.csv_values(&r, &r.stages[2]), ["", ""]);
        assert!(TABLE.text(&Report::default()).is_none());
    }
}
