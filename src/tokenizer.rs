//! The built-in tokenizer: an approximation of a GPT-style BPE token count
//! that needs no model files.
//!
//! Real model tokenizers differ from one another by 10–30 % on the same text,
//! and loading one needs a `tokenizer.json`. The built-in counter exists so that
//! a newcomer (and the simulator) can count tokens with nothing installed. It
//! follows the shape of GPT-2's pre-tokenizer:
//!
//! * a run of letters, with at most one leading space, costs `ceil(len / 7)`
//!   tokens: common English words are one token, long rare words two or more;
//! * a run of digits costs `ceil(len / 3)` (most BPE vocabularies hold numbers
//!   up to three digits);
//! * any other visible character (punctuation, symbols, non-Latin scripts that
//!   are not letters) costs one token, its leading space included;
//! * a run of whitespace that is not the single space in front of a word costs
//!   one token.
//!
//! Text built from [`VOCAB`] words, each with one leading space, therefore
//! counts exactly one token per word; the simulator's output and the synthetic
//! prompts rely on that to produce exact lengths.

/// Common short English words. Each `" " + word` counts as exactly one token
/// under [`count_tokens`] (every word is at most 7 letters).
pub const VOCAB: &[&str] = &[
    "the", "of", "and", "to", "in", "is", "that", "for", "it", "as", "was", "with", "be", "by",
    "on", "not", "he", "this", "are", "or", "his", "from", "at", "which", "but", "have", "an",
    "had", "they", "you", "were", "their", "one", "all", "we", "can", "her", "has", "there",
    "been", "if", "more", "when", "will", "would", "who", "so", "no", "she", "other", "its", "may",
    "these", "what", "them", "than", "some", "him", "time", "into", "only", "do", "out", "then",
    "also", "any", "first", "new", "two", "very", "after", "should", "well", "over", "such", "our",
    "most", "made", "many", "even", "where", "must", "through", "back", "years", "much", "before",
    "good", "those", "how", "down", "each", "great", "still", "work", "place", "world", "life",
    "being", "under", "never", "day", "same", "another", "know", "while", "last", "might", "us",
    "off", "small", "found", "state", "both", "year", "around", "system", "power", "number",
    "water", "part", "light", "model", "server", "request", "token", "batch", "cache", "memory",
    "latency", "network", "queue", "stage", "rate", "signal", "river", "stone", "garden", "window",
    "paper", "music", "market", "winter", "summer", "forest", "ocean", "engine", "silver",
    "golden", "quiet", "rapid", "simple", "clear", "bright", "early", "later", "inside", "outside",
    "above", "below", "across", "toward", "second", "third", "minute", "hour", "morning",
    "evening", "night", "city", "village", "road", "bridge", "tower", "field", "valley", "hill",
    "island", "harbor", "station", "letter", "story", "answer", "query", "reason", "method",
    "result", "figure", "table",
];

/// Anything that counts tokens: the built-in approximation, or (with
/// `--tokenizer`) a real model tokenizer.
pub trait TokenCounter: Send + Sync {
    fn count(&self, text: &str) -> usize;
    /// A short description for reports, e.g. `builtin` or a file path.
    fn name(&self) -> String;
    /// Text pieces (each with its leading space) that count exactly one token
    /// each, also when strung together: synthetic prompts are built from them.
    fn one_token_pieces(&self) -> Vec<String> {
        VOCAB.iter().map(|w| format!(" {w}")).collect()
    }
}

/// The built-in approximation as a [`TokenCounter`].
#[derive(Debug, Clone, Copy, Default)]
pub struct Builtin;

impl TokenCounter for Builtin {
    fn count(&self, text: &str) -> usize {
        count_tokens(text)
    }
    fn name(&self) -> String {
        "builtin".into()
    }
}

/// A model tokenizer loaded from a `tokenizer.json` (Hugging Face format),
/// through the `tokenizers` crate: a local file, or one from the Hugging
/// Face cache (`run::hub`).
pub struct TokenizerFile {
    inner: tokenizers::Tokenizer,
    path: String,
}

impl std::fmt::Debug for TokenizerFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "TokenizerFile({})", self.path)
    }
}

impl TokenizerFile {
    /// `path` is a `tokenizer.json`, or a model directory that holds one.
    pub fn load(path: &std::path::Path) -> anyhow::Result<Self> {
        let file = if path.is_dir() {
            path.join("tokenizer.json")
        } else {
            path.to_path_buf()
        };
        if !file.exists() {
            anyhow::bail!(
                "--tokenizer {}: no such file{}",
                path.display(),
                if path.is_dir() {
                    " (the directory has no tokenizer.json)"
                } else {
                    ""
                }
            );
        }
        let bytes =
            crate::bounds::read_file(&file, crate::bounds::TOKENIZER_FILE, "a tokenizer.json")
                .map_err(|e| anyhow::anyhow!("--tokenizer {}: {e}", path.display()))?;
        let mut inner = tokenizers::Tokenizer::from_bytes(&bytes).map_err(|e| {
            anyhow::anyhow!("--tokenizer {}: not a tokenizer.json: {e}", file.display())
        })?;
        // Model tokenizers often ship with truncation (e.g. 128 or 512 tokens)
        // or padding configured; either would make every count wrong.
        inner
            .with_truncation(None)
            .map_err(|e| anyhow::anyhow!("--tokenizer {}: {e}", file.display()))?;
        inner.with_padding(None);
        Ok(TokenizerFile {
            inner,
            path: file.display().to_string(),
        })
    }
}

impl TokenCounter for TokenizerFile {
    fn count(&self, text: &str) -> usize {
        self.inner
            .encode_fast(text, false)
            .map(|e| e.len())
            .unwrap_or_else(|_| count_tokens(text))
    }

    fn name(&self) -> String {
        self.path.clone()
    }

    fn one_token_pieces(&self) -> Vec<String> {
        single_pieces(self)
    }
}

/// The vocabulary words that `counter` takes as one token, alone and next
/// to another such word.
pub fn single_pieces(counter: &dyn TokenCounter) -> Vec<String> {
    let single: Vec<String> = VOCAB
        .iter()
        .map(|w| format!(" {w}"))
        .filter(|p| counter.count(p) == 1)
        .collect();
    single
        .iter()
        .zip(single.iter().cycle().skip(1))
        .filter(|(a, b)| counter.count(&format!("{a}{b}")) == 2)
        .map(|(a, _)| a.clone())
        .collect()
}

/// Counts tokens in `text` with the built-in approximation (see module docs).
///
/// ```
/// use llmsweep::tokenizer::count_tokens;
/// assert_eq!(count_tokens("The river runs past the station."), 7); // 6 words + "."
/// assert_eq!(count_tokens("internationalization"), 3); // 20 letters: ⌈20/7⌉
/// assert_eq!(count_tokens("2048 tokens"), 3); // ⌈4/3⌉ + 1
/// ```
pub fn count_tokens(text: &str) -> usize {
    let mut tokens = 0usize;
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c == ' ' {
            // A single space binds to the word, number or symbol that follows it.
            match chars.peek() {
                Some(&n) if !n.is_whitespace() => continue,
                _ => {
                    // A whitespace run: consume it whole.
                    while chars.peek().is_some_and(|n| n.is_whitespace()) {
                        chars.next();
                    }
                    tokens += 1;
                    continue;
                }
            }
        }
        if c.is_whitespace() {
            while chars.peek().is_some_and(|n| n.is_whitespace()) {
                // Keep the last space of the run for the following word, as GPT-2 does.
                let mut ahead = chars.clone();
                ahead.next();
                let last_space_before_word =
                    chars.peek() == Some(&' ') && ahead.peek().is_some_and(|a| !a.is_whitespace());
                if last_space_before_word {
                    break;
                }
                chars.next();
            }
            tokens += 1;
            continue;
        }
        if c.is_alphabetic() {
            let mut len = 1usize;
            while chars.peek().is_some_and(|n| n.is_alphabetic()) {
                chars.next();
                len += 1;
            }
            tokens += len.div_ceil(7);
        } else if c.is_ascii_digit() {
            let mut len = 1usize;
            while chars.peek().is_some_and(|n| n.is_ascii_digit()) {
                chars.next();
                len += 1;
            }
            tokens += len.div_ceil(3);
        } else {
            tokens += 1;
        }
    }
    tokens
}

/// The text of the `i`-th vocabulary token, with its leading space.
pub fn vocab_piece(i: usize) -> &'static str {
    // Stored without the space to keep the table readable; the space is added by
    // the callers that build text, see `push_vocab_token`.
    VOCAB[i % VOCAB.len()]
}

/// Appends `" " + VOCAB[i]` to `out`: exactly one built-in token.
pub fn push_vocab_token(out: &mut String, i: usize) {
    out.push(' ');
    out.push_str(vocab_piece(i));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_vocab_word_is_one_token() {
        for (i, w) in VOCAB.iter().enumerate() {
            let mut s = String::new();
            push_vocab_token(&mut s, i);
            assert_eq!(count_tokens(&s), 1, "word {w:?}");
            assert!(w.chars().all(|c| c.is_ascii_lowercase()), "word {w:?}");
        }
    }

    #[test]
    fn vocab_text_counts_one_token_per_word() {
        let mut s = String::new();
        for i in 0..1000 {
            push_vocab_token(&mut s, i * 7 + 3);
        }
        assert_eq!(count_tokens(&s), 1000);
    }

    #[test]
    fn counts_follow_the_documented_rules() {
        assert_eq!(count_tokens(""), 0);
        assert_eq!(count_tokens("hello"), 1);
        assert_eq!(count_tokens("hello world"), 2);
        assert_eq!(count_tokens("internationalization"), 3); // 20 letters
        assert_eq!(count_tokens("12345"), 2);
        assert_eq!(count_tokens("a, b."), 4);
        assert_eq!(count_tokens("one\n\ntwo"), 3);
        assert_eq!(count_tokens("one  two"), 3); // extra space is its own token
        assert_eq!(count_tokens("   "), 1);
    }

    /// A cached or given tokenizer.json of 600 MB was read whole (a 3 GiB
    /// one reached 3.1 GB): refused by its size before it is read, the
    /// bound named; a FIFO is refused without blocking.
    #[test]
    fn a_tokenizer_file_past_its_bound_or_not_a_file_is_refused_unread() {
        let dir = std::env::temp_dir().join(format!("llmsweep-tok-big-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let big = dir.join("tokenizer.json");
        // Sparse: no disk used.
        std::fs::File::create(&big)
            .unwrap()
            .set_len(600 << 20)
            .unwrap();
        let e = TokenizerFile::load(&dir).unwrap_err().to_string();
        assert!(
            e.contains("it is 600 MiB, more than the 128 MiB llmsweep reads of a tokenizer.json"),
            "{e}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
