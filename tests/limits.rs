//! What one vCPU can and cannot find: the README's examples
//! (`tests/programs/limits/`), each checked at every `--sync-points` level
//! as the README says. Schedules are seeded, so the counts are the same on
//! every host.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::{cli, require_kvm, require_tool};

/// Builds `file` of the examples with `compiler` and `flags` into `dir`.
fn build(dir: &Path, file: &str, compiler: &str, flags: &[&str], out: &str) -> PathBuf {
    let source = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/programs/limits")
        .join(file);
    let exe = dir.join(out);
    let tool = require_tool(compiler, "gcc, or a Rust toolchain (rustup)");
    let built = Command::new(tool)
        .args(flags)
        .arg("-o")
        .arg(&exe)
        .arg(&source)
        .output()
        .unwrap();
    assert!(
        built.status.success(),
        "{}",
        String::from_utf8_lossy(&built.stderr)
    );
    exe
}

/// How many of `schedules` POS schedules of `exe` fail at `level`.
fn failing(exe: &Path, level: &str, schedules: u32) -> u64 {
    let cache = tempfile::tempdir().unwrap();
    let out = cli()
        .env("XDG_CACHE_HOME", cache.path())
        .args(["check", "--json", "--jobs", "1", "--strategy", "pos"])
        .args([
            "--sync-points",
            level,
            "--schedules",
            &schedules.to_string(),
        ])
        .arg("--target")
        .arg(exe)
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    v["failures"].as_u64().unwrap()
}

#[test]
fn a_lost_update_between_two_instructions_on_a_global_needs_the_globals_level() {
    require_kvm();
    let dir = tempfile::tempdir().unwrap();
    let exe = build(
        dir.path(),
        "lost_update.c",
        "gcc",
        &["-O0", "-g", "-pthread"],
        "lost",
    );
    assert_eq!(failing(&exe, "calls", 30), 0);
    assert_eq!(failing(&exe, "atomics", 30), 0);
    assert!(failing(&exe, "globals", 30) > 0);
}

#[test]
fn races_one_vcpu_cannot_show_are_not_found_at_any_level() {
    require_kvm();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let cases = [
        // One `add` to memory: never interrupted on one vCPU.
        build(
            d,
            "lost_update.c",
            "gcc",
            &["-O2", "-g", "-pthread", "-DONE_INSTRUCTION"],
            "one",
        ),
        // Loads and stores through a pointer are no global's.
        build(
            d,
            "heap_update.c",
            "gcc",
            &["-O0", "-g", "-pthread"],
            "heap",
        ),
        // A store buffer's reordering: one vCPU is sequentially consistent.
        build(d, "store_buffer.c", "gcc", &["-O2", "-g", "-pthread"], "sb"),
        // LLVM's `inc [mem]` for a relaxed load and store.
        build(d, "relaxed_counter.rs", "rustc", &["-O", "-g"], "relaxed"),
        // Unoptimized, the relaxed load and store are plain moves in core's
        // functions, through a pointer.
        build(d, "relaxed_counter.rs", "rustc", &["-g"], "relaxed-debug"),
    ];
    for exe in &cases {
        for level in ["calls", "atomics", "globals"] {
            assert_eq!(failing(exe, level, 30), 0, "{} at {level}", exe.display());
        }
    }
}

#[test]
fn the_readme_tells_what_one_vcpu_cannot_find_with_these_examples() {
    let readme =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md")).unwrap();
    let section = readme
        .split("## What one vCPU cannot find")
        .nth(1)
        .expect("the README has the section")
        .split("\n## ")
        .next()
        .unwrap();
    for example in [
        "lost_update.c",
        "heap_update.c",
        "store_buffer.c",
        "relaxed_counter.rs",
    ] {
        assert!(section.contains(example), "{example} is not in the section");
    }
}
