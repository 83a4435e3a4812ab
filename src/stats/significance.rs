//! Whether a difference between two runs is larger than their noise (pure):
//! a latency percentile's change by a seeded bootstrap over the two stages'
//! histograms, the answer's from both runs' intervals.

use rand::rngs::StdRng;
use rand::SeedableRng as _;
use rand_distr::{Beta, Distribution as _};

use super::dist::Dist;

/// Bootstrap draws per comparison: enough for the tails of a gate's
/// interval over a dozen stages (0.2 % each side: 8 draws).
pub const DRAWS: usize = 4000;

/// A change is significant when its interval at 1 − ALPHA (95 %) excludes
/// zero. A gate over k stages asks each for ALPHA / k (Bonferroni), so a
/// run against itself fails a bound at most 5 % of the time, not 5 % per
/// stage.
pub const ALPHA: f64 = 0.05;

/// The seed every comparison starts from: the same two reports give the
/// same words every time.
pub const SEED: u64 = 0x6c6c_6d73_7765_6570;

/// Fewer samples than this on either side: too few to tell.
pub const MIN_SAMPLES: u64 = 10;

/// A distribution the bootstrap draws from: a stage's histogram and how
/// many independent samples it stands for (requests: the gaps of one
/// request's stream are not independent of each other, so an ITL
/// histogram of 20,000 gaps from 100 requests counts as 100).
#[derive(Debug, Clone)]
pub struct Sample {
    /// The histogram's buckets: value (ms) and the count up to and with it.
    cdf: Vec<(f64, u64)>,
    n: u64,
    /// The percentiles as the histogram reports them.
    point: Dist,
}

impl Sample {
    pub fn new(dist: &Dist, n: u64) -> Sample {
        let mut total = 0;
        let cdf = dist
            .buckets_ms()
            .into_iter()
            .map(|(v, c)| {
                total += c;
                (v, total)
            })
            .collect();
        Sample {
            cdf,
            n,
            point: dist.clone(),
        }
    }

    fn usable(&self) -> bool {
        self.n >= MIN_SAMPLES && !self.cdf.is_empty()
    }

    /// The histogram's value at quantile `u`, linear between its buckets
    /// (a bucket's mass spread from the value below it to its own): a
    /// smooth inverse, so a resampled high percentile does not stick to a
    /// few bucket values (which makes the interval too narrow).
    fn inverse(&self, u: f64) -> f64 {
        let Some(&(_, total)) = self.cdf.last() else {
            return 0.0;
        };
        let at = u.clamp(0.0, 1.0) * total as f64;
        let i = self.cdf.partition_point(|&(_, c)| (c as f64) < at);
        let Some(&(v, c)) = self.cdf.get(i) else {
            return self.cdf[self.cdf.len() - 1].0;
        };
        let Some(&(v0, c0)) = i.checked_sub(1).and_then(|j| self.cdf.get(j)) else {
            return v;
        };
        let w = (at - c0 as f64) / (c - c0).max(1) as f64;
        lerp(v0, v, w.clamp(0.0, 1.0))
    }

    /// The percentile `q` of one bootstrap resample of `n` draws from the
    /// histogram: the k-th smallest of n uniform draws is Beta(k, n − k + 1),
    /// and the histogram's inverse maps it to a value (resampling the
    /// histogram's own distribution without drawing n values).
    fn draw(&self, q: f64, rng: &mut StdRng) -> f64 {
        let n = self.n as f64;
        let k = (q * n).ceil().clamp(1.0, n);
        let u = Beta::new(k, n - k + 1.0).map_or(q, |b| b.sample(rng));
        self.inverse(u)
    }
}

/// What a baseline is at the rate a stage ran: one of its stages, or two
/// with the weight of the upper one (linear on the baseline's curve).
#[derive(Debug, Clone)]
pub enum Reference {
    One(Sample),
    Between(Sample, Sample, f64),
}

impl Reference {
    fn usable(&self) -> bool {
        match self {
            Reference::One(s) => s.usable(),
            Reference::Between(a, b, _) => a.usable() && b.usable(),
        }
    }

    fn value(&self, q: f64) -> f64 {
        match self {
            Reference::One(s) => s.point.quantile_ms(q),
            Reference::Between(a, b, w) => lerp(a.point.quantile_ms(q), b.point.quantile_ms(q), *w),
        }
    }

    fn draw(&self, q: f64, rng: &mut StdRng) -> f64 {
        match self {
            Reference::One(s) => s.draw(q, rng),
            Reference::Between(a, b, w) => lerp(a.draw(q, rng), b.draw(q, rng), *w),
        }
    }
}

/// `a` to `b` by `w` (0: `a`, 1: `b`).
pub fn lerp(a: f64, b: f64, w: f64) -> f64 {
    a + (b - a) * w
}

/// Whether a change is larger than the noise.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Noise {
    /// The 95 % interval of the change excludes zero.
    Significant,
    /// It does not: the change may be noise.
    WithinNoise,
    /// Too few samples, or no interval, to tell.
    CannotTell,
}

impl Noise {
    pub fn word(self) -> &'static str {
        match self {
            Noise::Significant => "significant",
            Noise::WithinNoise => "within noise",
            Noise::CannotTell => "cannot tell",
        }
    }
}

/// A figure's change from the baseline.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Change {
    pub base: f64,
    pub new: f64,
    /// (new − base) / base, in percent; None when the baseline is 0.
    pub pct: Option<f64>,
    /// The 95 % interval of `pct` when the bootstrap gave one.
    pub pct_low: Option<f64>,
    pub pct_high: Option<f64>,
    pub noise: Noise,
}

impl Change {
    /// The change from `base` to `new`, its noise not (yet) told.
    pub fn of(base: f64, new: f64) -> Change {
        Change {
            base,
            new,
            pct: percent(base, new),
            pct_low: None,
            pct_high: None,
            noise: Noise::CannotTell,
        }
    }

    /// `+38 % (significant)`, `-2 % (within noise)`.
    pub fn words(&self) -> String {
        match self.pct {
            Some(p) => format!("{} ({})", pct_text(p), self.noise.word()),
            None => format!("{:.2} → {:.2} ({})", self.base, self.new, self.noise.word()),
        }
    }
}

/// `+38 %`, `-2.4 %`, `+0.3 %`: whole percents from 10 up.
pub fn pct_text(p: f64) -> String {
    if p.abs() >= 9.95 {
        format!("{p:+.0} %")
    } else {
        format!("{p:+.1} %")
    }
}

/// (new − base) / base in percent; None when base is not positive.
pub fn percent(base: f64, new: f64) -> Option<f64> {
    (base > 0.0 && base.is_finite() && new.is_finite()).then(|| (new - base) / base * 100.0)
}

/// The percentile `q` (0..1) of `new` against the baseline's at the same
/// rate: the change, and a seeded bootstrap's 1 − `alpha` interval of it (each
/// draw resamples both sides; an interpolated baseline resamples both of
/// its stages).
pub fn quantile_change(base: &Reference, new: &Sample, q: f64, seed: u64, alpha: f64) -> Change {
    let mut c = Change::of(base.value(q), new.point.quantile_ms(q));
    if !base.usable() || !new.usable() || c.pct.is_none() {
        return c;
    }
    let mut rng = StdRng::seed_from_u64(seed);
    let mut draws: Vec<f64> = (0..DRAWS)
        .filter_map(|_| {
            let b = base.draw(q, &mut rng);
            let n = new.draw(q, &mut rng);
            percent(b, n)
        })
        .collect();
    if draws.len() < DRAWS / 2 {
        return c;
    }
    draws.sort_by(f64::total_cmp);
    let at = |p: f64| draws[((draws.len() - 1) as f64 * p).round() as usize];
    let tail = (alpha / 2.0).clamp(0.0, 0.5);
    let (lo, hi) = (at(tail), at(1.0 - tail));
    c.pct_low = Some(lo);
    c.pct_high = Some(hi);
    c.noise = if lo > 0.0 || hi < 0.0 {
        Noise::Significant
    } else {
        Noise::WithinNoise
    };
    c
}

/// A capacity and its interval (about 95 %), `high` None for a floor.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Interval {
    pub value: f64,
    pub low: f64,
    pub high: Option<f64>,
}

/// A run's answer as an interval; None when it is not known.
pub fn answer_interval(a: &crate::types::Answer) -> Option<Interval> {
    let value = a.requests_per_s?;
    Some(Interval {
        value,
        low: a.low.unwrap_or(value).min(value),
        high: a.high,
    })
}

/// The answer's change: significant when the two intervals do not overlap
/// (the new run's top below the baseline's bottom, or its bottom above the
/// baseline's top). A floor is open above: it can show a drop below
/// another run's interval, never a rise above its own.
pub fn interval_change(base: Interval, new: Interval) -> Change {
    let mut c = Change::of(base.value, new.value);
    let down = new.high.is_some_and(|h| h < base.low);
    let up = base.high.is_some_and(|h| new.low > h);
    c.noise = if down || up {
        Noise::Significant
    } else {
        Noise::WithinNoise
    };
    c
}

/// A stage's completion rate against the baseline's: completions are
/// counted, so each rate's relative noise is about 1/√(completions); the
/// change is significant when it is past the normal quantile of 1 − `alpha`/2
/// (1.96 at 5 %) of the difference's noise.
pub fn rate_change(base: f64, base_n: u64, new: f64, new_n: u64, alpha: f64) -> Change {
    let mut c = Change::of(base, new);
    if base_n < MIN_SAMPLES || new_n < MIN_SAMPLES || c.pct.is_none() {
        return c;
    }
    let var = |rate: f64, n: u64| rate * rate / n as f64;
    let sd = (var(base, base_n) + var(new, new_n)).sqrt();
    c.noise = if (new - base).abs() > z(alpha / 2.0) * sd {
        Noise::Significant
    } else {
        Noise::WithinNoise
    };
    c
}

/// The standard normal's upper quantile: z with P(Z > z) = `p` (0 < p ≤
/// 0.5), by Abramowitz and Stegun 26.2.23 (error under 4.5e-4).
pub fn z(p: f64) -> f64 {
    let p = p.clamp(1e-12, 0.5);
    let t = (-2.0 * p.ln()).sqrt();
    t - (2.515_517 + 0.802_853 * t + 0.010_328 * t * t)
        / (1.0 + 1.432_788 * t + 0.189_269 * t * t + 0.001_308 * t * t * t)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `n` values spread evenly over `lo..hi` ms.
    fn spread(n: u64, lo: f64, hi: f64) -> Dist {
        let mut d = Dist::default();
        for i in 0..n {
            let ms = lo + (hi - lo) * i as f64 / (n - 1).max(1) as f64;
            d.record_us((ms * 1000.0) as u64);
        }
        d
    }

    fn sample(d: &Dist) -> Sample {
        Sample::new(d, d.count())
    }

    #[test]
    fn a_shift_far_past_the_spread_is_significant_and_the_same_distribution_is_not() {
        let base = spread(500, 100.0, 200.0);
        let slower = spread(500, 150.0, 300.0);
        let c = quantile_change(
            &Reference::One(sample(&base)),
            &sample(&slower),
            0.99,
            SEED,
            ALPHA,
        );
        assert_eq!(c.noise, Noise::Significant, "{c:?}");
        assert!((c.pct.unwrap() - 50.0).abs() < 2.0, "{c:?}");
        assert!(c.pct_low.unwrap() > 0.0 && c.pct_high.unwrap() > c.pct_low.unwrap());
        assert!(
            c.words().starts_with("+50 % (significant)"),
            "{}",
            c.words()
        );

        let same = spread(500, 100.0, 200.0);
        let c = quantile_change(
            &Reference::One(sample(&base)),
            &sample(&same),
            0.5,
            SEED,
            ALPHA,
        );
        assert_eq!(c.noise, Noise::WithinNoise, "{c:?}");
        assert_eq!(c.words(), "+0.0 % (within noise)");
    }

    #[test]
    fn a_small_shift_in_a_small_sample_is_within_noise() {
        let base = spread(30, 100.0, 300.0);
        let new = spread(30, 104.0, 312.0);
        let c = quantile_change(
            &Reference::One(sample(&base)),
            &sample(&new),
            0.99,
            SEED,
            ALPHA,
        );
        assert_eq!(c.noise, Noise::WithinNoise, "{c:?}");
        assert!((c.pct.unwrap() - 4.0).abs() < 1.0, "{c:?}");
    }

    #[test]
    fn the_bootstrap_is_reproducible_and_few_samples_cannot_tell() {
        let base = spread(200, 10.0, 50.0);
        let new = spread(200, 11.0, 52.0);
        let r = Reference::One(sample(&base));
        let a = quantile_change(&r, &sample(&new), 0.9, SEED, ALPHA);
        let b = quantile_change(&r, &sample(&new), 0.9, SEED, ALPHA);
        assert_eq!(a, b);
        let few = spread(5, 10.0, 50.0);
        let c = quantile_change(&r, &sample(&few), 0.9, SEED, ALPHA);
        assert_eq!(c.noise, Noise::CannotTell);
        assert!(c.words().ends_with("(cannot tell)"), "{}", c.words());
        // Gaps of few requests count as that many samples.
        let gaps = Sample::new(&new, 4);
        assert_eq!(
            quantile_change(&r, &gaps, 0.9, SEED, ALPHA).noise,
            Noise::CannotTell
        );
    }

    #[test]
    fn an_interpolated_baseline_sits_between_its_two_stages() {
        let lo = spread(400, 100.0, 200.0);
        let hi = spread(400, 300.0, 400.0);
        let r = Reference::Between(sample(&lo), sample(&hi), 0.25);
        // p50: 150 and 350, a quarter of the way: 200.
        assert!((r.value(0.5) - 200.0).abs() < 1.0, "{}", r.value(0.5));
        let at = spread(400, 150.0, 250.0);
        let c = quantile_change(&r, &sample(&at), 0.5, SEED, ALPHA);
        assert_eq!(c.noise, Noise::WithinNoise, "{c:?}");
        let worse = spread(400, 250.0, 350.0);
        let c = quantile_change(&r, &sample(&worse), 0.5, SEED, ALPHA);
        assert_eq!(c.noise, Noise::Significant, "{c:?}");
        assert_eq!(lerp(2.0, 4.0, 0.5), 3.0);
    }

    /// `n` draws of a lognormal latency (median `median_ms`), seeded.
    fn lognormal(n: usize, median_ms: f64, seed: u64) -> Dist {
        use rand_distr::LogNormal;
        let mut rng = StdRng::seed_from_u64(seed);
        let ln = LogNormal::new(median_ms.ln(), 0.5).unwrap();
        let mut d = Dist::default();
        for _ in 0..n {
            d.record_us((ln.sample(&mut rng) * 1000.0) as u64);
        }
        d
    }

    /// Two samples of one distribution differ by noise alone: a
    /// percentile's change is called significant in about 5 % of 200 seeded
    /// trials (at most 7.5 %); a 30 % slower one at p50 in every trial; and a
    /// gate's Bonferroni level over 10 stages calls the same distribution
    /// significant in at most 1 of 20 trials.
    #[test]
    fn the_same_distribution_is_within_noise_but_for_the_level_s_share() {
        for q in [0.5, 0.99] {
            let (mut false_alarms, mut gate_alarms, mut found) = (0, 0, 0);
            for trial in 0..200u64 {
                let a = lognormal(400, 100.0, 2 * trial);
                let b = lognormal(400, 100.0, 2 * trial + 1);
                let r = Reference::One(sample(&a));
                let seed = SEED + trial;
                if quantile_change(&r, &sample(&b), q, seed, ALPHA).noise == Noise::Significant {
                    false_alarms += 1;
                }
                if trial < 20
                    && quantile_change(&r, &sample(&b), q, seed, ALPHA / 10.0).noise
                        == Noise::Significant
                {
                    gate_alarms += 1;
                }
                if trial < 20 && q == 0.5 {
                    let slow = lognormal(400, 130.0, 2 * trial + 1);
                    if quantile_change(&r, &sample(&slow), q, seed, ALPHA).noise
                        == Noise::Significant
                    {
                        found += 1;
                    }
                }
            }
            assert!(
                false_alarms <= 15,
                "p{q}: {false_alarms} of 200 false alarms"
            );
            assert!(gate_alarms <= 1, "p{q}: {gate_alarms} of 20 gate alarms");
            if q == 0.5 {
                assert_eq!(found, 20, "a 30 % shift found in {found} of 20");
            }
        }
    }

    #[test]
    fn answers_differ_when_their_intervals_do_not_overlap() {
        let iv = |value, low, high| Interval { value, low, high };
        let base = iv(8.0, 7.6, Some(8.4));
        let c = interval_change(base, iv(8.4, 8.1, Some(8.8)));
        assert_eq!(c.noise, Noise::WithinNoise);
        assert_eq!(c.words(), "+5.0 % (within noise)");
        let c = interval_change(base, iv(6.0, 5.5, Some(6.5)));
        assert_eq!(c.noise, Noise::Significant);
        assert_eq!(c.words(), "-25 % (significant)");
        assert_eq!(
            interval_change(base, iv(9.5, 9.0, Some(10.0))).noise,
            Noise::Significant
        );
        // A floor cannot show a rise over another floor, but a drop below it.
        let floor = iv(8.0, 8.0, None);
        assert_eq!(
            interval_change(floor, iv(12.0, 12.0, None)).noise,
            Noise::WithinNoise
        );
        assert_eq!(
            interval_change(floor, iv(5.0, 4.5, Some(5.5))).noise,
            Noise::Significant
        );
        assert_eq!(interval_change(iv(0.0, 0.0, None), floor).pct, None);
    }

    #[test]
    fn rates_differ_past_their_counting_noise() {
        // 300 completions each: about 5.8 % noise apiece.
        assert_eq!(
            rate_change(10.0, 300, 10.5, 300, ALPHA).noise,
            Noise::WithinNoise
        );
        assert_eq!(
            rate_change(10.0, 300, 8.0, 240, ALPHA).noise,
            Noise::Significant
        );
        assert_eq!(rate_change(10.0, 5, 8.0, 4, ALPHA).noise, Noise::CannotTell);
        assert_eq!(pct_text(-2.44), "-2.4 %");
        assert!((z(0.025) - 1.96).abs() < 0.001, "{}", z(0.025));
        assert!((z(0.0025) - 2.807).abs() < 0.002, "{}", z(0.0025));
        assert_eq!(pct_text(37.6), "+38 %");
    }
}
