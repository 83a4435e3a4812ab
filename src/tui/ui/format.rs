//! Number, duration and line formatting shared by the dashboard's widgets.

use ratatui::text::{Line, Span};

use crate::report::console::cut_between_words;

/// Latency in ms with precision by size: 0.95, 12.5, 1234.
pub(super) fn ms(v: Option<f64>) -> Option<String> {
    v.map(crate::report::stage_table::ms_by_size)
}

pub(super) fn fmt_duration(s: f64) -> String {
    let s = s.max(0.0) as u64;
    if s >= 3600 {
        format!("{}:{:02}:{:02}", s / 3600, (s / 60) % 60, s % 60)
    } else {
        format!("{:02}:{:02}", s / 60, s % 60)
    }
}

/// `text` cut to `width` columns between words, ending in ` …` when cut
/// (issue 34 saw `the serve…` on the warning line).
pub(super) fn fit_words(text: &str, width: usize) -> String {
    crate::report::console::fit_words(text, width)
}

/// Cuts a line to `width` columns between words, ending in ` …` when cut;
/// a single word wider than `width` is cut, ending in `…`.
pub(super) fn fit_line(line: Line<'static>, width: u16) -> Line<'static> {
    let width = width as usize;
    let chars: Vec<char> = line.spans.iter().flat_map(|s| s.content.chars()).collect();
    let (mut left, tail) = match cut_between_words(&chars, width) {
        None => return line,
        Some(0) => (width.saturating_sub(1), "…"),
        Some(n) => (n, " …"),
    };
    let mut spans = Vec::new();
    for s in line.spans {
        if left == 0 {
            break;
        }
        let n = s.content.chars().count();
        if n <= left {
            left -= n;
            spans.push(s);
        } else {
            let cut: String = s.content.chars().take(left).collect();
            spans.push(Span::styled(cut, s.style));
            left = 0;
        }
    }
    spans.push(Span::raw(tail));
    Line::from(spans)
}

/// A legend of `items` (each a mark and its words) in `width` columns:
/// whole items while they fit, then ` …` when some are left out; an item
/// is never cut (issue 34 saw `• other █…`).
pub(super) fn fit_items(items: Vec<Vec<Span<'static>>>, width: u16) -> Line<'static> {
    let width = width as usize;
    let len = |item: &Vec<Span>| {
        item.iter()
            .map(|s| s.content.chars().count())
            .sum::<usize>()
    };
    let total: usize = items.iter().map(len).sum();
    if total <= width {
        return Line::from(items.into_iter().flatten().collect::<Vec<_>>());
    }
    let mut used = 0;
    let mut spans = Vec::new();
    for item in items {
        let n = len(&item);
        if used + n + 2 > width {
            break;
        }
        used += n;
        spans.extend(item);
    }
    spans.push(Span::raw(if used == 0 { "…" } else { "… " }));
    Line::from(spans)
}

/// A sparkline's bars: the last `width` points' values times `scale` (its
/// bars are whole numbers), 0 where a point has none.
pub fn spark_bars<P>(
    series: &std::collections::VecDeque<P>,
    width: usize,
    scale: f64,
    value: impl Fn(&P) -> Option<f64>,
) -> Vec<u64> {
    series
        .iter()
        .skip(series.len().saturating_sub(width))
        .map(|p| (value(p).unwrap_or(0.0) * scale).round().max(0.0) as u64)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(l: &Line) -> String {
        l.spans.iter().map(|s| s.content.as_ref()).collect()
    }

    #[test]
    fn spark_bars_are_the_last_points_scaled_and_rounded() {
        let series: std::collections::VecDeque<Option<f64>> =
            [Some(9.0), Some(0.25), None, Some(1.26), Some(-1.0)].into();
        assert_eq!(spark_bars(&series, 4, 10.0, |p| *p), [3, 0, 13, 0]);
        assert_eq!(spark_bars(&series, 9, 1.0, |p| *p).len(), 5);
    }

    #[test]
    fn lines_are_cut_between_words() {
        let w = "! the data's 1000 prompts ran out: each respelled at its start so the server";
        let cut = fit_words(w, 70);
        assert_eq!(
            cut,
            "! the data's 1000 prompts ran out: each respelled at its start so …"
        );
        assert!(cut.chars().count() <= 70);
        let line = fit_line(Line::from(vec![Span::raw("stage 3 · "), Span::raw(w)]), 40);
        assert_eq!(text(&line), "stage 3 · ! the data's 1000 prompts …");
        // Separators do not end a cut line; a line that fits is kept.
        assert_eq!(fit_words("a · b · ccccc", 8), "a · b …");
        assert_eq!(fit_words("fits", 4), "fits");
        // One word wider than the room is cut as before.
        assert_eq!(fit_words("constant@28.61", 8), "constan…");
    }

    #[test]
    fn legends_keep_whole_items() {
        let items = |names: &[&str]| {
            names
                .iter()
                .map(|n| vec![Span::raw("━"), Span::raw(format!("{n} "))])
                .collect::<Vec<_>>()
        };
        let all = items(&["TTFT p50", "p99", "• other", "saturated"]);
        assert_eq!(
            text(&fit_items(all.clone(), 60)),
            "━TTFT p50 ━p99 ━• other ━saturated "
        );
        assert_eq!(text(&fit_items(all, 24)), "━TTFT p50 ━p99 … ");
    }
}
