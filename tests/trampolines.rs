//! Sync sites patched with jumps to trampolines: the program computes what
//! it computes natively, whatever jumps into the code a patch covers,
//! whatever unwinds through patched frames, and wherever the program maps
//! its own memory; and the runs equal those with breakpoints and with an
//! exit per site.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::config;
use rewind_fuzz::code::SyncPoints;
use rewind_fuzz::engine::{RunReport, SnapshotAt, Vm};
use rewind_fuzz::kernel::vfs::FileSource;
use rewind_fuzz::observe::trace::Operation;
use rewind_fuzz::sched::{Pct, Replay, Strategy, StrategyKind};

/// How sync sites reach the monitor (see `tests/hint_ring.rs`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Path3 {
    Jumps,
    Breakpoints,
    Exits,
}

fn run(exe: &Path, args: &[&str], path: Path3, strategy: Box<dyn Strategy>) -> RunReport {
    common::require_kvm();
    let mut c = config(exe, args);
    c.kernel.sync_points = SyncPoints::Atomics;
    c.hint_ring = path != Path3::Exits;
    c.site_jumps = path == Path3::Jumps;
    c.snapshot_at = SnapshotAt::Never;
    let mut vm = Vm::new(&c, FileSource::host()).unwrap();
    vm.set_strategy(strategy);
    vm.record_events();
    vm.run().unwrap()
}

/// Runs `exe` natively and under every path and strategy: stdout as
/// native (`lines` of it compared, all when `None`), and every path's run
/// the same.
fn same_as_natively_on_every_path(exe: &Path, args: &[&str], lines: Option<&dyn Fn(&str) -> bool>) {
    let native = Command::new(exe).args(args).output().unwrap();
    // Sorted: threads (libtest's) print in the order the host runs them.
    let keep = |s: &str| -> String {
        let mut kept: Vec<&str> = s.lines().filter(|l| lines.is_none_or(|f| f(l))).collect();
        kept.sort();
        kept.join("\n")
    };
    let native = keep(&String::from_utf8_lossy(&native.stdout));
    assert!(!native.is_empty(), "{exe:?} printed nothing natively");
    for seed in 0..2 {
        for (sname, make) in common::strategies(seed, 300) {
            let exits = run(exe, args, Path3::Exits, make());
            let out = keep(&String::from_utf8_lossy(&exits.stdout));
            assert_eq!(out, native, "{exe:?} {sname} seed {seed}");
            for path in [Path3::Jumps, Path3::Breakpoints] {
                let r = run(exe, args, path, make());
                let what = format!("{exe:?} {sname} seed {seed} {path:?}");
                assert_eq!(r.trace_hash, exits.trace_hash, "{what}");
                assert_eq!(r.outcome, exits.outcome, "{what}");
                assert_eq!(r.stdout, exits.stdout, "{what}");
                assert_eq!(r.schedule, exits.schedule, "{what}");
            }
        }
    }
}

fn build(
    dir: &Path,
    compiler: &str,
    name: &str,
    ext: &str,
    source: &str,
    flags: &[&str],
) -> PathBuf {
    let src = dir.join(format!("{name}.{ext}"));
    std::fs::write(&src, source).unwrap();
    let exe = dir.join(name);
    let out = Command::new(compiler)
        .arg(&src)
        .arg("-o")
        .arg(&exe)
        .args(flags)
        .output()
        .unwrap_or_else(|e| panic!("{compiler} is needed for this test ({e}): install it"));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    exe
}

const SWITCH: &str = r#"
#include <stdio.h>
#include <stdlib.h>
static int counter;
/* Case 1 begins right after case 0's four-byte atomic (gcc -O2 lays them
   out so): the switch's table jumps into what the atomic's jump moved. */
__attribute__((noinline)) int step(int *p, int sel) {
    int y = 0;
    switch (sel) {
    case 0: __atomic_add_fetch(p, 1, __ATOMIC_SEQ_CST); /* fallthrough */
    case 1: y += 3; break;
    case 2: y += 5; __atomic_add_fetch(p, 2, __ATOMIC_SEQ_CST); break;
    case 3: y -= 7; break;
    case 4: y ^= 11; break;
    case 5: y += 13; break;
    default: y = -1;
    }
    return y;
}
int main(int argc, char **argv) {
    long sum = 0;
    int n = argc > 1 ? atoi(argv[1]) : 1000;
    for (int i = 0; i < n; i++) sum += step(&counter, i % 7);
    printf("%ld %d\n", sum, counter);
    return 0;
}
"#;

/// A `switch`'s jump table, which no decoder follows, jumps into the
/// instruction a site's jump moved to its trampoline: the byte there traps
/// and the thread runs the moved instruction's copy.
#[test]
fn a_jump_the_decoder_cannot_see_into_a_moved_instruction_runs_its_copy() {
    let dir = tempfile::tempdir().unwrap();
    let exe = build(dir.path(), "gcc", "switch", "c", SWITCH, &["-O2"]);
    // The table's target for case 1 is the instruction after the atomic.
    let data = std::fs::read(&exe).unwrap();
    let table = rewind_fuzz::code::sites::discover(&data, SyncPoints::Atomics);
    let moved_target = table
        .trampolines
        .jumps()
        .any(|(_, j)| j.copies.len() > 1 && j.site + 4 == j.copies[1].1);
    assert!(moved_target, "no four-byte atomic moved its successor");
    same_as_natively_on_every_path(&exe, &["700"], None);
}

const CPP_EXCEPTIONS: &str = r#"
#include <atomic>
#include <cstdio>
#include <stdexcept>
#include <thread>
/* Short atomics through a reference: their jumps move the instructions
   after them, in every frame an exception unwinds through. */
__attribute__((noinline)) int thrower(std::atomic<int> &c, int depth) {
    c.fetch_add(1);
    if (depth == 0) throw std::runtime_error("deep");
    int r = thrower(c, depth - 1);
    c.fetch_add(r);
    return r;
}
int main() {
    std::atomic<int> counter{0}, caught{0};
    auto rounds = [&](int n, int depth) {
        for (int i = 0; i < n; i++) {
            try { thrower(counter, depth); } catch (const std::exception &e) { caught.fetch_add(1); }
        }
    };
    std::thread t(rounds, 40, 3);
    rounds(40, 5);
    t.join();
    std::printf("caught %d counter %d\n", caught.load(), counter.load());
}
"#;

/// A C++ exception thrown and caught across frames whose sites jump to
/// trampolines unwinds as natively, in two threads.
#[test]
fn a_cpp_exception_unwinds_through_patched_frames() {
    let dir = tempfile::tempdir().unwrap();
    let exe = build(
        dir.path(),
        "g++",
        "exceptions",
        "cpp",
        CPP_EXCEPTIONS,
        &["-O2", "-pthread"],
    );
    same_as_natively_on_every_path(&exe, &[], None);
}

const RUST_PANICS: &str = r#"
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

#[inline(never)]
fn deep(n: usize, hits: &AtomicUsize, m: &Mutex<Vec<usize>>) -> usize {
    hits.fetch_add(1, Ordering::SeqCst);
    m.lock().unwrap().push(n);
    if n == 0 {
        panic!("bottom");
    }
    deep(n - 1, hits, m) + hits.fetch_add(1, Ordering::SeqCst)
}

fn main() {
    std::panic::set_hook(Box::new(|_| {}));
    let hits = Arc::new(AtomicUsize::new(0));
    let m = Arc::new(Mutex::new(Vec::new()));
    let workers: Vec<_> = (0..2)
        .map(|t| {
            let (hits, m) = (hits.clone(), m.clone());
            std::thread::spawn(move || {
                (0..20)
                    .filter(|_| std::panic::catch_unwind(|| deep(3 + t, &hits, &m)).is_err())
                    .count()
            })
        })
        .collect();
    let caught: usize = workers.into_iter().map(|w| w.join().unwrap()).sum();
    let len = m.lock().map(|v| v.len()).unwrap_or_else(|p| p.into_inner().len());
    println!("caught {caught} hits {} pushed {len}", hits.load(Ordering::SeqCst));
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    #[test]
    #[should_panic(expected = "bottom")]
    fn a_panic_libtest_catches() {
        let hits = AtomicUsize::new(0);
        super::deep(4, &hits, &std::sync::Mutex::new(Vec::new()));
    }
    #[test]
    fn a_test_that_passes() {
        let hits = AtomicUsize::new(0);
        assert!(std::panic::catch_unwind(|| super::deep(2, &hits, &std::sync::Mutex::new(Vec::new()))).is_err());
        assert_eq!(hits.load(Ordering::SeqCst), 3);
    }
}
"#;

/// A Rust panic unwinds through frames whose sites jump to trampolines:
/// caught by `catch_unwind` in two threads, and by libtest for a test
/// that should panic.
#[test]
fn a_rust_panic_unwinds_through_patched_frames_and_libtest_catches_it() {
    let dir = tempfile::tempdir().unwrap();
    let exe = build(dir.path(), "rustc", "panics", "rs", RUST_PANICS, &["-O"]);
    same_as_natively_on_every_path(&exe, &[], None);
    let tests = build(
        dir.path(),
        "rustc",
        "panics_test",
        "rs",
        RUST_PANICS,
        &["-O", "--test"],
    );
    // libtest's summary, its timing aside.
    let summary = |l: &str| l.starts_with("test ") && !l.contains("finished in");
    same_as_natively_on_every_path(&tests, &["--test-threads=2"], Some(&summary));
}

const MAPS_OVER_TRAMPOLINES: &str = r#"
#define _GNU_SOURCE
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
static long counter;
__attribute__((noinline)) void bump(long *p, long by) { __atomic_add_fetch(p, by, __ATOMIC_SEQ_CST); }
int main(void) {
    for (int i = 0; i < 100; i++) bump(&counter, 1);
    /* Where a position-independent object's trampolines lie: 820 to 836
       MiB below its code. Nothing is there for the program: it may map
       there, with or without replacing. */
    unsigned long code = (unsigned long)&bump & ~0xfffUL;
    unsigned long lo = code - 0x35000000UL, mid = code - 0x33800000UL, hi = code - 0x32000000UL;
    char *a = mmap((void *)lo, mid - lo, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
    char *b = mmap((void *)mid, hi - mid, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
    printf("noreplace %s fixed %s\n", a == (char *)lo ? "placed" : "refused",
           b == (char *)mid ? "placed" : "refused");
    memset(a, 0x5a, mid - lo);
    memset(b, 0xa5, hi - mid);
    for (int i = 0; i < 100; i++) bump(&counter, 2);
    /* Its code, read through the kernel, is the compiler's. */
    unsigned char bytes[32];
    int fd[2];
    if (pipe(fd) == 0 && write(fd[1], (void *)&bump, sizeof bytes) == sizeof bytes &&
        read(fd[0], bytes, sizeof bytes) == sizeof bytes) {
        for (int i = 0; i < (int)sizeof bytes; i++) printf("%02x", bytes[i]);
        printf("\n");
    }
    printf("counter %ld\n", counter);
    return 0;
}
"#;

/// The program maps over where its trampolines lie (they are not its, so
/// `MAP_FIXED_NOREPLACE` succeeds as natively): the sites go back to
/// breakpoints, and the run goes on computing what it computes natively.
/// Its code, read through the kernel, reads as compiled.
#[test]
fn a_program_mapping_over_its_trampolines_takes_their_place() {
    let dir = tempfile::tempdir().unwrap();
    let exe = build(
        dir.path(),
        "gcc",
        "maps_over",
        "c",
        MAPS_OVER_TRAMPOLINES,
        &["-O1"],
    );
    same_as_natively_on_every_path(&exe, &[], None);
    let r = run(&exe, &[], Path3::Jumps, StrategyKind::Default.build(0, 0));
    let out = String::from_utf8_lossy(&r.stdout);
    assert!(out.contains("noreplace placed fixed placed"), "{out}");
    assert!(out.contains("counter 300"), "{out}");
}

/// Two threads sending numbers over std's channel (`tests/programs`).
const CHANNELS: &str = include_str!("programs/mpsc_sum.rs");

/// The sync-site steps of an atomics-heavy program (two threads sending
/// 5,000 messages each over std's channel) leave the guest at most once
/// in fifty under the default strategy, PCT and the replay of PCT's
/// schedule.
#[test]
fn at_most_one_sync_site_step_in_fifty_leaves_the_guest() {
    let dir = tempfile::tempdir().unwrap();
    let exe = build(dir.path(), "rustc", "channels", "rs", CHANNELS, &["-O"]);
    let site_steps = |r: &RunReport| {
        r.events
            .as_ref()
            .expect("events recorded")
            .iter()
            .filter(|e| matches!(e.op, Operation::Sync { .. }))
            .count() as u64
    };
    let pct = run(
        &exe,
        &["5000"],
        Path3::Jumps,
        Box::new(Pct::new(3, 40_000, 7)),
    );
    let runs = [
        (
            "default",
            run(
                &exe,
                &["5000"],
                Path3::Jumps,
                StrategyKind::Default.build(0, 0),
            ),
        ),
        (
            "replay",
            run(
                &exe,
                &["5000"],
                Path3::Jumps,
                Box::new(Replay::new(pct.schedule.clone())),
            ),
        ),
        ("pct:3", pct),
    ];
    let native = Command::new(&exe).arg("5000").output().unwrap().stdout;
    for (name, r) in runs {
        assert_eq!(r.stdout, native, "{name}");
        let sites = site_steps(&r);
        assert!(sites > 20_000, "{name}: {sites} site steps");
        assert!(
            r.buffered_sites * 50 >= sites * 49,
            "{name}: {} of {sites} site steps without an exit",
            r.buffered_sites
        );
    }
}
