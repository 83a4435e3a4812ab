//! The common streamed chunk, read without serde.
//!
//! Nearly every payload of a chat or completions stream has one shape: an
//! id, the object's name, a time, the model, and one choice holding a
//! piece of text. It is read once per token, and serde's general reading of
//! it (every key matched, every ignored value checked) cost about 5,000
//! instructions a chunk, half of what llmsweep spent per request beyond a
//! bare client's. This reads that shape, and only it, directly; and a
//! stream's next chunk that differs from the last only in its text is read
//! by comparing it with the last ([`LastChunk`]).
//!
//! It answers only for what it fully understands: any other key, a string
//! with an escape, a `usage` count that is not a whole number of tokens,
//! an error's shape, a tool call, a duplicate key or anything that is not
//! plain JSON gives `None`, and the caller reads the payload in full
//! ([`super::chunk::parse_chunk`]). So it can be wrong only by answering
//! differently from the full reading, which tests/fuzz.rs checks on
//! generated and mangled chunks and streams of them.

use std::borrow::Cow;

use super::chunk::{
    append, parse_chunk, ChunkError, ChunkInfo, CompletionTokensDetails, PromptTokensDetails,
    Usage, MAX_USAGE_TOKENS,
};

/// The last chunk of a stream that was read directly, kept to read the
/// next one by its text alone.
///
/// A server writes every token's chunk of one answer alike: the same id,
/// time and model, the same keys in the same order; only the text differs.
/// A chunk whose bytes are the last one's but for a plain text (no quote,
/// escape or control character, so every other byte means what it meant)
/// reads as the last one did with the new text, and is read so: two
/// comparisons and a scan of the text, where reading the whole chunk costs
/// about 2,500 instructions. tests/fuzz.rs holds that it reads as in full.
#[derive(Debug, Default)]
pub struct LastChunk {
    /// The chunk as it was sent, with its text at `text`.
    bytes: String,
    text: std::ops::Range<usize>,
    finished: bool,
    cut: bool,
}

impl LastChunk {
    /// Parses one `data:` payload of a stream: as the last one by its
    /// text, else the common shape directly (and kept), else in full.
    pub fn parse<'a>(&mut self, data: &'a str) -> Result<ChunkInfo<'a>, ChunkError> {
        if let Some(info) = self.read_like(data) {
            return Ok(info);
        }
        match read(data) {
            Some(info) => {
                self.keep(data, &info);
                Ok(info)
            }
            None => parse_chunk(data),
        }
    }

    /// The chunk read as the last one with its own text, if it is one.
    fn read_like<'a>(&self, data: &'a str) -> Option<ChunkInfo<'a>> {
        let before = self.bytes.get(..self.text.start)?;
        let after = self.bytes.get(self.text.end..)?;
        if before.is_empty()
            || data.len() < before.len() + after.len()
            || !data.starts_with(before)
            || !data.ends_with(after)
        {
            return None;
        }
        // Both ends are ASCII quotes in the last chunk, so in this one.
        let text = data.get(before.len()..data.len() - after.len())?;
        if plain_end(text.as_bytes(), 0) != text.len() {
            return None;
        }
        Some(ChunkInfo {
            text: Cow::Borrowed(text),
            has_output: !text.is_empty(),
            has_answer: !text.is_empty(),
            finished: self.finished,
            cut: self.cut,
            ..ChunkInfo::default()
        })
    }

    /// Keeps a chunk read directly when its one piece of answer text is
    /// all it says besides its end (no thinking, usage or tool call).
    fn keep(&mut self, data: &str, info: &ChunkInfo<'_>) {
        let Cow::Borrowed(text) = info.text else {
            return;
        };
        let plain = !text.is_empty()
            && info.reasoning.is_empty()
            && info.usage.is_none()
            && info.usage_error.is_none()
            && info.tool_calls.is_empty()
            && !info.done;
        // Where the text sits: it was borrowed from `data`.
        let at = (text.as_ptr() as usize).wrapping_sub(data.as_ptr() as usize);
        if !plain
            || at
                .checked_add(text.len())
                .is_none_or(|end| end > data.len())
        {
            return;
        }
        self.bytes.clear();
        self.bytes.push_str(data);
        self.text = at..at + text.len();
        self.finished = info.finished;
        self.cut = info.cut;
    }
}

/// The chunk read directly, or None: read it in full.
pub fn read(data: &str) -> Option<ChunkInfo<'_>> {
    let mut c = Cursor { s: data, i: 0 };
    let mut info = ChunkInfo::default();
    let mut seen = Seen::default();
    c.object(|c, key| match key {
        "choices" => {
            seen.once(0)?;
            c.array(|c| choice(c, &mut info))
        }
        // `usage: null` (vLLM sends it in every chunk with some settings),
        // or the counts at the end of a stream.
        "usage" => {
            seen.once(1)?;
            usage(c, &mut info)
        }
        // Their values say nothing to a load tester; an error object names
        // itself in `object`, and goes the full way.
        "object" => {
            seen.once(2)?;
            (c.scalar()? != Scalar::Str("error")).then_some(())
        }
        "id" | "created" | "model" | "system_fingerprint" | "service_tier" => {
            seen.once(slot(key))?;
            c.scalar().map(drop)
        }
        // vLLM's (0.32): null unless asked for.
        "prompt_token_ids" | "prompt_text" => {
            seen.once(if key == "prompt_text" { 8 } else { 9 })?;
            c.null()
        }
        _ => None,
    })?;
    c.end()?;
    Some(info)
}

/// Which of the keys above a duplicate is (serde refuses a duplicate field).
fn slot(key: &str) -> u8 {
    match key {
        "id" => 3,
        "created" => 4,
        "model" => 5,
        "system_fingerprint" => 6,
        _ => 7,
    }
}

/// One entry of `choices`.
fn choice<'a>(c: &mut Cursor<'a>, info: &mut ChunkInfo<'a>) -> Option<()> {
    let mut seen = Seen::default();
    c.object(|c, key| match key {
        "delta" => {
            seen.once(0)?;
            delta(c, info)
        }
        "text" => {
            seen.once(1)?;
            let t = c.string()?;
            if !t.is_empty() {
                append(&mut info.text, Cow::Borrowed(t));
                info.has_answer = true;
            }
            Some(())
        }
        "finish_reason" => {
            seen.once(2)?;
            match c.scalar()? {
                Scalar::Null => {}
                Scalar::Str(why) => {
                    info.finished = true;
                    info.cut |= why == "length";
                }
                Scalar::Other => return None,
            }
            Some(())
        }
        "logprobs" => {
            seen.once(3)?;
            c.null()
        }
        "index" => {
            seen.once(4)?;
            c.scalar().map(drop)
        }
        // vLLM's and SGLang's own: why it stopped, in their words.
        "stop_reason" | "matched_stop" => {
            seen.once(if key == "stop_reason" { 5 } else { 6 })?;
            c.scalar().map(drop)
        }
        // vLLM's (0.32, in every chunk): null unless asked for.
        "token_ids" => {
            seen.once(7)?;
            c.null()
        }
        _ => None,
    })?;
    info.has_output = info.has_answer || !info.reasoning.is_empty();
    Some(())
}

/// A choice's `delta`.
fn delta<'a>(c: &mut Cursor<'a>, info: &mut ChunkInfo<'a>) -> Option<()> {
    let mut seen = Seen::default();
    c.object(|c, key| {
        let (slot, text) = match key {
            "content" => (0, true),
            "reasoning_content" => (1, false),
            "reasoning" => (2, false),
            "role" => (3, false),
            // `tool_calls: null`; calls themselves go the full way.
            "tool_calls" => {
                seen.once(4)?;
                return c.null();
            }
            _ => return None,
        };
        seen.once(slot)?;
        let piece = match c.scalar()? {
            Scalar::Str(s) => s,
            Scalar::Null => return Some(()),
            Scalar::Other => return None,
        };
        if key == "role" {
            // Its value is no output.
        } else if text {
            if !piece.is_empty() {
                append(&mut info.text, Cow::Borrowed(piece));
                info.has_answer = true;
            }
        } else {
            append(&mut info.reasoning, Cow::Borrowed(piece));
        }
        Some(())
    })
}

/// A chunk's `usage`: `null`, or its counts, each a whole number of tokens
/// (anything else, and any key not read here, goes the full way, which
/// says what is wrong with it).
fn usage(c: &mut Cursor<'_>, info: &mut ChunkInfo<'_>) -> Option<()> {
    if c.peek()? == b'n' {
        return c.null();
    }
    let mut u = Usage::default();
    let mut seen = Seen::default();
    c.object(|c, key| match key {
        "prompt_tokens" => {
            seen.once(0)?;
            u.prompt_tokens = c.count()?;
            Some(())
        }
        "completion_tokens" => {
            seen.once(1)?;
            u.completion_tokens = c.count()?;
            Some(())
        }
        "reasoning_tokens" => {
            seen.once(2)?;
            u.reasoning_tokens = c.count()?;
            Some(())
        }
        // Not read by the full reading either: any value but a list or an
        // object (which this reader does not step over).
        "total_tokens" => {
            seen.once(3)?;
            c.scalar().map(drop)
        }
        "prompt_tokens_details" => {
            seen.once(4)?;
            u.prompt_tokens_details = c
                .details("cached_tokens")?
                .map(|cached_tokens| PromptTokensDetails { cached_tokens });
            Some(())
        }
        "completion_tokens_details" => {
            seen.once(5)?;
            u.completion_tokens_details = c
                .details("reasoning_tokens")?
                .map(|reasoning_tokens| CompletionTokensDetails { reasoning_tokens });
            Some(())
        }
        _ => None,
    })?;
    info.usage = Some(u);
    Some(())
}

/// The keys an object has had: a second one of a key is not read here.
#[derive(Default)]
struct Seen(u16);

impl Seen {
    fn once(&mut self, slot: u8) -> Option<()> {
        let bit = 1 << slot;
        if self.0 & bit != 0 {
            return None;
        }
        self.0 |= bit;
        Some(())
    }
}

/// A value that is no object or list.
#[derive(Debug, PartialEq)]
enum Scalar<'a> {
    Str(&'a str),
    Null,
    /// A number, `true` or `false`.
    Other,
}

/// A reading position in the payload; every step checks what JSON allows
/// there, and gives up (None) where this reader would need more.
struct Cursor<'a> {
    s: &'a str,
    i: usize,
}

impl<'a> Cursor<'a> {
    fn peek(&mut self) -> Option<u8> {
        let b = self.s.as_bytes();
        while let Some(&c) = b.get(self.i) {
            if !matches!(c, b' ' | b'\t' | b'\n' | b'\r') {
                return Some(c);
            }
            self.i += 1;
        }
        None
    }

    fn eat(&mut self, want: u8) -> Option<()> {
        (self.peek()? == want).then(|| self.i += 1)
    }

    /// Nothing but white space is left.
    fn end(&mut self) -> Option<()> {
        self.peek().is_none().then_some(())
    }

    /// `{ "key": value, … }`, each value read by `value` (which gets the key).
    fn object(&mut self, mut value: impl FnMut(&mut Self, &'a str) -> Option<()>) -> Option<()> {
        self.eat(b'{')?;
        if self.eat(b'}').is_some() {
            return Some(());
        }
        loop {
            let key = self.string()?;
            self.eat(b':')?;
            value(self, key)?;
            match self.peek()? {
                b',' => self.i += 1,
                b'}' => {
                    self.i += 1;
                    return Some(());
                }
                _ => return None,
            }
        }
    }

    /// `[ item, … ]`, each item read by `item`.
    fn array(&mut self, mut item: impl FnMut(&mut Self) -> Option<()>) -> Option<()> {
        self.eat(b'[')?;
        if self.eat(b']').is_some() {
            return Some(());
        }
        loop {
            item(self)?;
            match self.peek()? {
                b',' => self.i += 1,
                b']' => {
                    self.i += 1;
                    return Some(());
                }
                _ => return None,
            }
        }
    }

    /// A string without escapes or control characters (those go the full way).
    fn string(&mut self) -> Option<&'a str> {
        self.eat(b'"')?;
        let start = self.i;
        let end = plain_end(self.s.as_bytes(), start);
        if self.s.as_bytes().get(end) != Some(&b'"') {
            return None;
        }
        self.i = end + 1;
        // The payload is text and the string ends at an ASCII quote: a
        // character boundary.
        self.s.get(start..end)
    }

    /// A count of tokens: `null`, or a whole number up to
    /// [`MAX_USAGE_TOKENS`] (anything else goes the full way).
    fn count(&mut self) -> Option<Option<u64>> {
        if self.peek()? == b'n' {
            return self.null().map(|_| None);
        }
        let start = self.i;
        self.number()?;
        let n: u64 = self.s.get(start..self.i)?.parse().ok()?;
        (n <= MAX_USAGE_TOKENS).then_some(Some(n))
    }

    /// A usage's details: `null` (None), or an object with at most the one
    /// count `key` (`Some` of it).
    fn details(&mut self, key: &str) -> Option<Option<Option<u64>>> {
        if self.peek()? == b'n' {
            return self.null().map(|_| None);
        }
        let mut count = None;
        let mut seen = Seen::default();
        self.object(|c, k| {
            if k != key {
                return None;
            }
            seen.once(0)?;
            count = c.count()?;
            Some(())
        })?;
        Some(Some(count))
    }

    fn null(&mut self) -> Option<()> {
        (self.scalar()? == Scalar::Null).then_some(())
    }

    /// A string, `null`, `true`, `false` or a number (checked as JSON
    /// writes numbers); not an object or a list.
    fn scalar(&mut self) -> Option<Scalar<'a>> {
        match self.peek()? {
            b'"' => self.string().map(Scalar::Str),
            b'n' => self.word("null").map(|_| Scalar::Null),
            b't' => self.word("true").map(|_| Scalar::Other),
            b'f' => self.word("false").map(|_| Scalar::Other),
            b'-' | b'0'..=b'9' => self.number().map(|_| Scalar::Other),
            _ => None,
        }
    }

    fn word(&mut self, w: &str) -> Option<()> {
        let ok = self.s.as_bytes()[self.i..].starts_with(w.as_bytes());
        ok.then(|| self.i += w.len())
    }

    /// An integer, `-? (0 | [1-9][0-9]*)`, of at most 20 characters:
    /// fractions, exponents and longer numbers go the full way (JSON
    /// readers differ on them: `1e400`).
    fn number(&mut self) -> Option<()> {
        let b = &self.s.as_bytes()[self.i..];
        let sign = usize::from(b.first() == Some(&b'-'));
        let digits = b[sign..].iter().take_while(|c| c.is_ascii_digit()).count();
        let end = sign + digits;
        let leading_zero = digits > 1 && b[sign] == b'0';
        if digits == 0 || leading_zero || end > 20 {
            return None;
        }
        if matches!(b.get(end), Some(b'.' | b'e' | b'E')) {
            return None;
        }
        self.i += end;
        Some(())
    }
}

/// Where the plain part of a string that starts at `from` ends: the index
/// of its first quote, backslash or control character (or the end).
///
/// Nearly every string of a chunk is short and plain, and this is read for
/// each of them, so it looks at eight bytes at a time: a byte of a word is
/// flagged when it is one of those, with the carries of the subtractions
/// only ever flagging bytes after the first true one, which is the lowest
/// flag (the word is read little-endian).
fn plain_end(b: &[u8], from: usize) -> usize {
    const ONES: u64 = u64::from_le_bytes([1; 8]);
    const HIGHS: u64 = ONES * 0x80;
    let zero_byte = |v: u64| v.wrapping_sub(ONES) & !v;
    let mut i = from;
    while let Some(word) = b.get(i..i + 8) {
        let Ok(word) = <[u8; 8]>::try_from(word) else {
            break;
        };
        let x = u64::from_le_bytes(word);
        let flagged = (zero_byte(x ^ (ONES * u64::from(b'"')))
            | zero_byte(x ^ (ONES * u64::from(b'\\')))
            | (x.wrapping_sub(ONES * 0x20) & !x))
            & HIGHS;
        if flagged != 0 {
            return i + (flagged.trailing_zeros() / 8) as usize;
        }
        i += 8;
    }
    while let Some(&c) = b.get(i) {
        if c == b'"' || c == b'\\' || c < 0x20 {
            break;
        }
        i += 1;
    }
    i
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What servers send for nearly every token is read here, and reads as
    /// the full reading does.
    #[test]
    fn the_common_chunks_are_read_directly_and_alike() {
        for chunk in [
            // llmsweep's simulator (OpenAI's shape).
            r#"{"id":"chatcmpl-0","object":"chat.completion.chunk","created":1795925892,"model":"llmsweep-sim","choices":[{"index":0,"delta":{"content":" latency"},"logprobs":null,"finish_reason":null}]}"#,
            r#"{"id":"chatcmpl-0","object":"chat.completion.chunk","created":1795925892,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}"#,
            r#"{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":" answer"},"logprobs":null,"finish_reason":"length"}]}"#,
            // vLLM 0.32's: its first, a token, its last (keys it adds, null).
            r#"{"id":"chatcmpl-b84161a7a4d1c0e3","object":"chat.completion.chunk","created":1795930333,"model":"tiny-llama","choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}],"prompt_token_ids":null,"prompt_text":null}"#,
            r#"{"id":"chatcmpl-b84161a7a4d1c0e3","object":"chat.completion.chunk","created":1795930333,"model":"tiny-llama","choices":[{"index":0,"delta":{"content":" exp"},"logprobs":null,"finish_reason":null,"token_ids":null}]}"#,
            r#"{"id":"chatcmpl-b84161a7a4d1c0e3","object":"chat.completion.chunk","created":1795930333,"model":"tiny-llama","choices":[{"index":0,"delta":{"content":" syste"},"logprobs":null,"finish_reason":"length","stop_reason":null,"token_ids":null}]}"#,
            // vLLM's, with its stop_reason and a null usage.
            r#"{"id":"chatcmpl-9","object":"chat.completion.chunk","created":17,"model":"qwen","choices":[{"index":0,"delta":{"content":"Hi"},"logprobs":null,"finish_reason":null,"stop_reason":null}],"usage":null}"#,
            // llama.cpp's llama-server (b1-0c1e570): keys in its order, a
            // null content beside the role, an empty delta at the end.
            r#"{"choices":[{"finish_reason":null,"index":0,"delta":{"role":"assistant","content":null}}],"created":1795929117,"id":"chatcmpl-a82R","model":"/work/realsrv/model.gguf","system_fingerprint":"b1-0c1e570","object":"chat.completion.chunk"}"#,
            r#"{"choices":[{"finish_reason":null,"index":0,"delta":{"content":" winte"}}],"created":1795929117,"id":"chatcmpl-a82R","model":"/work/realsrv/model.gguf","system_fingerprint":"b1-0c1e570","object":"chat.completion.chunk"}"#,
            r#"{"choices":[{"finish_reason":"length","index":0,"delta":{}}],"created":1795929117,"id":"chatcmpl-a82R","model":"/work/realsrv/model.gguf","system_fingerprint":"b1-0c1e570","object":"chat.completion.chunk"}"#,
            // Thinking.
            r#"{"id":"x","choices":[{"index":0,"delta":{"reasoning_content":"hmm","content":null}}]}"#,
            // /v1/completions.
            r#"{"id":"cmpl-1","object":"text_completion","created":1,"model":"m","choices":[{"index":0,"text":" the","logprobs":null,"finish_reason":null}]}"#,
            r#" { "choices" : [ ] } "#,
            // The last chunk's counts: llmsweep's simulator, vLLM 0.32's, and
            // with details.
            r#"{"id":"chatcmpl-0","object":"chat.completion.chunk","created":1795935207,"model":"llmsweep-sim","choices":[],"usage":{"prompt_tokens":2,"total_tokens":6,"completion_tokens":4}}"#,
            r#"{"id":"chatcmpl-bd3ddd5dda495618","object":"chat.completion.chunk","created":1795938195,"model":"tiny-llama","choices":[],"usage":{"prompt_tokens":12,"total_tokens":15,"completion_tokens":3},"system_fingerprint":"vllm-0.32.0-0370d0ed"}"#,
            r#"{"id":"chatcmpl-b8","object":"chat.completion.chunk","created":1795930333,"model":"tiny-llama","choices":[],"usage":{"prompt_tokens":20,"total_tokens":52,"completion_tokens":32,"prompt_tokens_details":null}}"#,
            r#"{"choices":[],"usage":{"completion_tokens":3}}"#,
            r#"{"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":7,"prompt_tokens_details":{"cached_tokens":4},"completion_tokens_details":{"reasoning_tokens":2}}}"#,
            r#"{"choices":[],"usage":{"completion_tokens":null,"reasoning_tokens":3,"prompt_tokens_details":{},"total_tokens":"x"}}"#,
            r#"{"choices":[],"usage":{"completion_tokens":4294967295}}"#,
        ] {
            let direct = read(chunk).unwrap_or_else(|| panic!("not read directly: {chunk}"));
            assert_eq!(Ok(direct), parse_chunk(chunk), "{chunk}");
        }
        let c = read(r#"{"choices":[{"delta":{"content":" latency"}}]}"#).unwrap();
        assert!(matches!(c.text, Cow::Borrowed(" latency")));
    }

    /// The eight-bytes-at-a-time scan finds what a byte-by-byte one does,
    /// wherever the byte sits and whatever surrounds it.
    #[test]
    fn a_string_ends_where_a_byte_by_byte_scan_ends_it() {
        let slow = |b: &[u8], from: usize| {
            (from..b.len())
                .find(|&i| b[i] == b'"' || b[i] == b'\\' || b[i] < 0x20)
                .unwrap_or(b.len())
        };
        let fill: [u8; 6] = [b'a', b'!', 0x7f, 0x80, 0xe9, b'#'];
        for stop in [b'"', b'\\', 0, 0x1f, 0x0a] {
            for len in 0..20 {
                for at in 0..=len {
                    for &f in &fill {
                        let mut b = vec![f; len];
                        if at < len {
                            b[at] = stop;
                        }
                        // Bytes that could carry into their neighbours
                        // after the stop.
                        b.extend_from_slice(&[0x20, 0x21, 0, b'"']);
                        for from in 0..=len.min(3) {
                            assert_eq!(plain_end(&b, from), slow(&b, from), "{b:?} from {from}");
                        }
                    }
                }
            }
        }
    }

    /// A stream's chunks read by the last one's shape read as in full: its
    /// first (a role, no text), its tokens (plain, empty, escaped), its end.
    #[test]
    fn a_stream_s_chunks_read_like_the_last_read_as_in_full() {
        let chunk = |content: &str, finish: &str| {
            format!(
                r#"{{"id":"chatcmpl-7","object":"chat.completion.chunk","created":17,"model":"m","choices":[{{"index":0,"delta":{{"content":{}}},"logprobs":null,"finish_reason":{finish}}}]}}"#,
                serde_json::to_string(content).unwrap()
            )
        };
        let stream = [
            r#"{"id":"chatcmpl-7","object":"chat.completion.chunk","created":17,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}"#.to_string(),
            chunk(" the", "null"),
            chunk(" answer", "null"),
            chunk("", "null"),
            chunk("\"quoted\"", "null"),
            chunk("ünï", "null"),
            chunk("a\nb", "null"),
            chunk(" end", "\"length\""),
            chunk(" more", "\"length\""),
            r#"{"id":"chatcmpl-7","object":"chat.completion.chunk","created":17,"model":"m","choices":[],"usage":{"prompt_tokens":2,"completion_tokens":7}}"#.to_string(),
        ];
        let mut last = LastChunk::default();
        let mut alike = 0;
        for data in &stream {
            alike += usize::from(last.read_like(data).is_some());
            assert_eq!(last.parse(data), parse_chunk(data), "{data}");
        }
        // " answer", "", "ünï" and " more" are read by the last one's shape.
        assert_eq!(alike, 4);
    }

    /// What it does not fully understand goes the full way.
    #[test]
    fn anything_else_goes_the_full_way() {
        for chunk in [
            r#"{"object":"error","message":"boom"}"#,
            // Counts that are no whole number of tokens: the full reading
            // says why.
            r#"{"choices":[],"usage":{"completion_tokens":4294967296}}"#,
            r#"{"choices":[],"usage":{"completion_tokens":-1}}"#,
            r#"{"choices":[],"usage":{"completion_tokens":1.5}}"#,
            r#"{"choices":[],"usage":{"completion_tokens":"3"}}"#,
            r#"{"choices":[],"usage":"lots"}"#,
            r#"{"choices":[],"usage":{"completion_tokens":1,"completion_tokens":2}}"#,
            r#"{"choices":[],"usage":{"prompt_tokens_details":{"cached_tokens":1,"audio_tokens":0}}}"#,
            r#"{"choices":[],"usage":{"total_tokens":{}}}"#,
            r#"{"error":{"message":"boom"}}"#,
            r#"{"detail":"no"}"#,
            r#"{"choices":[{"delta":{"content":"a\"b"}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0}]}}]}"#,
            r#"{"choices":[{"delta":{"content":"a"}}],"choices":[]}"#,
            r#"{"choices":[{"delta":{"content":"a"}}]} x"#,
            r#"{"choices":[{"index":01}]}"#,
            r#"{"choices":[{"index":1e400}]}"#,
            r#"{"choices":[{"logprobs":{"content":[]}}]}"#,
            r#"{"choices":[{"token_ids":[1,2]}]}"#,
            r#"{"choices":[{"finish_reason":1}]}"#,
            r#"{"id":"x","extra":1}"#,
            "{\"choices\":[{\"delta\":{\"content\":\"a\u{1}\"}}]}",
            r#"{"choices":[{"delta":{"content":"a"}},]}"#,
            r#"{"choices":"#,
            "",
        ] {
            assert_eq!(read(chunk), None, "{chunk}");
        }
    }
}
