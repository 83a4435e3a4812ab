//! A linear, bounded Server-Sent Events parser.
//!
//! Every byte is looked at a constant number of times however the stream is
//! split into reads, and a line longer than the cap ends the stream instead of
//! growing a buffer without limit. Lines are checked for UTF-8 one at a time,
//! so an invalid byte fails the request at once rather than after the stream.
//!
//! Besides the standard fields (`data`, `event`, `id`, `retry`) it reports an
//! `error:` field, which llama.cpp's server uses for in-band errors.

/// One thing the stream said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SseItem {
    /// A dispatched event: its `event:` name (if any) and its joined `data:` lines.
    Event { event: Option<String>, data: String },
    /// An `error: ...` line (llama.cpp's framing of in-band errors).
    ErrorField(String),
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SseError {
    #[error("an SSE line is longer than {limit} bytes (--max-line-bytes)")]
    LineTooLong { limit: usize },
    #[error("an SSE event is longer than {limit} bytes (--max-line-bytes)")]
    EventTooLong { limit: usize },
    #[error("invalid UTF-8 in SSE line {line}")]
    InvalidUtf8 { line: u64 },
}

/// The default cap on one line (and one event's data).
pub const DEFAULT_MAX_LINE: usize = 4 << 20;

#[derive(Debug)]
pub struct SseParser {
    buf: Vec<u8>,
    /// Bytes of `buf` already consumed (lines handed out).
    start: usize,
    /// Bytes of `buf` from `start` already searched for a line end.
    scanned: usize,
    /// The previous line ended with CR: a LF right after it belongs to it.
    skip_lf: bool,
    max_line: usize,
    lines: u64,
    event: Option<String>,
    data: String,
    has_data: bool,
    /// Any SSE field or comment was seen (a body with none is not a stream).
    pub saw_field: bool,
    /// The start of the first line that is no SSE field, for error messages.
    pub first_foreign_line: Option<String>,
}

impl SseParser {
    pub fn new(max_line: usize) -> Self {
        SseParser {
            buf: Vec::new(),
            start: 0,
            scanned: 0,
            skip_lf: false,
            max_line: max_line.max(16),
            lines: 0,
            event: None,
            data: String::new(),
            has_data: false,
            saw_field: false,
            first_foreign_line: None,
        }
    }

    /// Appends received bytes. Fails when the unfinished line is over the cap.
    pub fn push(&mut self, bytes: &[u8]) -> Result<(), SseError> {
        if self.start > 0 && self.start * 2 >= self.buf.len() {
            // Drop consumed bytes; amortised linear since at least half goes.
            self.buf.drain(..self.start);
            self.scanned -= self.start;
            self.start = 0;
        }
        self.buf.extend_from_slice(bytes);
        Ok(())
    }

    /// The next complete item in the buffered bytes, if any.
    pub fn next_item(&mut self) -> Result<Option<SseItem>, SseError> {
        loop {
            if self.skip_lf && self.start < self.buf.len() {
                if self.buf[self.start] == b'\n' {
                    self.start += 1;
                }
                self.skip_lf = false;
                self.scanned = self.scanned.max(self.start);
            }
            let from = self.scanned.max(self.start);
            let found = self.buf[from..]
                .iter()
                .position(|&b| b == b'\n' || b == b'\r');
            let Some(off) = found else {
                self.scanned = self.buf.len();
                if self.buf.len() - self.start > self.max_line {
                    return Err(SseError::LineTooLong {
                        limit: self.max_line,
                    });
                }
                return Ok(None);
            };
            let end = from + off;
            if end - self.start > self.max_line {
                return Err(SseError::LineTooLong {
                    limit: self.max_line,
                });
            }
            let line_start = self.start;
            self.skip_lf = self.buf[end] == b'\r';
            self.start = end + 1;
            self.scanned = self.start;
            if let Some(item) = self.line(line_start, end)? {
                return Ok(Some(item));
            }
        }
    }

    /// At the end of the body: the last unterminated line and any pending
    /// event (servers that omit the final blank line still get their events).
    pub fn finish(&mut self) -> Result<Option<SseItem>, SseError> {
        if self.start < self.buf.len() {
            let (s, e) = (self.start, self.buf.len());
            self.start = e;
            self.scanned = e;
            if let Some(item) = self.line(s, e)? {
                return Ok(Some(item));
            }
        }
        Ok(self.dispatch())
    }

    fn dispatch(&mut self) -> Option<SseItem> {
        if !self.has_data && self.event.is_none() {
            return None;
        }
        let mut data = std::mem::take(&mut self.data);
        if data.ends_with('\n') {
            data.pop();
        }
        self.has_data = false;
        Some(SseItem::Event {
            event: self.event.take(),
            data,
        })
    }

    fn line(&mut self, s: usize, e: usize) -> Result<Option<SseItem>, SseError> {
        self.lines += 1;
        let raw = &self.buf[s..e];
        let mut line =
            std::str::from_utf8(raw).map_err(|_| SseError::InvalidUtf8 { line: self.lines })?;
        if self.lines == 1 {
            line = line.strip_prefix('\u{feff}').unwrap_or(line);
        }
        if line.is_empty() {
            return Ok(self.dispatch());
        }
        if line.starts_with(':') {
            self.saw_field = true;
            return Ok(None);
        }
        let (field, value) = match line.split_once(':') {
            Some((f, v)) => (f, v.strip_prefix(' ').unwrap_or(v)),
            None => (line, ""),
        };
        match field {
            "data" => {
                self.saw_field = true;
                if self.data.len() + value.len() + 1 > self.max_line {
                    return Err(SseError::EventTooLong {
                        limit: self.max_line,
                    });
                }
                self.data.push_str(value);
                self.data.push('\n');
                self.has_data = true;
            }
            "event" => {
                self.saw_field = true;
                self.event = Some(value.to_string());
            }
            "id" | "retry" => self.saw_field = true,
            "error" => {
                self.saw_field = true;
                return Ok(Some(SseItem::ErrorField(value.to_string())));
            }
            _ => {
                if self.first_foreign_line.is_none() {
                    self.first_foreign_line = Some(super::chunk::short(line));
                }
            }
        }
        Ok(None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(input: &[&[u8]], cap: usize) -> Result<Vec<SseItem>, SseError> {
        let mut p = SseParser::new(cap);
        let mut out = Vec::new();
        for part in input {
            p.push(part)?;
            while let Some(i) = p.next_item()? {
                out.push(i);
            }
        }
        while let Some(i) = p.finish()? {
            out.push(i);
        }
        Ok(out)
    }

    fn ev(event: Option<&str>, data: &str) -> SseItem {
        SseItem::Event {
            event: event.map(str::to_string),
            data: data.to_string(),
        }
    }

    #[test]
    fn events_split_anywhere_parse_the_same() {
        let whole = b"data: a\n\n: comment\nevent: error\ndata: {\"x\":1}\ndata: two\r\n\r\ndata:[DONE]\r\r";
        let expect = vec![
            ev(None, "a"),
            ev(Some("error"), "{\"x\":1}\ntwo"),
            ev(None, "[DONE]"),
        ];
        assert_eq!(all(&[whole], DEFAULT_MAX_LINE).unwrap(), expect);
        for cut in 0..whole.len() {
            let (a, b) = whole.split_at(cut);
            assert_eq!(all(&[a, b], DEFAULT_MAX_LINE).unwrap(), expect, "cut {cut}");
        }
        let bytes: Vec<&[u8]> = whole.chunks(1).collect();
        assert_eq!(all(&bytes, DEFAULT_MAX_LINE).unwrap(), expect);
    }

    #[test]
    fn llama_cpp_error_lines_are_reported() {
        let out = all(
            &[b"data: {\"a\":1}\n\nerror: {\"code\":500,\"message\":\"boom\"}\n\n"],
            1 << 20,
        )
        .unwrap();
        assert_eq!(
            out[1],
            SseItem::ErrorField("{\"code\":500,\"message\":\"boom\"}".into())
        );
    }

    #[test]
    fn a_last_event_without_a_blank_line_is_kept() {
        assert_eq!(
            all(&[b"data: [DONE]"], 1 << 20).unwrap(),
            vec![ev(None, "[DONE]")]
        );
    }

    #[test]
    fn long_lines_fail_before_the_line_ends() {
        let mut p = SseParser::new(1024);
        p.push(b"data: ").unwrap();
        let chunk = vec![b'x'; 512];
        let mut failed = false;
        for _ in 0..4 {
            p.push(&chunk).unwrap();
            if let Err(e) = p.next_item() {
                assert_eq!(e, SseError::LineTooLong { limit: 1024 });
                failed = true;
                break;
            }
        }
        assert!(failed, "a 2 KiB line passed a 1 KiB cap");
        // Many data lines that add up past the cap fail too.
        let many = b"data: 0123456789\n".repeat(200);
        assert_eq!(
            all(&[&many], 1024),
            Err(SseError::EventTooLong { limit: 1024 })
        );
    }

    #[test]
    fn invalid_utf8_fails_at_its_line() {
        let mut p = SseParser::new(1 << 20);
        p.push(b"data: ok\n\ndata: \xff\xfe\n\ndata: more").unwrap();
        assert_eq!(p.next_item().unwrap(), Some(ev(None, "ok")));
        assert_eq!(p.next_item(), Err(SseError::InvalidUtf8 { line: 3 }));
    }

    #[test]
    fn foreign_bodies_are_noticed() {
        let mut p = SseParser::new(1 << 20);
        p.push(b"{\"id\":\"x\",\"choices\":[]}").unwrap();
        assert_eq!(p.next_item().unwrap(), None);
        assert_eq!(p.finish().unwrap(), None);
        assert!(!p.saw_field);
        assert!(p
            .first_foreign_line
            .as_deref()
            .unwrap()
            .starts_with("{\"id\""));
    }
}
