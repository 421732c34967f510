//! A program for the process tests: a tokio multi-threaded runtime whose
//! tasks sleep, pass messages and run child processes, and a plain
//! `std::process::Command` pipeline. Prints what it saw; exits non-zero on
//! any surprise.

use std::process::{Command, Stdio};
use std::time::Duration;

fn std_commands() {
    let out = Command::new("echo")
        .arg("from a child")
        .output()
        .expect("run echo");
    assert!(out.status.success());
    print!("echo said: {}", String::from_utf8_lossy(&out.stdout));
    let status = Command::new("sh")
        .args(["-c", "exit 7"])
        .status()
        .expect("run sh");
    println!("sh exited with {:?}", status.code());
    let mut sort = Command::new("sort")
        .arg("-r")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("run sort");
    use std::io::Write;
    sort.stdin
        .take()
        .expect("stdin")
        .write_all(b"a\nc\nb\n")
        .expect("write to sort");
    let sorted = sort.wait_with_output().expect("sort's output");
    println!("sorted: {:?}", String::from_utf8_lossy(&sorted.stdout));
}

async fn tokio_tasks() {
    let (tx, mut rx) = tokio::sync::mpsc::channel(8);
    for i in 0..4u64 {
        let tx = tx.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(5 * (4 - i))).await;
            tx.send(i).await.expect("send");
        });
    }
    drop(tx);
    let mut sum = 0;
    while let Some(v) = rx.recv().await {
        sum += v;
    }
    println!("tasks summed to {sum}");
    let out = tokio::process::Command::new("sh")
        .args(["-c", "echo async child; exit 3"])
        .output()
        .await
        .expect("run an async child");
    println!(
        "tokio child said: {}exit {:?}",
        String::from_utf8_lossy(&out.stdout),
        out.status.code()
    );
}

fn main() {
    std_commands();
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(3)
        .enable_all()
        .build()
        .expect("a runtime")
        .block_on(tokio_tasks());
}
