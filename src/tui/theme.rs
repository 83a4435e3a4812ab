//! Colour themes: TOML files in `themes/`. The four shipped ones are compiled
//! in, so the binary works from anywhere; `--theme PATH` loads any other.

use std::path::Path;
use std::str::FromStr;

use anyhow::{bail, Context as _, Result};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::Span;
use ratatui::widgets::{Block, Borders};
use serde::Deserialize;

const BUILTIN: [(&str, &str); 4] = [
    ("dark", include_str!("../../themes/dark.toml")),
    ("light", include_str!("../../themes/light.toml")),
    (
        "high-contrast",
        include_str!("../../themes/high-contrast.toml"),
    ),
    ("mono", include_str!("../../themes/mono.toml")),
];

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ThemeFile {
    name: String,
    text: String,
    dim: String,
    accent: String,
    title: String,
    good: String,
    warn: String,
    bad: String,
    border: String,
    highlight_fg: String,
    highlight_bg: String,
    spark_ttft: String,
    spark_itl: String,
    spark_rate: String,
    spark_concurrency: String,
    #[serde(default)]
    bold: bool,
    #[serde(default)]
    reverse_highlight: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Theme {
    pub name: String,
    pub text: Color,
    pub dim: Color,
    pub accent: Color,
    pub title: Color,
    pub good: Color,
    pub warn: Color,
    pub bad: Color,
    pub border: Color,
    pub highlight_fg: Color,
    pub highlight_bg: Color,
    pub spark_ttft: Color,
    pub spark_itl: Color,
    pub spark_rate: Color,
    pub spark_concurrency: Color,
    pub bold: bool,
    pub reverse_highlight: bool,
}

impl Theme {
    pub fn style(&self, fg: Color) -> Style {
        let s = Style::default().fg(fg);
        if self.bold {
            s.add_modifier(Modifier::BOLD)
        } else {
            s
        }
    }

    pub fn text(&self) -> Style {
        Style::default().fg(self.text)
    }

    pub fn dim(&self) -> Style {
        Style::default().fg(self.dim)
    }

    pub fn title(&self) -> Style {
        self.style(self.title).add_modifier(Modifier::BOLD)
    }

    pub fn highlight(&self) -> Style {
        if self.reverse_highlight {
            Style::default().add_modifier(Modifier::REVERSED | Modifier::BOLD)
        } else {
            Style::default()
                .fg(self.highlight_fg)
                .bg(self.highlight_bg)
                .add_modifier(Modifier::BOLD)
        }
    }

    pub fn border(&self) -> Style {
        Style::default().fg(self.border)
    }

    /// A panel's frame: a border in the border's colour, `title` on it in
    /// the title's style.
    pub fn panel<'a>(&self, title: impl Into<std::borrow::Cow<'a, str>>) -> Block<'a> {
        Block::default()
            .borders(Borders::ALL)
            .border_style(self.border())
            .title(Span::styled(title, self.title()))
    }
}

fn color(field: &str, v: &str, origin: &str) -> Result<Color> {
    Color::from_str(v.trim()).map_err(|_| {
        anyhow::anyhow!(
            "{origin}: `{field} = {v:?}` is not a colour (use names like red, lightcyan, darkgray, reset, or #rrggbb)"
        )
    })
}

/// Parses a theme file; `origin` names it in errors.
pub fn parse(text: &str, origin: &str) -> Result<Theme> {
    let f: ThemeFile = toml::from_str(text).map_err(|e| {
        // toml's message names the line and the key.
        anyhow::anyhow!("{origin}: {}", e.to_string().trim())
    })?;
    Ok(Theme {
        text: color("text", &f.text, origin)?,
        dim: color("dim", &f.dim, origin)?,
        accent: color("accent", &f.accent, origin)?,
        title: color("title", &f.title, origin)?,
        good: color("good", &f.good, origin)?,
        warn: color("warn", &f.warn, origin)?,
        bad: color("bad", &f.bad, origin)?,
        border: color("border", &f.border, origin)?,
        highlight_fg: color("highlight_fg", &f.highlight_fg, origin)?,
        highlight_bg: color("highlight_bg", &f.highlight_bg, origin)?,
        spark_ttft: color("spark_ttft", &f.spark_ttft, origin)?,
        spark_itl: color("spark_itl", &f.spark_itl, origin)?,
        spark_rate: color("spark_rate", &f.spark_rate, origin)?,
        spark_concurrency: color("spark_concurrency", &f.spark_concurrency, origin)?,
        bold: f.bold,
        reverse_highlight: f.reverse_highlight,
        name: f.name,
    })
}

/// The shipped themes, in cycling order.
pub fn builtin() -> Vec<Theme> {
    BUILTIN
        .iter()
        .filter_map(|(name, text)| parse(text, &format!("themes/{name}.toml")).ok())
        .collect()
}

/// `--theme NAME|PATH`, with `NO_COLOR` read from the environment.
pub fn from_env(choice: Option<&str>) -> Result<Vec<Theme>> {
    let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
    select(choice, no_color)
}

/// `--theme NAME|PATH`. `NO_COLOR` (set and non-empty) forces the mono theme.
pub fn select(choice: Option<&str>, no_color: bool) -> Result<Vec<Theme>> {
    let mut all = builtin();
    if no_color {
        all.retain(|t| t.name == "mono");
        return Ok(all);
    }
    let Some(choice) = choice else {
        return Ok(all);
    };
    let first = if choice.ends_with(".toml") || Path::new(choice).exists() {
        let text = crate::bounds::read_text(
            std::path::Path::new(choice),
            crate::bounds::SMALL_FILE,
            "a theme file",
        )
        .with_context(|| format!("cannot read theme file {choice}"))?;
        parse(&text, choice)?
    } else {
        match all.iter().position(|t| t.name == choice) {
            Some(i) => all.remove(i),
            None => bail!(
                "unknown theme {choice:?}: use {} or a path to a .toml file",
                all.iter()
                    .map(|t| t.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        }
    };
    all.retain(|t| t.name != first.name);
    all.insert(0, first);
    Ok(all)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_four_shipped_themes_parse() {
        let names: Vec<String> = builtin().into_iter().map(|t| t.name).collect();
        assert_eq!(names, ["dark", "light", "high-contrast", "mono"]);
    }

    #[test]
    fn no_color_means_mono_and_choices_come_first() {
        assert_eq!(select(Some("light"), true).unwrap()[0].name, "mono");
        assert_eq!(select(Some("light"), false).unwrap()[0].name, "light");
        assert_eq!(select(None, false).unwrap()[0].name, "dark");
        let e = select(Some("neon"), false).unwrap_err().to_string();
        assert!(e.contains("unknown theme") && e.contains("dark"), "{e}");
    }

    #[test]
    fn bad_theme_files_name_the_file_line_and_key() {
        let bad = BUILTIN[0]
            .1
            .replace("accent = \"cyan\"", "accent = \"sparkly\"");
        let e = parse(&bad, "my.toml").unwrap_err().to_string();
        assert!(e.contains("my.toml") && e.contains("accent"), "{e}");
        let unknown = format!("{}\nsparkle = \"red\"\n", BUILTIN[0].1);
        let e = parse(&unknown, "my.toml").unwrap_err().to_string();
        assert!(
            e.contains("my.toml") && e.contains("sparkle") && e.contains("line"),
            "{e}"
        );
    }
}
