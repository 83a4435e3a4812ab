//! The stage clock cut into running segments by pauses, and the stage's
//! backlog over it: requests due but not yet answered (in flight at the
//! server, plus any the client could not send on time), time-weighted.
//!
//! Why time-weighted: the number in flight is an integer that changes on
//! every send and every completion. A once-a-second sample of it read 1.0
//! where the true mean was 1.14 (a fast server at 15 req/s), and a rate
//! derived from it by Little's law judged a stage that kept up saturated.
//! Here the count is integrated over time on every change, into cells of
//! 0.1 s of the stage clock (coarsened by halves on very long stages), so a
//! cell's mean is exact whatever the request rate.

/// Seconds of stage clock per cell at first.
const FIRST_WIDTH_S: f64 = 0.1;
/// More cells than this and neighbouring cells are merged (width doubles).
const MAX_CELLS: usize = 8192;

#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct Cell {
    /// ∫ in flight dt over the cell, request·seconds.
    in_flight: f64,
    /// ∫ waiting in the client dt.
    queued: f64,
    /// Running (not paused) seconds covered.
    dur: f64,
    /// Requests sent, completed and answered (completed or answered with
    /// an error) in the cell: what the steady rates count.
    sent: u32,
    completed: u32,
    answered: u32,
}

/// One cell's time-weighted means.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BacklogPoint {
    /// Middle of the cell, stage-clock seconds.
    pub t_s: f64,
    pub in_flight: f64,
    pub queued: f64,
    /// Requests answered (completed or errored with an answer) in the cell.
    pub answered: f64,
}

impl BacklogPoint {
    pub fn total(&self) -> f64 {
        self.in_flight + self.queued
    }
}

#[derive(Debug, Clone)]
pub struct Backlog {
    width: f64,
    cells: Vec<Cell>,
}

impl Default for Backlog {
    fn default() -> Self {
        Backlog {
            width: FIRST_WIDTH_S,
            cells: Vec::new(),
        }
    }
}

impl Backlog {
    /// `in_flight` and `queued` held from `from_s` to `to_s` (stage clock).
    pub fn add(&mut self, from_s: f64, to_s: f64, in_flight: u64, queued: u64) {
        // NaN fails both tests: nothing to add.
        if to_s.partial_cmp(&from_s) != Some(std::cmp::Ordering::Greater) || from_s < 0.0 {
            return;
        }
        while to_s / self.width > MAX_CELLS as f64 {
            self.coarsen();
        }
        let mut t = from_s;
        while t < to_s {
            let mut i = (t / self.width) as usize;
            // Rounding can put t at its cell's end: it belongs to the next.
            if (i + 1) as f64 * self.width <= t {
                i += 1;
            }
            let cell_end = (i + 1) as f64 * self.width;
            let upto = to_s.min(cell_end);
            let dt = upto - t;
            if self.cells.len() <= i {
                self.cells.resize(i + 1, Cell::default());
            }
            let c = &mut self.cells[i];
            c.in_flight += in_flight as f64 * dt;
            c.queued += queued as f64 * dt;
            c.dur += dt;
            t = upto;
        }
    }

    fn coarsen(&mut self) {
        let merged = self
            .cells
            .chunks(2)
            .map(|p| {
                p.iter().fold(Cell::default(), |a, c| Cell {
                    in_flight: a.in_flight + c.in_flight,
                    queued: a.queued + c.queued,
                    dur: a.dur + c.dur,
                    sent: a.sent.saturating_add(c.sent),
                    completed: a.completed.saturating_add(c.completed),
                    answered: a.answered.saturating_add(c.answered),
                })
            })
            .collect();
        self.cells = merged;
        self.width *= 2.0;
    }

    pub fn width(&self) -> f64 {
        self.width
    }

    fn cell_at(&mut self, t_s: f64) -> Option<&mut Cell> {
        if !(t_s >= 0.0 && t_s.is_finite()) {
            return None;
        }
        while t_s / self.width >= MAX_CELLS as f64 {
            self.coarsen();
        }
        let i = (t_s / self.width) as usize;
        if self.cells.len() <= i {
            self.cells.resize(i + 1, Cell::default());
        }
        self.cells.get_mut(i)
    }

    /// A request sent at `t_s` (stage clock).
    pub fn count_sent(&mut self, t_s: f64) {
        if let Some(c) = self.cell_at(t_s) {
            c.sent = c.sent.saturating_add(1);
        }
    }

    /// An answer at `t_s`: a completion, or an answered error.
    pub fn count_answer(&mut self, t_s: f64, completed: bool) {
        if let Some(c) = self.cell_at(t_s) {
            c.answered = c.answered.saturating_add(1);
            if completed {
                c.completed = c.completed.saturating_add(1);
            }
        }
    }

    /// Sent, completed and answered within `[from_s, to_s]`; a cell cut by
    /// an end counts in proportion to the part inside.
    pub fn counts(&self, from_s: f64, to_s: f64) -> (f64, f64, f64) {
        let mut n = (0.0, 0.0, 0.0);
        for (i, c) in self.cells.iter().enumerate() {
            let (a, b) = (i as f64 * self.width, (i + 1) as f64 * self.width);
            let inside = (b.min(to_s) - a.max(from_s)).max(0.0) / self.width;
            if inside > 0.0 {
                n.0 += inside * c.sent as f64;
                n.1 += inside * c.completed as f64;
                n.2 += inside * c.answered as f64;
            }
        }
        n
    }

    /// Cells mostly covered by running time whose middle lies in
    /// `[from_s, to_s]`, as time-weighted means.
    pub fn points(&self, from_s: f64, to_s: f64) -> Vec<BacklogPoint> {
        self.cells
            .iter()
            .enumerate()
            .filter(|(_, c)| c.dur >= 0.5 * self.width)
            .map(|(i, c)| BacklogPoint {
                t_s: (i as f64 + 0.5) * self.width,
                in_flight: c.in_flight / c.dur,
                queued: c.queued / c.dur,
                answered: c.answered as f64,
            })
            .filter(|p| p.t_s >= from_s && p.t_s <= to_s)
            .collect()
    }

    /// Time-weighted mean in flight over the cells that lie inside any of
    /// `ranges` (stage clock); None when they cover no time.
    pub fn mean_in_flight(&self, ranges: &[(f64, f64)]) -> Option<f64> {
        let (mut area, mut dur) = (0.0, 0.0);
        for (i, c) in self.cells.iter().enumerate() {
            let (a, b) = (i as f64 * self.width, (i + 1) as f64 * self.width);
            if ranges.iter().any(|(f, t)| a >= *f - 1e-9 && b <= *t + 1e-9) {
                area += c.in_flight;
                dur += c.dur;
            }
        }
        (dur > 0.0).then(|| area / dur)
    }
}

/// A stretch of running time between the stage start or a resume and a
/// pause or the end of sending. Its steady window opens once its pipeline
/// has filled (`stats::policy::FILL_QUANTILE`): by then a server that keeps
/// up answers as fast as it is sent to (from the first answer alone, the
/// faster requests' completions would be counted against all the sends,
/// and a stage that kept up read 6 % low). The achieved rate and the
/// backlog's growth are both read over that one window. Requests in flight
/// across a pause belong to no segment's rates.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Segment {
    /// Stage-clock seconds at which it began.
    pub start_s: f64,
    /// Stage-clock seconds at which it ended (a pause, or sending stopped).
    pub end_s: Option<f64>,
    /// The first answer to a request sent in this segment.
    pub first_answer_s: Option<f64>,
}

impl Segment {
    /// Its steady part: from its first answer plus `fill_s` (the time its
    /// pipeline takes to fill; never past its middle, never before the
    /// first answer) to its end (`now_s` for a segment still running);
    /// None before the first answer.
    pub fn steady(&self, now_s: f64, fill_s: f64) -> Option<(f64, f64)> {
        self.steady_window(now_s, fill_s).map(|w| (w.from, w.to))
    }

    /// [`Segment::steady`], and whether the pipeline had filled where the
    /// window opens (the middle did not cut the wait short).
    pub fn steady_window(&self, now_s: f64, fill_s: f64) -> Option<SteadyWindow> {
        let first = self.first_answer_s?;
        let to = self.end_s.unwrap_or(now_s);
        let middle = self.start_s + 0.5 * (to - self.start_s);
        let filled_at = first + fill_s.max(0.0);
        let from = first.max(filled_at.min(middle));
        (to > from).then_some(SteadyWindow {
            from,
            to,
            filled: filled_at <= middle,
        })
    }
}

/// A segment's steady window (stage clock).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SteadyWindow {
    pub from: f64,
    pub to: f64,
    /// The pipeline had filled where it opens.
    pub filled: bool,
}

/// The steady figures of a stage, over all its segments.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Steady {
    pub seconds: f64,
    pub sent: f64,
    pub completed: f64,
    pub answered: f64,
}

impl Steady {
    /// Over the steady parts of `segments` (see [`Segment::steady`]).
    pub fn of(segments: &[Segment], backlog: &Backlog, now_s: f64, settle_s: f64) -> Steady {
        let mut s = Steady::default();
        for seg in segments {
            if let Some((a, b)) = seg.steady(now_s, settle_s) {
                let (sent, completed, answered) = backlog.counts(a, b);
                s.seconds += b - a;
                s.sent += sent;
                s.completed += completed;
                s.answered += answered;
            }
        }
        s
    }

    pub fn per_s(&self, n: f64) -> f64 {
        if self.seconds > 0.0 {
            n / self.seconds
        } else {
            0.0
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cells_hold_exact_time_weighted_means() {
        let mut b = Backlog::default();
        // 1 in flight for 0.05 s, 2 for 0.05 s: the first cell's mean is 1.5;
        // a once-a-cell sample would read 1 or 2.
        b.add(0.0, 0.05, 1, 0);
        b.add(0.05, 0.1, 2, 0);
        b.add(0.1, 0.35, 3, 4);
        let p = b.points(0.0, 10.0);
        assert_eq!(p.len(), 3, "{p:?}");
        assert!((p[0].in_flight - 1.5).abs() < 1e-9);
        assert!((p[1].in_flight - 3.0).abs() < 1e-9 && (p[1].queued - 4.0).abs() < 1e-9);
        assert!((p[2].total() - 7.0).abs() < 1e-9);
        // The 0.3–0.4 cell is half covered: kept; mean over all time is exact.
        let mean = b.mean_in_flight(&[(0.0, 0.4)]).unwrap();
        assert!((mean - (0.05 + 0.1 + 0.75) / 0.35).abs() < 1e-9, "{mean}");
    }

    #[test]
    fn long_stages_coarsen_without_losing_area() {
        let mut b = Backlog::default();
        b.add(0.0, 2000.0, 5, 1);
        assert!(b.width() > FIRST_WIDTH_S);
        assert!(b.cells.len() <= MAX_CELLS);
        let mean = b.mean_in_flight(&[(0.0, 2000.0)]).unwrap();
        assert!((mean - 5.0).abs() < 1e-9);
        let p = b.points(0.0, 2000.0);
        assert!(p.iter().all(|p| (p.total() - 6.0).abs() < 1e-9));
    }

    #[test]
    fn steady_figures_count_segments_once_their_pipeline_filled() {
        // 10 req/s sent from 0 s; requests take 0.5–1.5 s (the first
        // answer at 0.5 s, median 1.0 s); pause at 5 s, resume, end at 9 s.
        let mut b = Backlog::default();
        for i in 0..90 {
            let sent = i as f64 / 10.0 + 0.05;
            b.count_sent(sent);
            let w = 0.5 + (i % 3) as f64 * 0.5;
            let seg_end = if sent < 5.0 { 5.0 } else { 9.0 };
            if sent + w <= seg_end {
                b.count_answer(sent + w, true);
            }
        }
        let segs = [
            Segment {
                start_s: 0.0,
                end_s: Some(5.0),
                first_answer_s: Some(0.55),
            },
            Segment {
                start_s: 5.0,
                end_s: None,
                first_answer_s: Some(5.55),
            },
        ];
        let s = Steady::of(&segs, &b, 9.0, 1.0);
        // 1.55–5 s and 6.55–9 s.
        assert!((s.seconds - 5.9).abs() < 1e-9, "{s:?}");
        let (sent, done) = (s.per_s(s.sent), s.per_s(s.completed));
        assert!((sent - 10.0).abs() < 0.3, "{s:?}");
        assert!(
            (done - 10.0).abs() < 0.5,
            "a stage that keeps up reads its rate: {s:?}"
        );
        // From the first answer instead, completions would read low.
        let early = Steady::of(&segs, &b, 9.0, 0.0);
        assert!(
            early.per_s(early.completed) < 0.95 * early.per_s(early.sent),
            "{early:?}"
        );
    }
}
