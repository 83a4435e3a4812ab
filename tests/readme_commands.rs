//! The README is the front door: every `llmsweep …` command in its `sh`
//! blocks (and in docs/'s, but those a shell would expand) still parses with
//! the real command line (`llmsweep::cli::Cli`), a load run's settings pass
//! the checks `llmsweep run` makes before it opens anything
//! (`llmsweep::run::settings`: the profile, the plan, the model mix, the
//! baseline) and its synthetic `--data` spec reads; its dashboard is the
//! golden 80×24 snapshot; its Quick start gives the test command CI runs;
//! and the links of the README and docs/ lead to files and headings that
//! exist.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use clap::{CommandFactory, FromArgMatches};
use llmsweep::cli::{Cli, Command};
use llmsweep::config::{typed_flags, RunConfig};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The fenced blocks of `lang` in a Markdown text: (line of the first line
/// inside the fence, the block's text).
fn blocks(md: &str, lang: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut open: Option<(usize, bool, String)> = None;
    for (i, line) in md.lines().enumerate() {
        match open.as_mut() {
            None if line.starts_with("```") => {
                open = Some((
                    i + 2,
                    line.trim_start_matches('`').trim() == lang,
                    String::new(),
                ))
            }
            None => {}
            Some(_) if line.starts_with("```") => {
                if let Some((at, true, text)) = open.take() {
                    out.push((at, text));
                }
            }
            Some((_, _, text)) => {
                text.push_str(line);
                text.push('\n');
            }
        }
    }
    assert!(open.is_none(), "a code fence is not closed");
    out
}

/// A shell word or an operator (`&`, `&&`, `|`, `;`, `>`, …) that ends a command.
#[derive(Debug, PartialEq)]
enum Token {
    Word(String),
    Op,
}

/// Stands in a word for what the shell would expand (`$…`, a backquote).
const EXPANDED: char = '\u{0}';

/// One line of shell, split as the shell splits it for the commands the
/// docs show: quotes, comments, operators; an expansion (`$`, a backquote,
/// outside single quotes) is marked [`EXPANDED`], not expanded.
fn shell_words(line: &str) -> Result<Vec<Token>, String> {
    let mut out = Vec::new();
    let mut word: Option<String> = None;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                let w = word.get_or_insert_with(String::new);
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(c) => w.push(c),
                        None => return Err("an unclosed single quote".into()),
                    }
                }
            }
            '"' => {
                let w = word.get_or_insert_with(String::new);
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('$' | '`') => w.push(EXPANDED),
                        Some('\\') => w.extend(chars.next()),
                        Some(c) => w.push(c),
                        None => return Err("an unclosed double quote".into()),
                    }
                }
            }
            '$' | '`' => word.get_or_insert_with(String::new).push(EXPANDED),
            '\\' => word.get_or_insert_with(String::new).extend(chars.next()),
            '#' if word.is_none() => break,
            c if c.is_whitespace() => out.extend(word.take().map(Token::Word)),
            '&' | '|' | ';' | '>' | '<' | '(' | ')' => {
                out.extend(word.take().map(Token::Word));
                out.push(Token::Op);
            }
            c => word.get_or_insert_with(String::new).push(c),
        }
    }
    out.extend(word.map(Token::Word));
    Ok(out)
}

/// Every `llmsweep …` command of a shell block: (its line, its arguments).
fn llmsweep_commands(at: usize, block: &str) -> Vec<(usize, Vec<String>)> {
    let mut out = Vec::new();
    let mut joined = String::new();
    let mut first = at;
    for (i, line) in block.lines().enumerate() {
        if joined.is_empty() {
            first = at + i;
        }
        if let Some(head) = line.strip_suffix('\\') {
            joined.push_str(head);
            joined.push(' ');
            continue;
        }
        joined.push_str(line);
        let tokens = shell_words(&joined).unwrap_or_else(|e| {
            panic!("line {first}: {e}: {joined}");
        });
        joined.clear();
        let mut command: Option<Vec<String>> = None;
        let mut at_start = true;
        for t in tokens {
            match t {
                Token::Op => {
                    out.extend(command.take().map(|c| (first, c)));
                    at_start = true;
                }
                Token::Word(w) => match command.as_mut() {
                    Some(c) => c.push(w),
                    None if at_start && w == "llmsweep" => command = Some(Vec::new()),
                    // An environment assignment before the command.
                    None if at_start && w.contains('=') && !w.starts_with('-') => {}
                    None => at_start = false,
                },
            }
        }
        out.extend(command.map(|c| (first, c)));
    }
    out
}

/// The files a load run's settings name, made as the README's commands
/// before it would have written them: a `--baseline` from the fixture
/// report, a profile file as `llmsweep report -f profile` renders it.
fn make_inputs(args: &[String], fixture: &Path) {
    let report = llmsweep::report::checkpoint::load_any(fixture).expect("the fixture report loads");
    for pair in args.windows(2) {
        let path = Path::new(&pair[1]);
        match pair[0].as_str() {
            "--baseline" => {
                let file = if path.extension().is_some_and(|e| e == "json") {
                    path.to_path_buf()
                } else {
                    path.join("report.json")
                };
                if let Some(dir) = file.parent().filter(|d| !d.as_os_str().is_empty()) {
                    std::fs::create_dir_all(dir).unwrap();
                }
                std::fs::copy(fixture, &file).unwrap();
            }
            "--profile" if pair[1].ends_with(".toml") && !path.exists() => {
                std::fs::write(path, llmsweep::report::rerun::render(&report)).unwrap()
            }
            _ => {}
        }
    }
}

/// A load run's settings, checked as `llmsweep run` checks them before it
/// opens anything, and its synthetic data spec read.
fn check_run(args: RunConfig, typed: &std::collections::HashSet<String>) -> Result<(), String> {
    let (settings, _) = llmsweep::run::settings(args, typed).map_err(|e| format!("{e:#}"))?;
    let data = settings.data.trim();
    if data.contains('=') {
        llmsweep::data::Synthetic::parse(data).map_err(|e| format!("{e:#}"))?;
    }
    Ok(())
}

/// Parses one command as the binary does; for a load run, checks its settings.
fn check(args: &[String]) -> Result<(), String> {
    let argv = std::iter::once("llmsweep".to_string()).chain(args.iter().cloned());
    let matches = Cli::command()
        .try_get_matches_from(argv)
        .map_err(|e| e.render().to_string())?;
    let cli = Cli::from_arg_matches(&matches).map_err(|e| e.render().to_string())?;
    match cli.command {
        None => check_run(cli.run, &typed_flags(&matches)),
        Some(Command::Run(run)) => {
            let typed = matches
                .subcommand_matches("run")
                .map(typed_flags)
                .unwrap_or_default();
            check_run(*run, &typed)
        }
        Some(_) => Ok(()),
    }
}

/// The `llmsweep …` commands of a page's `sh` blocks: (its line, its arguments).
fn page_commands(page: &Path) -> Vec<(usize, Vec<String>)> {
    blocks(&read(page), "sh")
        .iter()
        .flat_map(|(at, b)| llmsweep_commands(*at, b))
        .collect()
}

fn literal(args: &[String]) -> bool {
    !args.iter().any(|a| a.contains(EXPANDED))
}

/// Checks each command in a directory of this test's own, where the files
/// the commands read are made (relative paths are read from where a command
/// runs); returns the failures.
fn check_all(commands: &[(String, usize, Vec<String>)]) -> Vec<String> {
    let fixture = root().join("tests/fixtures/report.json");
    let dir = std::env::temp_dir().join(format!("llmsweep-readme-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::env::set_current_dir(&dir).unwrap();
    for (_, _, args) in commands {
        make_inputs(args, &fixture);
    }
    let failed = commands
        .iter()
        .filter_map(|(page, line, args)| {
            check(args)
                .err()
                .map(|e| format!("{page} line {line}: llmsweep {}\n{e}", args.join(" ")))
        })
        .collect();
    std::env::set_current_dir(root()).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    failed
}

/// The README's commands spell every value out, so each is checked; the
/// other pages' commands are checked but those a shell would expand (a
/// script's `$i`, `"$@"`).
#[test]
fn every_llmsweep_command_in_the_readme_and_docs_parses_and_its_settings_check() {
    let readme = page_commands(&root().join("README.md"));
    assert!(
        readme.len() >= 20,
        "the README shows one example per common job; found {} commands",
        readme.len()
    );
    let expanded: Vec<String> = readme
        .iter()
        .filter(|(_, a)| !literal(a))
        .map(|(line, a)| format!("README.md line {line}: llmsweep {}", a.join(" ")))
        .collect();
    assert!(
        expanded.is_empty(),
        "README commands are run as they are written: spell the values out\n{}",
        expanded.join("\n")
    );
    let subcommands: BTreeSet<&str> = readme
        .iter()
        .filter_map(|(_, a)| a.first().map(String::as_str))
        .filter(|a| !a.starts_with('-'))
        .collect();
    for sub in [
        "run", "sim", "report", "compare", "merge", "attach", "ls", "stop",
    ] {
        assert!(
            subcommands.contains(sub),
            "no `llmsweep {sub}` in the README's examples"
        );
    }
    let mut commands: Vec<(String, usize, Vec<String>)> = readme
        .into_iter()
        .map(|(line, a)| ("README.md".to_string(), line, a))
        .collect();
    let mut pages: Vec<PathBuf> = std::fs::read_dir(root().join("docs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    pages.sort();
    for page in &pages {
        let name = page.strip_prefix(root()).unwrap().display().to_string();
        for (line, args) in page_commands(page) {
            if literal(&args) {
                commands.push((name.clone(), line, args));
            }
        }
    }
    let failed = check_all(&commands);
    assert!(failed.is_empty(), "{}", failed.join("\n\n"));
}

#[test]
fn the_extractor_finds_commands_after_assignments_and_before_operators() {
    let block = "FOO=1 llmsweep -t 'http://a b' --x \"y z\" &  # comment\n\
                 llmsweep report r.json -f profile > p.toml && llmsweep \\\n  ls\n\
                 curl http://x   # llmsweep is not this command\n";
    let got = llmsweep_commands(10, block);
    let words = |s: &[&str]| s.iter().map(|w| w.to_string()).collect::<Vec<_>>();
    assert_eq!(
        got,
        vec![
            (10, words(&["-t", "http://a b", "--x", "y z"])),
            (11, words(&["report", "r.json", "-f", "profile"])),
            (11, words(&["ls"])),
        ]
    );
    let expanded = llmsweep_commands(
        1,
        "x=$(llmsweep plan \"$f\") && llmsweep run --shard $i/4\n",
    );
    assert_eq!(expanded.len(), 2, "{expanded:?}");
    assert!(
        !literal(&expanded[0].1) && !literal(&expanded[1].1),
        "{expanded:?}"
    );
    // The checks themselves refuse what the binary refuses.
    assert!(check(&words(&["--no-such-flag"])).is_err());
    assert!(check(&words(&["--data", "prompt_tokens=256,no_such_key=1"])).is_err());
    assert!(check(&words(&["--profile", "poisson", "--rate", "0"])).is_err());
    assert!(check(&words(&["--data", "prompt_tokens=256"])).is_ok());
}

#[test]
fn the_readme_dashboard_is_the_golden_80x24_snapshot() {
    let readme = read(&root().join("README.md"));
    let golden = read(&root().join("tests/golden/dashboard-80x24.txt"));
    let trim = |s: &str| s.lines().map(str::trim_end).collect::<Vec<_>>().join("\n");
    let shown = blocks(&readme, "")
        .into_iter()
        .map(|(_, b)| trim(&b))
        .find(|b| b.contains("┌ stages"))
        .expect("the README shows the dashboard");
    assert_eq!(
        shown,
        trim(&golden),
        "README.md's dashboard differs from tests/golden/dashboard-80x24.txt: copy it over"
    );
}

/// A heading's anchor as GitHub makes it: lower case, punctuation but `-`
/// and `_` dropped, spaces as `-`.
fn anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, '-' | '_' | ' '))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

fn anchors(md: &str) -> BTreeSet<String> {
    let mut fenced = false;
    md.lines()
        .filter(|l| {
            if l.starts_with("```") {
                fenced = !fenced;
            }
            !fenced && l.starts_with('#')
        })
        .map(|l| anchor(l.trim_start_matches('#')))
        .collect()
}

#[test]
fn the_links_of_the_readme_and_docs_lead_somewhere() {
    let mut pages = vec![root().join("README.md")];
    for e in std::fs::read_dir(root().join("docs")).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "md") {
            pages.push(p);
        }
    }
    let mut broken = Vec::new();
    for page in &pages {
        let md = read(page);
        let mut fenced = false;
        for (i, line) in md.lines().enumerate() {
            if line.starts_with("```") {
                fenced = !fenced;
            }
            if fenced {
                continue;
            }
            for (start, _) in line.match_indices("](") {
                let rest = &line[start + 2..];
                let Some(end) = rest.find(')') else { continue };
                let link = &rest[..end];
                if link.contains("://") || link.starts_with("mailto:") {
                    continue;
                }
                let (path, frag) = link.split_once('#').unwrap_or((link, ""));
                let target = if path.is_empty() {
                    page.clone()
                } else {
                    page.parent().unwrap().join(path)
                };
                let at = format!(
                    "{}:{}: {link}",
                    page.strip_prefix(root()).unwrap().display(),
                    i + 1
                );
                if !target.exists() {
                    broken.push(format!("{at}: no such file"));
                } else if !frag.is_empty()
                    && target.extension().is_some_and(|x| x == "md")
                    && !anchors(&read(&target)).contains(frag)
                {
                    broken.push(format!("{at}: no such heading"));
                }
            }
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

/// The README's two commands: the build-and-run and the test command, the
/// one CI (`.ci/run`) runs, so a fresh clone tests itself as CI does.
#[test]
fn the_readme_quick_start_gives_the_test_command_ci_runs() {
    let readme = read(&root().join("README.md"));
    let quick = readme
        .split("## Quick start")
        .nth(1)
        .and_then(|s| s.split("\n## ").next())
        .expect("the README has a Quick start");
    let first = blocks(quick, "sh")
        .into_iter()
        .next()
        .expect("the Quick start's commands")
        .1;
    let commands: Vec<&str> = first
        .lines()
        .map(|l| l.split('#').next().unwrap_or_default().trim())
        .filter(|l| !l.is_empty())
        .collect();
    assert_eq!(
        commands,
        ["cargo run --release", "cargo test --locked"],
        "the Quick start's first block: the two commands"
    );
    let ci = read(&root().join(".ci/run"));
    assert!(
        ci.lines().any(|l| l.trim() == "cargo test --locked"),
        ".ci/run runs the README's test command"
    );
}
