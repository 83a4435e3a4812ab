//! GuideLLM's command line, read the way its users type it: when a command
//! line does not parse, its GuideLLM words (`benchmark`, `--rate-type
//! sweep`, `--output-path`) are named with llmsweep's for each, and the
//! whole line is written back in llmsweep's words, ready to paste. Seen:
//! `--rate-type sweep` got clap's `a similar argument exists: '--rate'`
//! (the flag is `--profile sweep`), `benchmark` got `unrecognized
//! subcommand`. The names are those of GuideLLM 0.3 and 0.4 (`guidellm
//! benchmark [run] --help`), legacy aliases included.

/// What a GuideLLM flag is in llmsweep.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Becomes {
    /// Another flag with the same value.
    Flag(&'static str),
    /// A switch: the GuideLLM flag's value (if any) is dropped.
    Switch(&'static str),
    /// `--rate-type X`: `--profile X` (GuideLLM's `async` is `constant`).
    Profile,
    /// `--request-type chat_completions`: `--api chat`.
    Api,
    /// `--backend kind=openai_http,target=URL`: `--target URL`.
    Backend,
    /// `--output-path results/bench.json`: `--out results/bench` (llmsweep
    /// writes a directory of reports).
    OutDir,
    /// Nothing in llmsweep does this: left out of the line.
    Nothing,
}

struct Habit {
    flags: &'static [&'static str],
    /// Values the flag takes (0 for a switch).
    values: usize,
    becomes: Becomes,
    /// What to know about llmsweep's way.
    note: &'static str,
}

const HABITS: &[Habit] = &[
    Habit {
        flags: &["--rate-type"],
        values: 1,
        becomes: Becomes::Profile,
        note: "sweep, synchronous, throughput, concurrent, constant, poisson; GuideLLM's async is constant",
    },
    Habit {
        flags: &["--backend-type", "--backend"],
        values: 1,
        becomes: Becomes::Backend,
        note: "llmsweep speaks the OpenAI HTTP API (GuideLLM's openai_http); --api chat|completions|responses picks the endpoint",
    },
    Habit {
        flags: &["--backend-args", "--backend-kwargs"],
        values: 1,
        becomes: Becomes::Nothing,
        note: "headers go in --header 'K: V', request-body fields in --extra-body JSON",
    },
    Habit {
        flags: &["--processor"],
        values: 1,
        becomes: Becomes::Flag("--tokenizer"),
        note: "a tokenizer.json or a model directory",
    },
    Habit {
        flags: &["--processor-args"],
        values: 1,
        becomes: Becomes::Nothing,
        note: "--tokenizer takes a tokenizer.json or a model directory, no arguments",
    },
    Habit {
        flags: &[
            "--data-args",
            "--data-column-mapper",
            "--dataloader-kwargs",
            "--data-num-workers",
            "--data-sampler",
        ],
        values: 1,
        becomes: Becomes::Nothing,
        note: "--data takes a synthetic spec or a .jsonl/.json/.csv file (prompt column found by name); prompts are taken in order",
    },
    Habit {
        flags: &["--data-samples"],
        values: 1,
        becomes: Becomes::Nothing,
        note: "synthetic data: --data prompt_tokens=N,output_tokens=N,samples=N",
    },
    Habit {
        flags: &["--prompt-tokens", "--output-tokens"],
        values: 1,
        becomes: Becomes::Nothing,
        note: "lengths go in --data prompt_tokens=N,output_tokens=N",
    },
    Habit {
        flags: &["--random-seed"],
        values: 1,
        becomes: Becomes::Flag("--seed"),
        note: "",
    },
    Habit {
        flags: &["--output-path", "--output-dir"],
        values: 1,
        becomes: Becomes::OutDir,
        note: "a directory: report.json, .csv, .md and .html are written in it",
    },
    Habit {
        flags: &["--outputs", "--output-formats"],
        values: 1,
        becomes: Becomes::Flag("--export"),
        note: "json,csv,md,html (the default), console, vllm, sglang, profile",
    },
    Habit {
        flags: &["--output-sampling", "--sample-requests"],
        values: 1,
        becomes: Becomes::Switch("--save-requests"),
        note: "every request, to requests.jsonl",
    },
    Habit {
        flags: &["--output-extras", "--label"],
        values: 1,
        becomes: Becomes::Nothing,
        note: "the report's config echoes every setting",
    },
    Habit {
        flags: &["--warmup-percent"],
        values: 1,
        becomes: Becomes::Flag("--warmup"),
        note: "a fraction below 1 of the stage, or seconds",
    },
    Habit {
        flags: &["--cooldown-percent"],
        values: 1,
        becomes: Becomes::Flag("--cooldown"),
        note: "a fraction below 1 of the stage, or seconds",
    },
    Habit {
        flags: &["--rampup"],
        values: 1,
        becomes: Becomes::Flag("--ramp-up"),
        note: "seconds",
    },
    Habit {
        flags: &["--max-error-rate", "--max-global-error-rate"],
        values: 1,
        becomes: Becomes::Nothing,
        note: "llmsweep stops at --max-errors N errored requests (a count, not a rate)",
    },
    Habit {
        flags: &[
            "--disable-progress",
            "--disable-console-interactive",
            "--disable-console-outputs",
            "--disable-console",
        ],
        values: 0,
        becomes: Becomes::Switch("--headless"),
        note: "progress lines instead of the dashboard",
    },
    Habit {
        flags: &["--display-scheduler-stats"],
        values: 0,
        becomes: Becomes::Nothing,
        note: "every stage's report has llmsweep's check of its own lag",
    },
    Habit {
        flags: &["--scenario", "--config"],
        values: 1,
        becomes: Becomes::Flag("--profile"),
        note: "a shipped profile (llmsweep profiles) or a .toml file whose keys are the flags in snake_case",
    },
    Habit {
        flags: &["--request-type"],
        values: 1,
        becomes: Becomes::Api,
        note: "chat, completions or responses",
    },
    Habit {
        flags: &["--override"],
        values: 2,
        becomes: Becomes::Nothing,
        note: "a stage per rate: --rate 1,4,16",
    },
    Habit {
        flags: &["--constraint"],
        values: 1,
        becomes: Becomes::Nothing,
        note: "--max-seconds, --max-requests, --max-errors",
    },
];

/// GuideLLM's commands, first on the line.
const COMMANDS: &[(&str, Option<&str>, &str)] = &[
    (
        "benchmark",
        None,
        "no command: loading a server is llmsweep's default (`llmsweep run` is the same)",
    ),
    ("mock-server", Some("sim"), "the built-in simulated server"),
    (
        "from-file",
        Some("report"),
        "re-renders a saved report.json (-f console|md|csv|html|…)",
    ),
];

/// One GuideLLM word found, and what it is in llmsweep.
#[derive(Debug, Clone, PartialEq)]
struct Found {
    theirs: String,
    ours: Option<String>,
    note: String,
}

/// A command line (without the program's name) in llmsweep's words, with
/// what was translated; None when it has no GuideLLM word.
fn translate(args: &[String]) -> Option<(Vec<String>, Vec<Found>)> {
    let mut out = Vec::new();
    let mut found = Vec::new();
    let mut i = command(args, &mut out, &mut found);
    while i < args.len() {
        let arg = &args[i];
        i += 1;
        if arg == "--" {
            out.extend(args[i - 1..].iter().cloned());
            break;
        }
        let (flag, inline) = match arg.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f, Some(v.to_string())),
            _ => (arg.as_str(), None),
        };
        if let Some(f) = registry_option(args, &mut i, flag, inline.as_deref(), &mut out) {
            found.push(f);
            continue;
        }
        let Some(habit) = HABITS.iter().find(|h| h.flags.contains(&flag)) else {
            out.push(arg.clone());
            continue;
        };
        let mut values: Vec<String> = inline.into_iter().collect();
        while values.len() < habit.values && i < args.len() {
            values.push(args[i].clone());
            i += 1;
        }
        let theirs = std::iter::once(flag.to_string())
            .chain(values.iter().cloned())
            .collect::<Vec<_>>()
            .join(" ");
        let value = values.first().map(String::as_str).unwrap_or_default();
        let ours =
            habit_in_our_words(habit, value).filter(|o| !o.first().is_some_and(|f| given(args, f)));
        let note = match &ours {
            None if matches!(habit.becomes, Becomes::OutDir | Becomes::Backend) => {
                "given already in llmsweep's words"
            }
            _ => habit.note,
        }
        .to_string();
        found.push(Found {
            theirs,
            ours: ours.as_ref().map(|o| o.join(" ")),
            note,
        });
        out.extend(ours.into_iter().flatten());
    }
    (!found.is_empty()).then_some((merge_exports(out), found))
}

/// GuideLLM's command, then `run` after `benchmark` (0.4's `benchmark
/// run`): its translation put in `out` and `found`, and the index of the
/// first argument after it.
fn command(args: &[String], out: &mut Vec<String>, found: &mut Vec<Found>) -> usize {
    let Some((cmd, ours, note)) = args
        .first()
        .and_then(|a| COMMANDS.iter().find(|(c, _, _)| a == c))
    else {
        return 0;
    };
    found.push(Found {
        theirs: cmd.to_string(),
        ours: ours.map(str::to_string),
        note: note.to_string(),
    });
    out.extend(ours.map(str::to_string));
    if *cmd == "benchmark" && args.get(1).is_some_and(|a| a == "run") {
        return 2;
    }
    if *cmd == "benchmark" && args.get(1).is_some_and(|a| a == "from-file") {
        out.push("report".into());
        return 2;
    }
    1
}

/// A flag the line already gives in llmsweep's words (not as a GuideLLM
/// registry value) is not given twice (seen: `--output-path` beside
/// `--out` became `--out bench … --out /tmp/m`, which the parser refuses).
fn given(args: &[String], f: &str) -> bool {
    args.iter().enumerate().any(|(j, a)| {
        let inline = a.strip_prefix(f).and_then(|r| r.strip_prefix('='));
        let value = match inline {
            Some(v) => Some(v),
            None if a == f => args.get(j + 1).map(String::as_str),
            None => None,
        };
        value.is_some_and(|v| super::kinds::parse(v).is_none())
    })
}

/// GuideLLM 0.8's registry options (`--profile kind=constant,rate=5`),
/// and 0.3–0.7's JSON `--data '{…}'`: every key its flag, or named. None
/// when `flag` is no registry option or its value is not one (`i` is then
/// where it was).
fn registry_option(
    args: &[String],
    i: &mut usize,
    flag: &str,
    inline: Option<&str>,
    out: &mut Vec<String>,
) -> Option<Found> {
    if !super::kinds::REGISTRY_FLAGS.contains(&flag) {
        return None;
    }
    let value = inline.map(str::to_string).or_else(|| args.get(*i).cloned());
    let kv = value.as_deref().and_then(super::kinds::parse)?;
    if inline.is_none() {
        *i += 1;
    }
    let theirs = format!("{flag} {}", value.unwrap_or_default());
    let m = super::kinds::map(flag, &kv);
    let mut ours = Vec::new();
    for pair in m.ours.chunks(2) {
        let f = pair[0].as_str();
        let repeat = f != "--export" && out.iter().any(|o| o == f);
        if !given(args, f) && !repeat {
            ours.extend(pair.iter().cloned());
        }
    }
    let mut note = String::new();
    if !m.dropped.is_empty() {
        note = format!("no flag for {}", m.dropped.join(", "));
    }
    if !m.note.is_empty() && (ours.is_empty() || !m.dropped.is_empty()) {
        if !note.is_empty() {
            note.push_str(": ");
        }
        note.push_str(m.note);
    }
    let found = Found {
        theirs,
        ours: (!ours.is_empty()).then(|| ours.join(" ")),
        note,
    };
    out.extend(ours);
    Some(found)
}

/// What a habit's flag and value become in llmsweep's words (None: no
/// flag of ours says it).
fn habit_in_our_words(habit: &Habit, value: &str) -> Option<Vec<String>> {
    match habit.becomes {
        Becomes::Flag(f) => Some(vec![f.to_string(), value.to_string()]),
        Becomes::Switch(f) => Some(vec![f.to_string()]),
        Becomes::Profile => Some(vec![
            "--profile".into(),
            match value {
                "async" => "constant".to_string(),
                v => v.to_string(),
            },
        ]),
        Becomes::Api => match value {
            "chat_completions" => Some(vec!["--api".into(), "chat".into()]),
            "text_completions" => Some(vec!["--api".into(), "completions".into()]),
            _ => None,
        },
        Becomes::Backend => value
            .split(',')
            .find_map(|kv| kv.strip_prefix("target="))
            .map(|t| vec!["--target".into(), t.to_string()]),
        Becomes::OutDir => Some(vec!["--out".into(), super::kinds::report_dir(value)]),
        Becomes::Nothing => None,
    }
}

/// Several GuideLLM `--output`s (`kind=json`, `kind=csv`) as one
/// `--export json,csv`, where the first was.
fn merge_exports(line: Vec<String>) -> Vec<String> {
    let mut formats: Vec<String> = Vec::new();
    let mut out: Vec<String> = Vec::new();
    let mut first = None;
    let mut i = 0;
    while i < line.len() {
        if line[i] == "--export" && i + 1 < line.len() {
            first.get_or_insert(out.len());
            for f in line[i + 1].split(',') {
                if !formats.iter().any(|g| g == f) {
                    formats.push(f.to_string());
                }
            }
            i += 2;
            continue;
        }
        out.push(line[i].clone());
        i += 1;
    }
    if let Some(at) = first {
        out.splice(at..at, ["--export".to_string(), formats.join(",")]);
    }
    out
}

/// An argument as a shell reads it back: quoted when it has to be.
fn shell_word(a: &str) -> String {
    let plain = !a.is_empty()
        && a.chars()
            .all(|c| c.is_ascii_alphanumeric() || "_./:=,@%+-".contains(c));
    if plain {
        a.to_string()
    } else {
        format!("'{}'", a.replace('\'', r"'\''"))
    }
}

/// The hint for a command line clap accepts but whose values are GuideLLM
/// 0.8's registry options (`--profile kind=sweep --data
/// kind=synthetic_text,…`: llmsweep has `--profile` and `--data`, so the
/// line parses and would fail later, one value at a time); None otherwise.
pub fn guidellm_value_hint(args: &[String]) -> Option<String> {
    let words = args.iter().take_while(|a| *a != "--");
    let pairs: Vec<&String> = words.collect();
    let registry = pairs.iter().enumerate().any(|(j, a)| {
        let (flag, inline) = match a.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f, Some(v)),
            _ => (a.as_str(), None),
        };
        super::kinds::REGISTRY_FLAGS.contains(&flag)
            && inline
                .or_else(|| pairs.get(j + 1).map(|s| s.as_str()))
                .and_then(super::kinds::parse)
                .is_some()
    });
    registry.then(|| guidellm_hint(args)).flatten()
}

/// The hint for a command line that did not parse, if it speaks GuideLLM:
/// each GuideLLM word with llmsweep's, then the line in llmsweep's words.
/// `args` is the command line without the program's name.
pub fn guidellm_hint(args: &[String]) -> Option<String> {
    let (line, found) = translate(args)?;
    let mut s = String::from("error: these are GuideLLM's words; llmsweep's are:\n");
    let width = found
        .iter()
        .map(|f| f.theirs.chars().count())
        .max()
        .unwrap_or(0);
    for f in &found {
        let ours = match (&f.ours, f.note.is_empty()) {
            (Some(o), true) => o.clone(),
            (Some(o), false) => format!("{o}  ({})", f.note),
            (None, _) if f.note.starts_with("no command") => f.note.to_string(),
            (None, _) => format!("left out: {}", f.note),
        };
        s.push_str(&format!("  {:<width$}  →  {ours}\n", f.theirs));
    }
    let words: Vec<String> = line.iter().map(|a| shell_word(a)).collect();
    s.push_str(&format!(
        "try:\n  llmsweep {}\n(`llmsweep --help` lists every flag)",
        words.join(" ")
    ));
    Some(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(line: &str) -> Vec<String> {
        line.split_whitespace().map(str::to_string).collect()
    }

    fn line_of(line: &str) -> String {
        translate(&args(line))
            .map(|(l, _)| l.join(" "))
            .unwrap_or_else(|| "(none)".into())
    }

    /// Issue 34 item 5. Seen: `--rate-type sweep` → "a similar argument
    /// exists: '--rate'", `benchmark` → "unrecognized subcommand".
    #[test]
    fn guidellm_command_lines_come_back_in_llmsweeps_words() {
        assert_eq!(
            line_of("--rate-type sweep --target http://h:8000"),
            "--profile sweep --target http://h:8000"
        );
        assert_eq!(
            line_of("benchmark --target http://h:8000 --rate-type=async --rate 5"),
            "--target http://h:8000 --profile constant --rate 5"
        );
        assert_eq!(
            line_of("benchmark run --target http://h --output-path out.json --warmup-percent 0.1"),
            "--target http://h --out out --warmup 0.1"
        );
        assert_eq!(
            line_of("benchmark --backend-type openai_http --processor gpt2 --random-seed 7 --disable-progress"),
            "--tokenizer gpt2 --seed 7 --headless"
        );
        assert_eq!(
            line_of("--backend kind=openai_http,target=http://h:1 --request-type text_completions"),
            "--target http://h:1 --api completions"
        );
        assert_eq!(
            line_of(
                "--display-scheduler-stats --max-error-rate 0.1 --output-sampling 20 --target x"
            ),
            "--save-requests --target x"
        );
        assert_eq!(line_of("mock-server --port 8000"), "sim --port 8000");
        assert_eq!(line_of("--output-dir runs/a"), "--out runs/a");
        assert_eq!(line_of("--output-path runs/b.JSON"), "--out runs/b");
        // Given already in llmsweep's words: not twice (the first-hour
        // trial's rewrite read `--out bench --headless --out /tmp/m`).
        assert_eq!(
            line_of("--output-path bench.json --headless --out /tmp/m"),
            "--headless --out /tmp/m"
        );
        assert_eq!(line_of("--output-path b.json --out=/tmp/m"), "--out=/tmp/m");
        assert_eq!(line_of("benchmark from-file r.json"), "report r.json");
        // Nothing of GuideLLM's: no hint (clap's own error stands).
        assert_eq!(line_of("--rates 5 --target x"), "(none)");
        assert_eq!(line_of("run --profile sweep"), "(none)");
        // After `--`, nothing is a flag.
        assert_eq!(
            line_of("--rate-type sweep -- --processor"),
            "--profile sweep -- --processor"
        );
    }

    /// Issue 47. Seen: GuideLLM 0.8's line got `--constraint … → left
    /// out` and a "try:" line that kept `--profile kind=…`, `--data
    /// kind=…`, `--tokenizer kind=…` and `--output kind=…`; 0.3's JSON
    /// `--data` was kept as it was ("unknown format").
    #[test]
    fn guidellm_08_and_03_lines_translate_whole() {
        assert_eq!(
            line_of(
                "run --backend kind=openai_http,target=http://h:8000 --profile kind=constant,rate=5 \
                 --constraint kind=max_duration,seconds=10 \
                 --data kind=synthetic_text,prompt_tokens=64,output_tokens=32 \
                 --tokenizer kind=hf_auto,model=./tok --output kind=json,path=g.json"
                    .replace('\\', " ")
                    .as_str()
            ),
            "run --target http://h:8000 --profile constant --rate 5 --max-seconds 10 \
             --data prompt_tokens=64,output_tokens=32 --tokenizer ./tok --out g --export json"
                .split_whitespace()
                .filter(|w| *w != "\\")
                .collect::<Vec<_>>()
                .join(" ")
        );
        let json = vec![
            "benchmark".to_string(),
            "--target".into(),
            "http://h".into(),
            "--rate-type".into(),
            "constant".into(),
            "--rate".into(),
            "5".into(),
            "--data".into(),
            r#"{"prompt_tokens": 64, "output_tokens": 32}"#.into(),
            "--processor".into(),
            "gpt2".into(),
        ];
        let (line, _) = translate(&json).unwrap();
        assert_eq!(
            line.join(" "),
            "--target http://h --profile constant --rate 5 --data prompt_tokens=64,output_tokens=32 --tokenizer gpt2"
        );
        // Two outputs: one directory, both formats.
        assert_eq!(
            line_of("--output kind=json,path=r/g.json --output kind=csv,path=r/g.csv"),
            "--out r/g --export json,csv"
        );
        // A flag given in llmsweep's words is not given twice.
        assert_eq!(
            line_of("--constraint kind=max_duration,seconds=10 --max-seconds 5"),
            "--max-seconds 5"
        );
        // Accepted by clap, still GuideLLM's: the value hint.
        let accepted: Vec<String> = args("--profile kind=sweep --target http://h");
        let h = guidellm_value_hint(&accepted).unwrap();
        assert!(
            h.contains("llmsweep --profile sweep --target http://h"),
            "{h}"
        );
        assert_eq!(
            guidellm_value_hint(&args("--profile sweep --data prompt_tokens=8")),
            None
        );
    }

    #[test]
    fn the_hint_names_what_has_no_flag() {
        let h = guidellm_hint(&args(
            "--backend kind=openai_http,target=http://h --constraint kind=over_saturation --data kind=huggingface,source=a/b",
        ))
        .unwrap();
        for want in [
            "→  left out: no flag for kind=over_saturation: llmsweep's over-saturation guard is on by default",
            "→  left out: no flag for kind=huggingface, source=a/b",
            "try:\n  llmsweep --target http://h\n",
        ] {
            assert!(h.contains(want), "{want:?} not in:\n{h}");
        }
    }

    #[test]
    fn the_hint_names_each_flag_and_a_line_to_paste() {
        let h = guidellm_hint(&args(
            "benchmark --target http://127.0.0.1:8000 --rate-type sweep --data prompt_tokens=256,output_tokens=128 --display-scheduler-stats",
        ))
        .unwrap();
        for want in [
            "  --rate-type sweep          →  --profile sweep  (sweep, synchronous",
            "  benchmark                  →  no command: loading a server is llmsweep's default",
            "  --display-scheduler-stats  →  left out: ",
            "try:\n  llmsweep --target http://127.0.0.1:8000 --profile sweep --data prompt_tokens=256,output_tokens=128\n",
        ] {
            assert!(h.contains(want), "{want:?} not in:\n{h}");
        }
        assert_eq!(guidellm_hint(&args("--rate 5 --bogus")), None);
        assert_eq!(shell_word("K: V"), "'K: V'");
        assert_eq!(shell_word("it's"), r"'it'\''s'");
    }
}
