//! Nodes: sessions joined over TCP (loopback here) pass each other corpus
//! entries and findings' signatures; a node of another target, or a peer
//! that speaks garbage, is refused and the session goes on.

mod common;

use std::collections::BTreeSet;

use common::names;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

fn stat(out: &Path, key: &str) -> u64 {
    let text = std::fs::read_to_string(out.join("fuzzer_stats")).unwrap_or_default();
    text.lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            (k.trim() == key).then(|| v.trim().parse().ok()).flatten()
        })
        .unwrap_or_else(|| panic!("no {key} in fuzzer_stats:\n{text}"))
}

fn findings(out: &Path) -> BTreeSet<String> {
    names(&out.join("findings"))
        .into_iter()
        .filter(|n| n.ends_with(".rwd"))
        .collect()
}

fn wait_until(what: &str, ready: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(600);
    while !ready() {
        assert!(Instant::now() < deadline, "{what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A session running in the background, its standard error collected.
struct Node {
    child: Child,
    err: Arc<Mutex<String>>,
    out: PathBuf,
}

impl Node {
    fn start(name: &str, target: &str, time: &str, out: PathBuf, extra: &[&str]) -> Node {
        common::require_kvm();
        let mut child = Command::new(env!("CARGO_BIN_EXE_rewind-fuzz"))
            .args(["fuzz", "--target", target, "--jobs", "1", "-q"])
            .args(["--time", time, "--sync-id", name, "-o"])
            .arg(&out)
            .args(extra)
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let err = Arc::new(Mutex::new(String::new()));
        let (stream, sink) = (child.stderr.take().unwrap(), err.clone());
        std::thread::spawn(move || {
            for line in BufReader::new(stream).lines().map_while(Result::ok) {
                let mut s = sink.lock().unwrap();
                s.push_str(&line);
                s.push('\n');
            }
        });
        Node { child, err, out }
    }

    fn said(&self) -> String {
        self.err.lock().unwrap().clone()
    }

    /// The address it listens on, once it says.
    fn address(&self) -> String {
        wait_until("the node never said where it listens", || {
            self.said().contains("this node listens on ")
        });
        const MARK: &str = "this node listens on ";
        let said = self.said();
        let rest = &said[said.find(MARK).unwrap() + MARK.len()..];
        rest[..rest.find(": ").unwrap()].to_string()
    }

    /// Ends it as Ctrl-C would.
    fn interrupt(&self) {
        // SAFETY: kill(2) on the child we spawned; it has not been waited for.
        unsafe { libc::kill(self.child.id() as libc::pid_t, libc::SIGINT) };
    }

    /// Waits for the end; its exit code and everything it said.
    fn end(mut self) -> (Option<i32>, String) {
        let code = self.child.wait().unwrap().code();
        // The reader thread drains what is left.
        std::thread::sleep(Duration::from_millis(200));
        (code, self.said())
    }
}

#[test]
fn three_nodes_share_their_corpus_and_report_each_finding_once() {
    let dir = tempfile::tempdir().unwrap();
    let first = Node::start(
        "first",
        "harness:philosophers",
        // Ended once the others are done, whatever the host's load.
        "10m",
        dir.path().join("first"),
        &["--node-listen", "127.0.0.1:0"],
    );
    let addr = first.address();
    // The others join once the first has found the philosophers' bugs.
    wait_until("the first node found nothing", || {
        findings(&first.out).len() >= 2
    });
    let joined: Vec<Node> = ["second", "third"]
        .map(|name| {
            Node::start(
                name,
                "harness:philosophers",
                "8s",
                dir.path().join(name),
                &["--node-connect", &addr],
            )
        })
        .into();
    let found_first = findings(&first.out);
    for node in joined {
        let out = node.out.clone();
        let (code, err) = node.end();
        assert_eq!(code, Some(0), "nothing new to report here: {err}");
        assert!(findings(&out).is_empty(), "{err}");
        assert_eq!(
            stat(&out, "node_findings") as usize,
            found_first.len(),
            "{err}"
        );
        assert_eq!(
            err.matches("node first found: ").count(),
            found_first.len(),
            "{err}"
        );
        // The first node's corpus came with the welcome.
        assert!(stat(&out, "node_entries_imported") > 0, "{err}");
        assert!(stat(&out, "corpus_count") >= stat(&out, "node_entries_imported"));
    }
    let out = first.out.clone();
    first.interrupt();
    let (code, err) = first.end();
    assert_eq!(code, Some(1), "{err}");
    assert_eq!(findings(&out), found_first, "{err}");
    assert!(
        stat(&out, "node_entries_imported") > 0,
        "the others' entries: {err}"
    );
    assert_eq!(err.matches(" joined").count(), 2, "{err}");
    assert_eq!(err.matches(" left: ").count(), 2, "{err}");
}

#[test]
fn another_target_and_a_hostile_peer_are_refused_and_the_session_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let node = Node::start(
        "home",
        "harness:philosophers",
        "10m",
        dir.path().join("home"),
        &["--node-listen", "127.0.0.1:0"],
    );
    let addr = node.address();
    // A frame past the limit, then one that is not JSON, then a silent
    // connection closed at once.
    for frame in [
        u32::MAX.to_le_bytes().to_vec(),
        [5u32.to_le_bytes().to_vec(), b"{{{{{".to_vec()].concat(),
        Vec::new(),
    ] {
        let mut s = std::net::TcpStream::connect(&addr).unwrap();
        let _ = s.write_all(&frame);
    }
    let other = Node::start(
        "other",
        "harness:prodcons",
        "3s",
        dir.path().join("other"),
        &["--node-connect", &addr],
    );
    let (code, said) = other.end();
    assert_eq!(code, Some(0), "{said}");
    assert_eq!(said.matches("refused node ").count(), 1, "one line: {said}");
    assert!(said.contains("it fuzzes another target"), "{said}");
    let out = node.out.clone();
    wait_until("the home node found nothing", || findings(&out).len() >= 2);
    node.interrupt();
    let (code, said) = node.end();
    assert_eq!(code, Some(1), "the philosophers' bugs: {said}");
    assert!(said.contains("is past the limit"), "{said}");
    assert!(said.contains("not the node protocol"), "{said}");
    assert!(said.contains("it fuzzes another target"), "{said}");
    assert!(!findings(&out).is_empty());
    assert_eq!(stat(&out, "node_entries_imported"), 0);
}

#[test]
fn listening_where_other_hosts_reach_needs_its_flag() {
    common::require_kvm();
    let dir = tempfile::tempdir().unwrap();
    let run = |extra: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_rewind-fuzz"))
            .args(["fuzz", "--target", "harness:philosophers", "--jobs", "1"])
            .args(["--execs", "3", "-q", "--node-listen", "0.0.0.0:0", "-o"])
            .arg(dir.path().join("out"))
            .args(extra)
            .output()
            .unwrap()
    };
    let refused = run(&[]);
    let err = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(2), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("--node-listen-any-address"), "{err}");
    let open = run(&["--node-listen-any-address"]);
    let err = String::from_utf8_lossy(&open.stderr);
    assert!(matches!(open.status.code(), Some(0 | 1)), "{err}");
    assert!(
        err.contains("the node protocol has no authentication"),
        "{err}"
    );
}

#[test]
fn a_node_shares_with_a_sync_directory_too() {
    let dir = tempfile::tempdir().unwrap();
    let sync = dir.path().join("sync");
    std::fs::create_dir(&sync).unwrap();
    let home = Node::start(
        "home",
        "harness:prodcons",
        "10m",
        dir.path().join("home"),
        &[
            "--node-listen",
            "127.0.0.1:0",
            "--sync-dir",
            sync.to_str().unwrap(),
        ],
    );
    let addr = home.address();
    let visitor = Node::start(
        "visitor",
        "harness:prodcons",
        "5s",
        dir.path().join("visitor"),
        &["--node-connect", &addr, "--seed", "9"],
    );
    let (code, said) = visitor.end();
    assert_eq!(code, Some(0), "{said}");
    let out = home.out.clone();
    wait_until("the visitor's entries never came", || {
        std::fs::read_to_string(out.join("fuzzer_stats")).is_ok_and(|s| {
            s.lines()
                .any(|l| l.starts_with("node_entries_imported") && !l.ends_with(": 0"))
        })
    });
    home.interrupt();
    let (code, said) = home.end();
    assert_eq!(code, Some(0), "{said}");
    assert!(stat(&out, "node_entries_imported") > 0, "{said}");
    // What came from the other node goes on to the sync directory, with
    // everything else in the queue.
    let queue = names(&out.join("queue"));
    let published = names(&sync.join("home").join("queue"));
    assert!(!queue.is_empty());
    assert!(
        queue.is_subset(&published),
        "{:?}",
        queue.difference(&published).collect::<Vec<_>>()
    );
}
