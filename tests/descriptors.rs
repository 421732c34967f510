//! Descriptors and timers against the same programs run natively: timers
//! on virtual time (alarm, interval and POSIX timers, timerfd), signalfd,
//! select, unix and loopback TCP sockets between threads and processes,
//! and pseudoterminals.

mod common;

use std::process::Command;

use common::cli;

/// Builds `tests/programs/NAME.c`, runs it natively and three times in
/// the machine: the same stdout every time, and one trace hash.
fn prints_what_it_prints_natively(name: &str) {
    common::require_kvm();
    let dir = tempfile::tempdir().unwrap();
    let path = format!("{}/tests/programs/{name}.c", env!("CARGO_MANIFEST_DIR"));
    let source = std::fs::read_to_string(path).unwrap();
    let exe = common::build_c_with(dir.path(), name, &source, &["-pthread"]);
    let native = Command::new(&exe).output().unwrap();
    assert!(native.status.success(), "{name} natively");
    let mut hashes = Vec::new();
    for _ in 0..3 {
        let out = cli().args(["run", "--target"]).arg(&exe).output().unwrap();
        let said = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{said}");
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&native.stdout),
            "{name}"
        );
        hashes.push(said.rsplit("trace ").next().unwrap().to_string());
    }
    assert!(hashes.windows(2).all(|w| w[0] == w[1]), "{hashes:?}");
}

#[test]
fn timers_signal_descriptors_and_select_do_what_they_do_natively() {
    prints_what_it_prints_natively("timers");
}

#[test]
fn unix_and_loopback_tcp_sockets_connect_a_process_and_a_thread_as_natively() {
    prints_what_it_prints_natively("sockets");
}

#[test]
fn unix_and_udp_datagrams_and_sendmsg_recvmsg_do_what_they_do_natively() {
    prints_what_it_prints_natively("datagrams");
}

#[test]
fn a_pseudoterminal_pair_does_what_it_does_natively() {
    prints_what_it_prints_natively("ptys");
}

#[test]
fn edge_triggered_epoll_reports_again_only_what_changed() {
    prints_what_it_prints_natively("epoll_edges");
}

#[test]
fn a_polls_timeout_is_kept_while_other_threads_pipes_are_busy() {
    common::require_kvm();
    let dir = tempfile::tempdir().unwrap();
    let path = format!(
        "{}/tests/programs/poll_timeout_busy.c",
        env!("CARGO_MANIFEST_DIR")
    );
    let source = std::fs::read_to_string(path).unwrap();
    let exe = common::build_c_with(dir.path(), "poll_timeout_busy", &source, &["-pthread"]);
    // Under every strategy: the poll waits on its own pipe only, so the
    // others' traffic neither wakes it nor starts its timeout again.
    for strategy in ["pct:3", "random", "pos"] {
        let out = cli()
            .args(["run", "--strategy", strategy, "--target"])
            .arg(&exe)
            .output()
            .unwrap();
        let said = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{strategy}: {said}");
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            "poll returned 0 within 50 ms\n",
            "{strategy}: {said}"
        );
    }
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
