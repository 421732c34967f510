//! The live screen: on a terminal, a status block redrawn in place under
//! the findings and warnings printed above it; elsewhere, a status line
//! now and then (what the status says is `status`'s). Warnings and
//! findings are printed through it, so the block never covers them.

use std::collections::BTreeSet;
use std::io::{IsTerminal, Write};
use std::time::Instant;

use crate::fuzz::FuzzConfig;

pub struct Screen {
    /// Whether the status is a block on a terminal.
    pub(super) block: bool,
    /// Lines of the status block now on the terminal (0: none drawn).
    pub(super) drawn: usize,
    pub(super) last_block: Option<Instant>,
    pub(super) last_line: Option<Instant>,
    /// The last status line printed (not on a terminal).
    pub(super) last_line_said: Option<String>,
    /// Warnings given, by key: each is given once.
    warned: BTreeSet<String>,
    /// Features of every kind so far, and when the last new one came.
    features: usize,
    pub(super) last_new_feature: Instant,
}

impl Screen {
    pub fn new(cfg: &FuzzConfig) -> Screen {
        Screen {
            block: cfg.screen && std::io::stderr().is_terminal(),
            drawn: 0,
            last_block: None,
            // The first line comes after an interval: at the start every
            // count is zero.
            last_line: Some(Instant::now()),
            last_line_said: None,
            warned: BTreeSet::new(),
            features: 0,
            last_new_feature: Instant::now(),
        }
    }

    /// Takes the status block off the terminal, so what is printed next
    /// scrolls up like any output and stays in the scrollback; the block
    /// is drawn again below it.
    pub fn erase(&mut self) {
        if self.drawn > 0 {
            eprint!("\x1b[{}F\x1b[J", self.drawn);
            self.drawn = 0;
        }
    }

    /// Gives the warning `msg` unless the one keyed `key` was given.
    pub fn warn_once(&mut self, key: String, msg: String) {
        if self.warned.insert(key) {
            self.erase();
            eprintln!("rewind-fuzz: warning: {msg}");
        }
    }

    /// Says what happened to the session (a worker restarted, a node
    /// joined), above the status.
    pub fn say(&mut self, msg: &str) {
        self.erase();
        eprintln!("rewind-fuzz: {msg}");
    }

    /// Notes the count of features, for "last new feature".
    pub fn saw_features(&mut self, total: usize) {
        if total > self.features {
            self.features = total;
            self.last_new_feature = Instant::now();
        }
    }

    /// Draws the block in place: the findings printed above it stay.
    pub(super) fn draw(&mut self, lines: &[String]) {
        let mut text = String::new();
        if self.drawn > 0 {
            text.push_str(&format!("\x1b[{}F", self.drawn));
        }
        for l in lines {
            text.push_str("\x1b[2K");
            text.push_str(l);
            text.push('\n');
        }
        text.push_str("\x1b[J");
        let _ = std::io::stderr().lock().write_all(text.as_bytes());
        self.drawn = lines.len();
    }
}
