use std::process::ExitCode;

use clap::{Parser, Subcommand};

use llmsweep::sim;

/// Load tester for OpenAI-compatible LLM inference servers.
#[derive(Debug, Parser)]
#[command(name = "llmsweep", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the built-in simulated OpenAI-compatible server.
    Sim(sim::SimArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Some(Command::Sim(args)) => sim::run_cli(args),
        None => Err(anyhow::anyhow!("not implemented yet")),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(2)
        }
    }
}
