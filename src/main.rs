use std::process::ExitCode;

use std::collections::HashSet;

use clap::parser::ValueSource;
use clap::{ArgMatches, CommandFactory, FromArgMatches, Parser, Subcommand};

use llmsweep::{cli::RunArgs, run, sim};

/// Load tester for OpenAI-compatible LLM inference servers: a sweep from one
/// request at a time to saturation, with TTFT and ITL at every rate.
///
/// With no arguments it sweeps its own built-in simulated server.
#[derive(Debug, Parser)]
#[command(name = "llmsweep", version, about, long_about = None, args_conflicts_with_subcommands = true)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    run: RunArgs,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Load a server (the default command).
    Run(Box<RunArgs>),
    /// Run the built-in simulated OpenAI-compatible server.
    Sim(Box<sim::SimArgs>),
    /// List the shipped profiles, one line each.
    Profiles,
    /// Re-render a saved run (report.json or a stages.jsonl checkpoint).
    Report {
        /// report.json or stages.jsonl
        file: std::path::PathBuf,
        /// md, csv, html, console, vllm, sglang or json.
        #[arg(long, short = 'f', default_value = "console")]
        format: String,
        /// Write to this file instead of standard output.
        #[arg(long, short = 'o')]
        out: Option<std::path::PathBuf>,
    },
    /// Compare two runs stage by stage (rate, TTFT, ITL, throughput).
    Compare {
        a: std::path::PathBuf,
        b: std::path::PathBuf,
    },
}

fn render_saved(
    file: &std::path::Path,
    format: &str,
    out: Option<&std::path::Path>,
) -> anyhow::Result<()> {
    use llmsweep::report::{checkpoint, export};
    let f = export::Format::parse(format)?;
    let report = checkpoint::load_any(file)?;
    let text = export::render(&report, f)?;
    match out {
        Some(path) => {
            llmsweep::report::write_atomic(path, text.as_bytes())?;
            println!("wrote {}", path.display());
        }
        None => print!("{text}"),
    }
    Ok(())
}

fn compare(a: &std::path::Path, b: &std::path::Path) -> anyhow::Result<()> {
    use llmsweep::report::{checkpoint, compare};
    let ra = checkpoint::load_any(a)?;
    let rb = checkpoint::load_any(b)?;
    print!(
        "{}",
        compare::render(&ra, &rb, &a.display().to_string(), &b.display().to_string())
    );
    Ok(())
}

/// The ids of the arguments the user typed (not defaults): they override profiles.
fn typed(m: &ArgMatches) -> HashSet<String> {
    m.ids()
        .filter(|id| m.value_source(id.as_str()) == Some(ValueSource::CommandLine))
        .map(|id| id.to_string())
        .collect()
}

fn main() -> ExitCode {
    let matches = Cli::command().get_matches();
    let cli = match Cli::from_arg_matches(&matches) {
        Ok(c) => c,
        Err(e) => e.exit(),
    };
    let result = match cli.command {
        Some(Command::Sim(args)) => sim::run_cli(*args),
        Some(Command::Profiles) => {
            for (name, description) in llmsweep::profile::file::list() {
                println!("{name:<24} {description}");
            }
            Ok(())
        }
        Some(Command::Report { file, format, out }) => render_saved(&file, &format, out.as_deref()),
        Some(Command::Compare { a, b }) => compare(&a, &b),
        Some(Command::Run(args)) => {
            let explicit = matches
                .subcommand_matches("run")
                .map(typed)
                .unwrap_or_default();
            run::execute(*args, &explicit).map(|_| ())
        }
        None => run::execute(cli.run, &typed(&matches)).map(|_| ()),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            // An error may quote a URL with a password or a server's echo of a key.
            eprintln!("error: {}", llmsweep::redact::scrub(&format!("{e:#}")));
            ExitCode::from(2)
        }
    }
}
