//! Property tests over every parser that reads untrusted input: the server's
//! SSE stream and JSON chunks, profile files, and command-line specs; and
//! over every sink that writes what a server sent (terminal, Markdown, HTML).
//! They must never panic, and must keep their promises on valid input.
//!
//! `scripts/fuzz.sh SECONDS` runs them with many more cases for a bounded time.

use llmsweep::client::chunk::{parse_chunk, parse_response_event, ChunkError};
use llmsweep::client::chunk_plain;
use llmsweep::client::sse::{KeptSseItem, SseError, SseParser};
use proptest::prelude::*;

/// Every item the parser yields for the pieces, and the error that ended it.
fn sse_items(pieces: &[&[u8]], cap: usize) -> (Vec<KeptSseItem>, Option<SseError>) {
    let mut p = SseParser::new(cap);
    let mut out = Vec::new();
    for piece in pieces {
        if let Err(e) = p.push(piece) {
            return (out, Some(e));
        }
        loop {
            match p.next_item() {
                Ok(Some(i)) => out.push(i.kept()),
                Ok(None) => break,
                Err(e) => return (out, Some(e)),
            }
        }
    }
    loop {
        match p.finish() {
            Ok(Some(i)) => out.push(i.kept()),
            Ok(None) => return (out, None),
            Err(e) => return (out, Some(e)),
        }
    }
}

/// JSON-ish text: fragments of real chunks glued at random, so the parser
/// sees near-misses, not only noise.
fn chunkish() -> impl Strategy<Value = String> {
    let parts = prop::sample::select(vec![
        "{",
        "}",
        "[",
        "]",
        ",",
        ":",
        "\"choices\"",
        "\"delta\"",
        "\"content\"",
        "\"text\"",
        "\"usage\"",
        "\"error\"",
        "\"finish_reason\"",
        "\"tool_calls\"",
        "\"reasoning_content\"",
        "\"completion_tokens\"",
        "\"prompt_tokens\"",
        "\"total_tokens\"",
        "\"prompt_tokens_details\"",
        "\"cached_tokens\"",
        "4294967296",
        "-1",
        "null",
        "true",
        "1e400",
        "-0",
        "\"\\u0000\"",
        "\"\\ud800\"",
        "\"é\"",
        " ",
        "\"x\"",
        "42",
        "[]",
        "{}",
    ]);
    prop::collection::vec(parts, 0..40).prop_map(|v| v.concat())
}

/// A stream as a server writes it: chunks alike but for their text, with
/// now and then another shape (an end, thinking, a usage), a byte of the
/// last chunk changed, or a near miss.
fn chunk_stream() -> impl Strategy<Value = Vec<String>> {
    let text = prop::sample::select(vec![
        "",
        " the",
        " answer",
        "é ü",
        "a\"b",
        "a\\nb",
        "\\u00e9",
        "}",
        "\",\"x\":\"",
        " \"",
        "x\\",
    ]);
    let shape = prop::sample::select(vec![
        ("{\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"", "\"},\"logprobs\":null,\"finish_reason\":null}]}"),
        ("{\"id\":\"c\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"", "\"},\"finish_reason\":\"length\"}]}"),
        ("{\"choices\":[{\"finish_reason\":null,\"index\":0,\"delta\":{\"content\":\"", "\"}}],\"created\":1,\"id\":\"c\"}"),
        ("{\"choices\":[{\"delta\":{\"reasoning_content\":\"", "\"}}]}"),
        ("{\"choices\":[{\"delta\":{\"content\":\"", "\",\"reasoning_content\":\"hm\"}}]}"),
        ("{\"choices\":[{\"text\":\"", "\",\"index\":0}]}"),
        ("{\"choices\":[{\"text\":\"", "\",\"delta\":{\"content\":\"x\"}}]}"),
        ("{\"choices\":[{\"delta\":{\"content\":\"", "\"}}],\"usage\":{\"completion_tokens\":2}}"),
        ("{\"object\":\"", "\",\"choices\":[]}"),
    ]);
    let step = prop_oneof![
        4 => (shape, text).prop_map(|((a, b), t)| format!("{a}{t}{b}")),
        1 => (any::<prop::sample::Index>(), prop::sample::select(vec!['"', '\\', '}', ',', 'a', ' ', '1', '\u{1}'])).prop_map(|(at, c)| format!("\u{0}{}{c}", at.index(1 << 16))),
        1 => chunkish(),
    ];
    prop::collection::vec(step, 1..8).prop_map(|steps| {
        let mut out: Vec<String> = Vec::new();
        for s in steps {
            // "\0 at c": the last chunk with the byte at `at` replaced.
            let Some(rest) = s.strip_prefix('\u{0}') else {
                out.push(s);
                continue;
            };
            let Some(last) = out.last() else { continue };
            let c = rest.chars().last().unwrap_or('a');
            let at: usize = rest[..rest.len() - c.len_utf8()].parse().unwrap_or(0);
            let mut chars: Vec<char> = last.chars().collect();
            if !chars.is_empty() {
                let i = at % chars.len();
                chars[i] = c;
            }
            out.push(chars.into_iter().collect());
        }
        out
    })
}

/// 512 cases in the test suite; scripts/fuzz.sh raises it with
/// PROPTEST_CASES. No failure files.
fn config() -> ProptestConfig {
    ProptestConfig {
        cases: std::env::var("PROPTEST_CASES")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(512),
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn chunk_parser_never_panics_on_noise(s in ".{0,300}") {
        let _ = parse_chunk(&s);
        let _ = chunk_plain::LastChunk::default().parse(&s);
    }

    /// The direct reading of common chunks answers only as the full one
    /// does, on near misses of every kind.
    #[test]
    fn a_chunk_read_directly_reads_as_in_full(s in chunkish()) {
        if let Some(direct) = chunk_plain::read(&s) {
            prop_assert_eq!(Ok(direct), parse_chunk(&s), "{}", s);
        }
    }

    /// Chunks as servers write them, with any text (escapes, any
    /// language), optional keys and white space: the direct reading takes
    /// the plain ones and agrees with the full one on all.
    #[test]
    fn server_chunks_read_alike_both_ways(
        text in prop::option::of("(\\PC|[\"\\\\\n\u{1}])*"),
        reasoning in prop::option::of("[a-z ]{0,8}"),
        finish in prop::sample::select(vec!["null", "\"stop\"", "\"length\"", "3"]),
        extra in prop::sample::select(vec!["", ",\"logprobs\":null", ",\"stop_reason\":null", ",\"token_ids\":null", ",\"logprobs\":{}", ",\"x\":1"]),
        top in prop::sample::select(vec!["", ",\"usage\":null", ",\"usage\":{\"completion_tokens\":2}", ",\"usage\":{\"prompt_tokens\":3,\"total_tokens\":5,\"completion_tokens\":2,\"prompt_tokens_details\":{\"cached_tokens\":1}}", ",\"usage\":{\"completion_tokens\":-2}", ",\"usage\":{\"completion_tokens\":4294967296}", ",\"object\":\"error\"", ",\"model\":\"m\""]),
        space in prop::sample::select(vec!["", " ", "\n "]),
    ) {
        let mut delta = Vec::new();
        if let Some(t) = &text {
            delta.push(format!("\"content\":{}", serde_json::to_string(t).unwrap()));
        }
        if let Some(r) = &reasoning {
            delta.push(format!("\"reasoning_content\":\"{r}\""));
        }
        let chunk = format!(
            "{{{space}\"id\":\"c\",\"choices\":[{{\"index\":0,\"delta\":{{{}}},\"finish_reason\":{finish}{extra}}}]{top}{space}}}",
            delta.join(&format!(",{space}"))
        );
        let full = parse_chunk(&chunk);
        match chunk_plain::read(&chunk) {
            Some(direct) => prop_assert_eq!(Ok(direct), full, "{}", chunk),
            None => {
                let plain = text.as_deref().is_none_or(|t| !t.chars().any(|c| c == '"' || c == '\\' || c < ' '))
                    && finish != "3" && extra.len() < 20 && extra != ",\"x\":1" && extra != ",\"logprobs\":{}"
                    && !top.contains(":-2") && !top.contains("4294967296") && !top.contains("error");
                prop_assert!(!plain, "a plain chunk went the full way: {}", chunk);
            }
        }
    }

    /// A stream's chunks, each read by the last one's shape where it can
    /// be, read as in full.
    #[test]
    fn chunks_read_like_the_last_read_as_in_full(stream in chunk_stream()) {
        let mut last = chunk_plain::LastChunk::default();
        for data in &stream {
            prop_assert_eq!(last.parse(data), parse_chunk(data), "{}", data);
        }
    }

    #[test]
    fn chunk_parser_never_panics_on_near_misses(s in chunkish()) {
        let _ = parse_chunk(&s);
        let _ = parse_response_event(&s);
        let _ = llmsweep::client::messages::parse_messages_event(&s);
    }

    #[test]
    fn messages_parser_never_panics_on_its_own_events_mangled(
        kind in prop::sample::select(vec!["message_start", "content_block_start", "content_block_delta", "message_delta", "message_stop", "error", "ping"]),
        body in "[ -~]{0,80}",
    ) {
        let _ = llmsweep::client::messages::parse_messages_event(&format!(r#"{{"type":"{kind}",{body}}}"#));
        let _ = llmsweep::client::messages::parse_messages_event(&format!(r#"{{"type":"{kind}","delta":{{"type":"input_json_delta","partial_json":{body}}},"usage":{{"input_tokens":{body}}}}}"#));
    }

    #[test]
    fn valid_chunks_keep_their_text(text in "[ -~]{0,40}", finish in any::<bool>(), tokens in 0u64..100_000) {
        let v = serde_json::json!({
            "choices": [{"index": 0, "delta": {"content": text}, "finish_reason": if finish { serde_json::json!("stop") } else { serde_json::Value::Null }}],
            "usage": {"prompt_tokens": 1, "completion_tokens": tokens},
        });
        let payload = v.to_string();
        let c = parse_chunk(&payload).unwrap();
        prop_assert_eq!(&*c.text, text.as_str());
        prop_assert_eq!(c.has_output, !text.is_empty());
        prop_assert_eq!(c.finished, finish);
        prop_assert_eq!(c.usage.unwrap().completion_tokens, Some(tokens));
    }

    #[test]
    fn error_events_are_always_recognised(msg in "[ -~]{0,60}") {
        let v = serde_json::json!({"error": {"message": msg, "code": 500}});
        prop_assert!(matches!(parse_chunk(&v.to_string()), Err(ChunkError::ErrorEvent(_))));
    }

    /// Random bytes cut at random points through the client's SSE parser:
    /// every event that comes out goes through the chunk parser, and the
    /// outcome never depends on where the reads were cut.
    #[test]
    fn sse_framing_of_random_bytes(data in prop::collection::vec(any::<u8>(), 0..600), cuts in prop::collection::vec(0usize..600, 0..8), cap in 16usize..200) {
        let whole = sse_items(&[&data], cap);
        let mut pieces: Vec<&[u8]> = Vec::new();
        let mut last = 0;
        let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c.min(data.len())).collect();
        cuts.sort_unstable();
        for c in cuts.into_iter().chain([data.len()]) {
            pieces.push(&data[last..c]);
            last = c;
        }
        let split = sse_items(&pieces, cap);
        prop_assert_eq!(&whole, &split);
        for item in whole.0 {
            if let KeptSseItem::Event { data, .. } = item {
                let _ = parse_chunk(&data);
            }
        }
    }

    /// Text-only SSE (the common case) split anywhere gives the same events.
    #[test]
    fn sse_text_streams_split_anywhere(lines in prop::collection::vec("(data|event|id|error|:x|retry)?(: ?)?[a-z {}\\[\\]\"]{0,12}(\r\n|\n|\r)?", 0..20), cut in 0usize..400) {
        let text = lines.concat();
        let bytes = text.as_bytes();
        let cut = cut.min(bytes.len());
        let whole = sse_items(&[bytes], 1 << 20);
        let split = sse_items(&[&bytes[..cut], &bytes[cut..]], 1 << 20);
        prop_assert_eq!(whole, split);
    }

    #[test]
    fn profile_parser_never_panics(s in "[a-z_ =\"\\[\\],.0-9\n#]{0,200}") {
        if let Err(e) = llmsweep::profile::file::parse(&s, "fuzz.toml") {
            prop_assert!(e.to_string().starts_with("fuzz.toml"), "errors name the file: {}", e);
        }
    }

    #[test]
    fn cli_specs_never_panic(s in "[a-z_=,.0-9 mus-]{0,80}") {
        let _ = llmsweep::data::Synthetic::parse(&s);
        let _ = llmsweep::types::Slo::parse(&s);
        let _ = llmsweep::config::RateItem::parse(&s);
        let _ = llmsweep::stats::dist::parse_percentiles(&s);
        let _ = llmsweep::client::normalize_base_url(&s);
    }
}

/// Prometheus text: fragments of real `/metrics` lines glued at random.
fn promish() -> impl Strategy<Value = String> {
    let parts = prop::sample::select(vec![
        "vllm:num_requests_running",
        "_bucket",
        "{",
        "}",
        "le=",
        "\"+Inf\"",
        "\"0.5\"",
        "model_name=\"m\"",
        ",",
        " ",
        "\t",
        "\n",
        "# TYPE x histogram\n",
        "# HELP",
        "NaN",
        "+Inf",
        "-Inf",
        "1e400",
        "3.5",
        "1700000000000",
        "\\\"",
        "\\",
        "#",
        "=",
        "é",
    ]);
    prop::collection::vec(parts, 0..60).prop_map(|v| v.concat())
}

fn prom_value() -> impl Strategy<Value = f64> {
    prop_oneof![
        any::<f64>(),
        Just(f64::NAN),
        Just(f64::INFINITY),
        Just(f64::NEG_INFINITY),
        (0u64..1_000_000).prop_map(|v| v as f64),
    ]
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn prometheus_parser_never_panics(s in promish(), noise in ".{0,200}") {
        let _ = llmsweep::server_metrics::prom::parse(&s);
        let _ = llmsweep::server_metrics::prom::parse(&noise);
    }

    /// A rendered sample reads back as written: the timestamp is never the
    /// value, label values keep their escapes' meaning, NaN and ±Inf survive.
    #[test]
    fn prometheus_samples_round_trip(
        name in "[a-zA-Z_:][a-zA-Z0-9_:]{0,20}",
        labels in prop::collection::vec(("[a-z_][a-z0-9_]{0,8}", ".{0,12}"), 0..4),
        value in prom_value(),
        ts in prop::option::of(-1_000_000_000_000i64..4_000_000_000_000),
    ) {
        let esc = |v: &str| v.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n");
        let label_text: Vec<String> = labels.iter().map(|(k, v)| format!("{k}=\"{}\"", esc(v))).collect();
        let value_text = if value.is_nan() {
            "NaN".to_string()
        } else if value == f64::INFINITY {
            "+Inf".to_string()
        } else if value == f64::NEG_INFINITY {
            "-Inf".to_string()
        } else {
            format!("{value:?}")
        };
        let mut line = name.clone();
        if !labels.is_empty() {
            line.push_str(&format!("{{{}}}", label_text.join(",")));
        }
        line.push_str(&format!(" {value_text}"));
        if let Some(t) = ts {
            line.push_str(&format!(" {t}"));
        }
        let s = llmsweep::server_metrics::prom::parse_line(&line).expect("a valid line parses");
        prop_assert_eq!(&s.name, &name);
        let want: Vec<(String, String)> = labels.iter().map(|(k, v)| (k.clone(), v.replace('\r', ""))).collect();
        // Lines are trimmed; a label value never is.
        prop_assert_eq!(s.labels.len(), want.len());
        for ((k, v), (wk, wv)) in s.labels.iter().zip(&labels) {
            prop_assert_eq!(k, wk);
            prop_assert_eq!(v, wv);
        }
        prop_assert!(value.is_nan() && s.value.is_nan() || s.value == value, "{} -> {}", line, s.value);
        prop_assert_eq!(s.timestamp_ms, ts);
    }
}

/// What a hostile server puts in a model id or an error message: escape
/// sequences, C1 controls, bidi overrides, Markdown and HTML structure,
/// glued to arbitrary characters.
fn hostile_text() -> impl Strategy<Value = String> {
    let parts = prop::sample::select(vec![
        "\x1b]52;c;ZXZpbA==\x07",
        "\x1b[2J",
        "\x1b",
        "\x07",
        "\u{9b}",
        "\u{202e}",
        "\r",
        "\n",
        "\r\n",
        "\t",
        "\0",
        "\x7f",
        "|",
        "\\",
        "\\|",
        "`",
        "```",
        "## ",
        "[x](http://e)",
        "<script>",
        "&amp;",
        "\"",
        "a",
        " ",
        "é",
    ]);
    prop::collection::vec(
        prop_oneof![
            parts.prop_map(str::to_string),
            any::<char>().prop_map(|c| c.to_string())
        ],
        0..24,
    )
    .prop_map(|v| v.concat())
}

/// `|` that Markdown reads as a cell separator (not escaped by `\`).
fn separators(line: &str) -> usize {
    let mut n = 0;
    let mut escaped = false;
    for c in line.chars() {
        match c {
            '\\' if !escaped => escaped = true,
            '|' if !escaped => n += 1,
            _ => escaped = false,
        }
    }
    n
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn the_terminal_sink_passes_no_control_character(s in hostile_text()) {
        let t = llmsweep::safe::terminal(&s);
        prop_assert!(!t.chars().any(|c| c.is_control() && c != '\n' && c != '\t'), "{:?}", t);
        prop_assert!(!t.contains('\u{202e}'), "{:?}", t);
        // Text without hidden characters is left as it is.
        if !s.chars().any(|c| c.is_control() || c == '\u{202e}') {
            prop_assert_eq!(t.as_ref(), s.as_str());
        }
    }

    #[test]
    fn a_plain_text_field_stays_on_one_line(s in hostile_text()) {
        let l = llmsweep::safe::line(&s);
        prop_assert!(!l.chars().any(char::is_control), "{:?}", l);
    }

    #[test]
    fn a_markdown_cell_cannot_break_its_table(cells in prop::collection::vec(hostile_text(), 1..4)) {
        for c in &cells {
            let m = llmsweep::safe::markdown(c);
            prop_assert!(!m.chars().any(char::is_control), "{:?}", m);
            prop_assert_eq!(separators(&m), 0, "{:?}", m);
            prop_assert!(!m.contains('<'), "{:?}", m);
        }
        let headers: Vec<&str> = (0..cells.len()).map(|_| "h").collect();
        let table = llmsweep::report::tables::pipe_table(&headers, std::slice::from_ref(&cells), 1);
        let lines: Vec<&str> = table.lines().collect();
        prop_assert_eq!(lines.len(), 3, "{}", table);
        for l in &lines {
            prop_assert_eq!(separators(l), cells.len() + 1, "{}", table);
        }
    }

    #[test]
    fn the_html_sink_leaves_no_markup(s in hostile_text()) {
        let h = llmsweep::safe::html(&s);
        prop_assert!(!h.contains('<') && !h.contains('>') && !h.contains('"'), "{:?}", h);
    }
}
