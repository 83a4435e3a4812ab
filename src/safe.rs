//! Strings that came from outside (a server's messages and model ids, a
//! data file, a report file given to `llmsweep report`) made safe for the
//! place they go. One function per sink, used wherever that sink is written:
//!
//! - [`terminal`]: text for a terminal (every `term::note` and `term::out`,
//!   and every text file a report is written to): control characters other
//!   than newline and tab are shown as `\x1b`, `\u{9b}`, so a server cannot
//!   clear the screen, set the clipboard (OSC 52) or retitle the window;
//! - [`line`]: one field of plain text (a table cell, a line in a fenced
//!   block): as `terminal`, and newlines and tabs shown too, so the field
//!   stays on its line;
//! - [`markdown`]: a Markdown table cell or list item: as `line`, and `|`,
//!   `\`, `` ` ``, `[`, `]`, `<` and `&` neutralised, so it cannot end its cell,
//!   start a heading or a table, or become a link or raw HTML;
//! - [`markdown_block`]: a Markdown fenced code block (report.md's text
//!   tables): as `terminal`, inside a fence no line of the text can close;
//! - [`html`]: HTML text or an attribute value, escaped.
//!
//! (The dashboard draws through ratatui, which drops control characters.)

use std::borrow::Cow;
use std::fmt::Write as _;

/// Characters no sink shows raw: C0 controls, DEL, C1 controls, and the
/// bidirectional overrides that reorder what is shown (`\u{202e}`).
fn hidden(c: char) -> bool {
    c.is_control()
        || matches!(c, '\u{200e}' | '\u{200f}' | '\u{061c}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// How a hidden character is shown.
fn show(out: &mut String, c: char) {
    match c {
        '\n' => out.push_str("\\n"),
        '\r' => out.push_str("\\r"),
        '\t' => out.push_str("\\t"),
        c if (c as u32) < 0x80 => {
            let _ = write!(out, "\\x{:02x}", c as u32);
        }
        c => {
            let _ = write!(out, "\\u{{{:x}}}", c as u32);
        }
    }
}

fn escape_where(s: &str, hide: impl Fn(char) -> bool) -> Cow<'_, str> {
    if !s.chars().any(&hide) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 16);
    for c in s.chars() {
        if hide(c) {
            show(&mut out, c);
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// Text for a terminal: control characters other than newline and tab
/// shown visibly (`\x1b`, `\x07`, `\r`, `\u{9b}`).
pub fn terminal(s: &str) -> Cow<'_, str> {
    escape_where(s, |c| hidden(c) && c != '\n' && c != '\t')
}

/// One field of plain text: every control character shown visibly,
/// newlines and tabs included (`\n`, `\t`).
pub fn line(s: &str) -> Cow<'_, str> {
    escape_where(s, hidden)
}

/// A Markdown table cell or list item: on one line, with nothing that
/// Markdown would read as structure (`|`), code (`` ` ``), a link (`[`,
/// `]`) or HTML (`<`, `&`).
pub fn markdown(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match c {
            '|' => out.push_str("\\|"),
            // Else `\|` in the text would escape our escape's backslash.
            '\\' => out.push_str("\\\\"),
            '`' => out.push_str("\\`"),
            '[' => out.push_str("\\["),
            ']' => out.push_str("\\]"),
            '<' => out.push_str("&lt;"),
            '&' => out.push_str("&amp;"),
            c if hidden(c) => show(&mut out, c),
            c => out.push(c),
        }
    }
    out
}

/// A Markdown fenced code block holding `text` (shown as `terminal`
/// shows it): its fence is longer than any run of backticks in the text,
/// so no line of it (a stage name of ```` ``` ````) can close the block and
/// turn what follows into headings.
pub fn markdown_block(text: &str) -> String {
    let text = terminal(text);
    let longest = text.split(|c| c != '`').map(str::len).max().unwrap_or(0);
    let fence = "`".repeat(longest.max(2) + 1);
    let newline = if text.ends_with('\n') || text.is_empty() {
        ""
    } else {
        "\n"
    };
    format!("{fence}\n{text}{newline}{fence}\n")
}

/// HTML text or a quoted attribute value.
pub fn html(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// A list for an error message: the first few items, then how many more
/// and how to see them all (`see`, e.g. "curl …/v1/models lists them all").
pub fn short_list<S: AsRef<str>>(items: &[S], see: &str) -> String {
    const SHOWN: usize = 5;
    if items.is_empty() {
        return "nothing".to_string();
    }
    let first: Vec<String> = items
        .iter()
        .take(SHOWN)
        .map(|s| format!("{:?}", s.as_ref()))
        .collect();
    let mut out = first.join(", ");
    if items.len() > SHOWN {
        let _ = write!(out, " and {} more ({see})", items.len() - SHOWN);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A clipboard write (OSC 52), a screen clear, a bell, CR, a C1 CSI and
    /// a right-to-left override.
    const HOSTILE: &str = "a\x1b]52;c;ZXZpbA==\x07b\x1b[2Jc\rd\u{9b}31me\u{202e}f";

    #[test]
    fn the_terminal_sees_no_control_character_but_newlines_and_tabs() {
        let t = terminal(HOSTILE);
        assert_eq!(
            t,
            "a\\x1b]52;c;ZXZpbA==\\x07b\\x1b[2Jc\\rd\\u{9b}31me\\u{202e}f"
        );
        assert_eq!(terminal("two\nlines\tand a tab"), "two\nlines\tand a tab");
        assert!(matches!(terminal("plain"), Cow::Borrowed(_)));
    }

    #[test]
    fn a_line_stays_on_its_line() {
        assert_eq!(line("a\nb\r\nc\td"), "a\\nb\\r\\nc\\td");
        assert!(!line(HOSTILE).chars().any(char::is_control));
    }

    #[test]
    fn markdown_cells_cannot_start_headings_tables_links_or_html() {
        let m = markdown(
            "oops\n## Injected heading\n| a | b |\n|---|---|\n[x](http://e) <img src=x> `c` &amp;",
        );
        assert!(!m.contains('\n'), "{m}");
        assert_eq!(m.matches('|').count(), m.matches("\\|").count(), "{m}");
        assert!(!m.contains('<'), "{m}");
        assert!(m.contains("\\[x\\]"), "{m}");
        assert!(m.contains("&amp;amp;"), "{m}");
        assert!(!markdown(HOSTILE).chars().any(char::is_control));
    }

    #[test]
    fn a_markdown_block_cannot_be_closed_by_its_text() {
        assert_eq!(markdown_block("a\nb\n"), "```\na\nb\n```\n");
        assert_eq!(markdown_block("a"), "```\na\n```\n");
        let b = markdown_block(" c@5\n```\n## Injected\n`````x\n");
        assert!(
            b.starts_with("``````\n") && b.ends_with("\n``````\n"),
            "{b}"
        );
        assert!(!markdown_block(HOSTILE).contains('\x1b'));
    }

    #[test]
    fn html_is_escaped() {
        assert_eq!(
            html("<a href=\"x\">&</a>"),
            "&lt;a href=&quot;x&quot;&gt;&amp;&lt;/a&gt;"
        );
    }

    #[test]
    fn long_lists_show_the_first_few_a_count_and_where_to_see_all() {
        let ids: Vec<String> = (0..5000).map(|i| format!("model-{i}")).collect();
        let s = short_list(&ids, "GET /v1/models lists them all");
        assert_eq!(
            s,
            "\"model-0\", \"model-1\", \"model-2\", \"model-3\", \"model-4\" and 4995 more (GET /v1/models lists them all)"
        );
        assert_eq!(short_list(&ids[..2], "x"), "\"model-0\", \"model-1\"");
        assert_eq!(short_list::<String>(&[], "x"), "nothing");
    }
}
