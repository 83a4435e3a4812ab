//! The module graph stays one-way: `model` imports nothing of the crate, and
//! no two top-level modules depend on each other, directly or round a loop
//! (docs/ARCHITECTURE.md draws the picture). Read from the sources, outside
//! test modules.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

fn sources(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            sources(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

fn graph() -> BTreeMap<String, BTreeSet<String>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&src, &mut files);
    let mut g: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for f in files {
        let rel = f.strip_prefix(&src).unwrap();
        let top = rel
            .components()
            .next()
            .unwrap()
            .as_os_str()
            .to_string_lossy()
            .trim_end_matches(".rs")
            .to_string();
        if top == "main" || top == "lib" {
            continue;
        }
        let text = std::fs::read_to_string(&f).unwrap();
        let code = text.split("#[cfg(test)]").next().unwrap_or("");
        let deps = g.entry(top.clone()).or_default();
        for (i, _) in code.match_indices("crate::") {
            let name: String = code[i + 7..]
                .chars()
                .take_while(|c| c.is_ascii_lowercase() || *c == '_')
                .collect();
            if !name.is_empty() && name != top {
                deps.insert(name);
            }
        }
    }
    g
}

#[test]
fn the_data_model_is_a_leaf_and_modules_form_no_cycle() {
    let g = graph();
    assert!(
        g.get("model").is_some_and(|d| d.is_empty()),
        "model imports {:?}",
        g.get("model")
    );
    // Depth-first search for a back edge.
    fn visit(
        n: &str,
        g: &BTreeMap<String, BTreeSet<String>>,
        state: &mut BTreeMap<String, u8>,
        path: &mut Vec<String>,
    ) {
        match state.get(n) {
            Some(2) => return,
            Some(1) => panic!("import cycle: {} → {n}", path.join(" → ")),
            _ => {}
        }
        state.insert(n.to_string(), 1);
        path.push(n.to_string());
        for d in g.get(n).into_iter().flatten() {
            visit(d, g, state, path);
        }
        path.pop();
        state.insert(n.to_string(), 2);
    }
    let mut state = BTreeMap::new();
    for n in g.keys() {
        visit(n, &g, &mut state, &mut Vec::new());
    }
}

/// One path per type: an item is imported from the module that owns it, not
/// through a `pub use` of another module (a re-export gives it a second
/// name). A module's `mod.rs` may still present its own submodules' items.
#[test]
fn no_module_re_exports_another_modules_items() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&src, &mut files);
    let mut found = Vec::new();
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap();
        for (n, line) in text.lines().enumerate() {
            let l = line.trim_start();
            if l.starts_with("pub use crate::")
                || l.starts_with("pub(crate) use crate::")
                || l.starts_with("pub use super::")
            {
                found.push(format!("{}:{}: {l}", f.display(), n + 1));
            }
        }
    }
    assert!(found.is_empty(), "re-exports:\n{}", found.join("\n"));
}

/// The module a path names: `src/a/b.rs` or `src/a/b/mod.rs` (or `src/a.rs`
/// for a top-level one).
fn module_file(segments: &[&str]) -> Option<std::path::PathBuf> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let dir = segments.iter().fold(src, |p, s| p.join(s));
    let file = dir.with_extension("rs");
    [file, dir.join("mod.rs")].into_iter().find(|p| p.is_file())
}

/// Whether `name` is declared in `file` (a function, type, trait, constant or
/// inline module, or a module's own submodule item it presents with
/// `pub use`), outside its test module.
fn declares(file: &Path, name: &str) -> bool {
    let text = std::fs::read_to_string(file).unwrap();
    let code = text.split("#[cfg(test)]").next().unwrap_or("");
    let word_at = |i: usize, len: usize| {
        let before = code[..i].chars().next_back();
        let after = code[i + len..].chars().next();
        !before.is_some_and(|c| c.is_alphanumeric() || c == '_')
            && !after.is_some_and(|c| c.is_alphanumeric() || c == '_')
    };
    let declared = [
        "fn", "struct", "enum", "trait", "type", "const", "static", "mod",
    ]
    .iter()
    .any(|kw| {
        let decl = format!("{kw} {name}");
        code.match_indices(&decl).any(|(i, m)| word_at(i, m.len()))
    });
    let dir = file.parent().unwrap();
    declared
        || code.lines().map(str::trim).any(|l| {
            let Some(what) = l.strip_prefix("pub use ") else {
                return false;
            };
            if let Some(sub) = what.strip_suffix("::*;") {
                let sub = dir.join(format!("{sub}.rs"));
                return sub.is_file() && declares(&sub, name);
            }
            what.split(|c: char| !(c.is_alphanumeric() || c == '_'))
                .any(|w| w == name)
        })
}

/// Why a `a::b::c` path named in the docs does not exist, if it does not:
/// each lowercase segment is a module (a file) or, last, an item of the
/// module before it; a capitalised segment is a type declared in it.
fn missing_path(path: &str) -> Option<String> {
    let segs: Vec<&str> = path.split("::").collect();
    let mut module: Vec<&str> = Vec::new();
    for s in &segs {
        let is_type = s.starts_with(|c: char| c.is_ascii_uppercase());
        if !is_type {
            let mut next = module.clone();
            next.push(s);
            if module_file(&next).is_some() {
                module = next;
                continue;
            }
        }
        let Some(parent) = module_file(&module) else {
            return Some(format!("`{path}`: no module `{}`", module.join("::")));
        };
        if module.is_empty() || !declares(&parent, s) {
            return Some(format!(
                "`{path}`: nothing named `{s}` in {}",
                parent.display()
            ));
        }
        // An item: what follows it (a method, a variant) is not checked.
        return None;
    }
    None
}

/// docs/ARCHITECTURE.md is drawn from the code: every module path it names
/// (`stats::verdict`, `config::RunConfig`), every module in its table, and
/// every file (`src/bounds.rs`, `tests/common`) exists.
#[test]
fn the_architecture_document_names_only_what_exists() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let doc = std::fs::read_to_string(root.join("docs/ARCHITECTURE.md")).unwrap();
    let manifest = std::fs::read_to_string(root.join("Cargo.toml")).unwrap();
    let mut deps: Vec<String> = manifest
        .lines()
        .filter_map(|l| l.split_once('=').map(|(k, _)| k.trim().replace('-', "_")))
        .collect();
    deps.push("std".into());
    let mut wrong = Vec::new();
    for (n, line) in doc.lines().enumerate() {
        // Paths in backquotes, and the names in the first column of the table.
        let mut names: Vec<&str> = line.split('`').skip(1).step_by(2).collect();
        if let Some(first) = line.strip_prefix("| `") {
            let name = first.split('`').next().unwrap_or("");
            if !name.contains("::") {
                if module_file(&[name]).is_none() {
                    wrong.push(format!("line {}: `{name}`: no module", n + 1));
                }
                names.retain(|x| *x != name);
            }
        }
        for word in line.split(|c: char| c.is_whitespace() || "`(),;".contains(c)) {
            let word = word.trim_end_matches(['.', ':']);
            if ["src/", "tests/", "docs/", "benches/"]
                .iter()
                .any(|d| word.starts_with(d))
                && !root.join(word).exists()
            {
                wrong.push(format!("line {}: {word}: no such file", n + 1));
            }
        }
        for name in names {
            let name = name.trim_start_matches("crate::");
            let is_path = name.contains("::")
                && name
                    .split("::")
                    .all(|s| !s.is_empty() && s.chars().all(|c| c.is_alphanumeric() || c == '_'));
            // Paths into other crates (`tokio::sync::watch`) and from a type
            // (`RunConfig::echo`) are not this check's.
            let first = name.split("::").next().unwrap_or("");
            let ours = first.starts_with(|c: char| c.is_ascii_lowercase())
                && !deps.iter().any(|d| d == first);
            if is_path && ours {
                if let Some(why) = missing_path(name) {
                    wrong.push(format!("line {}: {why}", n + 1));
                }
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "docs/ARCHITECTURE.md:\n{}",
        wrong.join("\n")
    );
}
