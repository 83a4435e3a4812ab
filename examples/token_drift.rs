//! How far the built-in token counter falls from a real tokenizer, on your text.
//!
//!     cargo run --release --example token_drift -- path/to/tokenizer.json FILE...
//!
//! Prints, per file: words, the built-in count, the tokenizer's count, and the
//! difference. docs/TOKENIZER.md keeps the figures measured so far.

use std::path::Path;

use llmsweep::tokenizer::{count_tokens, TokenCounter, TokenizerFile};

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some((tok, files)) = args.split_first() else {
        anyhow::bail!("usage: token_drift TOKENIZER.json FILE...");
    };
    let tok = TokenizerFile::load(Path::new(tok))?;
    println!(
        "{:<40} {:>8} {:>9} {:>9} {:>7}",
        "file", "words", "builtin", "tokenizer", "diff"
    );
    let (mut b_all, mut t_all) = (0usize, 0usize);
    for f in files {
        let text = std::fs::read_to_string(f)?;
        let words = text.split_whitespace().count();
        let (b, t) = (count_tokens(&text), tok.count(&text));
        b_all += b;
        t_all += t;
        println!(
            "{f:<40} {words:>8} {b:>9} {t:>9} {:>+6.1}%",
            (b as f64 / t as f64 - 1.0) * 100.0
        );
    }
    println!(
        "{:<40} {:>8} {b_all:>9} {t_all:>9} {:>+6.1}%",
        "all",
        "",
        (b_all as f64 / t_all as f64 - 1.0) * 100.0
    );
    Ok(())
}
