//! The top-level modules form layers: no two of them import each other,
//! directly or around a circle. A circle would mean neither can be
//! understood, tested or replaced without the other.
//!
//! `cargo test --test layering -- --nocapture` prints the graph.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Every `.rs` file under `dir`, recursively.
fn rust_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read src/") {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The text of a file without its comments (doc links are no imports).
fn code(text: &str) -> String {
    text.lines()
        .map(|l| match l.find("//") {
            Some(i) if !l[..i].contains('"') => &l[..i],
            _ => l,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The top-level modules a file's code names through `crate::`, including
/// those inside `use crate::{a::X, b}` groups.
fn imports(code: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let ident = |s: &str| -> String {
        s.chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect()
    };
    for (i, _) in code.match_indices("crate::") {
        let rest = &code[i + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            // Top-level names of the group: at brace depth 0, after `{` or `,`.
            let mut depth = 0;
            let mut start = true;
            for (j, c) in group.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => break,
                    '}' => depth -= 1,
                    ',' if depth == 0 => start = true,
                    c if c.is_whitespace() => {}
                    _ if start && depth == 0 => {
                        out.insert(ident(&group[j..]));
                        start = false;
                    }
                    _ => {}
                }
            }
        } else {
            out.insert(ident(rest));
        }
    }
    out.retain(|m| !m.is_empty());
    out
}

/// Module -> the modules it imports, for `src/` of this crate.
fn module_graph() -> BTreeMap<String, BTreeSet<String>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for f in files {
        let rel = f.strip_prefix(&src).unwrap();
        let first = rel.components().next().unwrap().as_os_str();
        let module = first.to_string_lossy().trim_end_matches(".rs").to_string();
        if module == "lib" || module == "main" {
            continue;
        }
        let text = std::fs::read_to_string(&f).unwrap();
        let deps = graph.entry(module.clone()).or_default();
        for m in imports(&code(&text)) {
            if m != module {
                deps.insert(m);
            }
        }
    }
    graph
}

/// Strongly connected components with more than one module (Tarjan).
fn circles(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    struct State<'g> {
        graph: &'g BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'g str, usize>,
        low: BTreeMap<&'g str, usize>,
        stack: Vec<&'g str>,
        on_stack: BTreeSet<&'g str>,
        out: Vec<Vec<String>>,
    }
    fn visit<'g>(s: &mut State<'g>, v: &'g str) {
        let i = s.index.len();
        s.index.insert(v, i);
        s.low.insert(v, i);
        s.stack.push(v);
        s.on_stack.insert(v);
        for w in s.graph.get(v).into_iter().flatten() {
            let w = w.as_str();
            if !s.graph.contains_key(w) {
                continue;
            }
            if !s.index.contains_key(w) {
                visit(s, w);
                let lw = s.low[w];
                let lv = s.low.get_mut(v).unwrap();
                *lv = (*lv).min(lw);
            } else if s.on_stack.contains(w) {
                let iw = s.index[w];
                let lv = s.low.get_mut(v).unwrap();
                *lv = (*lv).min(iw);
            }
        }
        if s.low[v] == s.index[v] {
            let mut comp = Vec::new();
            loop {
                let w = s.stack.pop().unwrap();
                s.on_stack.remove(w);
                comp.push(w.to_string());
                if w == v {
                    break;
                }
            }
            if comp.len() > 1 {
                comp.sort();
                s.out.push(comp);
            }
        }
    }
    let mut s = State {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        out: Vec::new(),
    };
    for v in graph.keys() {
        if !s.index.contains_key(v.as_str()) {
            visit(&mut s, v);
        }
    }
    s.out
}

#[test]
fn no_two_top_level_modules_import_each_other_even_around_a_circle() {
    let graph = module_graph();
    for (m, deps) in &graph {
        let list: Vec<&str> = deps.iter().map(String::as_str).collect();
        println!("{m:<10} -> {}", list.join(", "));
    }
    let found = circles(&graph);
    let detail: Vec<String> = found
        .iter()
        .map(|c| {
            let edges: Vec<String> = c
                .iter()
                .flat_map(|a| {
                    graph[a]
                        .iter()
                        .filter(|b| c.contains(b))
                        .map(move |b| format!("{a} -> {b}"))
                })
                .collect();
            format!("{{{}}}: {}", c.join(", "), edges.join("; "))
        })
        .collect();
    assert!(
        found.is_empty(),
        "modules that import each other: {}",
        detail.join(" | ")
    );
}

#[test]
fn the_import_reader_sees_groups_paths_and_not_comments() {
    let text = "use crate::{a::X, b, c::{d, e}};\nlet x = crate::f::g();\n// crate::h\n";
    let got = imports(&code(text));
    let want: BTreeSet<String> = ["a", "b", "c", "f"].iter().map(|s| s.to_string()).collect();
    assert_eq!(got, want);
    let mut g = BTreeMap::new();
    g.insert("a".to_string(), BTreeSet::from(["b".to_string()]));
    g.insert("b".to_string(), BTreeSet::from(["a".to_string()]));
    g.insert("c".to_string(), BTreeSet::from(["a".to_string()]));
    assert_eq!(circles(&g), vec![vec!["a".to_string(), "b".to_string()]]);
}

/// File -> the sibling files it names (`super::x`, `crate::DIR::x`), for
/// the files of `src/DIR/` (its `mod.rs`, the parent that declares them
/// and holds what they share, aside).
fn file_graph(dir: &str) -> BTreeMap<String, BTreeSet<String>> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src").join(dir);
    let mut files = Vec::new();
    rust_files(&root, &mut files);
    let stem = |f: &Path| {
        let rel = f.strip_prefix(&root).unwrap();
        let first = rel.components().next().unwrap().as_os_str();
        first.to_string_lossy().trim_end_matches(".rs").to_string()
    };
    let names: BTreeSet<String> = files.iter().map(|f| stem(f)).collect();
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for f in &files {
        let me = stem(f);
        if me == "mod" {
            continue;
        }
        let text = code(&std::fs::read_to_string(f).unwrap());
        let deps = graph.entry(me.clone()).or_default();
        // `super::` from a file of a subdirectory names the subdirectory.
        let nested = f.parent() != Some(root.as_path());
        let prefixes = [format!("crate::{dir}::"), "super::".to_string()];
        for prefix in &prefixes {
            if nested && prefix == "super::" {
                continue;
            }
            for (i, _) in text.match_indices(prefix.as_str()) {
                let rest = &text[i + prefix.len()..];
                let mut named = BTreeSet::new();
                if let Some(group) = rest.strip_prefix('{') {
                    let group = &group[..group.find('}').unwrap_or(group.len())];
                    for item in group.split(',') {
                        named.insert(item.trim().split("::").next().unwrap().to_string());
                    }
                } else {
                    let ident: String = rest
                        .chars()
                        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                        .collect();
                    named.insert(ident);
                }
                for n in named {
                    if n != me && n != "mod" && names.contains(&n) {
                        deps.insert(n);
                    }
                }
            }
        }
    }
    graph
}

/// The files of `src/DIR/` and what each imports, shown, and the circles
/// they form refused.
fn files_in_no_circle(dir: &str) -> BTreeMap<String, BTreeSet<String>> {
    let graph = file_graph(dir);
    for (m, deps) in &graph {
        let list: Vec<&str> = deps.iter().map(String::as_str).collect();
        println!("{dir}/{m:<12} -> {}", list.join(", "));
    }
    let found = circles(&graph);
    assert!(
        found.is_empty(),
        "files of src/{dir}/ in a circle: {found:?}"
    );
    graph
}

#[test]
fn the_files_of_the_command_line_import_each_other_in_no_circle() {
    let graph = files_in_no_circle("cli");
    // The reader sees what a circle is made of.
    assert!(graph["cargo"].contains("fuzz"), "{graph:?}");
}

#[test]
fn the_files_of_the_kernel_import_each_other_in_no_circle() {
    // The system-call families (`sys_*`) sit above the kernel's objects
    // (`file/`, `timers`, `signal`, `thread` ...): a family that reached
    // into another, or an object that reached up into a family, would put
    // them in one circle again.
    let graph = files_in_no_circle("kernel");
    // The reader sees the families' calls into the objects, and the table's
    // into every family.
    assert!(graph["sys_file"].contains("file"), "{graph:?}");
    assert!(graph["table"].contains("sys_net"), "{graph:?}");
    for (m, deps) in &graph {
        if !m.starts_with("sys_") {
            let up: Vec<&String> = deps.iter().filter(|d| d.starts_with("sys_")).collect();
            let above_all = m == "table" || m == "tests";
            assert!(up.is_empty() || above_all, "{m} reaches up into {up:?}");
        }
    }
}
