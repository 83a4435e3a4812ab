//! A linear, bounded Server-Sent Events parser.
//!
//! Every byte is looked at a constant number of times however the stream is
//! split into reads, and a line longer than the cap ends the stream instead of
//! growing a buffer without limit. Lines are checked for UTF-8 one at a time,
//! so an invalid byte fails the request at once rather than after the stream.
//!
//! It runs once per streamed token, so it copies and allocates as little as it
//! can: a read's bytes are parsed where they arrived (`Bytes` is shared, not
//! copied); only a line cut by the end of a read is copied, to be finished by
//! the next; an event's data is gathered in a buffer the parser keeps and
//! lends out, so a stream of any length allocates it once.
//!
//! Besides the standard fields (`data`, `event`, `id`, `retry`) it reports an
//! `error:` field, which llama.cpp's server uses for in-band errors.

use bytes::{Buf, Bytes};

/// One thing the stream said, lent by the parser until its next call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SseItem<'a> {
    /// A dispatched event: its `event:` name (if any) and its joined `data:` lines.
    Event {
        event: Option<&'a str>,
        data: &'a str,
    },
    /// An `error: ...` line (llama.cpp's framing of in-band errors).
    ErrorField(&'a str),
}

/// An [`SseItem`] kept past the parser's next call (its text copied).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeptSseItem {
    Event { event: Option<String>, data: String },
    ErrorField(String),
}

impl SseItem<'_> {
    /// The item with its text copied, to keep.
    pub fn kept(&self) -> KeptSseItem {
        match *self {
            SseItem::Event { event, data } => KeptSseItem::Event {
                event: event.map(str::to_string),
                data: data.to_string(),
            },
            SseItem::ErrorField(v) => KeptSseItem::ErrorField(v.to_string()),
        }
    }
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

/// What a line did: the parser's buffers hold the item it made, if any.
enum Made {
    Nothing,
    Event,
    Error,
}

#[derive(Debug)]
pub struct SseParser {
    /// Received bytes not yet split into lines (a read's, not copied).
    pending: Bytes,
    /// The start of a line the last read cut off, waiting for its end.
    carry: Vec<u8>,
    /// The previous line ended with CR: a LF right after it belongs to it.
    skip_lf: bool,
    max_line: usize,
    lines: u64,
    /// The event being gathered: its name (`has_event`) and data lines.
    event: String,
    has_event: bool,
    data: String,
    has_data: bool,
    /// The text of the last `error:` line.
    error: String,
    /// The buffers above were lent out as an item: emptied before the next line.
    lent: bool,
    /// Any SSE field or comment was seen (a body with none is not a stream).
    pub saw_field: bool,
    /// The start of the first line that is no SSE field, for error messages.
    pub first_foreign_line: Option<String>,
}

impl SseParser {
    pub fn new(max_line: usize) -> Self {
        SseParser {
            pending: Bytes::new(),
            carry: Vec::new(),
            skip_lf: false,
            max_line: max_line.max(16),
            lines: 0,
            event: String::new(),
            has_event: false,
            data: String::new(),
            has_data: false,
            error: String::new(),
            lent: false,
            saw_field: false,
            first_foreign_line: None,
        }
    }

    /// Appends received bytes (copied: [`SseParser::push_bytes`] shares them).
    pub fn push(&mut self, bytes: &[u8]) -> Result<(), SseError> {
        self.push_bytes(Bytes::copy_from_slice(bytes))
    }

    /// Appends a read's bytes. The caller takes every item out
    /// ([`SseParser::next_item`] until `None`) before the next read, so
    /// nothing is pending and the read is parsed where it is.
    pub fn push_bytes(&mut self, bytes: Bytes) -> Result<(), SseError> {
        if self.pending.is_empty() {
            self.pending = bytes;
        } else {
            let mut joined = Vec::with_capacity(self.pending.len() + bytes.len());
            joined.extend_from_slice(&self.pending);
            joined.extend_from_slice(&bytes);
            self.pending = joined.into();
        }
        Ok(())
    }

    /// The next complete item in the received bytes, if any.
    pub fn next_item(&mut self) -> Result<Option<SseItem<'_>>, SseError> {
        Ok(self.next_made()?.map(|made| self.item(made)))
    }

    /// At the end of the body: the lines still pending, the last
    /// unterminated line and any pending event (servers that omit the
    /// final blank line still get their events).
    pub fn finish(&mut self) -> Result<Option<SseItem<'_>>, SseError> {
        if let Some(made) = self.next_made()? {
            return Ok(Some(self.item(made)));
        }
        if !self.carry.is_empty() {
            self.empty_lent();
            if let made @ (Made::Event | Made::Error) = self.carried_line(&[])? {
                return Ok(Some(self.item(made)));
            }
        }
        self.empty_lent();
        Ok(self.gathering().then(|| self.item(Made::Event)))
    }

    /// Reads lines until one makes an item; None when the received bytes
    /// end inside a line.
    fn next_made(&mut self) -> Result<Option<Made>, SseError> {
        loop {
            match self.next_line()? {
                Some(Made::Nothing) => {}
                other => return Ok(other),
            }
        }
    }

    /// The item a line made, lent from the parser's buffers.
    fn item(&mut self, made: Made) -> SseItem<'_> {
        match made {
            // An error line is no event: the event being gathered goes on.
            Made::Error => SseItem::ErrorField(&self.error),
            _ => {
                self.lent = true;
                SseItem::Event {
                    event: self.has_event.then_some(self.event.as_str()),
                    data: self.data.strip_suffix('\n').unwrap_or(&self.data),
                }
            }
        }
    }

    /// An event lent out is over: its buffers are emptied (their room kept).
    fn empty_lent(&mut self) {
        if self.lent {
            self.lent = false;
            self.event.clear();
            self.has_event = false;
            self.data.clear();
            self.has_data = false;
        }
    }

    /// Splits off and reads the next complete line; None when the received
    /// bytes end inside a line (kept in `carry` for the next read).
    fn next_line(&mut self) -> Result<Option<Made>, SseError> {
        if self.skip_lf && !self.pending.is_empty() {
            if self.pending[0] == b'\n' {
                self.pending.advance(1);
            }
            self.skip_lf = false;
        }
        // Every event ends with a blank line: found without a search.
        let end = match self.pending.first() {
            Some(b'\n') => Some(0),
            _ => memchr::memchr2(b'\n', b'\r', &self.pending),
        };
        let Some(end) = end else {
            if self.carry.len() + self.pending.len() > self.max_line {
                return Err(SseError::LineTooLong {
                    limit: self.max_line,
                });
            }
            self.carry.extend_from_slice(&self.pending);
            self.pending.clear();
            return Ok(None);
        };
        if self.carry.len() + end > self.max_line {
            return Err(SseError::LineTooLong {
                limit: self.max_line,
            });
        }
        let head = self.pending.split_to(end + 1);
        self.skip_lf = head[end] == b'\r';
        self.empty_lent();
        if self.carry.is_empty() {
            return self.line(&head[..end]).map(Some);
        }
        self.carried_line(&head[..end]).map(Some)
    }

    /// Reads the line begun in an earlier read and ended by `tail` (the
    /// carry keeps its room for the next).
    fn carried_line(&mut self, tail: &[u8]) -> Result<Made, SseError> {
        let mut line = std::mem::take(&mut self.carry);
        line.extend_from_slice(tail);
        let made = self.line(&line);
        line.clear();
        self.carry = line;
        made
    }

    /// An event is being gathered (a blank line dispatches it).
    fn gathering(&self) -> bool {
        self.has_data || self.has_event
    }

    fn line(&mut self, raw: &[u8]) -> Result<Made, SseError> {
        self.lines += 1;
        let mut line =
            std::str::from_utf8(raw).map_err(|_| SseError::InvalidUtf8 { line: self.lines })?;
        if self.lines == 1 {
            line = line.strip_prefix('\u{feff}').unwrap_or(line);
        }
        if line.is_empty() {
            return Ok(if self.gathering() {
                Made::Event
            } else {
                Made::Nothing
            });
        }
        if line.starts_with(':') {
            self.saw_field = true;
            return Ok(Made::Nothing);
        }
        // The field's name is short: a byte loop finds its end sooner than
        // a search would start.
        let (field, value) = match line.bytes().position(|b| b == b':') {
            Some(at) => {
                let v = &line[at + 1..];
                (&line[..at], v.strip_prefix(' ').unwrap_or(v))
            }
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
                self.event.clear();
                self.event.push_str(value);
                self.has_event = true;
            }
            "id" | "retry" => self.saw_field = true,
            "error" => {
                self.saw_field = true;
                self.error.clear();
                self.error.push_str(value);
                return Ok(Made::Error);
            }
            _ => {
                if self.first_foreign_line.is_none() {
                    self.first_foreign_line = Some(super::chunk::short(line));
                }
            }
        }
        Ok(Made::Nothing)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(input: &[&[u8]], cap: usize) -> Result<Vec<KeptSseItem>, SseError> {
        let mut p = SseParser::new(cap);
        let mut out = Vec::new();
        for part in input {
            p.push(part)?;
            while let Some(i) = p.next_item()? {
                out.push(i.kept());
            }
        }
        while let Some(i) = p.finish()? {
            out.push(i.kept());
        }
        Ok(out)
    }

    fn ev(event: Option<&str>, data: &str) -> KeptSseItem {
        KeptSseItem::Event {
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
            KeptSseItem::ErrorField("{\"code\":500,\"message\":\"boom\"}".into())
        );
    }

    /// An `error:` line between an event's data lines is reported at once;
    /// the event it interrupted is still gathered whole.
    #[test]
    fn an_error_line_inside_an_event_leaves_the_event_whole() {
        let whole = b"data: a\nerror: boom\ndata: b\n\ndata: c\n\n";
        let expect = vec![
            KeptSseItem::ErrorField("boom".into()),
            ev(None, "a\nb"),
            ev(None, "c"),
        ];
        for cut in 0..whole.len() {
            let (a, b) = whole.split_at(cut);
            assert_eq!(all(&[a, b], DEFAULT_MAX_LINE).unwrap(), expect, "cut {cut}");
        }
    }

    /// Reads pushed before the last was taken apart are joined, not lost.
    #[test]
    fn reads_pushed_without_taking_items_are_all_read() {
        let mut p = SseParser::new(1 << 20);
        p.push(b"data: a\n\nda").unwrap();
        p.push(b"ta: b\n\n").unwrap();
        let mut out = Vec::new();
        while let Some(i) = p.next_item().unwrap() {
            out.push(i.kept());
        }
        assert_eq!(out, vec![ev(None, "a"), ev(None, "b")]);
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
        assert_eq!(
            p.next_item().unwrap().map(|i| i.kept()),
            Some(ev(None, "ok"))
        );
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
