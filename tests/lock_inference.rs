//! Lock inference on real programs, as `check` runs them: correct
//! lock-free code gets no finding of any kind under every strategy, and
//! inversions of every kind of lock are still found, as potential
//! deadlocks in every run and as deadlocks when a thread is preempted
//! between its two acquisitions.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::{cli, example, harness, require_kvm};
use serde_json::Value;

/// One of the C programs of `tests/programs/locks/`, built with gcc at
/// `opt` into `dir`.
fn program(dir: &Path, name: &str, opt: &str) -> PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/programs/locks")
        .join(format!("{name}.c"));
    let exe = dir.join(format!("{name}{opt}"));
    let out = Command::new("gcc")
        .args(["-g", opt, "-pthread", "-o"])
        .arg(&exe)
        .arg(&src)
        .output()
        .expect("gcc");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    exe
}

/// `rewind-fuzz check --json` of `exe` with `strategy` over `schedules`.
fn check(exe: &Path, args: &[&str], strategy: &str, schedules: u32, extra: &[&str]) -> Value {
    let cache = tempfile::tempdir().unwrap();
    check_in(cache.path(), exe, args, strategy, schedules, extra)
}

/// [`check`], keeping its reproducers in `cache`.
fn check_in(
    cache: &Path,
    exe: &Path,
    args: &[&str],
    strategy: &str,
    schedules: u32,
    extra: &[&str],
) -> Value {
    require_kvm();
    let out = cli()
        .env("XDG_CACHE_HOME", cache)
        .args(["check", "--json", "--jobs", "2", "--strategy", strategy])
        .args(["--schedules", &schedules.to_string()])
        .args(extra)
        .arg("--target")
        .arg(exe)
        .arg("--")
        .args(args)
        .output()
        .unwrap();
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "check's JSON: {e}\n{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

/// How many schedules ended each way.
fn outcomes(v: &Value) -> Vec<(String, u64)> {
    v["outcomes"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, n)| (k.clone(), n.as_u64().unwrap()))
        .collect()
}

/// The strategies every correct program is checked under, with schedules
/// (the README's figures run 1,000 of each with the release build).
const STRATEGIES: [(&str, u32); 4] = [
    ("default", 1),
    ("random", 100),
    ("pct:3", 100),
    ("pos", 100),
];

/// Every schedule of every strategy exits 0: no crash, no hang, and no
/// potential deadlock on the words lock-free code takes from 0.
fn no_finding_under_any_strategy(exe: &Path, args: &[&str]) {
    for (strategy, n) in STRATEGIES {
        let v = check(exe, args, strategy, n, &[]);
        assert_eq!(
            outcomes(&v),
            vec![("exited(0)".to_string(), n as u64)],
            "{} under {strategy}: {}",
            exe.display(),
            v["first_failure"]["summary"]
        );
    }
}

#[test]
fn a_treiber_stack_gets_no_finding_under_any_strategy() {
    let dir = tempfile::tempdir().unwrap();
    for opt in ["-O0", "-O2"] {
        no_finding_under_any_strategy(&program(dir.path(), "treiber", opt), &[]);
    }
}

#[test]
fn a_chase_lev_deque_gets_no_finding_under_any_strategy() {
    let dir = tempfile::tempdir().unwrap();
    for opt in ["-O0", "-O2"] {
        no_finding_under_any_strategy(&program(dir.path(), "chase_lev", opt), &[]);
    }
}

#[test]
fn an_index_published_next_to_a_spinlock_gets_no_finding_under_any_strategy() {
    let dir = tempfile::tempdir().unwrap();
    for opt in ["-O1", "-O2"] {
        no_finding_under_any_strategy(&program(dir.path(), "index_publish", opt), &[]);
    }
}

#[test]
fn a_locks_memory_reused_for_claim_flags_gets_no_finding_under_any_strategy() {
    let dir = tempfile::tempdir().unwrap();
    for opt in ["-O0", "-O2"] {
        no_finding_under_any_strategy(&program(dir.path(), "reused_lock", opt), &[]);
    }
}

#[test]
fn a_lock_taken_after_a_spinlock_was_let_go_by_a_store_gets_no_finding() {
    let dir = tempfile::tempdir().unwrap();
    for opt in ["-O0", "-O2"] {
        no_finding_under_any_strategy(&program(dir.path(), "spin_then_mutex", opt), &[]);
    }
}

#[test]
fn std_channels_get_no_finding_under_any_strategy() {
    no_finding_under_any_strategy(&example("channels"), &[]);
}

/// The finding kinds of a check of an inversion: a potential deadlock in
/// most schedules, a deadlock (or, for spinlocks, a hang) in some.
fn assert_found(v: &Value, what: &str, deadlock_kind: &str) {
    let found = outcomes(v);
    let count = |k: &str| found.iter().find(|(o, _)| o == k).map_or(0, |(_, n)| *n);
    assert!(
        count("potential-deadlock") > 0,
        "{what}: no potential deadlock in {found:?}"
    );
    assert!(
        count(deadlock_kind) > 0,
        "{what}: no {deadlock_kind} in {found:?}"
    );
    assert_eq!(
        found
            .iter()
            .filter(|(o, _)| o != "potential-deadlock" && o != deadlock_kind)
            .count(),
        0,
        "{what}: {found:?}"
    );
}

#[test]
fn inversions_of_std_and_parking_lot_mutexes_are_found_at_every_opt_level() {
    // opt-level 1 (the harness) and unoptimized (this package's examples,
    // in the test profile): the atomic is inline or a call into `core`.
    let v = check(&harness("rust-mutex-inversion"), &[], "pct:3", 200, &[]);
    assert_found(&v, "std at opt-level 1", "deadlocked");
    for lock in ["std", "parking_lot"] {
        let cache = tempfile::tempdir().unwrap();
        let v = check_in(
            cache.path(),
            &example("mutex_inversions"),
            &[lock],
            "pct:3",
            200,
            &[],
        );
        assert_found(&v, lock, "deadlocked");
        // Locks on the heap are named by where the program made them, and
        // waited for at the program's line, not inside the lock's code.
        let rwd = v["first_failure"]["rwd_file"]
            .as_str()
            .expect("a reproducer");
        let shown = cli().args(["show", rwd]).output().unwrap();
        let summary = String::from_utf8_lossy(&shown.stdout);
        for made_at in ["mutex_inversions.rs:35", "mutex_inversions.rs:36"] {
            assert!(
                summary.contains(&format!("Arc made at {made_at}")),
                "{lock}: the lock made at {made_at} is not named: {summary}"
            );
        }
        // A story line longer than a terminal goes on, indented, below.
        let lines: Vec<&str> = summary.lines().collect();
        let indent = |l: &str| l.len() - l.trim_start().len();
        for (i, first) in lines.iter().enumerate() {
            if !first.contains(" waits for ") {
                continue;
            }
            let mut wait = first.to_string();
            for more in &lines[i + 1..] {
                if indent(more) <= indent(first) || more.trim_start().starts_with("held by") {
                    break;
                }
                wait.push(' ');
                wait.push_str(more.trim());
            }
            assert!(
                wait.contains("(mutex_inversions.rs:"),
                "{lock}: not waited for at the program's line: {wait}"
            );
        }
    }
}

#[test]
fn inversions_of_spinlocks_and_hand_written_futex_mutexes_are_found() {
    let dir = tempfile::tempdir().unwrap();
    for opt in ["-O0", "-O2"] {
        let futex = program(dir.path(), "futex_inversion", opt);
        let v = check(&futex, &[], "pct:3", 200, &[]);
        assert_found(&v, &format!("futex mutexes {opt}"), "deadlocked");
        // Spinning threads that wait for each other never block: when the
        // step budget ends, a cycle of spinners is a deadlock, named by
        // lock and holder. A scheduler that starves a lock's holder behind
        // a spinner ends `hung` (no cycle). Released by plain stores no
        // site sees, the spinlocks order nothing (when a holder let one go
        // is unknown): a run that does not deadlock exits, no warning.
        let spin = program(dir.path(), "spin_inversion", opt);
        let v = check(&spin, &[], "pct:3", 50, &["--max-steps", "5000"]);
        let found = outcomes(&v);
        assert!(
            found.iter().any(|(o, _)| o == "deadlocked"),
            "spinlocks {opt}: {found:?}"
        );
        assert!(
            found
                .iter()
                .all(|(o, _)| ["hung", "deadlocked", "exited(0)"].contains(&o.as_str())),
            "spinlocks {opt}: {found:?}"
        );
    }
    // At `globals` the spinlocks' release stores are sites (the locks are
    // global variables): their holds are seen to end, and their opposite
    // orders are potential deadlocks again.
    let spin = program(dir.path(), "spin_inversion", "-O2");
    let v = check(
        &spin,
        &[],
        "pct:3",
        20,
        &["--max-steps", "5000", "--sync-points", "globals"],
    );
    let found = outcomes(&v);
    assert!(
        found.iter().any(|(o, _)| o == "potential-deadlock"),
        "spinlocks at globals: {found:?}"
    );
    assert!(
        found
            .iter()
            .all(|(o, _)| ["deadlocked", "potential-deadlock"].contains(&o.as_str())),
        "spinlocks at globals: {found:?}"
    );
    // A spinning deadlock names both locks and both threads. (The default
    // schedule takes both locks in one thread before the other runs: its
    // first attempts wait for nobody.)
    let spin = program(dir.path(), "spin_inversion", "-O2");
    let cache = tempfile::tempdir().unwrap();
    let text = (0..50)
        .map(|seed| {
            let out = cli()
                .env("XDG_CACHE_HOME", cache.path())
                .args([
                    "run",
                    "--max-steps",
                    "5000",
                    "--strategy",
                    "random",
                    "--seed",
                ])
                .arg(seed.to_string())
                .arg("--target")
                .arg(&spin)
                .output()
                .unwrap();
            String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr)
        })
        .find(|t| t.contains("deadlocked"))
        .expect("a random schedule of 50 deadlocks");
    for lock in ["first_lock", "second_lock"] {
        assert!(text.contains(lock), "{lock} is not named: {text}");
    }
}

#[test]
fn pthread_inversions_are_found_as_before() {
    for h in ["abba", "three-lock-cycle", "bank-transfer"] {
        let v = check(&harness(h), &[], "pct:3", 200, &[]);
        assert_found(&v, h, "deadlocked");
    }
}

#[test]
fn checks_summary_names_a_cycles_locks_and_sites_as_the_program_does() {
    let dir = tempfile::tempdir().unwrap();
    let futex = program(dir.path(), "futex_inversion", "-O2");
    let cache = tempfile::tempdir().unwrap();
    let out = cli()
        .env("XDG_CACHE_HOME", cache.path())
        .args(["check", "--schedules", "3", "--target"])
        .arg(&futex)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stderr);
    let cycle: Vec<&str> = text.lines().filter(|l| l.contains(" took ")).collect();
    assert_eq!(cycle.len(), 2, "{text}");
    for line in cycle {
        for name in ["accounts_lock", "ledger_lock", "futex_inversion.c:"] {
            assert!(line.contains(name), "{name} is not in {line:?}");
        }
        assert!(!line.contains("0x"), "a bare address in {line:?}");
    }
    let v = check(&futex, &[], "pct:3", 3, &[]);
    let edges = &v["first_failure"]["potential_deadlocks"][0]["edges"];
    let names: Vec<&str> = edges
        .as_array()
        .expect("edges")
        .iter()
        .flat_map(|e| [&e["holding_name"], &e["acquiring_name"]])
        .filter_map(Value::as_str)
        .collect();
    assert!(
        names.iter().all(|n| n.ends_with("_lock")),
        "names in check's JSON: {names:?}"
    );
}
