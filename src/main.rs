use std::process::ExitCode;

use clap::{Parser, Subcommand};

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
    Run(RunArgs),
    /// Run the built-in simulated OpenAI-compatible server.
    Sim(sim::SimArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Some(Command::Sim(args)) => sim::run_cli(args),
        Some(Command::Run(args)) => run::execute(args).map(|_| ()),
        None => run::execute(cli.run).map(|_| ()),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(2)
        }
    }
}
