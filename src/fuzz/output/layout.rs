//! The output directory's layout, what sessions before a `--resume` left
//! in it, and replacing its files atomically.
//!
//! ```text
//! OUT/queue/          the corpus, one JSON schedule input per entry
//! OUT/findings/       one reproducer per distinct failure, with its story
//! OUT/fuzzer_stats    AFL-style `key : value` lines
//! OUT/plot_data       one line per interval
//! OUT/coverage.svg    features over time
//! ```

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use super::screen::Screen;
use crate::fsutil::write_atomically;
use crate::fuzz::FuzzError;

/// The output directory.
pub struct OutDir {
    path: PathBuf,
}

/// A directory of the session that cannot be used.
pub fn setup_error(what: &str, path: &Path, e: std::io::Error) -> FuzzError {
    FuzzError::Setup(format!(
        "cannot {what} {}: {e}; choose a writable --out directory",
        path.display()
    ))
}

impl OutDir {
    /// Creates the directory and its subdirectories (or finds them, for
    /// `--resume`), and checks it can be written.
    pub fn create(out: &Path) -> Result<OutDir, FuzzError> {
        let dir = OutDir {
            path: out.to_path_buf(),
        };
        for d in [dir.path.clone(), dir.queue(), dir.findings()] {
            std::fs::create_dir_all(&d).map_err(|e| setup_error("create", &d, e))?;
        }
        // A probe write: a read-only or full directory is reported now, not
        // after hours of fuzzing.
        let probe = dir.path.join(".write-test");
        write_atomically(&probe, b"ok").map_err(|e| setup_error("write to", &dir.path, e))?;
        let _ = std::fs::remove_file(&probe);
        Ok(dir)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// `queue/`, the corpus.
    pub fn queue(&self) -> PathBuf {
        self.path.join("queue")
    }

    /// `findings/`, the reproducers.
    pub fn findings(&self) -> PathBuf {
        self.path.join("findings")
    }

    /// Replaces the file `name` whole. One that cannot be written (a full
    /// disk) is said once: fuzzing goes on, but the file stops being
    /// current.
    pub fn update(&self, name: &str, bytes: &[u8], screen: &mut Screen) {
        let path = self.path.join(name);
        if let Err(e) = write_atomically(&path, bytes) {
            screen.warn_once(
                format!("write {name}"),
                format!(
                    "cannot update {}: {e}; fuzzing goes on, but it is no longer current (free space in --out)",
                    path.display()
                ),
            );
        }
    }

    /// Removes the file `name`, if there is one.
    pub fn remove(&self, name: &str) {
        let _ = std::fs::remove_file(self.path.join(name));
    }
}

/// What the sessions before a `--resume` did: the counts go on from there,
/// and their findings are not announced again.
#[derive(Clone, Debug, Default)]
pub struct Prior {
    pub execs: u64,
    pub run_time: f64,
    /// `fuzzer_stats` lines `findings_*`, by key.
    pub findings: BTreeMap<String, u64>,
    /// Signature ids of the findings already in `findings/`.
    pub signatures: BTreeSet<String>,
}

impl Prior {
    /// Reads `fuzzer_stats` and the names in `findings/` of a session
    /// directory (an absent one reads as nothing).
    pub fn read(out: &Path) -> Prior {
        let mut p = Prior::default();
        p.read_stats(out);
        p.signatures = finding_ids(&out.join("findings"));
        p
    }

    /// The counts of `fuzzer_stats` that go on.
    fn read_stats(&mut self, out: &Path) {
        let stats = crate::fsutil::read_foreign(&out.join("fuzzer_stats"), 1 << 20)
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .unwrap_or_default();
        for l in stats.lines() {
            let Some((k, v)) = l.split_once(':') else {
                continue;
            };
            let (k, v) = (k.trim(), v.trim());
            match k {
                "execs_done" => self.execs = v.parse().unwrap_or(0),
                "run_time" => self.run_time = v.parse().unwrap_or(0.0),
                k if k == "findings"
                    || k.starts_with("findings_")
                    || k == "saved_crashes"
                    || k == "saved_hangs" =>
                {
                    self.findings.insert(k.into(), v.parse().unwrap_or(0));
                }
                _ => {}
            }
        }
    }

    /// A count of `fuzzer_stats` the sessions before left (0 if none).
    pub fn count(&self, key: &str) -> u64 {
        self.findings.get(key).copied().unwrap_or(0)
    }
}

/// The signature ids the names of the reproducers in `dir` carry:
/// `KIND-ID.rwd` (or `.schedule.json`), where the id is 16 hex digits.
fn finding_ids(dir: &Path) -> BTreeSet<String> {
    let mut ids = BTreeSet::new();
    for name in list_names(dir) {
        let stem = name.split('.').next().unwrap_or("");
        if let Some((_, id)) = stem.rsplit_once('-') {
            if id.len() == 16 && id.bytes().all(|b| b.is_ascii_hexdigit()) {
                ids.insert(id.to_string());
            }
        }
    }
    ids
}

/// The names of the files in `dir` (none if it cannot be read).
pub fn list_names(dir: &Path) -> BTreeSet<String> {
    std::fs::read_dir(dir)
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default()
}
