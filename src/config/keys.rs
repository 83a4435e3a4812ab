//! A profile file's unknown key, said the way a reader wants it: the key
//! they meant.

/// serde lists every key after an unknown one; a reader wants the one they
/// meant: "unknown field `rates`: did you mean `rate`? (the keys are the
/// flags of `llmsweep run` in snake_case)".
pub(super) fn shorten_unknown_key(msg: &str, command_line_only: &[&str]) -> String {
    let Some(at) = msg.find("unknown field `") else {
        return msg.to_string();
    };
    let rest = &msg[at + "unknown field `".len()..];
    let Some(end) = rest.find('`') else {
        return msg.to_string();
    };
    let key = &rest[..end];
    if command_line_only.contains(&key) {
        return format!(
            "{}`{key}` is for the command line only: a profile file cannot load another profile, detach the run, or write over an earlier run",
            &msg[..at]
        );
    }
    let known: Vec<&str> = rest
        .split('`')
        .skip(2)
        .step_by(2)
        .filter(|k| !k.is_empty())
        .collect();
    let hint = match closest(key, &known) {
        Some(k) => format!("did you mean `{k}`? "),
        None => String::new(),
    };
    format!(
        "{}unknown field `{key}`: {hint}(the keys are the flags of `llmsweep run` in snake_case; `llmsweep run --help` lists them)",
        &msg[..at]
    )
}

/// The known word nearest a mistyped one, if near enough to be the one
/// meant (two edits, or a third of its length): for "did you mean".
pub(crate) fn closest<'a>(word: &str, known: &[&'a str]) -> Option<&'a str> {
    known
        .iter()
        .map(|k| (edit_distance(word, k), *k))
        .min()
        .filter(|(d, k)| *d <= 2.max(k.len() / 3))
        .map(|(_, k)| k)
}

/// Levenshtein distance, for "did you mean".
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let cur = row[j + 1];
            row[j + 1] = if ca == *cb {
                prev
            } else {
                1 + prev.min(cur).min(row[j])
            };
            prev = cur;
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    #[test]
    fn edit_distance_counts_edits() {
        assert_eq!(super::edit_distance("rates", "rate"), 1);
        assert_eq!(super::edit_distance("", "abc"), 3);
    }
}
