//! Bad input gets one line saying what is wrong and what to do, and exit code 2.

mod common;

use common::cli;

fn fails_with_2(args: &[&str], env: &[(&str, &str)], expect: &str) {
    let mut c = cli();
    c.args(args);
    for (k, v) in env {
        c.env(k, v);
    }
    let out = c.output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
    assert_eq!(err.trim_end().lines().count(), 1, "one line: {err}");
    assert!(err.contains(expect), "{args:?}: {err}");
    assert!(out.stdout.is_empty());
}

fn elf_with(class: u8, machine: u16) -> tempfile::NamedTempFile {
    let mut h = vec![0u8; 64];
    h[..4].copy_from_slice(b"\x7fELF");
    h[4] = class;
    h[5] = 1;
    h[6] = 1;
    h[16..18].copy_from_slice(&2u16.to_le_bytes());
    h[18..20].copy_from_slice(&machine.to_le_bytes());
    h[20..24].copy_from_slice(&1u32.to_le_bytes());
    let f = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(f.path(), &h).unwrap();
    f
}

#[test]
fn a_missing_target_is_refused() {
    fails_with_2(
        &["run", "--target", "/no/such/program"],
        &[],
        "cannot read --target",
    );
}

#[test]
fn a_directory_target_is_refused() {
    fails_with_2(&["run", "--target", "/tmp"], &[], "is a directory");
}

#[test]
fn a_file_that_is_not_elf_is_refused() {
    fails_with_2(
        &["run", "--target", "/etc/passwd"],
        &[],
        "not an ELF executable",
    );
}

#[test]
fn a_32_bit_elf_is_refused() {
    let f = elf_with(1, 3);
    fails_with_2(
        &["run", "--target", f.path().to_str().unwrap()],
        &[],
        "32-bit",
    );
}

#[test]
fn an_elf_for_another_machine_is_refused() {
    let f = elf_with(2, 183);
    fails_with_2(
        &["run", "--target", f.path().to_str().unwrap()],
        &[],
        "not x86-64",
    );
}

#[test]
fn a_missing_kvm_device_is_explained() {
    fails_with_2(
        &["run", "--target", "/bin/true"],
        &[("REWIND_KVM_DEVICE", "/no/kvm/here")],
        "rewind-fuzz needs KVM",
    );
}

#[test]
fn an_unusable_kvm_device_is_explained() {
    fails_with_2(
        &["run", "--target", "/bin/true"],
        &[("REWIND_KVM_DEVICE", "/dev/null")],
        "KVM",
    );
}

#[test]
fn bad_options_are_refused_with_exit_code_2() {
    let out = cli()
        .args(["run", "--target", "/bin/true", "--timeout", "soon"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn the_exit_code_is_the_guests() {
    let out = cli()
        .args(["run", "--target", "/bin/false"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let out = cli()
        .args(["run", "--target", "/bin/true"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
}

#[test]
fn json_output_is_one_object_with_the_documented_keys() {
    let out = cli()
        .args(["run", "--json", "--target", "/bin/echo", "--", "hi"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    for key in ["steps", "trace_hash", "threads", "stdout", "stderr"] {
        assert!(v.get(key).is_some(), "{key}");
    }
    for key in ["kind", "code", "signal", "fault_addr", "thread"] {
        assert!(v["outcome"].get(key).is_some(), "outcome.{key}");
    }
    assert_eq!(v["outcome"]["kind"], "exited");
    assert_eq!(v["stdout"], "hi\n");
}

#[test]
fn a_bundled_harness_runs_with_its_own_step_budget_unless_told_otherwise() {
    // busy-wait-hang's manifest sets max_steps = 2000; pct:2 from seed 0
    // makes it hang.
    let steps = |extra: &[&str]| {
        let out = cli()
            .args(["run", "--json", "--strategy", "pct:2"])
            .args(["--target", "harness:busy-wait-hang"])
            .args(extra)
            .output()
            .unwrap();
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(v["outcome"]["kind"], "hung", "{v}");
        v["steps"].as_u64().unwrap()
    };
    assert_eq!(steps(&[]), 2000);
    assert_eq!(steps(&["--max-steps", "3000"]), 3000);
}

/// Every number in `v` that looks like an address (above 64 KiB) under a
/// key that names one, by path.
fn integer_addresses(v: &serde_json::Value, path: &str, out: &mut Vec<String>) {
    const ADDRESS_KEYS: [&str; 8] = [
        "rip",
        "site",
        "object",
        "lock",
        "holder_site",
        "fault_addr",
        "from_site",
        "to_site",
    ];
    match v {
        serde_json::Value::Object(m) => {
            for (k, x) in m {
                let p = format!("{path}.{k}");
                if ADDRESS_KEYS.contains(&k.as_str()) && x.as_u64().is_some_and(|a| a > 0xffff) {
                    out.push(p.clone());
                }
                integer_addresses(x, &p, out);
            }
        }
        serde_json::Value::Array(a) => {
            for x in a {
                integer_addresses(x, &format!("{path}[]"), out);
            }
        }
        _ => {}
    }
}

#[test]
fn every_commands_json_has_a_schema_and_hex_addresses() {
    common::require_kvm();
    let dir = tempfile::tempdir().unwrap();
    let rwd = dir.path().join("abba.rwd");
    let json = |args: &[&std::ffi::OsStr]| {
        let out = cli()
            .env("XDG_CACHE_HOME", dir.path())
            .args(args)
            .output()
            .unwrap();
        let v: serde_json::Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{args:?}: {e}: {}", String::from_utf8_lossy(&out.stderr)));
        v
    };
    let os = |s: &str| std::ffi::OsString::from(s);
    let check = json(&[
        &os("check"),
        &os("--json"),
        &os("--target"),
        &os("harness:abba"),
        &os("--schedules"),
        &os("200"),
        &os("--save-rwd"),
        rwd.as_os_str(),
    ]);
    let run = json(&[
        &os("run"),
        &os("--json"),
        &os("--target"),
        &os("harness:abba"),
        &os("--schedule"),
        rwd.as_os_str(),
    ]);
    let replay = json(&[&os("replay"), &os("--json"), rwd.as_os_str()]);
    assert_eq!(run["outcome"]["kind"], "deadlocked", "{run}");
    for (name, v) in [("check", &check), ("run", &run), ("replay", &replay)] {
        assert_eq!(v["schema"], 1, "{name}: {v}");
        let mut found = Vec::new();
        integer_addresses(v, name, &mut found);
        assert!(found.is_empty(), "addresses as integers: {found:?}\n{v}");
    }
    let threads = check["first_failure"]["outcome"]["threads"]
        .as_array()
        .unwrap();
    assert!(
        threads
            .iter()
            .any(|t| t["lock"].as_str().is_some_and(|l| l.starts_with("0x"))),
        "{check}"
    );
}

#[test]
fn check_keeps_its_files_out_of_the_current_directory_and_names_them() {
    common::require_kvm();
    let dir = tempfile::tempdir().unwrap();
    let (cwd, cache) = (dir.path().join("cwd"), dir.path().join("cache"));
    std::fs::create_dir(&cwd).unwrap();
    let out = cli()
        .current_dir(&cwd)
        .env("XDG_CACHE_HOME", &cache)
        .args([
            "check",
            "--json",
            "--target",
            "harness:philosophers",
            "--schedules",
            "300",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(std::fs::read_dir(&cwd).unwrap().count(), 0, "{v}");
    let written = v["files_written"].as_array().unwrap();
    assert_eq!(written.len(), 2, "{v}");
    for f in written {
        let p = std::path::Path::new(f.as_str().unwrap());
        assert!(
            p.starts_with(cache.join("rewind-fuzz/check")) && p.exists(),
            "{v}"
        );
    }
    // The summary names the locks and the source line, in one short line.
    let summary = v["first_failure"]["summary"].as_str().unwrap();
    assert!(summary.chars().count() <= 160, "{summary}");
    assert!(
        summary.contains("forks[") && summary.contains("philosophers.c:"),
        "{summary}"
    );
}

#[test]
fn a_reproducers_schedule_re_tests_a_fix() {
    common::require_kvm();
    let dir = tempfile::tempdir().unwrap();
    let rwd = dir.path().join("abba.rwd");
    let found = cli()
        .current_dir(dir.path())
        .args([
            "check",
            "--target",
            "harness:abba",
            "--schedules",
            "200",
            "--save-rwd",
        ])
        .arg(&rwd)
        .output()
        .unwrap();
    assert_eq!(
        found.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&found.stderr)
    );
    let again = cli()
        .args(["run", "--target", "harness:abba", "--schedule"])
        .arg(&rwd)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&again.stderr);
    assert!(said.contains("deadlocked"), "{said}");
    let fixed = cli()
        .args(["run", "--target", "harness:abba-fixed", "--schedule"])
        .arg(&rwd)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&fixed.stderr);
    assert_eq!(fixed.status.code(), Some(0), "{said}");
    assert!(said.contains("schedule with its arguments"), "{said}");
    assert!(said.contains("records did not happen"), "{said}");
    assert!(said.contains("exited with code 0"), "{said}");
    // The same through `replay --target` with the minimized reproducer,
    // its own settings kept: 1 while the failure happens, 0 once it is gone.
    let min = dir.path().join("abba-min.rwd");
    let minimized = cli()
        .arg("minimize")
        .arg(&rwd)
        .arg("-o")
        .arg(&min)
        .output()
        .unwrap();
    assert!(
        minimized.status.success(),
        "{}",
        String::from_utf8_lossy(&minimized.stderr)
    );
    let rwd = min;
    let retest = |target: &str| {
        let out = cli()
            .arg("replay")
            .arg(&rwd)
            .args(["--target", target])
            .output()
            .unwrap();
        let said = String::from_utf8_lossy(&out.stderr).into_owned();
        (out.status.code(), said)
    };
    let (code, said) = retest("harness:abba");
    assert_eq!(code, Some(1), "{said}");
    assert!(said.contains("it still fails, the same way"), "{said}");
    let (code, said) = retest("harness:abba-fixed");
    assert_eq!(code, Some(0), "{said}");
    assert!(said.contains("the failure is gone"), "{said}");
    let json = cli()
        .arg("replay")
        .arg(&rwd)
        .args(["--json", "--target", "harness:abba-fixed"])
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(v["failure_gone"], true, "{v}");
    assert_eq!(v["recorded"]["outcome"]["kind"], "deadlocked", "{v}");
    let bad = cli()
        .arg("replay")
        .arg(&rwd)
        .args(["--target", "/nonexistent/program"])
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2));
    assert_eq!(String::from_utf8_lossy(&bad.stderr).lines().count(), 1);
}

#[test]
fn completions_and_man_pages_come_from_the_binary() {
    let bash = cli().args(["completions", "bash"]).output().unwrap();
    assert!(bash.status.success());
    let script = String::from_utf8_lossy(&bash.stdout);
    for word in [
        "_rewind__fuzz",
        "check",
        "replay",
        "--target",
        "--schedules",
    ] {
        assert!(script.contains(word), "{word} missing from the bash script");
    }
    let dir = tempfile::tempdir().unwrap();
    let man = cli().arg("man").arg(dir.path()).output().unwrap();
    assert!(man.status.success());
    for page in [
        "rewind-fuzz.1",
        "rewind-fuzz-check.1",
        "rewind-fuzz-replay.1",
    ] {
        let text = std::fs::read_to_string(dir.path().join(page)).unwrap();
        assert!(text.starts_with(".ie") || text.contains(".TH"), "{page}");
    }
    let bad = cli().args(["completions", "cmd.exe"]).output().unwrap();
    assert_eq!(bad.status.code(), Some(2));
}

#[test]
fn check_per_test_runs_each_test_alone_and_names_the_failing_one() {
    common::require_kvm();
    let dir = tempfile::tempdir().unwrap();
    let out = cli()
        .env("XDG_CACHE_HOME", dir.path())
        .args([
            "check",
            "--per-test",
            "--target",
            "harness:rust-libtest-fail",
            "--schedules",
            "5",
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    let rows: Vec<&str> = err.lines().filter(|l| l.starts_with("tests::")).collect();
    assert_eq!(rows.len(), 6, "{err}");
    assert!(
        err.lines()
            .any(|l| l.starts_with("test ") && l.contains("schedules") && l.ends_with("failing")),
        "{err}"
    );
    for row in rows {
        let failed = row.ends_with("FAILED");
        let failing = row.starts_with("tests::this_test_fails_on_purpose ");
        assert_eq!(failed, failing, "{row}");
        // Schedules run, and of those, how many failed: every one of the
        // test that always fails.
        let cells: Vec<&str> = row.split_whitespace().collect();
        assert_eq!(cells[1], "5", "{row}");
        assert_eq!(cells[3], if failing { "5" } else { "0" }, "{row}");
    }
    // The failure names its test and the panic's message.
    assert!(
        err.contains(
            "test tests::this_test_fails_on_purpose: exited with code 101: panicked at libtest.rs:"
        ),
        "{err}"
    );
    // A binary that is no test binary is bad input.
    let bad = cli()
        .args(["check", "--per-test", "--target", "harness:hello"])
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("neither a Rust test binary"));
}

#[test]
fn check_per_test_runs_each_googletest_test_alone() {
    common::require_kvm();
    let dir = tempfile::tempdir().unwrap();
    let exe = dir.path().join("accounts_test");
    let source =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/programs/gtest_accounts.cc");
    let built = std::process::Command::new("g++")
        .args(["-g", "-O1", "-pthread", "-o"])
        .arg(&exe)
        .arg(&source)
        .args(["-lgtest", "-lgtest_main"])
        .status()
        .unwrap();
    assert!(built.success(), "GoogleTest (libgtest-dev) is needed");
    let out = cli()
        .env("XDG_CACHE_HOME", dir.path())
        .args(["check", "--per-test", "--schedules", "200", "--target"])
        .arg(&exe)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    let row = |test: &str| {
        err.lines()
            .find(|l| l.starts_with(&format!("{test} ")))
            .unwrap_or_else(|| panic!("no row for {test}: {err}"))
            .to_string()
    };
    assert!(row("Accounts.TransfersBothWaysKeepTheTotal").ends_with("FAILED"));
    assert!(!row("Accounts.TransferMovesTheAmount").ends_with("FAILED"));
    assert!(!row("Arithmetic.Adds").ends_with("FAILED"));
    assert!(
        err.contains("test Accounts.TransfersBothWaysKeepTheTotal: deadlocked"),
        "{err}"
    );
}

#[test]
fn time_budgets_take_bare_seconds_as_afl_does_and_refuse_no_time() {
    common::require_kvm();
    // `-V 60` is AFL++'s sixty seconds, on every command that takes --time.
    let out = cli()
        .args(["run", "--target", "harness:hello", "-V", "60"])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for args in [
        &["fuzz", "--target", "harness:hello", "--time", "0s"][..],
        &["--target", "harness:hello", "-V", "0"],
        &["check", "--target", "harness:hello", "--time", "0"],
        &["run", "--target", "harness:hello", "-V", "0ms"],
    ] {
        let out = cli().args(args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains("a budget of no time"), "{args:?}: {err}");
        assert!(!err.contains("--max-steps"), "{args:?}: {err}");
    }
    // The version is --version; -V is a budget, never the version.
    let version = cli().arg("--version").output().unwrap();
    assert!(String::from_utf8_lossy(&version.stdout).starts_with("rewind-fuzz "));
    let bare = cli().arg("-V").output().unwrap();
    assert_eq!(bare.status.code(), Some(2));
    assert!(bare.stdout.is_empty());
}

#[test]
fn an_output_directory_that_is_not_one_is_refused_in_one_line() {
    for args in [
        &["fuzz", "--target", "/bin/true", "-o", "/dev/null"][..],
        &["--target", "/bin/true", "--per-test", "-o", "/dev/null"],
        &["man", "/dev/null"],
        &["fuzz", "--target", "/bin/true", "--sync-dir", "/dev/null"],
    ] {
        fails_with_2(
            args,
            &[],
            "/dev/null is a device, FIFO or socket, not a directory",
        );
    }
    let file = tempfile::NamedTempFile::new().unwrap();
    let path = file.path().to_str().unwrap();
    fails_with_2(
        &["fuzz", "--target", "/bin/true", "-o", path],
        &[],
        "is a file, not a directory",
    );
}

#[test]
fn a_script_target_is_refused_with_the_command_that_runs_it() {
    common::require_kvm();
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("greet.sh");
    std::fs::write(&script, "#!/bin/sh\necho hello from a script\n").unwrap();
    let script = script.to_str().unwrap();
    let hint = format!("--target /bin/sh -- {script}");
    fails_with_2(&["run", "--target", script], &[], &hint);
    // The command it gives runs the script.
    let out = cli()
        .args(["run", "--target", "/bin/sh", "--", script])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "hello from a script\n"
    );
}

#[test]
fn the_step_budget_says_what_a_step_is() {
    let help = cli().args(["run", "--help"]).output().unwrap();
    let text = String::from_utf8_lossy(&help.stdout);
    let max_steps = text
        .split("--max-steps")
        .nth(1)
        .unwrap_or_else(|| panic!("{text}"));
    let described: String = max_steps.chars().take(300).collect();
    assert!(
        described.contains("pthread calls and sync sites"),
        "{described}"
    );
}

#[test]
fn a_per_test_failures_printed_commands_and_reproducer_run_that_test_as_recorded() {
    common::require_kvm();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let found = cli()
        .current_dir(d)
        .args([
            "check",
            "--per-test",
            "--target",
            "harness:rust-libtest-fail",
            "--schedules",
            "2",
            "--save-rwd",
            "f.rwd",
            "--save-schedule",
            "f.schedule.json",
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&found.stderr).into_owned();
    assert_eq!(found.status.code(), Some(1), "{err}");
    // The command check printed runs as printed, the test alone.
    let printed = err
        .lines()
        .filter_map(|l| l.strip_prefix("reproduce with: "))
        .find(|c| c.contains("this_test_fails_on_purpose"))
        .unwrap_or_else(|| panic!("no command for the failing test:\n{err}"))
        .replace(
            "rewind-fuzz ",
            &format!("{} ", env!("CARGO_BIN_EXE_rewind-fuzz")),
        );
    assert!(
        printed.contains("-- --exact tests::this_test_fails_on_purpose --test-threads=1"),
        "{printed}"
    );
    let again = std::process::Command::new("sh")
        .current_dir(d)
        .args(["-c", &printed])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&again.stderr);
    assert_eq!(again.status.code(), Some(101), "{printed}: {said}");
    assert!(said.contains("records happened again"), "{said}");
    assert!(String::from_utf8_lossy(&again.stdout).contains("running 1 test"));

    // The reproducer as --schedule: its arguments, not the whole binary's.
    let rwd = d.join("f-tests__this_test_fails_on_purpose.rwd");
    let run = |extra: &[&str]| {
        let out = cli()
            .current_dir(d)
            .args(["run", "--target", "harness:rust-libtest-fail", "--schedule"])
            .arg(&rwd)
            .args(extra)
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    // Its signature names the panic by place.
    let shown = cli().arg("show").arg(&rwd).output().unwrap();
    let story = String::from_utf8_lossy(&shown.stdout);
    let signature = story.lines().find(|l| l.contains("signature:")).unwrap();
    assert!(
        signature.contains("exited(101) at libtest.rs:") && signature.contains(" (panic)"),
        "{signature}"
    );
    let (code, stdout, said) = run(&[]);
    assert_eq!(code, Some(101), "{said}");
    assert!(stdout.contains("running 1 test"), "{stdout}");
    assert!(
        said.contains(
            "schedule with its arguments, environment, seed, level, oracle and exit codes"
        ),
        "{said}"
    );
    assert!(said.contains("records happened again"), "{said}");
    // Arguments given after -- replace the recorded ones, and it says so.
    let passing = [
        "--",
        "--exact",
        "tests::a_mutex_counts_every_increment",
        "--test-threads=1",
    ];
    let (code, stdout, said) = run(&passing);
    assert_eq!(code, Some(0), "{said}");
    assert!(stdout.contains("running 1 test"), "{stdout}");
    assert!(
        said.contains("given here, these replace the reproducer's: the arguments after --"),
        "{said}"
    );
    assert!(
        said.contains("--exact tests::this_test_fails_on_purpose"),
        "{said}"
    );
    assert!(said.contains("records did not happen"), "{said}");

    // A recording that does not give the failure its schedule was saved
    // for says so, writes nothing and exits 1.
    let schedule = d.join("f-tests__this_test_fails_on_purpose.schedule.json");
    let out = cli()
        .current_dir(d)
        .args(["run", "--target", "harness:rust-libtest-fail", "--schedule"])
        .arg(&schedule)
        .args(["--save-rwd", "not.rwd"])
        .args(passing)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(said.contains("did not reproduce the failure"), "{said}");
    assert!(!d.join("not.rwd").exists());
}

/// The completion script for `shell`, written into `dir`.
fn completion_script(shell: &str, dir: &std::path::Path, name: &str) -> std::path::PathBuf {
    let out = cli().args(["completions", shell]).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let path = dir.join(name);
    std::fs::write(&path, &out.stdout).unwrap();
    path
}

/// The options a shell offers for `rewind-fuzz fuzz --sy`.
fn assert_offers_the_sync_options(shell: &str, offered: &str) {
    for option in ["--sync-dir", "--sync-id", "--sync-points"] {
        assert!(
            offered
                .lines()
                .any(|l| l.split_whitespace().next() == Some(option)),
            "{shell} does not offer {option}: {offered:?}"
        );
    }
}

#[test]
fn bash_completes_options_of_a_subcommand_when_the_script_is_sourced() {
    let bash = common::require_tool("bash", "apt-get install -y bash");
    let dir = tempfile::tempdir().unwrap();
    let script = completion_script("bash", dir.path(), "rewind-fuzz.bash");
    // What bash does at a tab: the function `complete` registered, with
    // the words of the line.
    let driver = format!(
        r#"source {}
spec=$(complete -p rewind-fuzz) || exit 3
fn=${{spec##*-F }}; fn=${{fn%% *}}
COMP_WORDS=(rewind-fuzz fuzz --sy); COMP_CWORD=2
COMP_LINE="rewind-fuzz fuzz --sy"; COMP_POINT=${{#COMP_LINE}}
"$fn" rewind-fuzz --sy fuzz
printf '%s\n' "${{COMPREPLY[@]}}""#,
        script.display()
    );
    assert_offers_the_sync_options("bash", &shell_output(&bash, &driver));
}

/// What `shell -c command` prints; it must succeed.
fn shell_output(shell: &std::path::Path, command: &str) -> String {
    let out = std::process::Command::new(shell)
        .args(["-c", command])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn fish_completes_options_of_a_subcommand_when_the_script_is_sourced() {
    let fish = common::require_tool("fish", "apt-get install -y fish");
    let dir = tempfile::tempdir().unwrap();
    let script = completion_script("fish", dir.path(), "rewind-fuzz.fish");
    let command = format!(
        "source {}; complete -C 'rewind-fuzz fuzz --sy'",
        script.display()
    );
    assert_offers_the_sync_options("fish", &shell_output(&fish, &command));
}

#[test]
fn zsh_completes_options_of_a_subcommand_when_the_script_is_sourced() {
    let zsh = common::require_tool("zsh", "apt-get install -y zsh");
    let dir = tempfile::tempdir().unwrap();
    completion_script("zsh", dir.path(), "_rewind-fuzz");
    let offered = dir.path().join("offered");
    let ready = dir.path().join("ready");
    let done = dir.path().join("done");
    // An interactive zsh on a pseudo-terminal (zsh/zpty), with the script
    // in its fpath as an install puts it, completing at a tab once its
    // line editor is up (it drops what was typed before); compadd notes
    // what the script offers.
    let driver = format!(
        r#"zmodload zsh/zpty
zpty z zsh -f -i
zpty -w z "PS1=''"
zpty -w z "fpath=({dir} \$fpath); autoload -U compinit; compinit -u -D"
zpty -w z "compadd() {{ local -a m; builtin compadd -O m \"\$@\"; print -rl -- \$m >> {offered}; builtin compadd \"\$@\" }}"
zpty -w z "bindkey '^I' complete-word; : > {ready}"
while [[ ! -e {ready} ]]; do zpty -r -t z line || sleep 0.05; done
zpty -w -n z $'rewind-fuzz fuzz --sy\t'
zpty -w z $'\C-e\C-u: > {done}'
while [[ ! -e {done} ]]; do zpty -r -t z line || sleep 0.05; done
zpty -d z"#,
        dir = dir.path().display(),
        offered = offered.display(),
        ready = ready.display(),
        done = done.display(),
    );
    let mut child = std::process::Command::new(zsh)
        .args(["-f", "-c", &driver])
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    assert!(child.wait().unwrap().success());
    let text = std::fs::read_to_string(&offered).unwrap_or_default();
    assert_offers_the_sync_options("zsh", &text);
}
