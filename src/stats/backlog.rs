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
}

/// One cell's time-weighted means.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BacklogPoint {
    /// Middle of the cell, stage-clock seconds.
    pub t_s: f64,
    pub in_flight: f64,
    pub queued: f64,
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
                })
            })
            .collect();
        self.cells = merged;
        self.width *= 2.0;
    }

    pub fn width(&self) -> f64 {
        self.width
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
/// pause or the end of sending. Rates are measured from the first answer to
/// a request sent in the segment (the pipeline has filled) to its end;
/// requests in flight across a pause belong to no segment's rates.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Segment {
    /// Stage-clock seconds at which it began.
    pub start_s: f64,
    /// Stage-clock seconds at which it ended (a pause, or sending stopped).
    pub end_s: Option<f64>,
    /// The first answer to a request sent in this segment.
    pub first_answer_s: Option<f64>,
    /// Sent, completed and answered (completed or answered with an error)
    /// after that first answer.
    pub sent: u64,
    pub completed: u64,
    pub answered: u64,
}

impl Segment {
    /// Its steady part: from the first answer to its end (`now_s` for a
    /// segment still running); None before the first answer.
    pub fn steady(&self, now_s: f64) -> Option<(f64, f64)> {
        let from = self.first_answer_s?;
        let to = self.end_s.unwrap_or(now_s);
        (to > from).then_some((from, to))
    }
}

/// The steady figures of a stage, over all its segments.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Steady {
    pub seconds: f64,
    pub sent: u64,
    pub completed: u64,
    pub answered: u64,
}

impl Steady {
    pub fn of(segments: &[Segment], now_s: f64) -> Steady {
        let mut s = Steady::default();
        for seg in segments {
            if let Some((a, b)) = seg.steady(now_s) {
                s.seconds += b - a;
                s.sent += seg.sent;
                s.completed += seg.completed;
                s.answered += seg.answered;
            }
        }
        s
    }

    pub fn per_s(&self, n: u64) -> f64 {
        if self.seconds > 0.0 {
            n as f64 / self.seconds
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
    fn steady_figures_add_segments_after_their_first_answer() {
        let segs = [
            Segment {
                start_s: 0.0,
                end_s: Some(5.0),
                first_answer_s: Some(1.0),
                sent: 40,
                completed: 39,
                answered: 40,
            },
            Segment {
                start_s: 5.0,
                end_s: None,
                first_answer_s: Some(6.0),
                sent: 30,
                completed: 30,
                answered: 30,
            },
            Segment {
                start_s: 9.0,
                ..Default::default()
            },
        ];
        let s = Steady::of(&segs, 9.0);
        assert_eq!(s.seconds, 7.0);
        assert_eq!((s.sent, s.completed, s.answered), (70, 69, 70));
        assert!((s.per_s(s.sent) - 10.0).abs() < 1e-9);
    }
}
