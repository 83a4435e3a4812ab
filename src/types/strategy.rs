//! What a stage is: the one description of each stage strategy (its name,
//! its loop, its part in a sweep, what the steering keys change, its words
//! on the dashboard and in `--help`) and the questions the rest of the
//! program asks of it ("is this the flood?", "open or closed loop?", "can
//! the rate be steered?"). Two other types carry a strategy: a stage's
//! parameters (`engine::Strategy`: its rate, streams or trace, which names
//! its kind) and what a run does (`config::LoadStrategy`: a sweep, a search,
//! or stages of one kind); a sweep's rate stages are an `engine::Strategy`
//! of a rate kind. No other module lists the kinds or matches on their
//! variants (tests/architecture.rs counts the files that name one, and
//! refuses an enum that repeats their names).

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// How a stage releases requests, without its parameters (the engine's
/// `Strategy` carries those and names its kind with `Strategy::kind`).
/// `report.json` writes it as `strategy`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StrategyKind {
    /// One request at a time. (The default only fills `Default` reports.)
    #[default]
    Synchronous,
    /// A fixed number of streams (closed loop).
    Concurrent,
    /// As many at once as allowed.
    Throughput,
    /// Open loop at a fixed rate.
    Constant,
    /// Open loop with gamma-distributed gaps.
    Poisson,
    /// Open loop at a trace's times (`--profile replay`).
    Replay,
}

impl StrategyKind {
    /// Every kind, in the order the docs list them.
    pub const ALL: [StrategyKind; 6] = [
        StrategyKind::Synchronous,
        StrategyKind::Concurrent,
        StrategyKind::Throughput,
        StrategyKind::Constant,
        StrategyKind::Poisson,
        StrategyKind::Replay,
    ];

    /// What a stage of this kind is, for every place that names, shows or
    /// steers it: one descriptor per kind instead of a match in each.
    pub const fn info(self) -> &'static KindInfo {
        match self {
            StrategyKind::Synchronous => &SYNCHRONOUS,
            StrategyKind::Concurrent => &CONCURRENT,
            StrategyKind::Throughput => &THROUGHPUT,
            StrategyKind::Constant => &CONSTANT,
            StrategyKind::Poisson => &POISSON,
            StrategyKind::Replay => &REPLAY,
        }
    }

    /// The name on the wire and in stage names (`constant@5.00`).
    pub const fn name(self) -> &'static str {
        self.info().name
    }

    /// Requests are due on a schedule, whatever the server answers
    /// (constant, poisson, replay); the others wait for answers.
    pub const fn is_open_loop(self) -> bool {
        self.info().open_loop
    }

    /// What it does, in a line.
    pub const fn help(self) -> &'static str {
        self.info().help
    }

    /// What the steering keys change on a stage of this kind.
    pub const fn steers(self) -> Steers {
        self.info().steers
    }

    /// Its part in a sweep (and a search).
    pub const fn role(self) -> SweepRole {
        self.info().role
    }

    /// One request at a time: a sweep's first stage, the latency floor.
    pub fn is_synchronous(self) -> bool {
        self.role() == SweepRole::Synchronous
    }

    /// The flood (throughput): as many at once as allowed. Its rate is
    /// what the server completed under a queue, its latency that queue's.
    pub fn is_flood(self) -> bool {
        self.role() == SweepRole::Flood
    }

    /// Its target is a request rate the sweep places on its curve and
    /// interpolates between (constant, poisson).
    pub fn is_rate(self) -> bool {
        self.role() == SweepRole::Rate
    }

    /// Its target is a number of streams (concurrent), not a rate.
    pub fn counts_streams(self) -> bool {
        self.steers() == Steers::Streams
    }

    /// Its stages take a target from `--rate`: requests per second
    /// (constant, poisson) or streams (concurrent). The others set their
    /// own pace (synchronous, throughput, a replay) and take none.
    pub fn takes_target(self) -> bool {
        self.is_rate() || self.counts_streams()
    }

    /// Sends at a trace's times: its pace is the trace's (`--time-scale`),
    /// so it takes no rate, no ramp and no over-saturation guard.
    pub const fn follows_trace(self) -> bool {
        self.info().from_trace
    }

    /// A stage's usual name at its target (requests per second, or
    /// streams): `synchronous`, `throughput`, `replay`, `concurrent@8`,
    /// `constant@5.25` (two decimals, like GuideLLM's `constant@5.71`).
    pub fn stage_name(self, target: Option<f64>) -> String {
        match target {
            Some(n) if self.counts_streams() => format!("{}@{}", self.name(), n.round()),
            Some(r) if self.is_rate() => format!("{}@{r:.2}", self.name()),
            _ => self.name().to_string(),
        }
    }

    /// The rate (or streams) the keys change can be set on it: not a
    /// replay, whose pace is its trace's.
    pub fn can_steer(self) -> bool {
        !self.follows_trace()
    }
}

/// A stage strategy as the rest of the program sees it.
#[derive(Debug, PartialEq)]
pub struct KindInfo {
    /// The name on the wire and in stage names.
    pub name: &'static str,
    /// Requests are due on a schedule, whatever the server answers.
    pub open_loop: bool,
    /// Its part in a sweep.
    pub role: SweepRole,
    /// What the steering keys change.
    pub steers: Steers,
    /// Its requests are due at a trace's times.
    pub from_trace: bool,
    /// Its pace in words when it has no target rate (the dashboard's header).
    pub pace: &'static str,
    /// What it does, in a line (`--sweep-strategy`'s values in `--help`).
    pub help: &'static str,
}

/// What a stage of a kind is to a sweep: the sweep runs synchronous, then
/// the flood, then rate stages between the two (and probes above).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SweepRole {
    /// The first stage: one request at a time, the lowest rate and the
    /// latency floor.
    Synchronous,
    /// The second: as many at once as allowed; its rate bounds the grid.
    Flood,
    /// The interpolated stages and the probes: a target request rate.
    Rate,
    /// No part of a sweep (concurrent, replay).
    Outside,
}

/// What the steering keys (`+ - * / r`) change on a running stage: each
/// change starts a new stage.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Steers {
    /// The request rate of an open-loop stage.
    Rate,
    /// The number of streams of a concurrent stage (whole, at least one).
    Streams,
    /// A stage that sets its own pace (synchronous, throughput): a key
    /// starts a constant stage from the rate achieved so far.
    FromAchieved,
}

impl Steers {
    /// What the keys change, in one word (`rate`, `streams`).
    pub const fn unit(self) -> &'static str {
        match self {
            Steers::Streams => "streams",
            Steers::Rate | Steers::FromAchieved => "rate",
        }
    }

    /// The help screen's lines: what the keys do here, `+ / -`, `* / /`.
    pub const fn help(self) -> [&'static str; 3] {
        match self {
            Steers::Streams => [
                "concurrent stage: keys change the number of streams",
                "+ / -     one more / one fewer stream (10 %, at least 1)",
                "* / /     double / halve the streams",
            ],
            Steers::FromAchieved => [
                "synchronous / throughput: keys start a constant stage",
                "+ / -     constant at the rate achieved so far ±10 %",
                "* / /     constant at double / half the measured rate",
            ],
            Steers::Rate => [
                "constant / poisson stage: keys change the request rate",
                "+ / -     rate up / down 10 %",
                "* / /     double / halve the rate",
            ],
        }
    }

    /// The footer's word for `+/-`.
    pub const fn footer(self) -> &'static str {
        match self {
            Steers::Streams => "streams ±10%",
            Steers::FromAchieved => "constant ±10%",
            Steers::Rate => "rate ±10%",
        }
    }
}

const SYNCHRONOUS: KindInfo = KindInfo {
    name: "synchronous",
    open_loop: false,
    role: SweepRole::Synchronous,
    steers: Steers::FromAchieved,
    from_trace: false,
    pace: "one request at a time",
    help: "One request at a time",
};
const CONCURRENT: KindInfo = KindInfo {
    name: "concurrent",
    open_loop: false,
    role: SweepRole::Outside,
    steers: Steers::Streams,
    from_trace: false,
    pace: "no target rate",
    help: "A fixed number of streams, each sending its next request when the last ends",
};
const THROUGHPUT: KindInfo = KindInfo {
    name: "throughput",
    open_loop: false,
    role: SweepRole::Flood,
    steers: Steers::FromAchieved,
    from_trace: false,
    pace: "all at once",
    help: "As many at once as allowed",
};
const CONSTANT: KindInfo = KindInfo {
    name: "constant",
    open_loop: true,
    role: SweepRole::Rate,
    steers: Steers::Rate,
    from_trace: false,
    pace: "no target rate",
    help: "Evenly spaced requests",
};
const POISSON: KindInfo = KindInfo {
    name: "poisson",
    open_loop: true,
    role: SweepRole::Rate,
    steers: Steers::Rate,
    from_trace: false,
    pace: "no target rate",
    help: "Random gaps (gamma-distributed with --burstiness)",
};
const REPLAY: KindInfo = KindInfo {
    name: "replay",
    open_loop: true,
    role: SweepRole::Outside,
    steers: Steers::Rate,
    from_trace: true,
    pace: "no target rate",
    help: "Each request of a trace at its time",
};

impl fmt::Display for StrategyKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for StrategyKind {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        StrategyKind::ALL
            .into_iter()
            .find(|k| k.name() == s)
            .ok_or_else(|| {
                let names: Vec<&str> = StrategyKind::ALL.iter().map(|k| k.name()).collect();
                format!("unknown strategy {s:?} (one of {})", names.join(", "))
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The strings the code wrote before these types existed, literally.
    const OLD_STRATEGIES: [&str; 6] = [
        "synchronous",
        "concurrent",
        "throughput",
        "constant",
        "poisson",
        "replay",
    ];

    /// The footer's `+/-` says by how much, as the help does (the concurrent
    /// footer read `streams ±` with no amount).
    #[test]
    fn every_footer_step_names_its_amount() {
        for s in [Steers::Streams, Steers::FromAchieved, Steers::Rate] {
            assert!(s.footer().ends_with("±10%"), "{}", s.footer());
            assert!(s.help()[1].contains("10 %"), "{}", s.help()[1]);
        }
    }

    /// Fails to compile when a variant is added, as a reminder to list it
    /// in `ALL` (the tests below check the list is complete).
    fn strategy_index(k: StrategyKind) -> usize {
        match k {
            StrategyKind::Synchronous => 0,
            StrategyKind::Concurrent => 1,
            StrategyKind::Throughput => 2,
            StrategyKind::Constant => 3,
            StrategyKind::Poisson => 4,
            StrategyKind::Replay => 5,
        }
    }

    /// One descriptor per kind: its name reads back as the kind, and what
    /// the keys change follows from how the kind paces itself.
    #[test]
    fn each_kind_is_described_once_and_consistently() {
        for k in StrategyKind::ALL {
            let info = k.info();
            assert_eq!(info.name.parse::<StrategyKind>(), Ok(k));
            let expected = match (info.open_loop, k) {
                (true, _) => Steers::Rate,
                (false, StrategyKind::Concurrent) => Steers::Streams,
                (false, _) => Steers::FromAchieved,
            };
            assert_eq!(info.steers, expected, "{k}");
            assert!(!info.pace.is_empty() && !info.help.is_empty());
            assert!(info.steers.help().iter().all(|l| !l.is_empty()));
            // A sweep's rate stages are open loop, its first two closed;
            // only an open-loop stage follows a trace.
            match info.role {
                SweepRole::Rate => assert!(info.open_loop && !info.from_trace, "{k}"),
                SweepRole::Synchronous | SweepRole::Flood => assert!(!info.open_loop, "{k}"),
                SweepRole::Outside => {}
            }
            assert!(!info.from_trace || info.open_loop, "{k}");
        }
    }

    /// The questions, kind by kind, as the code asked them before the
    /// descriptor answered them.
    #[test]
    fn the_questions_answer_as_the_kinds_did() {
        use StrategyKind::*;
        let which = |q: fn(StrategyKind) -> bool| -> Vec<StrategyKind> {
            StrategyKind::ALL.into_iter().filter(|k| q(*k)).collect()
        };
        assert_eq!(which(StrategyKind::is_synchronous), [Synchronous]);
        assert_eq!(which(StrategyKind::is_flood), [Throughput]);
        assert_eq!(which(StrategyKind::is_rate), [Constant, Poisson]);
        assert_eq!(which(StrategyKind::counts_streams), [Concurrent]);
        assert_eq!(which(StrategyKind::follows_trace), [Replay]);
        assert_eq!(
            which(StrategyKind::is_open_loop),
            [Constant, Poisson, Replay]
        );
        assert_eq!(
            which(StrategyKind::can_steer),
            [Synchronous, Concurrent, Throughput, Constant, Poisson]
        );
    }

    /// Stage names as the engine's strategies and the peers' stages made
    /// them before both asked the kind.
    #[test]
    fn stage_names_are_the_names_stages_had() {
        use StrategyKind::*;
        for (kind, target, name) in [
            (Synchronous, None, "synchronous"),
            (Throughput, None, "throughput"),
            (Concurrent, Some(8.0), "concurrent@8"),
            (Concurrent, None, "concurrent"),
            (Constant, Some(5.254), "constant@5.25"),
            (Poisson, Some(0.5), "poisson@0.50"),
            (Constant, None, "constant"),
            // A replay's target is its trace's mean rate: not in its name.
            (Replay, Some(1.95), "replay"),
        ] {
            assert_eq!(kind.stage_name(target), name);
        }
    }

    #[test]
    fn strategy_kinds_keep_the_old_names_on_the_wire() {
        let idx: Vec<usize> = StrategyKind::ALL.into_iter().map(strategy_index).collect();
        assert_eq!(idx, (0..6).collect::<Vec<_>>(), "ALL lists every kind once");
        for (k, old) in StrategyKind::ALL.into_iter().zip(OLD_STRATEGIES) {
            assert_eq!(k.name(), old);
            assert_eq!(k.to_string(), old);
            let json = serde_json::to_string(&k).unwrap();
            assert_eq!(json, format!("\"{old}\""));
            assert_eq!(serde_json::from_str::<StrategyKind>(&json).unwrap(), k);
            assert_eq!(old.parse::<StrategyKind>(), Ok(k));
        }
        assert!(serde_json::from_str::<StrategyKind>("\"sweep\"").is_err());
        let e = "sync".parse::<StrategyKind>().unwrap_err();
        assert!(e.contains("synchronous, concurrent"), "{e}");
    }
}
