//! A parser for the Prometheus text exposition format (version 0.0.4, and the
//! OpenMetrics text that servers send when asked for it).
//!
//! One line is `name{label="value",...} value [timestamp]`. What this parser
//! is careful about, because real `/metrics` pages do all of it:
//!
//! * an optional trailing timestamp (milliseconds) is not the value;
//! * label values may contain spaces, `,`, `}`, `=`, and the escapes `\"`,
//!   `\\` and `\n`;
//! * values may be `NaN`, `+Inf`, `-Inf`, or in exponent notation (`8.1e+06`);
//! * `# HELP` / `# TYPE` lines give each family its kind; a histogram's
//!   `_bucket` / `_sum` / `_count` series belong to the family named in its
//!   `# TYPE` line;
//! * a line that does not parse is skipped and counted, never fatal.
//!
//! Aggregating across label sets is left to the caller, which knows whether
//! a family is a gauge (not to be summed blindly) or a counter.

use std::collections::HashMap;

/// A metric family's kind, from its `# TYPE` line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Counter,
    Gauge,
    Histogram,
    Summary,
    Untyped,
}

impl Kind {
    fn parse(s: &str) -> Kind {
        match s {
            "counter" => Kind::Counter,
            "gauge" => Kind::Gauge,
            "histogram" | "gaugehistogram" => Kind::Histogram,
            "summary" => Kind::Summary,
            _ => Kind::Untyped,
        }
    }
}

/// One sample line.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// The series name as written (`vllm:e2e_request_latency_seconds_bucket`).
    pub name: String,
    /// Labels in the order written.
    pub labels: Vec<(String, String)>,
    pub value: f64,
    /// The optional timestamp (ms since the epoch); informational only.
    pub timestamp_ms: Option<i64>,
}

impl Sample {
    pub fn label(&self, key: &str) -> Option<&str> {
        self.labels
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}

/// A parsed page.
#[derive(Debug, Clone, Default)]
pub struct Page {
    pub samples: Vec<Sample>,
    /// Family name → kind, from `# TYPE` lines.
    pub kinds: HashMap<String, Kind>,
    /// Lines that were neither comments, blank, nor valid samples.
    pub bad_lines: usize,
}

impl Page {
    /// The kind of the family a series belongs to (`x_bucket` → `x` when `x`
    /// is a histogram); `Untyped` when no `# TYPE` line names it.
    pub fn kind_of(&self, series: &str) -> Kind {
        if let Some(k) = self.kinds.get(series) {
            return *k;
        }
        for suffix in ["_bucket", "_sum", "_count", "_total", "_created"] {
            if let Some(base) = series.strip_suffix(suffix) {
                if let Some(k) = self.kinds.get(base) {
                    return *k;
                }
            }
        }
        Kind::Untyped
    }

    /// Samples of one series name.
    pub fn series<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a Sample> + 'a {
        self.samples.iter().filter(move |s| s.name == name)
    }

    pub fn has(&self, name: &str) -> bool {
        self.samples.iter().any(|s| s.name == name)
    }
}

/// Parses a whole page. Never fails: bad lines are counted in `bad_lines`.
pub fn parse(text: &str) -> Page {
    let mut page = Page::default();
    for raw in text.lines() {
        let line = raw.trim();
        if line.is_empty() {
            continue;
        }
        if let Some(comment) = line.strip_prefix('#') {
            let mut words = comment.split_whitespace();
            if words.next() == Some("TYPE") {
                if let (Some(name), Some(kind)) = (words.next(), words.next()) {
                    page.kinds.insert(name.to_string(), Kind::parse(kind));
                }
            }
            continue;
        }
        match parse_line(line) {
            Some(s) => page.samples.push(s),
            None => page.bad_lines += 1,
        }
    }
    page
}

fn is_name_start(c: char) -> bool {
    c.is_ascii_alphabetic() || c == '_' || c == ':'
}

fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == ':'
}

/// Parses one sample line; None when it is malformed.
pub fn parse_line(line: &str) -> Option<Sample> {
    let line = line.trim();
    let mut chars = line.char_indices().peekable();
    let (_, first) = chars.next()?;
    if !is_name_start(first) {
        return None;
    }
    let mut name_end = line.len();
    while let Some(&(i, c)) = chars.peek() {
        if is_name_char(c) {
            chars.next();
        } else {
            name_end = i;
            break;
        }
    }
    let name = &line[..name_end];
    let mut rest = &line[name_end..];
    let mut labels = Vec::new();
    if let Some(after) = rest.strip_prefix('{') {
        let (parsed, remaining) = parse_labels(after)?;
        labels = parsed;
        rest = remaining;
    }
    // The value and the optional timestamp, separated by whitespace.
    if !rest.is_empty() && !rest.starts_with([' ', '\t']) {
        return None;
    }
    // An OpenMetrics exemplar (` # {trace_id="..."} 0.5`) follows the sample.
    let rest = rest.split_once(" #").map_or(rest, |(sample, _)| sample);
    let mut fields = rest.split_whitespace();
    let value = parse_value(fields.next()?)?;
    let timestamp_ms = match fields.next() {
        None => None,
        // OpenMetrics writes timestamps in seconds with a fraction; the text
        // format in integer milliseconds. Either way it is not the value.
        Some(t) => Some(match t.parse::<i64>() {
            Ok(ms) => ms,
            Err(_) => {
                let secs: f64 = t.parse().ok()?;
                if !secs.is_finite() {
                    return None;
                }
                (secs * 1000.0) as i64
            }
        }),
    };
    if fields.next().is_some() {
        return None;
    }
    Some(Sample {
        name: name.to_string(),
        labels,
        value,
        timestamp_ms,
    })
}

/// Parses `a="x",b="y"}` (the text after `{`); returns the labels and what
/// follows the closing brace.
fn parse_labels(mut s: &str) -> Option<(Vec<(String, String)>, &str)> {
    let mut labels = Vec::new();
    loop {
        s = s.trim_start();
        if let Some(rest) = s.strip_prefix('}') {
            return Some((labels, rest));
        }
        let key_end = s.find(|c: char| !is_name_char(c))?;
        if key_end == 0 {
            return None;
        }
        let key = &s[..key_end];
        s = s[key_end..].trim_start().strip_prefix('=')?;
        s = s.trim_start().strip_prefix('"')?;
        let mut value = String::new();
        let mut chars = s.char_indices();
        let end = loop {
            let (i, c) = chars.next()?;
            match c {
                '"' => break i,
                '\\' => {
                    let (_, e) = chars.next()?;
                    value.push(match e {
                        'n' => '\n',
                        other => other,
                    });
                }
                c => value.push(c),
            }
        };
        labels.push((key.to_string(), value));
        s = s[end + 1..].trim_start();
        if let Some(rest) = s.strip_prefix(',') {
            s = rest;
        } else if !s.starts_with('}') {
            return None;
        }
    }
}

/// Parses a sample value: a float, `NaN`, `+Inf`, `-Inf` (any case).
pub fn parse_value(s: &str) -> Option<f64> {
    match s.to_ascii_lowercase().as_str() {
        "nan" => Some(f64::NAN),
        "+inf" | "inf" => Some(f64::INFINITY),
        "-inf" => Some(f64::NEG_INFINITY),
        _ => s.parse::<f64>().ok(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_trailing_timestamp_is_not_the_value() {
        let s = parse_line("http_requests_total{method=\"post\",code=\"200\"} 1027 1395066363000")
            .unwrap();
        assert_eq!(s.value, 1027.0);
        assert_eq!(s.timestamp_ms, Some(1_395_066_363_000));
        assert_eq!(s.label("code"), Some("200"));
        let s = parse_line("x 3.5 1700000000.250").unwrap();
        assert_eq!(s.value, 3.5);
        assert_eq!(s.timestamp_ms, Some(1_700_000_000_250));
        let s = parse_line("x 7").unwrap();
        assert_eq!(s.timestamp_ms, None);
        let s = parse_line(r#"h_bucket{le="0.5"} 5 # {trace_id="a b"} 0.4 1700000000"#).unwrap();
        assert_eq!(s.value, 5.0);
        assert_eq!(s.timestamp_ms, None);
    }

    #[test]
    fn label_values_with_escapes_spaces_and_braces() {
        let s = parse_line(
            r#"msdos_file_access_time_seconds{path="C:\\DIR\\FILE.TXT",error="Cannot find file:\n\"FILE.TXT\"", note="a } b, c=d"} 1.458255915e9"#,
        )
        .unwrap();
        assert_eq!(s.label("path"), Some(r"C:\DIR\FILE.TXT"));
        assert_eq!(s.label("error"), Some("Cannot find file:\n\"FILE.TXT\""));
        assert_eq!(s.label("note"), Some("a } b, c=d"));
        assert_eq!(s.value, 1.458255915e9);
        // A trailing comma inside the braces is allowed; an empty label set too.
        let s = parse_line(r#"m{a="1",} 2"#).unwrap();
        assert_eq!(s.labels, vec![("a".to_string(), "1".to_string())]);
        let s = parse_line("m{} 2").unwrap();
        assert!(s.labels.is_empty());
    }

    #[test]
    fn special_values() {
        assert!(parse_line("m NaN").unwrap().value.is_nan());
        assert_eq!(parse_line("m +Inf").unwrap().value, f64::INFINITY);
        assert_eq!(parse_line("m -Inf").unwrap().value, f64::NEG_INFINITY);
        assert_eq!(parse_line("m 8.128902e+06").unwrap().value, 8_128_902.0);
        let b = parse_line(r#"h_bucket{le="+Inf"} 17"#).unwrap();
        assert_eq!(b.label("le"), Some("+Inf"));
        assert_eq!(parse_value(b.label("le").unwrap()), Some(f64::INFINITY));
    }

    #[test]
    fn malformed_lines_are_counted_not_fatal() {
        let page = parse(
            "# HELP a x\n# TYPE a gauge\na 1\n\nnot a metric line\n{x=\"1\"} 2\nb{unterminated=\"x} 3\nc 1 2 3\nd\ne{a=\"1\"}5\nf 2\n",
        );
        let names: Vec<_> = page.samples.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["a", "f"]);
        assert_eq!(page.bad_lines, 6);
        assert_eq!(page.kinds.get("a"), Some(&Kind::Gauge));
    }

    #[test]
    fn histogram_series_belong_to_their_family() {
        let page = parse(
            "# TYPE vllm:e2e_request_latency_seconds histogram\n\
             vllm:e2e_request_latency_seconds_bucket{le=\"0.5\",model_name=\"m\"} 3.0\n\
             vllm:e2e_request_latency_seconds_bucket{le=\"+Inf\",model_name=\"m\"} 4.0\n\
             vllm:e2e_request_latency_seconds_sum{model_name=\"m\"} 2.5\n\
             vllm:e2e_request_latency_seconds_count{model_name=\"m\"} 4.0\n\
             # TYPE vllm:prompt_tokens counter\n\
             vllm:prompt_tokens_total{model_name=\"m\"} 10\n",
        );
        assert_eq!(
            page.kind_of("vllm:e2e_request_latency_seconds_bucket"),
            Kind::Histogram
        );
        assert_eq!(
            page.kind_of("vllm:e2e_request_latency_seconds_count"),
            Kind::Histogram
        );
        assert_eq!(page.kind_of("vllm:prompt_tokens_total"), Kind::Counter);
        assert_eq!(page.kind_of("unknown"), Kind::Untyped);
        assert_eq!(
            page.series("vllm:e2e_request_latency_seconds_bucket")
                .count(),
            2
        );
    }

    #[test]
    fn windows_line_endings_and_openmetrics_eof() {
        let page = parse("# TYPE a counter\r\na_total 5\r\n# EOF\r\n");
        assert_eq!(page.samples.len(), 1);
        assert_eq!(page.samples[0].value, 5.0);
        assert_eq!(page.bad_lines, 0);
    }
}
