//! Text tables: GuideLLM's grouped-header table and Markdown pipe tables,
//! drawn from rows of cells (the layouts, the server's and reasoning
//! tables and `compare` fill them).

use std::fmt::Write as _;

/// A table with grouped column headers, drawn the way GuideLLM draws it:
/// `=` rules, a group row, a header row, a `-` rule, right-aligned cells
/// separated by `|`.
pub struct GroupedTable {
    /// (group, header) per column; a group spans its consecutive columns.
    pub columns: Vec<(&'static str, &'static str)>,
    pub rows: Vec<Vec<String>>,
}

impl GroupedTable {
    pub fn render(&self) -> String {
        let n = self.columns.len();
        let mut widths: Vec<usize> = (0..n)
            .map(|i| {
                let values = self
                    .rows
                    .iter()
                    .map(|r| r.get(i).map_or(0, |v| v.chars().count()));
                values
                    .chain([self.columns[i].1.chars().count()])
                    .max()
                    .unwrap_or(0)
                    + 1
            })
            .collect();
        // Groups: (label, first column, column count). Widen a group's first
        // column until its label fits.
        let mut groups: Vec<(&str, usize, usize)> = Vec::new();
        for (i, (g, _)) in self.columns.iter().enumerate() {
            match groups.last_mut() {
                Some(last) if last.0 == *g => last.2 += 1,
                _ => groups.push((g, i, 1)),
            }
        }
        for (gi, &(label, first, count)) in groups.iter().enumerate() {
            let need = label.chars().count() + usize::from(gi > 0) + 2;
            let have: usize = widths[first..first + count].iter().sum::<usize>();
            if need > have {
                widths[first] += need - have;
            }
        }
        let total: usize = widths.iter().sum::<usize>() + n - 1;
        let mut s = String::new();
        let _ = writeln!(s, "{}", "=".repeat(total));
        let mut group_row = String::new();
        for (gi, &(label, first, count)) in groups.iter().enumerate() {
            let span: usize = widths[first..first + count].iter().sum();
            let text = if gi == 0 {
                label.to_string()
            } else {
                format!(" {label}")
            };
            let pipes = if gi + 1 == groups.len() {
                count - 1
            } else {
                count
            };
            let _ = write!(group_row, "{text:<span$}{}", "|".repeat(pipes));
        }
        let _ = writeln!(s, "{}", group_row.trim_end());
        let cells = |vals: Vec<String>| -> String {
            vals.iter()
                .zip(&widths)
                .map(|(v, w)| format!("{v:>w$}"))
                .collect::<Vec<_>>()
                .join("|")
        };
        let _ = writeln!(
            s,
            "{}",
            cells(self.columns.iter().map(|c| c.1.to_string()).collect())
        );
        let _ = writeln!(
            s,
            "{}",
            widths
                .iter()
                .map(|w| "-".repeat(*w))
                .collect::<Vec<_>>()
                .join("|")
        );
        for r in &self.rows {
            let _ = writeln!(s, "{}", cells(r.clone()));
        }
        let _ = writeln!(s, "{}", "=".repeat(total));
        s
    }
}

/// A Markdown pipe table; columns from `numeric_from` on are right-aligned.
pub fn pipe_table(headers: &[&str], rows: &[Vec<String>], numeric_from: usize) -> String {
    let w: Vec<usize> = (0..headers.len())
        .map(|i| {
            rows.iter()
                .map(|r| r[i].chars().count())
                .chain([headers[i].chars().count(), 3])
                .max()
                .unwrap_or(3)
        })
        .collect();
    let line = |cells: Vec<String>| format!("| {} |", cells.join(" | "));
    // Cells may quote a server (a model id): none can end its cell or line.
    let rows: Vec<Vec<String>> = rows
        .iter()
        .map(|r| r.iter().map(|c| crate::safe::markdown(c)).collect())
        .collect();
    let rows = &rows;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{}",
        line(
            headers
                .iter()
                .enumerate()
                .map(|(i, h)| format!("{h:<w$}", w = w[i]))
                .collect()
        )
    );
    let _ = writeln!(
        s,
        "|{}|",
        w.iter()
            .enumerate()
            .map(|(i, w)| if i >= numeric_from {
                format!("{}:", "-".repeat(w + 1))
            } else {
                format!(":{}", "-".repeat(w + 1))
            })
            .collect::<Vec<_>>()
            .join("|")
    );
    for r in rows {
        let _ = writeln!(
            s,
            "{}",
            line(
                r.iter()
                    .enumerate()
                    .map(|(i, c)| if i >= numeric_from {
                        format!("{c:>w$}", w = w[i])
                    } else {
                        format!("{c:<w$}", w = w[i])
                    })
                    .collect()
            )
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grouped_tables_line_up_like_guidellm() {
        let t = GroupedTable {
            columns: vec![
                ("Metadata", "Benchmark"),
                ("Requests Made", "Comp"),
                ("Requests Made", "Inc"),
            ],
            rows: vec![vec!["synchronous".into(), "1".into(), "512".into()]],
        };
        let s = t.render();
        let lines: Vec<&str> = s.lines().collect();
        // Every line of the table has the same width.
        let w = lines[0].len();
        for l in &lines[2..] {
            assert_eq!(l.len(), w, "{s}");
        }
        assert!(
            lines[1].starts_with("Metadata") && lines[1].contains("| Requests Made"),
            "{s}"
        );
        assert!(
            lines[2].ends_with("| Inc") || lines[2].ends_with("|  Inc"),
            "{s}"
        );
        assert!(lines[4].starts_with(" synchronous|"), "{s}");
    }
}
