//! Descriptors and timers against the same programs run natively: timers
//! on virtual time (alarm, interval and POSIX timers, timerfd), signalfd,
//! select, and unix and loopback TCP sockets between threads and processes.

mod common;

use std::process::Command;

use common::cli;

#[test]
fn timers_signal_descriptors_and_select_do_what_they_do_natively() {
    common::require_kvm();
    let dir = tempfile::tempdir().unwrap();
    let exe = dir.path().join("timers");
    let src = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/programs/timers.c");
    let out = Command::new("gcc")
        .args(["-O1", "-o"])
        .arg(&exe)
        .arg(src)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let native = Command::new(&exe).output().unwrap();
    assert!(native.status.success());
    let mut hashes = Vec::new();
    for _ in 0..3 {
        let out = cli().args(["run", "--target"]).arg(&exe).output().unwrap();
        let said = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{said}");
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&native.stdout)
        );
        hashes.push(said.rsplit("trace ").next().unwrap().to_string());
    }
    assert!(hashes.windows(2).all(|w| w[0] == w[1]), "{hashes:?}");
}

/// Builds `tests/programs/NAME.c` into `dir`.
fn build(dir: &std::path::Path, name: &str) -> std::path::PathBuf {
    let exe = dir.join(name);
    let src = format!("{}/tests/programs/{name}.c", env!("CARGO_MANIFEST_DIR"));
    let out = Command::new("gcc")
        .args(["-O1", "-pthread", "-o"])
        .arg(&exe)
        .arg(src)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    exe
}

#[test]
fn unix_and_loopback_tcp_sockets_connect_a_process_and_a_thread_as_natively() {
    common::require_kvm();
    let dir = tempfile::tempdir().unwrap();
    let exe = build(dir.path(), "sockets");
    let native = Command::new(&exe).output().unwrap();
    assert!(native.status.success());
    let out = cli().args(["run", "--target"]).arg(&exe).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(out.stdout, native.stdout);
}

#[test]
fn a_python_http_server_answers_urllib_over_loopback() {
    common::require_kvm();
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/programs/loopback_http.py"
    );
    let out = cli()
        .args(["run", "--target", "/usr/bin/python3", "--", script])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "200 hello over loopback\n"
    );
}

#[test]
fn unix_and_udp_datagrams_and_sendmsg_recvmsg_do_what_they_do_natively() {
    common::require_kvm();
    let dir = tempfile::tempdir().unwrap();
    let exe = build(dir.path(), "datagrams");
    let native = Command::new(&exe).output().unwrap();
    assert!(native.status.success());
    let out = cli().args(["run", "--target"]).arg(&exe).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&native.stdout)
    );
}
