//! A Nix build in the machine: Debian's `nix-build` (single-user, no
//! sandbox) builds a three-step derivation, its builders' output going
//! through a pseudoterminal, to the same output path and contents as
//! natively, with one trace hash run after run, and under many schedules.
//!
//! Each test has its own store, state and configuration under a
//! temporary directory, so nothing of the host's Nix setup counts. The
//! machine's runs write only to its overlay: the host directory stays
//! empty until the native run builds there.

mod common;

use std::path::Path;
use std::process::Command;

use common::{cli, require_tool};
use serde_json::Value;

/// Three builders, each adding to the one before.
const DERIVATION: &str = include_str!("programs/three_steps.nix");

/// What the machine lacks and Nix would otherwise use: no sandbox or
/// build users (one user, one process tree), no binary cache (the
/// machine has no outside network), no seccomp filter (named as
/// unsupported in the machine).
const CONFIG: &str =
    "sandbox = false\nbuild-users-group =\nsubstituters =\nfilter-syscalls = false\n";

/// Builds the derivation and prints its output path and contents.
const BUILD: &str = r#"out=$(nix-build --no-out-link default.nix --argstr nonce same) && echo "$out" && cat "$out""#;

/// A directory with the derivation and a private Nix setup, and the
/// environment that points Nix at it.
fn setup(dir: &Path) -> Vec<(String, String)> {
    std::fs::write(dir.join("default.nix"), DERIVATION).unwrap();
    std::fs::create_dir(dir.join("etc")).unwrap();
    std::fs::write(dir.join("etc/nix.conf"), CONFIG).unwrap();
    let at = |sub: &str| dir.join(sub).to_string_lossy().into_owned();
    [
        ("PATH", "/usr/bin:/bin".to_string()),
        ("HOME", at("home")),
        ("NIX_REMOTE", "local".into()),
        ("NIX_STORE_DIR", at("store")),
        ("NIX_STATE_DIR", at("state")),
        ("NIX_LOG_DIR", at("log")),
        ("NIX_CONF_DIR", at("etc")),
        ("XDG_CONFIG_HOME", at("config")),
        ("XDG_CACHE_HOME", at("cache")),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect()
}

/// `run --json` of the build in the machine.
fn in_machine(dir: &Path, env: &[(String, String)]) -> Value {
    common::require_kvm();
    let mut c = cli();
    c.current_dir(dir).args(["run", "--json"]);
    for (k, v) in env {
        c.arg("-e").arg(format!("{k}={v}"));
    }
    let out = c
        .args(["--target", "/bin/sh", "--", "-c", BUILD])
        .output()
        .unwrap();
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)))
}

#[test]
fn nix_build_of_a_three_step_derivation_ends_as_natively_with_one_trace_hash() {
    require_tool("nix-build", "apt-get install -y nix-bin");
    let dir = tempfile::tempdir().unwrap();
    let env = setup(dir.path());
    let first = in_machine(dir.path(), &env);
    let again = in_machine(dir.path(), &env);
    assert_eq!(first["outcome"]["kind"], "exited", "{first}");
    assert_eq!(first["outcome"]["code"], 0, "{first}");
    assert_eq!(again["trace_hash"], first["trace_hash"]);
    assert_eq!(again["stdout"], first["stdout"]);
    assert!(
        !dir.path().join("store").exists(),
        "the machine's builds stay in its overlay"
    );

    let native = Command::new("/bin/sh")
        .args(["-c", BUILD])
        .current_dir(dir.path())
        .env_clear()
        .envs(env.iter().map(|(k, v)| (k, v)))
        .output()
        .unwrap();
    assert!(
        native.status.success(),
        "{}",
        String::from_utf8_lossy(&native.stderr)
    );
    let native = String::from_utf8(native.stdout).unwrap();
    let store = dir.path().join("store").to_string_lossy().into_owned();
    assert!(native.starts_with(&format!("{store}/")), "{native}");
    assert!(native.ends_with("-c\nc\nb\na\n"), "{native}");
    assert_eq!(first["stdout"].as_str().unwrap(), native);
}

#[test]
fn nix_build_with_its_seccomp_filter_names_what_the_machine_lacks() {
    require_tool("nix-build", "apt-get install -y nix-bin");
    let dir = tempfile::tempdir().unwrap();
    let env = setup(dir.path());
    // Nix's default: a seccomp filter in each builder.
    std::fs::write(
        dir.path().join("etc/nix.conf"),
        CONFIG.replace("filter-syscalls = false\n", ""),
    )
    .unwrap();
    let run = in_machine(dir.path(), &env);
    assert_eq!(run["outcome"]["kind"], "unsupported", "{run}");
    assert!(run.to_string().contains("seccomp"), "{run}");
}

#[test]
fn nix_build_builds_the_same_output_under_many_schedules() {
    require_tool("nix-build", "apt-get install -y nix-bin");
    let dir = tempfile::tempdir().unwrap();
    let env = setup(dir.path());
    // The default schedule's output, which the test above holds equal to
    // the native one, is what every schedule must print.
    let first = in_machine(dir.path(), &env);
    let printed = first["stdout"].as_str().unwrap();
    assert!(printed.ends_with("-c\nc\nb\na\n"), "{first}");
    let expected = dir.path().join("expected");
    std::fs::write(&expected, printed).unwrap();
    let mut c = cli();
    c.current_dir(dir.path())
        .args(["check", "--schedules", "8", "-j", "2", "--expect-stdout"])
        .arg(&expected);
    for (k, v) in &env {
        c.arg("-e").arg(format!("{k}={v}"));
    }
    let out = c
        .args(["--target", "/bin/sh", "--", "-c", BUILD])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{said}");
    assert!(said.contains("8 schedules"), "{said}");
    assert!(said.contains("every schedule exited 0"), "{said}");
}
