//! Actions are only simulated (DESIGN.md §5): no product code may start a process or a shell.
//! Parses every file under `src/` with `syn` and fails on process-spawning paths — in code,
//! `use` trees and macro bodies — while comments and string literals cannot trigger it.

use std::path::{Path, PathBuf};

use syn::visit::Visit;

/// Path shapes that start processes. A path matches when these segments appear in order,
/// contiguously, anywhere in it (so `std::process::Command::new` matches `["process"]`).
const BANNED: &[&[&str]] = &[
    &["std", "process"],
    &["process", "Command"],
    &["Command", "new"],
    &["tokio", "process"],
    &["async_process"],
    &["duct"],
    &["subprocess"],
    &["libc", "system"],
    &["libc", "fork"],
    &["libc", "execv"],
    &["libc", "execve"],
    &["libc", "execvp"],
    &["libc", "execl"],
    &["libc", "execlp"],
    &["libc", "posix_spawn"],
    &["nix", "unistd", "execv"],
    &["nix", "unistd", "execve"],
    &["nix", "unistd", "execvp"],
    &["nix", "unistd", "fork"],
    &["nix", "spawn"],
];

fn banned(segments: &[String]) -> Option<String> {
    for pat in BANNED {
        if segments
            .windows(pat.len())
            .any(|w| w.iter().zip(pat.iter()).all(|(a, b)| a == b))
        {
            return Some(pat.join("::"));
        }
    }
    None
}

#[derive(Default)]
struct Finder {
    hits: Vec<String>,
}

impl Finder {
    fn check(&mut self, segments: Vec<String>) {
        if let Some(p) = banned(&segments) {
            self.hits
                .push(format!("{} (matches {p})", segments.join("::")));
        }
    }

    /// Macro bodies are token streams, not syntax trees: look for `a :: b` ident chains.
    fn check_tokens(&mut self, tokens: proc_macro2::TokenStream) {
        let mut chain: Vec<String> = Vec::new();
        let mut last_colon = false;
        for tt in tokens {
            match tt {
                proc_macro2::TokenTree::Ident(i) => {
                    if !last_colon && !chain.is_empty() {
                        self.check(std::mem::take(&mut chain));
                    }
                    chain.push(i.to_string());
                    last_colon = false;
                }
                proc_macro2::TokenTree::Punct(p) if p.as_char() == ':' => last_colon = true,
                proc_macro2::TokenTree::Group(g) => {
                    self.check(std::mem::take(&mut chain));
                    self.check_tokens(g.stream());
                    last_colon = false;
                }
                _ => {
                    self.check(std::mem::take(&mut chain));
                    last_colon = false;
                }
            }
        }
        self.check(chain);
    }
}

fn use_paths(tree: &syn::UseTree, prefix: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
    match tree {
        syn::UseTree::Path(p) => {
            prefix.push(p.ident.to_string());
            use_paths(&p.tree, prefix, out);
            prefix.pop();
        }
        syn::UseTree::Name(n) => out.push([prefix.clone(), vec![n.ident.to_string()]].concat()),
        syn::UseTree::Rename(r) => out.push([prefix.clone(), vec![r.ident.to_string()]].concat()),
        syn::UseTree::Glob(_) => out.push(prefix.clone()),
        syn::UseTree::Group(g) => g.items.iter().for_each(|t| use_paths(t, prefix, out)),
    }
}

impl<'ast> Visit<'ast> for Finder {
    fn visit_path(&mut self, p: &'ast syn::Path) {
        self.check(p.segments.iter().map(|s| s.ident.to_string()).collect());
        syn::visit::visit_path(self, p);
    }

    fn visit_item_use(&mut self, u: &'ast syn::ItemUse) {
        let mut out = Vec::new();
        use_paths(&u.tree, &mut Vec::new(), &mut out);
        for p in out {
            self.check(p);
        }
    }

    fn visit_macro(&mut self, m: &'ast syn::Macro) {
        self.check_tokens(m.tokens.clone());
        syn::visit::visit_macro(self, m);
    }
}

fn scan_source(src: &str) -> Vec<String> {
    let file = syn::parse_file(src).expect("product code parses");
    let mut f = Finder::default();
    f.visit_file(&file);
    f.hits
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read src") {
        let p = entry.expect("entry").path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|e| e == "rs") {
            out.push(p);
        }
    }
}

#[test]
fn no_product_code_starts_a_process_or_a_shell() {
    let mut files = Vec::new();
    rust_files(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("src"),
        &mut files,
    );
    assert!(files.len() > 20, "scanned {} files", files.len());
    let mut hits = Vec::new();
    for f in &files {
        let src = std::fs::read_to_string(f).expect("read");
        hits.extend(
            scan_source(&src)
                .into_iter()
                .map(|h| format!("{}: {h}", f.display())),
        );
    }
    assert!(
        hits.is_empty(),
        "process-spawning code in src/:\n{}",
        hits.join("\n")
    );
}

#[test]
fn the_scanner_catches_spawns_and_ignores_comments_and_strings() {
    assert!(!scan_source(r#"fn f() { std::process::Command::new("sh"); }"#).is_empty());
    assert!(
        !scan_source(r#"use std::process::Command; fn f() { Command::new("sh").spawn(); }"#)
            .is_empty()
    );
    assert!(!scan_source(r#"use std::{io, process::{self, Command as C}};"#).is_empty());
    assert!(!scan_source(r#"fn f() { let _ = tokio::process::Command::new("ls"); }"#).is_empty());
    assert!(!scan_source(r#"fn f() { unsafe { libc::system(std::ptr::null()); } }"#).is_empty());
    assert!(
        !scan_source(r#"fn f() { println!("{:?}", std::process::Command::new("sh")); }"#)
            .is_empty()
    );
    assert!(!scan_source(r#"fn f() { nix::unistd::execv(a, b); }"#).is_empty());
    // Comments and strings are not code.
    assert!(scan_source("// std::process::Command::new(\"sh\")\nfn f() {}").is_empty());
    assert!(
        scan_source(
            r#"/// Never call std::process::Command here.
fn f() -> &'static str { "std::process::Command::new(\"sh\")" }"#
        )
        .is_empty()
    );
    assert!(
        scan_source(r#"fn f() { tokio::task::spawn_blocking(|| 1); let command = 2; }"#).is_empty()
    );
}
