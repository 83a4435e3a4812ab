//! `llmsweep compare A.json B.json`: stage by stage, what changed from A to B,
//! each change with whether it is larger than the noise (`*` significant,
//! `~` within noise, `?` cannot tell), the words `report::baseline` gives.

use std::fmt::Write as _;

use super::columns;
use super::delta::{delta, pair};
use super::tables::pipe_table;
use crate::types::{Report, StageReport};

/// The comparison, A the baseline and B the new run. Errs on a histogram
/// that does not decode (naming its stage; the caller names the file).
pub fn render(a: &Report, b: &Report, a_name: &str, b_name: &str) -> anyhow::Result<String> {
    let mut s = heading(a, b, a_name, b_name);
    s.push_str(&stage_table(a, b)?);
    let lines = super::baseline::stage_lines(a, b)?;
    if !lines.is_empty() {
        let _ = writeln!(s, "\n{NOISE_NOTE}");
        for line in lines {
            let _ = writeln!(s, "  {line}");
        }
    }
    if let Some(t) = reasoning_table(a, b) {
        s.push_str(&t);
    }
    for line in conversation_lines(a, b) {
        let _ = writeln!(s, "{line}");
    }
    // Stages no pair holds: what only one run ran (its rate may still be
    // on the other's curve: the words above say so).
    let pairs = pair(a, b);
    for (r, first, tag) in [(a, true, "A"), (b, false, "B")] {
        for st in super::delta::unpaired(r, &pairs, first) {
            let _ = writeln!(
                s,
                "only in {tag}: {}",
                crate::types::stage_run_name(&r.stages, st)
            );
        }
    }
    Ok(s)
}

/// What the words of the differences mean.
const NOISE_NOTE: &str = "The answer's change is significant when the two runs' intervals do not overlap. \
B against A at the same rate (a rate A did not run: interpolated between A's stages around it). \
significant: the change's 95 % interval excludes 0 (a seeded bootstrap over both stages' histograms; for req/s, \
the completions' counting noise); within noise: it does not; cannot tell: fewer than 10 requests.";

/// Which run is which, and each run's answer first, as every report says it.
fn heading(a: &Report, b: &Report, a_name: &str, b_name: &str) -> String {
    let mut s = String::new();
    for (k, name, r) in [("A", a_name, a), ("B", b_name, b)] {
        let _ = writeln!(
            s,
            "{k}: {name} — {} ({}), {}",
            crate::safe::line(&r.target.model),
            crate::safe::line(&r.target.url),
            r.created
        );
    }
    for (k, r) in [("A", a), ("B", b)] {
        let answer = super::summary::answer(r);
        let _ = writeln!(s, "{k} {}", crate::stats::answer_line::line(&answer));
    }
    let _ = writeln!(s, "B against A: {}", super::baseline::answer_words(a, b));
    s.push('\n');
    s
}

/// A figure `compare` sets side by side.
struct Compared {
    /// The header of A's and B's columns (`TTFT p50` → `TTFT p50 A`, `TTFT p50 B`).
    name: &'static str,
    /// The header of the change's column.
    delta: &'static str,
    get: fn(&StageReport) -> f64,
    digits: usize,
    /// The figure's key in `report::baseline::ROW`, when its change's
    /// noise is known (None: the change alone).
    key: Option<&'static str>,
}

const COMPARED: [Compared; 5] = [
    Compared {
        name: columns::ACHIEVED_HEADER,
        delta: "Δ achieved",
        get: |s| columns::ACHIEVED.num(s),
        digits: 2,
        key: Some("achieved_requests_per_s"),
    },
    Compared {
        name: "Out tok/s",
        delta: "Δ tok/s",
        get: |s| columns::OUTPUT_TOKENS_PER_S.num(s),
        digits: 0,
        key: None,
    },
    Compared {
        name: "TTFT p50",
        delta: "Δ TTFT p50",
        get: |s| columns::TTFT.of(s).p50,
        digits: 1,
        key: Some("ttft_p50_ms"),
    },
    Compared {
        name: "TTFT p99",
        delta: "Δ TTFT p99",
        get: |s| columns::TTFT.of(s).p99,
        digits: 1,
        key: Some("ttft_p99_ms"),
    },
    Compared {
        name: "ITL p50",
        delta: "Δ ITL p50",
        get: |s| columns::ITL.of(s).p50,
        digits: 2,
        key: Some("itl_p50_ms"),
    },
];

/// The paired stages' figures, A, B and the change, marked with its noise
/// where the histograms tell (as the dashboard marks a change from a
/// baseline: `+25%*`).
fn stage_table(a: &Report, b: &Report) -> anyhow::Result<String> {
    let names: Vec<String> = COMPARED
        .iter()
        .flat_map(|c| {
            [
                format!("{} A", c.name),
                format!("{} B", c.name),
                c.delta.to_string(),
            ]
        })
        .collect();
    let mut headers = vec!["Stage (A → B)"];
    headers.extend(names.iter().map(String::as_str));
    let mut rows: Vec<Vec<String>> = Vec::new();
    for (x, y) in pair(a, b) {
        let change = super::baseline::stage_change(a, y, &y.name)?;
        let mut row = vec![pair_name(a, b, x, y)];
        for c in &COMPARED {
            let (va, vb) = ((c.get)(x), (c.get)(y));
            let p = c.digits;
            let marked = c.key.and_then(|k| {
                let f = change.as_ref()?.figures.iter().find(|f| f.figure == k)?;
                Some(super::baseline::change_short(f))
            });
            row.extend([
                format!("{va:.p$}"),
                format!("{vb:.p$}"),
                marked.unwrap_or_else(|| delta(va, vb)),
            ]);
        }
        rows.push(row);
    }
    Ok(format!(
        "{}\n{}\n{MARKS_NOTE}\n",
        pipe_table(&headers, &rows, 1),
        columns::ACHIEVED_NOTE
    ))
}

/// What the marks after a change in the stage table mean.
const MARKS_NOTE: &str = "Δ: B against A; * significant, ~ within noise, ? cannot tell (the words below); Δ tok/s the change alone.";

/// `x` or `x → y` when the paired stages' names differ, each numbered as
/// its report's tables number it (`throughput #2`).
fn pair_name(a: &Report, b: &Report, x: &StageReport, y: &StageReport) -> String {
    let (nx, ny) = (
        crate::types::stage_run_name(&a.stages, x),
        crate::types::stage_run_name(&b.stages, y),
    );
    if nx == ny {
        nx
    } else {
        format!("{nx} → {ny}")
    }
}

/// Multi-turn runs: each paired stage's conversations and, by turn, TTFT
/// p50 and cached share, A → B.
fn conversation_lines(a: &Report, b: &Report) -> Vec<String> {
    let mut out = Vec::new();
    for (x, y) in pair(a, b) {
        let (cx, cy) = (x.conversations.as_ref(), y.conversations.as_ref());
        if cx.is_none() && cy.is_none() {
            continue;
        }
        let count = |c: Option<&crate::types::Conversations>| {
            c.map_or("-".to_string(), |c| {
                format!(
                    "{} started, {} completed, {} cut off",
                    c.started, c.completed, c.cut_off
                )
            })
        };
        out.push(format!(
            "{} conversations: A {} · B {}",
            x.name,
            count(cx),
            count(cy)
        ));
        let turns = cx
            .map_or(0, |c| c.by_turn.len())
            .max(cy.map_or(0, |c| c.by_turn.len()));
        for k in 0..turns {
            let (tx, ty) = (
                cx.and_then(|c| c.by_turn.get(k)),
                cy.and_then(|c| c.by_turn.get(k)),
            );
            let ttft = |f: Option<&crate::types::TurnFigures>| {
                f.map_or("-".to_string(), |f| format!("{:.1}", f.ttft_ms.p50))
            };
            let share = |f: Option<&crate::types::TurnFigures>| {
                f.and_then(|f| f.cached_share)
                    .map_or("-".to_string(), |x| format!("{:.0}%", x * 100.0))
            };
            let d = match (tx, ty) {
                (Some(p), Some(q)) => format!(" ({})", delta(p.ttft_ms.p50, q.ttft_ms.p50)),
                _ => String::new(),
            };
            out.push(format!(
                "  turn {}: TTFT p50 {} → {} ms{d} · cached {} → {}",
                k + 1,
                ttft(tx),
                ttft(ty),
                share(tx),
                share(ty)
            ));
        }
    }
    out
}

/// `compare`'s table of the first answer token, when either run thought.
fn reasoning_table(ra: &Report, rb: &Report) -> Option<String> {
    let pairs = &pair(ra, rb);
    if !pairs
        .iter()
        .any(|(a, b)| a.reasoning.is_some() || b.reasoning.is_some())
    {
        return None;
    }
    let headers = [
        "Stage (A → B)",
        "TTFAT p50 A",
        "TTFAT p50 B",
        "Δ TTFAT p50",
        "TTFAT p99 A",
        "TTFAT p99 B",
        "Δ TTFAT p99",
        "Think tok A",
        "Think tok B",
        "Answer ITL p50 A",
        "Answer ITL p50 B",
    ];
    // A run that did not think waited for its first token.
    let ttfat = |s: &StageReport| s.waited_ttft_ms().clone();
    let rows: Vec<Vec<String>> = pairs
        .iter()
        .map(|(x, y)| {
            let (a, b) = (ttfat(x), ttfat(y));
            let think = |s: &StageReport| {
                s.reasoning
                    .as_ref()
                    .map_or("0".into(), |r| format!("{:.1}", r.reasoning_tokens_mean))
            };
            let aitl = |s: &StageReport| {
                let d = s.reasoning.as_ref().map_or(&s.itl_ms, |r| &r.answer_itl_ms);
                format!("{:.2}", d.p50)
            };
            vec![
                pair_name(ra, rb, x, y),
                format!("{:.1}", a.p50),
                format!("{:.1}", b.p50),
                delta(a.p50, b.p50),
                format!("{:.1}", a.p99),
                format!("{:.1}", b.p99),
                delta(a.p99, b.p99),
                think(x),
                think(y),
                aitl(x),
                aitl(y),
            ]
        })
        .collect();
    Some(format!(
        "\nTime to first answer token (TTFT where a run did not think):\n{}",
        pipe_table(&headers, &rows, 1)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conversations_compare_by_turn() {
        use crate::types::{Conversations, StageReport, TurnFigures};
        let run = |ttft: [f64; 2], share: f64| {
            let mut r: Report = serde_json::from_str(
                r#"{"version":1,"tool":"t","created":"c","target":{"url":"u","model":"m","api":"chat","builtin_simulator":true},"config":{},"partial":false,"end_reason":"completed","stages":[],"timeline":[]}"#,
            )
            .unwrap();
            let mut st = StageReport {
                name: "constant@2.00".into(),
                ..Default::default()
            };
            st.conversations = Some(Conversations {
                started: 10,
                completed: 8,
                cut_off: 2,
                failed: 0,
                by_turn: ttft
                    .iter()
                    .enumerate()
                    .map(|(i, &p50)| {
                        let mut t = TurnFigures {
                            turn: i as u32 + 1,
                            cached_share: Some(if i == 0 { 0.0 } else { share }),
                            ..Default::default()
                        };
                        t.ttft_ms.p50 = p50;
                        t
                    })
                    .collect(),
            });
            r.stages.push(st);
            r
        };
        let (a, b) = (run([100.0, 20.0], 0.8), run([100.0, 120.0], 0.0));
        let text = render(&a, &b, "a", "b").unwrap();
        assert!(
            text.contains(
                "constant@2.00 conversations: A 10 started, 8 completed, 2 cut off · B 10 started"
            ),
            "{text}"
        );
        assert!(
            text.contains("turn 2: TTFT p50 20.0 → 120.0 ms (+500.0%) · cached 80% → 0%"),
            "{text}"
        );
        assert!(!render(&run([1.0, 1.0], 0.0), &a, "a", "b")
            .unwrap()
            .is_empty());
    }
}
