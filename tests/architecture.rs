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
