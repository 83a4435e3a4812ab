//! Why a request failed: the stable error categories, what a transport
//! error's chain says, and the few samples of each kept per stage.

use std::fmt;

use super::chunk::short;
use super::limits;

/// A non-2xx body is read up to this size for the error message.
pub(super) const ERROR_BODY_BYTES: usize = crate::bounds::ERROR_BODY;

/// Why a request failed. The names are stable: they are report keys, and
/// docs/METRICS.md lists them all.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ErrorCategory {
    /// The server answered with a non-2xx, non-3xx status.
    Http(u16),
    /// A 3xx the client did not follow (see `--follow-redirects`).
    Redirect(u16),
    /// Could not connect (refused, DNS, TLS).
    Connect,
    /// The client's own limits: out of file descriptors or local ports.
    ClientLimit,
    /// No complete answer within --request-timeout.
    Timeout,
    /// The connection broke, or the stream ended before `[DONE]`.
    StreamBroken,
    /// Bytes that are not a valid SSE stream (invalid UTF-8, a line over the cap).
    StreamMalformed,
    /// A 200 whose body is JSON, HTML or anything but an event stream.
    UnexpectedBody,
    /// A `data:` payload that is not JSON.
    InvalidJson,
    /// An in-band error: `event: error`, an `error` field or object in the
    /// data, or llama.cpp's `error:` line.
    ErrorEvent,
    /// The stream finished without any generated output.
    EmptyResponse,
    /// A streamed tool call the server garbled: a `tool_calls` delta that is
    /// not a list of calls, a call without a function name, or arguments
    /// that are not JSON when the answer finished (not cut by its length).
    ToolCallMalformed,
    /// Anything else the HTTP stack reported while sending.
    Request,
}

impl ErrorCategory {
    /// Every category name except the numbered ones, for documentation and tests.
    pub const FIXED_NAMES: [&'static str; 11] = [
        "connect",
        "client_limit",
        "timeout",
        "stream_broken",
        "stream_malformed",
        "unexpected_body",
        "invalid_json",
        "error_event",
        "empty_response",
        "tool_call_malformed",
        "request",
    ];
}

impl fmt::Display for ErrorCategory {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ErrorCategory::Http(code) => write!(f, "http_{code}"),
            ErrorCategory::Redirect(code) => write!(f, "redirect_{code}"),
            ErrorCategory::Connect => f.write_str("connect"),
            ErrorCategory::ClientLimit => f.write_str("client_limit"),
            ErrorCategory::Timeout => f.write_str("timeout"),
            ErrorCategory::StreamBroken => f.write_str("stream_broken"),
            ErrorCategory::StreamMalformed => f.write_str("stream_malformed"),
            ErrorCategory::UnexpectedBody => f.write_str("unexpected_body"),
            ErrorCategory::InvalidJson => f.write_str("invalid_json"),
            ErrorCategory::ErrorEvent => f.write_str("error_event"),
            ErrorCategory::EmptyResponse => f.write_str("empty_response"),
            ErrorCategory::ToolCallMalformed => f.write_str("tool_call_malformed"),
            ErrorCategory::Request => f.write_str("request"),
        }
    }
}

/// A body that is not what was asked for, in one line: its content type,
/// size and first line (an HTML error page is not dumped whole). JSON
/// bodies are short already and say the most: they are shown as they are.
pub fn body_summary(content_type: &str, body: &str, declared_len: Option<u64>) -> String {
    let trimmed = body.trim();
    if trimmed.starts_with('{') || trimmed.starts_with('[') {
        return short(&trimmed.split_whitespace().collect::<Vec<_>>().join(" "));
    }
    if trimmed.is_empty() {
        return "an empty body".into();
    }
    let size = declared_len.unwrap_or(body.len() as u64);
    let ct = if content_type.is_empty() {
        "no content type"
    } else {
        content_type
    };
    let first = trimmed.lines().next().unwrap_or_default().trim();
    let mut line: String = first.chars().take(80).collect();
    if first.chars().count() > 80 {
        line.push('…');
    }
    format!("{ct}, {size} bytes, first line {line:?}")
}

/// Distinct error messages kept per category in a stage report.
pub const ERROR_SAMPLES: usize = 3;

/// Keeps up to [`ERROR_SAMPLES`] distinct messages for `category`.
pub fn add_error_sample(
    samples: &mut std::collections::BTreeMap<String, Vec<String>>,
    category: ErrorCategory,
    message: &str,
) {
    let list = samples.entry(category.to_string()).or_default();
    if list.len() < ERROR_SAMPLES {
        let message = crate::redact::scrub(message);
        if !list.contains(&message) {
            list.push(message);
        }
    }
}

pub(super) fn classify_send_error(e: &reqwest::Error) -> ErrorCategory {
    if os_errors(e).any(limits::is_client_limit) {
        ErrorCategory::ClientLimit
    } else if e.is_connect() {
        ErrorCategory::Connect
    } else if e.is_timeout() {
        ErrorCategory::Timeout
    } else if e.is_body() || e.is_decode() || is_stale_connection(e) {
        // Closed or reset before any answer, even on a new connection: the
        // server dropped it.
        ErrorCategory::StreamBroken
    } else {
        ErrorCategory::Request
    }
}

/// The OS error codes in an error's source chain.
pub(super) fn os_errors<'a>(
    e: &'a (dyn std::error::Error + 'static),
) -> impl Iterator<Item = i32> + 'a {
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(e);
    std::iter::from_fn(move || {
        while let Some(err) = cur {
            cur = err.source();
            if let Some(code) = err
                .downcast_ref::<std::io::Error>()
                .and_then(|io| io.raw_os_error())
            {
                return Some(code);
            }
        }
        None
    })
}

/// The send failed because the connection was closed or reset before any
/// answer arrived: what a pooled connection the server already closed does.
/// Connect errors and timeouts are not this.
pub(super) fn is_stale_connection(e: &reqwest::Error) -> bool {
    if e.is_connect() || e.is_timeout() || e.is_status() {
        return false;
    }
    is_closed_before_answer(e)
}

pub(super) fn is_closed_before_answer(e: &(dyn std::error::Error + 'static)) -> bool {
    use std::io::ErrorKind;
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = cur {
        if let Some(h) = err.downcast_ref::<hyper::Error>() {
            if h.is_incomplete_message() || h.is_canceled() {
                return true;
            }
        }
        if let Some(io) = err.downcast_ref::<std::io::Error>() {
            if matches!(
                io.kind(),
                ErrorKind::ConnectionReset
                    | ErrorKind::ConnectionAborted
                    | ErrorKind::BrokenPipe
                    | ErrorKind::UnexpectedEof
            ) {
                return true;
            }
        }
        cur = err.source();
    }
    false
}

/// reqwest's top-level message is vague ("error sending request"); the
/// source chain says what happened. Known puzzles get a hint.
pub(super) fn describe_reqwest(e: &reqwest::Error) -> String {
    let mut msg = e.to_string();
    let mut src = std::error::Error::source(e);
    while let Some(s) = src {
        let part = s.to_string();
        // Wrappers often repeat their source's text.
        if !msg.ends_with(&part) {
            msg.push_str(": ");
            msg.push_str(&part);
        }
        src = s.source();
    }
    if let Some(code) = os_errors(e).find(|&c| limits::is_client_limit(c)) {
        msg = format!("{} ({})", short(&msg), limits::hint(code));
        return msg;
    }
    match hint_for(&msg) {
        Some(h) => format!("{} ({h})", short(&msg)),
        None => short(&msg),
    }
}

/// What to try for a TLS puzzle, from the error text.
pub(super) fn hint_for(msg: &str) -> Option<&'static str> {
    let m = msg.to_ascii_lowercase();
    if m.contains("invalidcontenttype")
        || m.contains("corrupt message")
        || m.contains("wrong version number")
        || m.contains("http request to an https")
    {
        Some("the server does not speak TLS here: try http:// instead of https://")
    } else if m.contains("certificate")
        || m.contains("unknownissuer")
        || m.contains("notvalidforname")
    {
        Some("the server's TLS certificate is not trusted: fix it, or pass --insecure for a test server")
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_html_page_is_summarised_in_one_line() {
        let page = "<!DOCTYPE html>\n<html>\n<head><title>404 Not Found</title></head>\n<body>\n<h1>Not Found</h1>\n</body>\n</html>\n";
        let s = body_summary("text/html; charset=utf-8", page, None);
        assert_eq!(
            s,
            format!(
                "text/html; charset=utf-8, {} bytes, first line \"<!DOCTYPE html>\"",
                page.len()
            )
        );
        assert_eq!(body_summary("", "", Some(0)), "an empty body");
        assert_eq!(
            body_summary("application/json", "{\"detail\":\n \"Not Found\"}", None),
            "{\"detail\": \"Not Found\"}"
        );
        assert!(crate::client::normalize_base_url("").is_err());
    }

    #[test]
    fn error_categories_have_stable_names() {
        assert_eq!(ErrorCategory::Http(503).to_string(), "http_503");
        assert_eq!(ErrorCategory::Redirect(307).to_string(), "redirect_307");
        assert_eq!(ErrorCategory::StreamBroken.to_string(), "stream_broken");
        let all = [
            ErrorCategory::Connect,
            ErrorCategory::ClientLimit,
            ErrorCategory::Timeout,
            ErrorCategory::StreamBroken,
            ErrorCategory::StreamMalformed,
            ErrorCategory::UnexpectedBody,
            ErrorCategory::InvalidJson,
            ErrorCategory::ErrorEvent,
            ErrorCategory::EmptyResponse,
            ErrorCategory::ToolCallMalformed,
            ErrorCategory::Request,
        ];
        let names: Vec<String> = all.iter().map(|c| c.to_string()).collect();
        assert_eq!(names, ErrorCategory::FIXED_NAMES);
    }

    #[test]
    fn every_category_is_documented() {
        let metrics = include_str!("../../docs/METRICS.md");
        for name in ErrorCategory::FIXED_NAMES
            .iter()
            .chain(&["http_<code>", "redirect_<code>"])
        {
            let tick = format!("`{name}`");
            assert!(
                metrics.contains(&tick),
                "docs/METRICS.md does not list {tick}"
            );
        }
    }

    #[derive(Debug)]
    struct Wrapped(std::io::Error);
    impl fmt::Display for Wrapped {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            write!(f, "wrapped")
        }
    }
    impl std::error::Error for Wrapped {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&self.0)
        }
    }

    #[test]
    fn os_errors_and_closed_connections_are_found_in_the_chain() {
        let e = Wrapped(std::io::Error::from_raw_os_error(24));
        assert_eq!(os_errors(&e).collect::<Vec<_>>(), vec![24]);
        assert!(limits::is_client_limit(24));
        let reset = Wrapped(std::io::Error::from(std::io::ErrorKind::ConnectionReset));
        assert!(is_closed_before_answer(&reset));
        let refused = Wrapped(std::io::Error::from(std::io::ErrorKind::ConnectionRefused));
        assert!(!is_closed_before_answer(&refused));
    }

    #[test]
    fn tls_puzzles_get_a_hint() {
        assert!(
            hint_for("received corrupt message of type InvalidContentType")
                .unwrap()
                .contains("http://")
        );
        assert!(hint_for("invalid peer certificate: UnknownIssuer")
            .unwrap()
            .contains("--insecure"));
        assert_eq!(hint_for("connection refused"), None);
    }
}
