//! Output oracles: judging a run by what it printed, for bugs whose symptom
//! is a wrong result rather than a crash or a deadlock.
//!
//! An oracle judges every run that exits (whatever its code); a run it
//! rejects ends as [`Outcome::WrongOutput`](super::outcome::Outcome), an
//! outcome kind of its own. A reproducer keeps its oracle, so a replay
//! judges the same way.

use std::io::{Read, Write};
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use wait_timeout::ChildExt;

/// How long an oracle command may take before its verdict is "wrong".
const COMMAND_TIMEOUT: Duration = Duration::from_secs(60);

/// A judgment of a run's stdout.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Oracle {
    /// The stdout must be exactly these bytes (`--expect-stdout FILE`).
    Stdout(Vec<u8>),
    /// A host command (run with `sh -c`) reads the stdout on its stdin and
    /// exits non-zero for a wrong result (`--oracle CMD`).
    Command(String),
}

impl Oracle {
    /// How the user asked for it, for reports.
    pub fn describe(&self) -> String {
        match self {
            Oracle::Stdout(_) => "--expect-stdout".into(),
            Oracle::Command(c) => format!("--oracle {c:?}"),
        }
    }

    /// `None` when `stdout` is right; otherwise one line on what is wrong.
    pub fn judge(&self, stdout: &[u8]) -> Option<String> {
        match self {
            Oracle::Stdout(want) => first_difference(want, stdout),
            Oracle::Command(cmd) => run_command(cmd, stdout),
        }
    }
}

/// The first line where `got` differs from `want`, quoted, or `None` when
/// they are equal.
pub fn first_difference(want: &[u8], got: &[u8]) -> Option<String> {
    if want == got {
        return None;
    }
    let quote = |l: Option<&[u8]>| match l {
        Some(l) => format!("{:?}", String::from_utf8_lossy(l)),
        None => "nothing".to_string(),
    };
    let mut w = want.split_inclusive(|&b| b == b'\n');
    let mut g = got.split_inclusive(|&b| b == b'\n');
    let mut line = 1;
    loop {
        let (a, b) = (w.next(), g.next());
        if a != b {
            return Some(format!(
                "stdout line {line}: expected {}, got {}",
                quote(a),
                quote(b)
            ));
        }
        line += 1;
    }
}

/// Reads `pipe` to its end on a thread; its first non-blank line.
fn first_line(pipe: impl Read + Send + 'static) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut first = String::new();
        let mut line = Vec::new();
        let mut pipe = std::io::BufReader::new(pipe);
        while let Ok(n) = std::io::BufRead::read_until(&mut pipe, b'\n', &mut line) {
            if n == 0 {
                break;
            }
            let text = String::from_utf8_lossy(&line);
            if first.is_empty() && !text.trim().is_empty() {
                first = text.trim().chars().take(400).collect();
            }
            line.clear();
        }
        first
    })
}

/// Puts the oracle's process back in the state of a process the user
/// started. Judging happens on the thread that runs the guest, which makes
/// `rdtsc` fault (`PR_SET_TSC`); the kernel keeps that across `fork` and
/// `execve`, and the command's dynamic loader would die of it. Nothing
/// else of the monitor's carries over: its signal handlers end at
/// `execve`, `Command` puts back `SIGPIPE`, its threads block no signals,
/// and its files (KVM's included) are close-on-exec.
fn host_process_state() -> std::io::Result<()> {
    // SAFETY: prctl with integer arguments changes only this process's
    // TSC-access flag.
    let r = unsafe { libc::prctl(libc::PR_SET_TSC, libc::PR_TSC_ENABLE, 0, 0, 0) };
    if r != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Runs oracle command `cmd` on `stdout`: `None` when it exits 0, otherwise
/// what it said (its first line of output) or how it ended.
fn run_command(cmd: &str, stdout: &[u8]) -> Option<String> {
    let mut command = Command::new("sh");
    command
        .arg("-c")
        .arg(cmd)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // SAFETY: the closure runs in the forked child before exec and makes
    // only prctl, which is async-signal-safe, allocating nothing.
    unsafe { command.pre_exec(host_process_state) };
    let spawned = command.spawn();
    let mut child = match spawned {
        Ok(c) => c,
        Err(e) => return Some(format!("the oracle command could not start: {e}")),
    };
    // Fed and drained from threads, so an oracle that stops reading early
    // or says a lot cannot block us, nor we it.
    let mut stdin = child.stdin.take().expect("piped stdin");
    let input = stdout.to_vec();
    let feeder = std::thread::spawn(move || {
        let _ = stdin.write_all(&input);
    });
    let said_out = first_line(child.stdout.take().expect("piped stdout"));
    let said_err = first_line(child.stderr.take().expect("piped stderr"));
    let status = match child.wait_timeout(COMMAND_TIMEOUT) {
        Ok(Some(s)) => s,
        Ok(None) => {
            let _ = child.kill();
            let _ = child.wait();
            return Some(format!(
                "the oracle command ran longer than {} s",
                COMMAND_TIMEOUT.as_secs()
            ));
        }
        Err(e) => return Some(format!("waiting for the oracle command: {e}")),
    };
    let _ = feeder.join();
    let said_out = said_out.join().unwrap_or_default();
    let said_err = said_err.join().unwrap_or_default();
    if status.success() {
        return None;
    }
    let said = if said_out.is_empty() {
        said_err
    } else {
        said_out
    };
    let how = match status.code() {
        Some(c) => format!("the oracle command exited with {c}"),
        None => "the oracle command was killed by a signal".to_string(),
    };
    Some(if said.is_empty() {
        how
    } else {
        format!("{how}: {said}")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_output_passes() {
        assert_eq!(first_difference(b"a\nb\n", b"a\nb\n"), None);
    }

    #[test]
    fn the_first_differing_line_is_named() {
        let d = first_difference(b"sum = 10\nok\n", b"sum = 9\nok\n").unwrap();
        assert_eq!(
            d,
            r#"stdout line 1: expected "sum = 10\n", got "sum = 9\n""#
        );
        let d = first_difference(b"a\nb\n", b"a\n").unwrap();
        assert_eq!(d, r#"stdout line 2: expected "b\n", got nothing"#);
    }

    #[test]
    fn a_command_judges_by_its_exit_status() {
        let o = Oracle::Command("grep -q 'sum = 10'".into());
        assert_eq!(o.judge(b"sum = 10\n"), None);
        assert_eq!(
            o.judge(b"sum = 9\n").as_deref(),
            Some("the oracle command exited with 1")
        );
        let says = Oracle::Command("echo 'bad sum' >&2; exit 3".into());
        assert_eq!(
            says.judge(b"").as_deref(),
            Some("the oracle command exited with 3: bad sum")
        );
    }

    #[test]
    fn a_command_that_says_a_lot_is_not_stuck_on_its_pipe() {
        let o = Oracle::Command("yes wrong | head -c 1000000; exit 1".into());
        assert_eq!(
            o.judge(b"").as_deref(),
            Some("the oracle command exited with 1: wrong")
        );
    }

    #[test]
    fn a_command_that_reads_nothing_still_judges() {
        let o = Oracle::Command("exit 0".into());
        assert_eq!(o.judge(&vec![b'x'; 1 << 20]), None);
    }
}
