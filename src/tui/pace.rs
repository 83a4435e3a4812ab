//! When the dashboard draws: pure, so the decision is tested on its own.
//!
//! The dashboard draws when something it shows has changed (a snapshot, the
//! server view, the GPU panel), never faster than its frame rate on average.
//! It used to draw on a fixed 4 Hz timer instead, reading whatever snapshot
//! was there: with the engine publishing at 4 Hz too, the two clocks ran in
//! step, and whenever a snapshot came a little late the timer drew the old
//! one twice and the late one never (seen as a 500 ms gap between screen
//! changes every few seconds). Drawing on arrival shows every snapshot.

use std::time::{Duration, Instant};

/// The dashboard's frame budget: at most one frame per `frame` on average
/// (a generic cell rate: each frame books the next slot a `frame` later),
/// with half a frame of tolerance so that a snapshot arriving a little early
/// or late against the slots is drawn at once instead of one frame later.
/// Two frames are never closer than half a `frame`.
#[derive(Debug, Clone)]
pub struct Pacer {
    frame: Duration,
    /// The next frame's slot; a frame is due from half a frame before it.
    slot: Option<Instant>,
    /// Something changed since the last frame.
    dirty: bool,
}

impl Pacer {
    pub fn new(fps: f64) -> Pacer {
        Pacer {
            frame: Duration::from_secs_f64(1.0 / fps),
            slot: None,
            dirty: false,
        }
    }

    /// Something shown has changed: a frame is wanted.
    pub fn changed(&mut self) {
        self.dirty = true;
    }

    /// When the next frame is to be drawn: None while nothing changed, else
    /// now or the earliest moment the frame budget allows.
    pub fn due(&self, now: Instant) -> Option<Instant> {
        if !self.dirty {
            return None;
        }
        let earliest = self
            .slot
            .map(|s| s.checked_sub(self.frame / 2).unwrap_or(s))
            .unwrap_or(now);
        Some(earliest.max(now))
    }

    /// A frame was drawn at `now`: it books the next slot.
    pub fn drawn(&mut self, now: Instant) {
        self.dirty = false;
        let slot = self.slot.map_or(now, |s| s.max(now));
        self.slot = Some(slot + self.frame);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Which of `arrivals` (ms from the start, one snapshot each) are ever
    /// on the screen when the dashboard draws as the pacer says, and when.
    fn shown(fps: f64, arrivals: &[u64]) -> Vec<(usize, u64)> {
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        let mut pacer = Pacer::new(fps);
        let mut frames = Vec::new();
        let mut next = 0;
        // Step a simulated clock a millisecond at a time.
        let end = arrivals.last().copied().unwrap_or(0) + 2_000;
        for ms in 0..=end {
            let now = at(ms);
            while next < arrivals.len() && arrivals[next] <= ms {
                pacer.changed();
                next += 1;
            }
            if pacer.due(now).is_some_and(|d| d <= now) {
                pacer.drawn(now);
                frames.push((next - 1, ms));
            }
        }
        frames
    }

    /// Snapshots every 250 ms with a few ms of jitter, as the engine
    /// publishes them, a pseudo-random walk of lateness.
    fn jittered(n: u64, jitter_ms: u64) -> Vec<u64> {
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        (1..=n)
            .map(|k| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                k * 250 + x % (jitter_ms + 1)
            })
            .collect()
    }

    #[test]
    fn every_snapshot_at_the_frame_rate_is_drawn_as_it_arrives() {
        // The old fixed 4 Hz timer, beating against these, drew some
        // snapshot twice and the next one never.
        for jitter in [0, 5, 30, 100] {
            let arrivals = jittered(400, jitter);
            let frames = shown(4.0, &arrivals);
            let drawn: Vec<usize> = frames.iter().map(|f| f.0).collect();
            assert_eq!(
                drawn,
                (0..arrivals.len()).collect::<Vec<_>>(),
                "jitter {jitter} ms: each snapshot once, none skipped"
            );
            for (i, ms) in frames {
                assert!(
                    ms - arrivals[i] <= 125,
                    "jitter {jitter} ms: snapshot {i} drawn {} ms late",
                    ms - arrivals[i]
                );
            }
        }
    }

    #[test]
    fn snapshots_faster_than_the_frame_rate_are_drawn_at_the_frame_rate() {
        // 50 ms apart for 10 s at 4 fps: about 40 frames, the newest shown.
        let arrivals: Vec<u64> = (1..=200).map(|k| k * 50).collect();
        let frames = shown(4.0, &arrivals);
        assert!((38..=42).contains(&frames.len()), "{} frames", frames.len());
        assert!(frames.windows(2).all(|w| w[1].1 - w[0].1 >= 125));
        assert_eq!(frames.last().map(|f| f.0), Some(arrivals.len() - 1));
    }

    #[test]
    fn nothing_changed_nothing_drawn() {
        let mut pacer = Pacer::new(4.0);
        let now = Instant::now();
        assert_eq!(pacer.due(now), None);
        pacer.changed();
        assert_eq!(pacer.due(now), Some(now));
        pacer.drawn(now);
        assert_eq!(pacer.due(now), None);
        // A change right after a frame waits for half a frame at least.
        pacer.changed();
        assert_eq!(pacer.due(now), Some(now + Duration::from_millis(125)));
    }

    #[test]
    fn a_slow_frame_rate_is_kept() {
        // --fps 1 with 4 Hz snapshots: about one frame a second.
        let arrivals: Vec<u64> = (1..=80).map(|k| k * 250).collect();
        let frames = shown(1.0, &arrivals);
        assert!((19..=22).contains(&frames.len()), "{} frames", frames.len());
    }
}
