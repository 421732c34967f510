//! The README keeps exactly two set-up commands, and CI runs the second.

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

#[test]
fn ci_runs_the_readme_test_command() {
    let ci =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(".ci/run")).unwrap();
    let test = &setup_commands()[1];
    assert!(
        ci.lines().any(|l| l.trim() == test),
        ".ci/run must run `{test}`"
    );
}
