//! What a stage's verdict and capacity estimate read, recorded as requests
//! end: completions fitted against time per running segment, answers and
//! the backlog, when measured requests were sent and ended, what a pause
//! did to the rates, and what the stage started with.

use std::collections::BTreeSet;
use std::time::Duration;

use tokio::time::Instant;

use crate::client::{ErrorCategory, RequestOutcome, RequestRecord};
use crate::stats::backlog::{Backlog, Segment};
use crate::stats::verdict;

/// The evidence, as requests end.
#[derive(Debug)]
pub(super) struct VerdictEvidence {
    /// Least-squares fits of completion count against completion time, one
    /// per running segment (pauses cut the stage into segments): pooled,
    /// their slope is the completion rate without the refill after a resume.
    completion_fit: Vec<SlopeFit>,
    /// The same for answers: completions and errors the server answered.
    answer_fit: Vec<SlopeFit>,
    /// Completions of requests sent and ended in the same segment: what the
    /// capacity estimate counts (a request in flight across a pause
    /// finished while the stage clock stood still).
    pub(super) fit_completions: u64,
    /// Per segment: first and last such completion, and the first of their
    /// requests sent, stage clock.
    fit_spans: Vec<FitSpan>,
    /// What a pause does to the per-second rates (see [`PauseEffect`]).
    pub(super) pause_effect: PauseEffect,
    /// Running segments of the stage clock and their steady counts.
    pub(super) segments: Vec<Segment>,
    /// Requests due but not answered, time-weighted over the stage clock.
    pub(super) backlog: Backlog,
    /// Requests due that the client has not sent yet (open loop, set by the
    /// engine: a concurrency cap or a late client holds them).
    pub(super) client_queue: u64,
    /// When the stage stopped sending (its end, before any drain).
    pub(super) stopped_at: Option<Instant>,
    /// The cap on requests in flight, if any (for the verdict's words).
    pub(super) in_flight_cap: Option<u64>,
    /// The run's `--max-concurrency`, if set.
    pub(super) max_concurrency: Option<u64>,
    /// Requests of the stage before still in flight at this one's start,
    /// and when the last of them ended (None: not yet).
    pub(super) inherited: Option<(u64, Option<Instant>)>,
    /// Answers inside the window; errors answered and not.
    pub(super) answers: u64,
    pub(super) answered_errors: u64,
    pub(super) unanswered_errors: u64,
    pub(super) first_measured_sent: Option<Instant>,
    pub(super) first_measured_end: Option<Instant>,
    pub(super) last_measured_end: Option<Instant>,
    /// Quarter-seconds (stage clock) in which measured requests completed.
    busy_quarters: BTreeSet<u64>,
    /// What earlier stages say about the server (unloaded latency, capacity).
    pub(super) reference: verdict::Reference,
    /// Requests in flight when the stage ended and cancelled them (seen at
    /// the first incomplete record): what the verdict and the last point of
    /// the series use, not the zero left after the cancellation.
    pub(super) in_flight_at_end: Option<u64>,
}

impl Default for VerdictEvidence {
    fn default() -> Self {
        VerdictEvidence {
            completion_fit: vec![SlopeFit::default()],
            answer_fit: vec![SlopeFit::default()],
            fit_completions: 0,
            fit_spans: Vec::new(),
            pause_effect: PauseEffect::default(),
            segments: vec![Segment::default()],
            backlog: Backlog::default(),
            client_queue: 0,
            stopped_at: None,
            in_flight_cap: None,
            max_concurrency: None,
            inherited: None,
            answers: 0,
            answered_errors: 0,
            unanswered_errors: 0,
            first_measured_sent: None,
            first_measured_end: None,
            last_measured_end: None,
            busy_quarters: BTreeSet::new(),
            reference: verdict::Reference::default(),
            in_flight_at_end: None,
        }
    }
}

impl VerdictEvidence {
    /// The stage clock stopped at `at_s`: the running segment ends there.
    pub(super) fn paused(&mut self, at_s: f64) {
        if let Some(seg) = self.segments.last_mut() {
            seg.end_s = Some(at_s);
        }
    }

    /// The stage clock runs again at `now` (`at_s` on it): a new segment.
    pub(super) fn resumed(&mut self, now: Instant, at_s: f64) {
        self.segments.push(Segment {
            start_s: at_s,
            ..Default::default()
        });
        self.completion_fit.push(SlopeFit::default());
        self.answer_fit.push(SlopeFit::default());
        self.pause_effect.resumed(now);
    }

    /// Sending stopped at `at` (`at_s` on the stage clock).
    pub(super) fn stopped(&mut self, at: Instant, at_s: f64) {
        self.client_queue = 0;
        self.stopped_at = Some(at);
        if let Some(seg) = self.segments.last_mut() {
            seg.end_s.get_or_insert(at_s);
        }
    }

    /// An errored request: answered by the server, or not at all (one that
    /// never left llmsweep is neither: the self-check counts it).
    pub(super) fn on_error(&mut self, r: &RequestRecord) {
        if never_left(r) {
            return;
        }
        if got_no_answer(r) {
            self.unanswered_errors += 1;
        } else {
            self.answered_errors += 1;
        }
    }

    /// An answer inside the window: evidence for the verdict's backlog.
    pub(super) fn count_answer(&mut self, segment: Option<usize>, t_end: f64, completed: bool) {
        self.answers += 1;
        let Some(k) = segment else {
            return;
        };
        let fit = &mut self.answer_fit[k];
        let y = fit.n + 1.0;
        fit.add(t_end, y);
        let seg = &mut self.segments[k];
        if seg.first_answer_s.is_none() {
            seg.first_answer_s = Some(t_end);
        }
        self.backlog.count_answer(t_end, completed);
    }

    /// A measured completion ended at `t_end` (stage clock).
    pub(super) fn on_measured(&mut self, r: &RequestRecord, t_end: f64) {
        self.busy_quarters.insert((t_end * 4.0) as u64);
        let min = |t: Option<Instant>, x: Instant| Some(t.map_or(x, |t| t.min(x)));
        self.first_measured_end = min(self.first_measured_end, r.ended_at);
        self.first_measured_sent = min(self.first_measured_sent, r.sent_at);
        self.last_measured_end = Some(
            self.last_measured_end
                .map_or(r.ended_at, |t| t.max(r.ended_at)),
        );
    }

    /// A measured completion in segment `k`, sent at `t_sent` and ended at
    /// `t_end` (stage clock): evidence for the capacity fit.
    pub(super) fn fit_completion(&mut self, k: usize, t_sent: f64, t_end: f64) {
        self.fit_completions += 1;
        let fit = &mut self.completion_fit[k];
        let y = fit.n + 1.0;
        fit.add(t_end, y);
        if self.fit_spans.len() <= k {
            self.fit_spans.resize(k + 1, FitSpan::default());
        }
        self.fit_spans[k].add(t_sent, t_end);
    }

    /// The completion rate within the segments (pooled fits).
    pub(super) fn completion_slope(&self) -> Option<f64> {
        pooled_slope(&self.completion_fit)
    }

    /// The answer rate within the segments.
    pub(super) fn answer_slope(&self) -> Option<f64> {
        pooled_slope(&self.answer_fit)
    }

    /// Over the segments with fitted completions: seconds from each first
    /// completion to its last, and from each first send to its last
    /// completion, summed; None without any.
    pub(super) fn spans(&self) -> Option<((f64, u64), f64)> {
        let (span_s, sent_to_end_s, spans) = self
            .fit_spans
            .iter()
            .filter_map(FitSpan::seconds)
            .fold((0.0, 0.0, 0u64), |(t, w, n), (span, took)| {
                (t + span, w + took, n + 1)
            });
        (spans > 0).then_some(((span_s, spans), sent_to_end_s))
    }

    /// Quarter-seconds in which measured requests completed.
    pub(super) fn busy_quarters(&self) -> u64 {
        self.busy_quarters.len() as u64
    }
}

/// One running segment's completions counted for the capacity fit: the
/// first and last to end, and the first of their requests sent (stage clock).
#[derive(Debug, Clone, Copy, Default)]
struct FitSpan {
    first_sent: Option<f64>,
    ends: Option<(f64, f64)>,
}

/// A running least-squares fit of y against x (here: completions so far
/// against completion time). Its slope is the steady completion rate: the
/// ramp before the first completion does not count, requests cut off at the
/// end do not count, and completions that come in lock-step bursts (a full
/// batch of equal-length outputs finishing together) give the rate between
/// bursts, where a first-to-last average would count a whole burst too many.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct SlopeFit {
    n: f64,
    sx: f64,
    sy: f64,
    sxx: f64,
    sxy: f64,
}

/// The slope of several fits pooled (each with its own intercept): the
/// rate within the segments, without the gaps between them. None with
/// fewer than 3 points in all, or when no segment spans any time.
fn pooled_slope(fits: &[SlopeFit]) -> Option<f64> {
    let (mut sxx, mut sxy, mut n) = (0.0, 0.0, 0.0);
    for f in fits.iter().filter(|f| f.n >= 2.0) {
        sxx += f.sxx - f.sx * f.sx / f.n;
        sxy += f.sxy - f.sx * f.sy / f.n;
        n += f.n;
    }
    (n >= 3.0 && sxx > 1e-12 * n).then(|| sxy / sxx)
}

/// The request failed in llmsweep itself, out of file descriptors or local
/// ports (`client_limit`): the server never saw it, so it is no evidence
/// of the server's answers, errors or silence.
pub(super) fn never_left(r: &RequestRecord) -> bool {
    matches!(
        r.outcome,
        RequestOutcome::Errored {
            category: ErrorCategory::ClientLimit,
            ..
        }
    )
}

/// An errored request the server never answered: it could not connect, or
/// it timed out before any output. A stream that began and then stalled
/// until the timeout was answered (the server is faulty there, not out of
/// capacity), so it counts with the answered errors, not as overload.
pub(super) fn got_no_answer(r: &RequestRecord) -> bool {
    match &r.outcome {
        RequestOutcome::Errored { category, .. } => match category {
            ErrorCategory::Connect => true,
            ErrorCategory::Timeout => r.chunks.is_empty(),
            _ => false,
        },
        _ => false,
    }
}

/// What a pause does to the per-second rates of the measured window. The
/// stage clock stops, but the server goes on with the requests in flight:
/// their completions fall in no running second, and after the resume the
/// first new completions come a latency later. A flood with a deep queue
/// completed at full speed through a 6 s pause, and "Per Second" read
/// 28.87 on a server that holds 20. The rates leave out the completions
/// that ended in a pause and the time from each resume to the next
/// completion (at once for a queue that is still deep; a latency for a
/// pipeline the pause drained).
#[derive(Debug, Default)]
pub(super) struct PauseEffect {
    /// Measured completions that ended in a pause, and their tokens.
    pub(super) requests: u64,
    pub(super) output: u64,
    pub(super) prompt: u64,
    /// From a resume to the next completion.
    refills: Vec<(Instant, Instant)>,
    resumed_at: Option<Instant>,
}

impl FitSpan {
    fn add(&mut self, t_sent: f64, t_end: f64) {
        self.first_sent = Some(self.first_sent.map_or(t_sent, |t| t.min(t_sent)));
        self.ends = Some(
            self.ends
                .map_or((t_end, t_end), |(a, b)| (a.min(t_end), b.max(t_end))),
        );
    }

    /// Seconds from the first completion to the last, and from the first
    /// request sent to the last completion; None without completions.
    fn seconds(&self) -> Option<(f64, f64)> {
        let (first_end, last_end) = self.ends?;
        let first_sent = self.first_sent.unwrap_or(first_end);
        Some((last_end - first_end, last_end - first_sent))
    }
}

impl SlopeFit {
    fn add(&mut self, x: f64, y: f64) {
        self.n += 1.0;
        self.sx += x;
        self.sy += y;
        self.sxx += x * x;
        self.sxy += x * y;
    }
}

impl PauseEffect {
    pub(super) fn resumed(&mut self, now: Instant) {
        self.resumed_at = Some(now);
    }

    /// A completion while the stage clock ran.
    pub(super) fn answered(&mut self, at: Instant) {
        if let Some(from) = self.resumed_at.take() {
            self.refills.push((from, at.max(from)));
        }
    }

    pub(super) fn ended_in_pause(&mut self, r: &RequestRecord) {
        self.requests += 1;
        self.output = self.output.saturating_add(r.output_tokens);
        self.prompt = self.prompt.saturating_add(r.prompt_tokens);
    }

    /// Seconds of refill inside `[from, to]` (one still waiting lasts to
    /// `to`).
    pub(super) fn refill_within(&self, from: Instant, to: Instant) -> f64 {
        self.refills
            .iter()
            .copied()
            .chain(self.resumed_at.map(|r| (r, to.max(r))))
            .map(|(a, b)| b.min(to).saturating_duration_since(a.max(from)))
            .sum::<Duration>()
            .as_secs_f64()
    }
}
