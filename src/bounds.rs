//! Every read from the outside has a bound, enforced while reading, not
//! after: a server, a viewer or a file cannot make llmsweep hold more than
//! this. docs/ARCHITECTURE.md lists them; what is cut is said once in the
//! report (a warning) or in the error that refuses it.

/// One line a viewer sends on the control socket (a longer line ends the
/// connection).
pub const CONTROL_LINE: usize = 64 << 10;
/// One `/metrics` page (the rest of a longer page is not read; the report
/// says so once).
pub const METRICS_PAGE: usize = 8 << 20;
/// The `/v1/models` answer (a longer one is refused with the bound named).
pub const MODELS_LIST: usize = 16 << 20;
/// The body of an error answer kept for its message (the rest is not read).
pub const ERROR_BODY: usize = 16 << 10;
/// An entry of the run registry (`attach::runs::registry_dir`): a run
/// directory's path.
pub const REGISTRY_ENTRY: usize = 4 << 10;
/// One row (line) of a JSONL or CSV data file (a longer row is a bad row).
pub const DATA_ROW: usize = 8 << 20;
/// A pooling API's answer (embeddings, rerank, score): a batch of 64
/// inputs of 4,096-dimension embeddings is about 6 MB of JSON.
pub const POOLED_ANSWER: usize = 64 << 20;
/// A `/tokenize` answer (its token ids; prompts llmsweep counts are short).
pub const TOKENIZE_ANSWER: usize = 16 << 20;
/// A `tokenizer.json` downloaded from the Hugging Face Hub (the largest
/// common ones are about 35 MB).
pub const TOKENIZER_FILE: usize = 128 << 20;
/// A `.json` data file, which is one document and read whole (ShareGPT's
/// is about 650 MB).
pub const DATA_JSON_FILE: usize = 2 << 30;

/// One histogram of a report file (`ttft_us`, …), deflated and inflated
/// alike: llmsweep's own, 3 significant digits from 1 µs to 1 h, are at
/// most 212 KB of counts.
pub const HISTOGRAM: usize = 1 << 20;

/// The text of one viewer's note or stop reason on the control socket, and
/// (`VIEWER_EVENT`) a note's event name: longer ones are cut (`…`). The
/// run's own notes (an export's path, a signal) are a few dozen bytes.
pub const VIEWER_TEXT: usize = 1 << 10;
pub const VIEWER_EVENT: usize = 64;
/// Timeline entries viewers add to a run (their notes, their comings and
/// goings, their exports), all viewers together: past it they are not
/// kept, and a viewer's note is answered with an error naming this bound.
pub const VIEWER_NOTES: usize = 1000;

/// `s` cut to at most `max` bytes on a character boundary, `…` marking a
/// cut.
pub fn cut(s: &str, max: usize) -> std::borrow::Cow<'_, str> {
    if s.len() <= max {
        return s.into();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &s[..end]).into()
}

/// One request's prompt built by llmsweep (synthetic `prompt_tokens` with
/// `prefix_tokens`, a conversation's turn with its history): 1 Mi tokens,
/// above the longest context windows served (1M), 5 to 8 MB of text.
pub const PROMPT_TOKENS: u64 = 1 << 20;
/// Text built as one piece before the run: every group's shared prefix
/// together, or one conversation's requests together (each turn holds the
/// history before it, so they grow with the square of the turns): 8 Mi
/// tokens, about 50 MB.
pub const BUILT_TOKENS: u64 = 8 << 20;

/// A bound as people write it: `64 KiB`, `8 MiB`.
pub fn human(bytes: usize) -> String {
    if bytes >= 1 << 20 && bytes % (1 << 20) == 0 {
        format!("{} MiB", bytes >> 20)
    } else if bytes >= 1 << 10 && bytes % (1 << 10) == 0 {
        format!("{} KiB", bytes >> 10)
    } else {
        format!("{bytes} bytes")
    }
}

/// A body read up to a bound.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Capped {
    /// At most the bound.
    pub bytes: Vec<u8>,
    /// The body went on past the bound (and was not read further).
    pub cut: bool,
}

/// Reads a response body, keeping at most `cap` bytes and reading no more
/// than the chunk that crosses it; the rest of the body is never read (the
/// connection is dropped with the response).
pub async fn read_capped(mut resp: reqwest::Response, cap: usize) -> reqwest::Result<Capped> {
    let mut out = Capped::default();
    if resp.content_length().is_some_and(|n| n > cap as u64) {
        out.cut = true;
    }
    while let Some(chunk) = resp.chunk().await? {
        let room = cap - out.bytes.len();
        if chunk.len() > room {
            out.bytes.extend_from_slice(&chunk[..room]);
            out.cut = true;
            return Ok(out);
        }
        out.bytes.extend_from_slice(&chunk);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_cut_on_a_character_boundary() {
        assert_eq!(cut("abc", 3), "abc");
        assert_eq!(cut("abcd", 3), "abc…");
        assert_eq!(cut("aé", 2), "a…");
    }

    #[test]
    fn bounds_are_written_as_people_write_them() {
        assert_eq!(human(CONTROL_LINE), "64 KiB");
        assert_eq!(human(METRICS_PAGE), "8 MiB");
        assert_eq!(human(1000), "1000 bytes");
    }
}
