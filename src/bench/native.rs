//! The baseline: the buggy program run natively in a loop, as a stress test
//! would, counting the runs that fail.

use std::io;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::results::NativeLoop;

/// A run taking longer than this is stuck (natively a deadlock just hangs):
/// it is killed and counted as a failure. The programs take milliseconds.
pub const RUN_TIMEOUT: Duration = Duration::from_secs(3);

/// Runs `exe` with `args` again and again for `budget` (and at least once),
/// in a private working directory, and counts the failures: a non-zero
/// exit, a fatal signal, or a run killed after `timeout`.
pub fn stress(
    harness: &str,
    exe: &Path,
    args: &[String],
    budget: Duration,
    timeout: Duration,
) -> io::Result<NativeLoop> {
    let cwd = tempfile::tempdir()?;
    let start = Instant::now();
    let mut l = NativeLoop {
        harness: harness.to_string(),
        budget_s: budget.as_secs_f64(),
        seconds: 0.0,
        runs: 0,
        failures: 0,
        timeouts: 0,
        first_failure_run: None,
        first_failure_s: None,
    };
    while l.runs == 0 || start.elapsed() < budget {
        let (passed, timed_out) = run_once(exe, args, cwd.path(), timeout)?;
        l.runs += 1;
        if !passed {
            l.failures += 1;
            l.timeouts += u64::from(timed_out);
            if l.first_failure_run.is_none() {
                l.first_failure_run = Some(l.runs);
                l.first_failure_s = Some(start.elapsed().as_secs_f64());
            }
        }
    }
    l.seconds = start.elapsed().as_secs_f64();
    Ok(l)
}

/// One run: whether it exited 0, and whether it had to be killed.
fn run_once(
    exe: &Path,
    args: &[String],
    cwd: &Path,
    timeout: Duration,
) -> io::Result<(bool, bool)> {
    let mut child = Command::new(exe)
        .args(args)
        .current_dir(cwd)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()?;
    let deadline = Instant::now() + timeout;
    // Poll with a growing pause: a run takes about a millisecond, so the
    // first checks come quickly and a stuck run costs little.
    let mut pause = Duration::from_micros(50);
    loop {
        if let Some(status) = child.try_wait()? {
            return Ok((status.success(), false));
        }
        if Instant::now() >= deadline {
            // Only this child, through its own handle.
            child.kill()?;
            child.wait()?;
            return Ok((false, true));
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(2));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_loop_counts_failing_runs_and_the_first_one() {
        let fail = stress(
            "false",
            Path::new("/bin/false"),
            &[],
            Duration::from_millis(50),
            RUN_TIMEOUT,
        )
        .unwrap();
        assert!(fail.runs >= 1);
        assert_eq!(fail.failures, fail.runs);
        assert_eq!(fail.first_failure_run, Some(1));
        let pass = stress(
            "true",
            Path::new("/bin/true"),
            &[],
            Duration::ZERO,
            RUN_TIMEOUT,
        )
        .unwrap();
        assert_eq!((pass.runs, pass.failures), (1, 0), "at least one run");
        assert_eq!(pass.first_failure_run, None);
    }

    #[test]
    fn a_stuck_run_is_killed_and_counted_as_a_timeout() {
        let l = stress(
            "sleep",
            Path::new("/bin/sleep"),
            &["10".into()],
            Duration::ZERO,
            Duration::from_millis(100),
        )
        .unwrap();
        assert_eq!((l.runs, l.failures, l.timeouts), (1, 1, 1));
        assert!(l.seconds < 5.0);
    }
}
