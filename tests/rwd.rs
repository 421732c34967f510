//! Reproducers: a failure in one `.rwd` file that minimizes, replays on its
//! own files, tells its story, and whose reader refuses bad files cleanly.

mod common;

use std::path::{Path, PathBuf};
use std::process::Output;

use common::{cli, harness, require_kvm};
use rewind_fuzz::rwd::{self, Rwd};
use serde_json::Value;

/// Runs `check` on a harness in `dir` and returns the reproducer it wrote.
fn check_rwd(dir: &Path, name: &str, strategy: &str, schedules: u32) -> PathBuf {
    require_kvm();
    let out = cli()
        .current_dir(dir)
        .args([
            "check",
            "--json",
            "-j",
            "2",
            "--strategy",
            strategy,
            "--schedules",
            &schedules.to_string(),
            "--target",
        ])
        .arg(harness(name))
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    assert_eq!(v["first_failure"]["kind"], "deadlocked", "{v}");
    let file = v["first_failure"]["rwd_file"]
        .as_str()
        .unwrap_or_else(|| panic!("check names its reproducer: {v}"));
    dir.join(file)
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Minimizes with a budget of schedules (deterministic) and returns the JSON.
fn minimize(input: &Path, output: &Path) -> Value {
    let out = cli()
        .args(["minimize", "--json", "--execs", "400"])
        .arg(input)
        .arg("-o")
        .arg(output)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn the_philosophers_deadlock_minimizes_to_at_most_five_preemptions_that_replay_a_hundred_times() {
    let dir = tempfile::tempdir().unwrap();
    let found = check_rwd(dir.path(), "philosophers", "random", 60);
    let min = dir.path().join("min.rwd");
    let m = minimize(&found, &min);
    let before = m["decisions_before"].as_u64().unwrap();
    let after = m["decisions_after"].as_u64().unwrap();
    assert!(after <= 5, "{after} preemptions left: {m}");
    assert!(after < before, "{m}");
    assert!(m["execs"].as_u64().unwrap() <= 400);

    let original = Rwd::load(&found).unwrap();
    let minimized = Rwd::load(&min).unwrap();
    assert_eq!(
        minimized.expected.signature, original.expected.signature,
        "two reproducers of one bug have one signature"
    );
    assert_eq!(minimized.schedule.decisions.len() as u64, after);

    for i in 0..100 {
        let r = rwd::replay(&minimized).unwrap();
        assert!(
            r.matches,
            "replay {i} differs: {}",
            r.report.outcome.summary()
        );
        assert_eq!(r.signature, minimized.expected.signature);
        assert_eq!(r.report.trace_hash, minimized.trace_hash_hex());
    }
    let out = cli().args(["replay", "--json"]).arg(&min).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["matches"], true);
    assert_eq!(v["got"]["signature_id"], v["expected"]["signature_id"]);
}

#[test]
fn minimizing_the_same_input_with_the_same_budget_gives_the_same_schedule() {
    let dir = tempfile::tempdir().unwrap();
    let found = check_rwd(dir.path(), "bank-transfer", "random", 100);
    let (a, b) = (dir.path().join("a.rwd"), dir.path().join("b.rwd"));
    let ma = minimize(&found, &a);
    let mb = minimize(&found, &b);
    assert_eq!(ma["execs"], mb["execs"]);
    let (ra, rb) = (Rwd::load(&a).unwrap(), Rwd::load(&b).unwrap());
    assert_eq!(ra.schedule, rb.schedule);
    assert_eq!(ra.expected.trace_hash, rb.expected.trace_hash);
}

#[test]
fn a_reproducer_still_replays_after_the_directory_of_its_binary_is_deleted() {
    require_kvm();
    let bin_dir = tempfile::tempdir().unwrap();
    let exe = bin_dir.path().join("null-deref");
    std::fs::copy(harness("null-deref"), &exe).unwrap();
    let fixture = bin_dir.path().join("fixture.txt");
    std::fs::write(&fixture, "read me").unwrap();
    let out_dir = tempfile::tempdir().unwrap();
    let file = out_dir.path().join("crash.rwd");
    let out = cli()
        .args(["run", "--json", "--save-rwd"])
        .arg(&file)
        .arg("--target")
        .arg(&exe)
        .arg("--")
        .arg(&fixture)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let ran: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(ran["outcome"]["kind"], "crashed");
    assert!(ran.get("events").is_none(), "no trace was asked for");

    drop(bin_dir);
    assert!(!exe.exists());
    let out = cli()
        .args(["replay", "--json"])
        .arg(&file)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["got"]["trace_hash"], ran["trace_hash"]);
    assert_eq!(v["got"]["outcome"]["kind"], "crashed");

    // The crash's story: thread, address, and a symbolized backtrace.
    let out = cli().arg("show").arg(&file).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let story = stdout(&out);
    assert!(
        story.contains("got SIGSEGV touching address 0x0"),
        "{story}"
    );
    assert!(story.contains("backtrace:"), "{story}");
    assert!(story.contains("writer (null-deref.c:"), "{story}");
}

/// The text of `show` for a reproducer, and its SVG.
fn show(file: &Path) -> (String, String) {
    let svg = file.with_extension("svg");
    let out = cli()
        .arg("show")
        .arg(file)
        .arg("--svg")
        .arg(&svg)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    (stdout(&out), std::fs::read_to_string(&svg).unwrap())
}

#[test]
fn show_names_the_forks_threads_and_source_lines_of_the_philosophers_cycle() {
    let dir = tempfile::tempdir().unwrap();
    let found = check_rwd(dir.path(), "philosophers", "random", 60);
    let (story, svg) = show(&found);
    assert!(
        story.contains("wait-for cycle of 5 threads"),
        "the cycle: {story}"
    );
    for t in 2..=6 {
        assert!(
            story.contains(&format!("thread {t} waits for forks")),
            "thread {t} and its fork: {story}"
        );
    }
    assert!(story.contains("philosopher (philosophers.c:"), "{story}");
    assert!(story.contains("which took it at"), "{story}");
    assert!(story.contains("THE STEPS THAT MATTER"), "{story}");
    let lanes: Vec<&str> = story
        .split("THE STEPS THAT MATTER")
        .nth(1)
        .unwrap()
        .lines()
        .skip(1)
        .take_while(|l| !l.is_empty())
        .collect();
    let idle = lanes
        .iter()
        .find_map(|l| l.trim().strip_prefix("(no steps here: thread "));
    assert!(
        story.contains("| thread 2") || idle.is_some_and(|t| t.contains('2')),
        "thread 2 has a lane or is named idle: {story}"
    );
    // Six threads' lanes, and every other line, fit a 120-column terminal.
    for l in story.lines() {
        assert!(
            l.chars().count() <= 120,
            "{} columns: {l}",
            l.chars().count()
        );
    }
    assert!(svg.starts_with("<svg") && svg.contains("thread 2") && svg.contains("forks"));
}

#[test]
fn show_names_the_accounts_threads_and_source_lines_of_the_bank_transfer_cycle() {
    let dir = tempfile::tempdir().unwrap();
    let found = check_rwd(dir.path(), "bank-transfer", "random", 100);
    let (story, svg) = show(&found);
    assert!(story.contains("wait-for cycle of 2 threads"), "{story}");
    assert!(story.contains("waits for accounts"), "{story}");
    assert!(story.contains("transfer (bank-transfer.c:"), "{story}");
    assert!(
        story.contains("thread 2") && story.contains("thread 3"),
        "{story}"
    );
    assert!(svg.contains("accounts"));
}

#[test]
fn a_replay_that_parts_from_the_recording_names_the_first_different_step() {
    let dir = tempfile::tempdir().unwrap();
    let found = check_rwd(dir.path(), "bank-transfer", "random", 100);
    let mut r = Rwd::load(&found).unwrap();
    let last = r
        .schedule
        .decisions
        .pop()
        .expect("the failure needs a decision");
    let tampered = dir.path().join("tampered.rwd");
    r.save(&tampered).unwrap();
    let out = cli().arg("replay").arg(&tampered).output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains(&format!(
            "the run parted from the recording at step {}",
            last.0 + 1
        )),
        "{err}"
    );
    assert!(
        err.contains("expected [") && err.contains("got      ["),
        "{err}"
    );
}

/// Runs a command on a bad file: exit code 2, one line, no panic.
fn refused(what: &str, args: &[&str], file: &Path) {
    let out = cli().args(args).arg(file).output().unwrap();
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{what}: {err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{what}: {err}");
    assert!(!err.contains("panicked"), "{what}: {err}");
    assert!(err.starts_with("rewind-fuzz: "), "{what}: {err}");
}

#[test]
fn the_decoder_rejects_each_kind_of_bad_file_with_exit_code_2() {
    let dir = tempfile::tempdir().unwrap();
    let found = check_rwd(dir.path(), "bank-transfer", "random", 100);
    let good = std::fs::read(&found).unwrap();
    let write = |name: &str, bytes: &[u8]| {
        let p = dir.path().join(name);
        std::fs::write(&p, bytes).unwrap();
        p
    };
    let mut cases: Vec<(&str, PathBuf)> = vec![
        ("missing", dir.path().join("no-such.rwd")),
        ("empty", write("empty.rwd", b"")),
        ("truncated header", write("short.rwd", &good[..10])),
        ("truncated", write("half.rwd", &good[..good.len() / 2])),
        ("not a reproducer", write("text.rwd", b"hello, world\n")),
    ];
    let mut corrupt = good.clone();
    let mid = corrupt.len() / 2;
    corrupt[mid] ^= 0x5a;
    cases.push(("corrupted", write("corrupt.rwd", &corrupt)));
    let mut magic = good.clone();
    magic[..4].copy_from_slice(b"ELF\x7f");
    cases.push(("wrong magic", write("magic.rwd", &magic)));
    let mut future = good.clone();
    future[4..8].copy_from_slice(&999u32.to_le_bytes());
    cases.push(("future version", write("future.rwd", &future)));
    let mut huge = good.clone();
    huge[8..16].copy_from_slice(&(1u64 << 62).to_le_bytes());
    cases.push(("huge length", write("huge.rwd", &huge)));
    // Hostile contents with a valid frame: the reader checks what it holds.
    let r = Rwd::load(&found).unwrap();
    let mut traversal = r.clone();
    traversal.files[0].path = "/tmp/../../etc/shadow".into();
    cases.push((
        "path traversal",
        write("traversal.rwd", &traversal.encode()),
    ));
    let mut relative = r.clone();
    relative.target.exe = "../../bin/sh".into();
    cases.push((
        "relative program",
        write("relative.rwd", &relative.encode()),
    ));
    let mut swapped = r.clone();
    swapped.blobs[0].data[0] ^= 1;
    cases.push(("wrong content hash", write("hash.rwd", &swapped.encode())));

    for (what, file) in &cases {
        refused(what, &["replay"], file);
    }
    refused("show", &["show"], &dir.path().join("corrupt.rwd"));
    let min = dir.path().join("min.rwd");
    refused(
        "minimize",
        &["minimize", "-o", min.to_str().unwrap()],
        &dir.path().join("future.rwd"),
    );
    assert!(!min.exists());
    let out = cli()
        .arg("replay")
        .arg(dir.path().join("future.rwd"))
        .output()
        .unwrap();
    assert!(
        stderr(&out).contains("format version 999"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn the_format_document_names_the_versions_this_build_reads_and_writes() {
    let doc = include_str!("../docs/rwd-format.md");
    let v = rewind_fuzz::rwd::format::VERSION;
    let title = doc.lines().next().unwrap();
    assert_eq!(
        title,
        format!("# The `.rwd` reproducer format, versions 1 to {v}")
    );
    assert!(
        doc.contains(&format!("1 to {v} (written: {v})")),
        "the header table names version {v}"
    );
    assert!(doc.contains(&format!("(today: 1 to {v})")));
    assert!(doc.contains(&format!("Every file is written as version {v}.")));
}

#[test]
fn older_reproducers_and_schedules_replay_with_polls_taken_up_after_any_activity() {
    require_kvm();
    let dir = tempfile::tempdir().unwrap();
    let path = format!(
        "{}/benches/programs/many_waiters.c",
        env!("CARGO_MANIFEST_DIR")
    );
    let source = std::fs::read_to_string(path).unwrap();
    let exe = common::build_c_with(dir.path(), "many_waiters", &source, &["-pthread"]);
    // Six threads poll pipes of their own while the main thread passes
    // bytes through another: format 7 took every poll up again after each
    // of those bytes, format 8 takes none. A random walk runs the polls
    // taken up.
    let record = |any_activity: bool| {
        let mut c = common::config(&exe, &["poll", "6", "30"]);
        c.kernel.polls_retry_on_any_activity = any_activity;
        if any_activity {
            // Format 7's step rules too: ticks came with format 9.
            c.kernel.step_rules = rewind_fuzz::code::StepRules::Format7;
        }
        let source = rewind_fuzz::kernel::vfs::FileSource::host;
        let mut vm = rewind_fuzz::engine::Vm::new(&c, source()).unwrap();
        vm.set_strategy(Box::new(rewind_fuzz::sched::RandomWalk::new(1)));
        let walk = vm.run().unwrap();
        rwd::record(&c, source(), &walk.schedule).unwrap()
    };
    let (now, new_report) = record(false);
    let (old, old_report) = record(true);
    assert!(
        old_report.steps > new_report.steps,
        "{} steps then, {} now",
        old_report.steps,
        new_report.steps
    );
    // The older file: the same payload without its last two fields,
    // framed as version 7.
    let file = old.encode();
    let mut payload = zstd::decode_all(&file[16..]).unwrap();
    let ok_codes = payload.split_off(payload.len() - 2);
    assert_eq!(ok_codes, [1, 0], "exit code 0 the only success");
    assert_eq!(payload.pop(), Some(0), "polls taken up after any activity");
    let mut v7 = b"RWD\0".to_vec();
    v7.extend_from_slice(&7u32.to_le_bytes());
    v7.extend_from_slice(&(payload.len() as u64).to_le_bytes());
    v7.extend(zstd::encode_all(&payload[..], 3).unwrap());
    let (v7_path, v8_path) = (dir.path().join("v7.rwd"), dir.path().join("v8.rwd"));
    std::fs::write(&v7_path, v7).unwrap();
    now.save(&v8_path).unwrap();
    for (file, report) in [(&v7_path, &old_report), (&v8_path, &new_report)] {
        let out = cli().arg("replay").arg(file).output().unwrap();
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(0), "{err}");
        assert!(err.contains("as recorded"), "{err}");
        assert!(err.contains(&report.trace_hash), "{err}");
    }
    // Their schedules, replayed by `run`: version 3 as it was made.
    assert_eq!(old.schedule().version, 3);
    assert_eq!(now.schedule().version, rewind_fuzz::sched::SCHEDULE_VERSION);
    for (made, report) in [(&old, &old_report), (&now, &new_report)] {
        let file = dir
            .path()
            .join(format!("v{}.json", made.schedule().version));
        made.schedule().save(&file).unwrap();
        let out = cli()
            .args(["run", "--json", "--target"])
            .arg(&exe)
            .arg("--schedule")
            .arg(&file)
            .args(["--", "poll", "6", "30"])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(v["steps"], report.steps.0, "{}", file.display());
    }
}

/// The rows of the lanes in a story: `(step, preempted after it, text)`.
fn lane_rows(story: &str) -> Vec<(u64, bool, String)> {
    story
        .split("THE STEPS THAT MATTER")
        .nth(1)
        .unwrap_or_else(|| panic!("no lanes: {story}"))
        .lines()
        .take_while(|l| !l.is_empty())
        .filter_map(|l| {
            let (head, rest) = l.split_once('|')?;
            let preempted = head.trim_start().starts_with(">>");
            let step = head.trim().trim_start_matches(">>").trim().parse().ok()?;
            Some((step, preempted, rest.to_string()))
        })
        .collect()
}

#[test]
fn show_centres_its_lanes_on_the_preemptions_and_keeps_every_line_within_120_columns() {
    let dir = tempfile::tempdir().unwrap();
    let found = check_rwd(dir.path(), "philosophers", "random", 60);
    let min = dir.path().join("min.rwd");
    minimize(&found, &min);
    for file in [&found, &min] {
        let (story, _) = show(file);
        for l in story.lines() {
            assert!(
                l.chars().count() <= 120,
                "{} columns: {l}",
                l.chars().count()
            );
        }
        // The preemptions the schedule lists, the last ones at least, are
        // rows of the lanes, marked.
        let decisions: Vec<u64> = story
            .lines()
            .filter_map(|l| l.trim().strip_prefix("after step "))
            .filter_map(|l| l.split(':').next()?.parse().ok())
            .collect();
        assert!(!decisions.is_empty(), "{story}");
        let rows = lane_rows(&story);
        let marked: Vec<u64> = rows.iter().filter(|r| r.1).map(|r| r.0).collect();
        for d in decisions.iter().rev().take(4) {
            assert!(
                marked.contains(d),
                "the preemption after step {d} is not in the lanes:\n{story}"
            );
        }
        // And so is the end.
        let last: u64 = story
            .lines()
            .find_map(|l| {
                l.split(" steps, trace ")
                    .next()?
                    .rsplit('(')
                    .next()?
                    .parse()
                    .ok()
            })
            .unwrap();
        assert!(
            rows.iter().any(|r| r.0 == last),
            "step {last} is not in the lanes:\n{story}"
        );
    }
}

#[test]
fn show_folds_spins_and_names_rust_code_and_data_as_the_source_spells_them() {
    let dir = tempfile::tempdir().unwrap();
    let found = check_rwd(dir.path(), "rust-mutex-inversion", "random", 100);
    let min = dir.path().join("min.rwd");
    minimize(&found, &min);
    let (story, _) = show(&min);
    assert!(
        !story.contains("_RNv") && !story.contains("_ZN"),
        "mangled names:\n{story}"
    );
    let rows = lane_rows(&story);
    // The threads spun for each other's locks until the step budget: the
    // spin shows as a few rows, folded, not as the tens of steps it took.
    assert!(story.contains("spin rust-mutex-inversion.rs:"), "{story}");
    let spins = rows.iter().filter(|r| r.2.contains("spin ")).count();
    assert!(spins <= 4, "{spins} spin rows:\n{story}");
    assert!(
        story.contains("steps above again") || story.contains(" ×"),
        "{story}"
    );
    for l in story.lines() {
        assert!(
            l.chars().count() <= 120,
            "{} columns: {l}",
            l.chars().count()
        );
    }
}

/// The texts of an SVG picture and whether each fits its width: `(x, font
/// size, text)`.
fn svg_texts(svg: &str) -> (f64, Vec<(f64, f64, String)>) {
    let attr = |tag: &str, name: &str| -> Option<f64> {
        tag.split(&format!(" {name}=\""))
            .nth(1)?
            .split('"')
            .next()?
            .parse()
            .ok()
    };
    let width = attr(svg.lines().next().unwrap(), "width").unwrap();
    let texts = svg
        .split("<text")
        .skip(1)
        .map(|t| {
            let (tag, rest) = t.split_once('>').unwrap();
            let content = rest.split("</text>").next().unwrap();
            let content = content
                .replace("&lt;", "<")
                .replace("&gt;", ">")
                .replace("&amp;", "&");
            (
                attr(tag, "x").unwrap(),
                attr(tag, "font-size").unwrap_or(12.0),
                content,
            )
        })
        .collect();
    (width, texts)
}

#[test]
fn the_picture_marks_the_faulting_thread_and_step_and_fits_its_legend() {
    require_kvm();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("crash.rwd");
    let out = cli()
        .args(["run", "--target"])
        .arg(harness("null-deref"))
        .arg("--save-rwd")
        .arg(&file)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let (story, svg) = show(&file);
    // The text marks the fault in the crashing thread's lane.
    assert!(story.contains("!! SIGSEGV"), "{story}");
    assert!(svg.contains("(faulted)"), "{svg}");
    assert!(svg.contains("✖ SIGSEGV"), "{svg}");
    let (width, texts) = svg_texts(&svg);
    for (x, size, text) in &texts {
        let right = x + 0.6 * size * text.chars().count() as f64;
        assert!(
            right <= width,
            "{text:?} ends at {right} in a picture {width} wide"
        );
    }
    for meaning in ["takes or waits for a lock", "another system call or step"] {
        assert!(
            texts.iter().any(|t| t.2 == meaning),
            "{meaning} is not in the legend"
        );
    }
}
