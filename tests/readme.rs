//! The README keeps exactly two set-up commands; the second is the CI script,
//! which installs what the tests need and runs them all.

use std::path::Path;

fn setup_commands() -> Vec<String> {
    let readme =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md")).unwrap();
    let section = readme
        .split("## Set up on a fresh machine")
        .nth(1)
        .expect("a set-up section")
        .split("\n## ")
        .next()
        .unwrap();
    section
        .split("```sh\n")
        .skip(1)
        .map(|block| block.split("```").next().unwrap().trim().to_string())
        .collect()
}

#[test]
fn the_readme_has_exactly_two_set_up_commands() {
    let cmds = setup_commands();
    assert_eq!(cmds.len(), 2, "{cmds:?}");
    assert!(
        cmds.iter().all(|c| !c.contains('\n')),
        "one line each: {cmds:?}"
    );
    assert!(
        cmds[0].contains("--target harness:"),
        "the first runs the main job on a bundled harness"
    );
}

fn ci_script() -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(".ci/run")).unwrap()
}

#[test]
fn the_readme_test_command_is_the_ci_script_and_it_runs_every_test_reporting_every_failure() {
    assert_eq!(setup_commands()[1], ".ci/run");
    let ci = ci_script();
    assert!(
        ci.lines()
            .any(|l| l.trim().starts_with("cargo nextest run --profile ci")),
        ".ci/run must run the ci profile"
    );
    let config =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(".config/nextest.toml"))
            .unwrap();
    let ci_profile = config.split("[profile.ci]").nth(1).expect("a ci profile");
    assert!(
        ci_profile.lines().any(|l| l.trim() == "fail-fast = false"),
        "the ci profile reports every failure: {ci_profile}"
    );
}

#[test]
fn the_ci_script_installs_every_tool_a_test_requires() {
    let ci = ci_script();
    let tests = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests");
    let mut required = std::collections::BTreeSet::new();
    for entry in std::fs::read_dir(&tests).unwrap().flatten() {
        let Ok(text) = std::fs::read_to_string(entry.path()) else {
            continue;
        };
        for call in text.split("require_tool(").skip(1) {
            let name = call
                .trim_start()
                .strip_prefix('"')
                .and_then(|c| c.split('"').next())
                .filter(|n| {
                    !n.is_empty()
                        && n.chars()
                            .all(|c| c.is_ascii_alphanumeric() || "/+._-".contains(c))
                });
            if let Some(name) = name {
                required.insert(name.rsplit('/').next().unwrap().to_string());
            }
        }
    }
    assert!(required.len() > 10, "{required:?}");
    // The Rust toolchain is there already; the script checks for it.
    let toolchain = ci
        .lines()
        .find(|l| l.starts_with("for tool in cargo"))
        .expect("the script checks for the Rust toolchain");
    for tool in &required {
        assert!(
            ci.contains(&format!("[{tool}]="))
                || toolchain
                    .split_whitespace()
                    .any(|w| w.trim_end_matches(';') == tool),
            ".ci/run does not install {tool}, which a test requires"
        );
    }
    assert!(ci.contains("libgtest-dev") && ci.contains("cargo install --locked cargo-nextest"));
}
