use super::estimate::collapsed;
use super::estimate::{capacity, Capacity};
use super::sweep::*;
use super::*;

fn reading(rate: f64, growth: f64, fit_noise: f64) -> Reading {
    Reading {
        rate,
        target: rate,
        growth,
        fit_noise,
        window_s: 6.0,
        settle_s: 3.0,
        filled: true,
        slowing: 0.0,
        ttft_rise_s: None,
        known_capacity: 0.0,
        answers_slowed: 0.0,
        counted: false,
    }
}

#[test]
fn a_stage_far_below_the_capacity_is_judged_at_the_answers_precision() {
    // Real vLLM on one core: 1.5 req/s "grew by -0.00 ± 0.16 req/s over
    // 6.4 s … use stages of at least 17 s" with the server known to
    // complete 3.5 (its flood) and truly holding 5.6.
    let low = Reading {
        window_s: 6.4,
        ..reading(1.5, 0.0, 0.08)
    };
    assert!(matches!(call(&low), Call::Unsure { .. }), "alone: unsure");
    let known = Reading {
        known_capacity: 3.5,
        ..low
    };
    assert_eq!(call(&known), Call::KeptUp);
    // Near the capacity known, the precision is the stage's own.
    let near = Reading {
        known_capacity: 3.5,
        ..reading(3.4, 0.0, 0.12)
    };
    assert!(matches!(call(&near), Call::Unsure { .. }));
    // A growth clear of its noise is behind wherever the stage is.
    let behind = Reading {
        known_capacity: 30.0,
        ..reading(1.5, 0.4, 0.05)
    };
    assert_eq!(call(&behind), Call::FellBehind);
}

#[test]
fn a_stage_kept_up_shows_its_rate() {
    // The default run against the simulator: constant@39.22 "kept up
    // (achieved 35.00 req/s)", its growth of 3.69 ± 0.69 excused as a
    // batch filling (TTFT flat). Not kept up while its window shows a
    // rate under 95 % of what was offered: a longer stage tells.
    let filling = Reading {
        window_s: 5.0,
        ttft_rise_s: Some(0.0),
        ..reading(39.22, 3.69, 0.3)
    };
    assert!(!filling.queued());
    assert!(!filling.shows_its_rate());
    assert!(
        matches!(call(&filling), Call::Unsure { .. }),
        "{:?}",
        call(&filling)
    );
    // The same stage with a growth under 5 % of its rate kept up.
    let level = Reading {
        growth: 1.5,
        ..filling
    };
    assert!(level.shows_its_rate());
    assert_eq!(call(&level), Call::KeptUp);
}

#[test]
fn a_stage_kept_up_shows_a_rate_within_five_percent_of_its_target() {
    // The default run against the simulator: "constant@34.42 kept up
    // (achieved 32.58 req/s)", 5.3 % under its target: its window was
    // offered 34.19 and answered 4.7 % under that, its growth excused
    // as a batch filling (TTFT flat).
    let short = Reading {
        target: 34.42,
        ttft_rise_s: Some(0.0),
        ..reading(34.19, 1.61, 0.2)
    };
    assert!(!short.shows_its_rate());
    assert_ne!(call(&short), Call::KeptUp);
    // Answering within 5 % of the target, it kept up.
    let near = Reading {
        growth: 1.2,
        ..short
    };
    assert!(near.shows_its_rate());
    assert_eq!(call(&near), Call::KeptUp);
}

#[test]
fn a_clear_growth_of_any_size_is_falling_behind() {
    // vLLM at 8.50 req/s: 0.41 ± 0.10, once "too close to 5 % to tell".
    assert_eq!(call(&reading(8.5, 0.41, 0.05)), Call::FellBehind);
    assert_eq!(call(&reading(40.0, 6.0, 0.01)), Call::FellBehind);
}

#[test]
fn a_flat_backlog_is_keeping_up_and_a_noisy_one_asks_for_longer() {
    assert_eq!(call(&reading(30.0, 0.05, 0.1)), Call::KeptUp);
    assert_eq!(call(&reading(30.0, -0.2, 0.2)), Call::KeptUp);
    match call(&reading(10.0, 0.3, 0.4)) {
        Call::Unsure { needed_s } => assert!(needed_s > 9.0, "{needed_s}"),
        c => panic!("{c:?}"),
    }
}

#[test]
fn a_growth_no_request_waited_for_is_a_batch_filling() {
    // The simulator at its capacity: in flight 107 → 120 in 5.2 s at
    // 38.6 req/s, TTFT flat.
    let flat = Reading {
        window_s: 5.2,
        ttft_rise_s: Some(0.01),
        ..reading(38.6, 3.23, 0.3)
    };
    assert!(!flat.queued());
    assert_ne!(call(&flat), Call::FellBehind);
    // The same growth with TTFT rising as a queue makes it (g·T/λ =
    // 0.44 s): falling behind.
    let queue = Reading {
        ttft_rise_s: Some(0.4),
        ..flat
    };
    assert!(queue.queued());
    assert_eq!(call(&queue), Call::FellBehind);
    // No TTFT seen: no excuse.
    let unseen = Reading {
        ttft_rise_s: None,
        ..flat
    };
    assert!(unseen.queued());
}

#[test]
fn a_window_opened_before_the_pipeline_filled_is_not_falling_behind() {
    // 8 s stages at 33.92 req/s on a server that holds 37.
    let r = Reading {
        filled: false,
        ..reading(33.92, 2.49, 0.36)
    };
    assert_ne!(call(&r), Call::FellBehind);
}

fn point(r: &Reading) -> Point {
    r.point()
}

#[test]
fn the_capacity_is_bracketed_by_the_stages_around_it() {
    // C = 8: stages at 6, 7, 7.5 keep up; 8.5 falls behind by 0.5.
    let pts: Vec<Point> = [(6.0, 0.0), (7.0, 0.02), (7.5, -0.01), (8.5, 0.5)]
        .iter()
        .map(|&(l, g)| point(&reading(l, g, 0.05)))
        .collect();
    let c = capacity(&pts).unwrap();
    assert!((c.estimate - 8.0).abs() < 0.1, "{c:?}");
    assert!(c.low < 8.0 && c.high.unwrap() > 8.0, "{c:?}");
    assert!(c.is_precise(), "{c:?}");
}

#[test]
fn nothing_fell_behind_is_a_floor_and_the_next_rate_is_above_it() {
    let pts: Vec<Point> = [(5.0, 0.0), (6.0, 0.01)]
        .iter()
        .map(|&(l, g)| point(&reading(l, g, 0.05)))
        .collect();
    let c = capacity(&pts).unwrap();
    assert!(c.high.is_none(), "{c:?}");
    assert!(c.estimate > 5.8 && c.estimate <= 6.0, "{c:?}");
    let next = next_rate(&c, Some(6.0), Some(5.07), 0).unwrap();
    assert!(
        (next - 6.9).abs() < 1e-9,
        "a flood under it is no ceiling: {next}"
    );
    assert_eq!(next_rate(&c, Some(6.0), Some(8.0), 0), Some(8.0));
}

#[test]
fn a_flood_far_above_capacity_weighs_least() {
    // C = 10; a stage at 30 completes 12 (+20 %, a degraded flood), one at
    // 10.5 falls behind by 0.5.
    let far = point(&reading(30.0, 18.0, 0.1));
    let near = point(&reading(10.5, 0.5, 0.05));
    let c = capacity(&[far, near]).unwrap();
    assert!((c.estimate - 10.0).abs() < 0.5, "{c:?}");
    let alone = capacity(&[far]).unwrap();
    assert!(
        !alone.is_precise(),
        "a flood alone is not precise: {alone:?}"
    );
    let next = next_rate(&alone, None, None, 0).unwrap();
    let middle = 0.5 * (alone.low + alone.high.unwrap());
    assert!((next - (1.05 * alone.estimate).max(middle)).abs() < 1e-9);
}

#[test]
fn the_rules_on_counts_speak_only_past_their_floors() {
    // Rule 3: at least MIN_ERRORS and UNANSWERED_SHARE of those sent.
    assert!(!unanswered(40, 4));
    assert!(unanswered(40, 5));
    assert!(!unanswered(400, 19));
    assert!(unanswered(400, 20));
    // Rule 8: nothing completed, and enough errors to say so.
    assert!(!all_errors(0, 4));
    assert!(all_errors(0, 5));
    assert!(!all_errors(1, 50));
    // Rule 6's second half.
    assert!(!erroring(0.049));
    assert!(erroring(0.05));
}

#[test]
fn far_beyond_capacity_needs_a_latency_and_a_second_of_answers() {
    // 213 req/s sent at a server whose flood completed 36, 32 answered a second.
    assert!(far_beyond_capacity(213.0, 36.0, 32.0, 4.0, 0.4));
    assert!(
        !far_beyond_capacity(213.0, 36.0, 32.0, 0.9, 0.4),
        "under a second"
    );
    assert!(
        !far_beyond_capacity(213.0, 36.0, 32.0, 2.0, 2.5),
        "under a latency"
    );
    assert!(
        !far_beyond_capacity(60.0, 36.0, 20.0, 4.0, 0.4),
        "not twice the most seen"
    );
    // A probe at twice the rate held (BLIND_STEP) is a probe, not an
    // overload to cut after its first second.
    assert!(!far_beyond_capacity(
        sweep::BLIND_STEP * 15.33,
        15.33,
        0.0,
        1.0,
        0.07
    ));
    assert!(
        !far_beyond_capacity(213.0, 36.0, 120.0, 4.0, 0.4),
        "answered over half"
    );
}

#[test]
fn the_length_a_short_stage_is_told_reaches_past_its_window() {
    // First answer at 0.5 s, fill 0.4 s, 0.1 s cells: the window opens at
    // 0.9 s and needs STEADY_SECONDS past a cell, one spare second on top.
    let n = length_to_tell(0.5, 0.4, 0.1);
    assert_eq!(n, (0.5 + 0.4 + 0.1 + STEADY_SECONDS + SPARE_SECONDS).ceil());
    // A slow first answer: the window opens at the stage's middle instead.
    let slow = length_to_tell(20.0, 30.0, 0.1);
    assert_eq!(slow, (20.0 + 0.1 + STEADY_SECONDS + SPARE_SECONDS).ceil());
}

#[test]
fn the_sweeps_budget_and_an_added_stages_length() {
    assert_eq!(added_stages(10), 8);
    assert_eq!(added_stages(1), MIN_ADDED_STAGES);
    // A new rate runs the stage length; one already run twice it; one near
    // a stage that asked for 25 s of 10 s stages 2.5 ×, at most 3 ×.
    assert_eq!(probe_stretch(false, 0.0, Some(10.0)), 1.0);
    assert_eq!(probe_stretch(true, 0.0, Some(10.0)), RERUN_STRETCH);
    assert_eq!(probe_stretch(false, 25.0, Some(10.0)), 2.5);
    assert_eq!(probe_stretch(false, 90.0, Some(10.0)), MAX_PROBE_STRETCH);
    assert_eq!(probe_stretch(false, 90.0, None), 1.0);
}

#[test]
fn a_client_is_late_one_way_at_a_time() {
    let on_time = client_late(5.0, 100, 0.0, 0.0, 3.0, 400.0);
    assert!(!on_time.any());
    assert!(client_late(21.0, 100, 0.0, 0.0, 3.0, 400.0).sent_late);
    // Of three sends the p90 is the latest: one late send is not a schedule
    // the client could not keep.
    assert!(!client_late(23.0, 3, 0.0, 0.0, 3.0, 400.0).any());
    assert!(client_late(23.0, SEND_LATE_MIN_SENDS, 0.0, 0.0, 3.0, 400.0).sent_late);
    assert!(client_late(5.0, 100, 30.0, 0.06, 3.0, 400.0).unsent);
    assert!(
        !client_late(5.0, 100, 30.0, 0.015, 3.0, 400.0).any(),
        "a little behind"
    );
    // The lag limit is a quarter of the latency when that is over 50 ms.
    assert_eq!(
        client_late(5.0, 100, 0.0, 0.0, 101.0, 400.0).lag_over_ms,
        Some(100.0)
    );
    assert!(!client_late(5.0, 100, 0.0, 0.0, 99.0, 400.0).any());
    assert_eq!(timing_lag_limit_ms(2.0), LAG_FLOOR_MS);
    assert_eq!(timing_lag_limit_ms(40.0), 20.0);
}

#[test]
fn the_stage_before_decides_only_a_verdict_that_is_not_kept_up() {
    assert!(behind_the_stage_before(false, 3.0, 10.0));
    assert!(!behind_the_stage_before(false, 2.5, 10.0));
    assert!(!behind_the_stage_before(true, 9.0, 10.0));
    assert!(ran_enough(5.0, 10.0));
    assert!(!ran_enough(4.9, 10.0));
}

/// A stage's point as a stored report gives it: rate, growth, effective
/// noise, filling, collapse, and whether the guard ended it.
fn stored(
    rate: f64,
    growth: f64,
    noise: f64,
    filling: f64,
    collapse: f64,
    guard_cut: bool,
) -> Point {
    Point {
        rate,
        growth,
        noise,
        filling,
        collapse,
        guard_cut,
        named: None,
    }
}

#[test]
fn a_stage_that_fell_behind_bounds_the_capacity_under_its_rate() {
    // Real llama.cpp, sweep 2 (report.json): 30.36 fell behind by 2.81 ±
    // 0.49 while its answers slowed by as much (collapse = the growth), and
    // a 1.0 s probe at 60.40 counted 32.48 ± 8.77 with half of it allowed:
    // the answer read 28.92 (28.32–60.32).
    let pts = [
        stored(15.13, -0.016, 0.151, 0.0, 0.0, false),
        stored(29.38, 0.468, 0.303, 0.0, 0.234, false),
        stored(60.40, 32.48, 8.77, 0.0, 16.24, true),
        stored(30.10, 2.81, 0.49, 0.0, 2.81, true),
    ];
    let c = capacity(&pts).unwrap();
    let high = c.high.expect("bounded");
    assert!(
        high <= 30.36,
        "no capacity at or above a rate that fell behind: {c:?}"
    );
    // A constant run after a sweep on the simulator: 18.92 held, 22.98
    // fell behind by 2.83 ± 0.40 completing 20.15, its collapse 2.12
    // allowed; the answer read "holds ≥ 20.15 … fell behind but does not
    // bound it" when the collapse was only capped.
    let two = [
        stored(18.92, 0.0, 0.19, 0.0, 0.0, false),
        stored(22.98, 2.83, 0.40, 0.0, 2.12, false),
    ];
    let c = capacity(&two).unwrap();
    assert!(c.high.is_some_and(|h| h <= 22.98), "{c:?}");
}

#[test]
fn a_counted_growth_carries_no_collapse() {
    let counted = Reading {
        counted: true,
        ..reading(60.4, 32.48, 8.1)
    };
    assert_eq!(counted.collapse(), 0.0);
    assert!(reading(60.4, 32.48, 8.1).collapse() > 0.0);
}

#[test]
fn stages_the_guard_ended_do_not_bound_the_capacity_from_below_alone() {
    // Real llama.cpp, sweep 3: 15.33 held; the guard ended probes at 30.67
    // (answered 28.39 over 6.2 s) and 29.81 (23.96 over 5.4 s), and the
    // answer read 28.38 (27.49–30.11), "±4.6 %": done. 35 s stages after
    // it: 25.54 fell behind completing 23.29. Their few seconds do not make
    // the interval precise; a stage near the capacity that runs its length
    // must.
    let pts = [
        stored(15.36, -0.01, 0.15, 0.0, 0.0, false),
        stored(30.88, 2.49, 0.45, 0.0, 1.25, true),
        stored(30.06, 6.11, 1.01, 1.35, 3.05, true),
    ];
    let c = capacity(&pts).unwrap();
    assert!(!c.is_precise(), "{c:?}");
    assert!(c.low <= 24.0, "the truth (~23.3) is inside: {c:?}");
    // The same two stages run their length: they bound it from both sides.
    let whole = [
        pts[0],
        Point {
            guard_cut: false,
            ..pts[1]
        },
        Point {
            guard_cut: false,
            ..pts[2]
        },
    ];
    assert!(capacity(&whole).unwrap().low > 27.0);
    // The next probe goes into the interval, not 5 % over its low end.
    let next = next_rate(&c, Some(15.33), None, 0).unwrap();
    assert!(
        next > 1.05 * c.estimate || c.estimate > 0.5 * (c.low + c.high.unwrap()),
        "{next} {c:?}"
    );
    assert!(next < 30.06, "{next} {c:?}");
}

#[test]
fn a_wide_flat_bottom_is_probed_in_its_middle() {
    // Real llama.cpp, sweep 1: 20.03 held, then a probe at 40.07 (2 ×,
    // no flood to go by) fell behind by 22.13: every capacity from about
    // 20 to 29 explained both, and probes crept up 5 % at a time (21.04,
    // 22.07, 23.12 held; 24.23 did not).
    let pts = [
        stored(20.03, 0.001, 0.2, 0.0, 0.0, false),
        stored(40.41, 22.13, 2.486, 0.0, 11.065, true),
    ];
    let c = capacity(&pts).unwrap();
    let next = next_rate(&c, Some(20.03), None, 0).unwrap();
    let middle = 0.5 * (c.low + c.high.unwrap());
    assert!(
        (next - middle).abs() < 1e-9 && next > 1.05 * c.estimate,
        "{next} {c:?}"
    );
}

#[test]
fn each_probe_that_held_climbs_a_step_further() {
    // Real vLLM, sweep 3: a flood of 11.76, then probes held at 13.52,
    // 15.55, 17.88, 20.56, 23.64 (× 1.15 each) before 27.19 fell behind:
    // the whole budget.
    let floor = Capacity {
        estimate: 13.5,
        low: 13.0,
        high: None,
    };
    let at = |climbs| next_rate(&floor, Some(13.52), Some(11.76), climbs).unwrap() / 13.52;
    assert!((at(0) - 1.15).abs() < 1e-9);
    assert!((at(1) - 1.15f64.powi(2)).abs() < 1e-9);
    assert!((at(2) - 1.15f64.powi(3)).abs() < 1e-9);
    assert!(
        (at(10) - 1.15f64.powi(MAX_CLIMBS as i32)).abs() < 1e-9,
        "capped"
    );
}

#[test]
fn guard_cut_stages_that_agree_bound_the_capacity() {
    // A server capped at 125 req/s (--max-concurrency 16): the guard ended
    // stages at 143.75 and 187.50, both completing 125; 106.25 held.
    let pts = [
        stored(106.25, 0.0, 1.06, 0.0, 0.0, false),
        stored(143.66, 18.66, 2.36, 0.0, 0.0, true),
        stored(187.69, 62.54, 6.54, 0.0, 0.0, true),
    ];
    let c = capacity(&pts).unwrap();
    assert!((c.estimate - 125.0).abs() < 0.05 * 125.0, "{c:?}");
    assert!(c.is_precise() || c.half_width() < 0.075, "{c:?}");
}

/// Real vLLM on one core, 2026-11-29 sweep 1 (report.json's readings):
/// 19.57 kept up (offered 20.01, growth 0.28); the probe at 22.50, cut
/// by the guard after 7 s, fell behind completing 16.26, under what 19.57
/// achieved. With half its growth allowed as collapse the interval read
/// 19.30–20.69, "precise", and the sweep stopped; 35 s at 21.67 then kept
/// up. A stage that completed less than a slower one achieved collapsed:
/// it bounds the capacity by its rate alone, so the interval reaches up
/// to it and the sweep probes in between.
#[test]
fn a_collapse_bounds_the_capacity_by_its_rate_alone() {
    let mut pts = vec![
        stored(15.546, -0.119, 0.159, 0.0, 0.0, false),
        stored(17.706, 0.224, 0.186, 0.0, 0.112, false),
        stored(20.011, 0.278, 0.208, 0.0, 0.139, false),
        stored(22.234, 5.970, 0.726, 0.0, 2.985, true),
    ];
    pts[3].named = Some(22.5);
    let c = capacity(&pts).unwrap();
    let high = c.high.expect("bracketed");
    assert!(high >= 21.67, "the truth (21.67 held) is inside: {c:?}");
    assert!(high <= 22.234, "never at the rate that fell behind: {c:?}");
    assert!(!c.is_precise(), "the gap is worth a probe: {c:?}");
    // A stage behind that completed about what the slower ones did is no
    // collapse: its growth reads the capacity (the fixed-step server).
    let pts = [
        stored(36.0, 0.0, 0.2, 0.0, 0.0, false),
        stored(44.0, 4.0, 0.3, 0.0, 2.0, false),
    ];
    assert_eq!(collapsed(pts.to_vec())[1].collapse, 2.0);
    let c = capacity(&pts).unwrap();
    assert!(c.high.unwrap() < 43.0, "{c:?}");
}
