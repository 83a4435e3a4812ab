//! Golden files (`tests/golden/NAME`): the text a test produced must equal
//! the file byte for byte; `UPDATE_GOLDEN=1` rewrites the files, to be
//! reviewed in the diff.

use std::path::Path;

/// Compares `actual` with `tests/golden/{name}`; on a difference, names the
/// first differing line and shows both texts when they are short (a screen).
pub fn golden(name: &str, actual: &str) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden")
        .join(name);
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, actual).unwrap();
        return;
    }
    let want = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e} (run with UPDATE_GOLDEN=1 to create it)",
            path.display()
        )
    });
    if want == actual {
        return;
    }
    let first = want
        .lines()
        .zip(actual.lines())
        .position(|(a, b)| a != b)
        .unwrap_or(want.lines().count().min(actual.lines().count()));
    let whole = if want.len() + actual.len() < 16_000 {
        format!("\n--- want\n{want}\n--- got\n{actual}")
    } else {
        String::new()
    };
    panic!(
        "{name} differs from {} at line {} (UPDATE_GOLDEN=1 rewrites it after review):\n  \
         golden: {:?}\n  actual: {:?}{whole}",
        path.display(),
        first + 1,
        want.lines().nth(first),
        actual.lines().nth(first),
    );
}
