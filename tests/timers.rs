//! Timers on virtual time (alarm, interval and POSIX timers, timerfd),
//! signalfd and select, against the same program run natively.

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
