//! Number, duration and line formatting shared by the dashboard's widgets.

use ratatui::text::{Line, Span};

pub(super) fn f(v: Option<f64>, prec: usize) -> Option<String> {
    v.map(|x| format!("{x:.prec$}"))
}

/// Latency in ms with precision by size: 0.95, 12.5, 1234.
pub(super) fn ms(v: Option<f64>) -> Option<String> {
    v.map(|x| {
        if x >= 1000.0 {
            format!("{x:.0}")
        } else if x >= 10.0 {
            format!("{x:.1}")
        } else {
            format!("{x:.2}")
        }
    })
}

pub(super) fn fmt_duration(s: f64) -> String {
    let s = s.max(0.0) as u64;
    if s >= 3600 {
        format!("{}:{:02}:{:02}", s / 3600, (s / 60) % 60, s % 60)
    } else {
        format!("{:02}:{:02}", s / 60, s % 60)
    }
}

/// Cuts a line to `width` columns, ending in `…` when cut.
pub(super) fn fit_line(line: Line<'static>, width: u16) -> Line<'static> {
    let width = width as usize;
    let total: usize = line.spans.iter().map(|s| s.content.chars().count()).sum();
    if total <= width {
        return line;
    }
    let mut left = width.saturating_sub(1);
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
    spans.push(Span::raw("…"));
    Line::from(spans)
}
