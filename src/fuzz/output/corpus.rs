//! The corpus on disk: entries the workers publish to the hub are written
//! to `queue/` and the sync directory; other fuzzers' entries in the sync
//! directory go to the hub.

use std::collections::BTreeSet;
use std::path::Path;
use std::time::{Duration, Instant};

use super::layout::{OutDir, list_names, setup_error};
use super::screen::Screen;
use crate::fuzz::input::ScheduleInput;
use crate::fuzz::sync::SyncDir;
use crate::fuzz::{FuzzConfig, FuzzError, Hub, SYNC_INTERVAL};

/// How long one tick may spend reading the sync directory.
const SYNC_SLICE: Duration = Duration::from_millis(40);
/// How many unusable sync entries are named, one warning each.
const SYNC_WARNINGS: usize = 5;

/// The pseudo-worker of the hub that entries from the sync directory come
/// from.
const FROM_SYNC: usize = usize::MAX;

pub struct CorpusDir {
    /// Names of the entries in `queue/`.
    written: BTreeSet<String>,
    /// Labels of the sync directory's entries taken (or refused).
    imported: BTreeSet<String>,
    /// The sync directory, opened once; whether a scan of it is under way.
    sync: Option<SyncDir>,
    scanning: bool,
    last_sync: Option<Instant>,
    /// Unusable entries of the sync directory seen (only the first few are
    /// named).
    sync_skipped: usize,
}

impl CorpusDir {
    /// The corpus in `dir` so far, and the sync directory, if any.
    pub fn open(cfg: &FuzzConfig, dir: &OutDir) -> Result<CorpusDir, FuzzError> {
        let sync = match &cfg.sync_dir {
            Some(d) => Some(
                SyncDir::open(d, &cfg.sync_id)
                    .map_err(|e| setup_error("open the sync directory", d, e))?,
            ),
            None => None,
        };
        Ok(CorpusDir {
            written: list_names(&dir.queue()),
            imported: BTreeSet::new(),
            sync,
            scanning: false,
            last_sync: None,
            sync_skipped: 0,
        })
    }

    /// Entries in `queue/`.
    pub fn len(&self) -> usize {
        self.written.len()
    }

    /// Entries taken from the sync directory.
    pub fn imported(&self) -> usize {
        self.imported.len()
    }

    /// The sync directory, if the session has one.
    pub fn sync(&self) -> Option<&SyncDir> {
        self.sync.as_ref()
    }

    /// Writes corpus entries new in the hub to `queue/` and the sync
    /// directory, then takes new ones from the sync directory when due.
    pub fn exchange(
        &mut self,
        cfg: &FuzzConfig,
        dir: &OutDir,
        hub: &Hub,
        cursor: &mut usize,
        screen: &mut Screen,
    ) {
        self.export(cfg, dir, hub, cursor, screen);
        if self.scanning || self.last_sync.is_none_or(|t| t.elapsed() >= SYNC_INTERVAL) {
            self.import(cfg, hub, screen);
        }
    }

    /// Writes corpus entries new in the hub to `queue/` and the sync directory.
    fn export(
        &mut self,
        cfg: &FuzzConfig,
        dir: &OutDir,
        hub: &Hub,
        cursor: &mut usize,
        screen: &mut Screen,
    ) {
        let fresh = hub.slice(*cursor);
        *cursor += fresh.len();
        for (from, input) in fresh {
            let name = libafl::inputs::Input::generate_name(&input, None);
            if !self.written.insert(name.clone()) {
                continue;
            }
            if let Err(e) = libafl::inputs::Input::to_file(&input, dir.queue().join(&name)) {
                screen.warn_once(
                    "queue".into(),
                    format!(
                        "cannot write to {}/queue: {e} (fuzzing goes on)",
                        dir.path().display()
                    ),
                );
            }
            // Entries that came from the sync directory are not sent back.
            if from != FROM_SYNC {
                self.publish(cfg, &name, &input, screen);
            }
        }
    }

    /// Copies a corpus entry to the sync directory, if there is one.
    fn publish(&self, cfg: &FuzzConfig, name: &str, input: &ScheduleInput, screen: &mut Screen) {
        let (Some(sync), Some(dir)) = (&self.sync, &cfg.sync_dir) else {
            return;
        };
        let data = serde_json::to_vec_pretty(input).unwrap();
        if let Err(e) = sync.publish("queue", name, &data, 0o644) {
            screen.warn_once(
                "sync-out".into(),
                format!(
                    "cannot publish to the sync directory {}: {e} (fuzzing goes on)",
                    dir.display()
                ),
            );
        }
    }

    /// Takes other fuzzers' new entries from the sync directory: one
    /// slice of a scan per tick, so a huge directory cannot hold up the
    /// session's end.
    fn import(&mut self, cfg: &FuzzConfig, hub: &Hub, screen: &mut Screen) {
        let (Some(sync), Some(dir)) = (&mut self.sync, &cfg.sync_dir) else {
            return;
        };
        let until = Instant::now() + SYNC_SLICE;
        let mut found = Vec::new();
        let imported = &mut self.imported;
        let scanned = sync.scan_slice(
            until,
            crate::sched::MAX_SCHEDULE_FILE,
            |label| imported.insert(label.into()),
            &mut found,
        );
        match scanned {
            Ok(false) => self.scanning = true,
            Ok(true) => {
                self.scanning = false;
                self.last_sync = Some(Instant::now());
            }
            Err(e) => {
                self.scanning = false;
                self.last_sync = Some(Instant::now());
                let msg = format!(
                    "cannot read the sync directory {}: {e} (fuzzing goes on alone)",
                    dir.display()
                );
                screen.warn_once("sync-in".into(), msg);
            }
        }
        let dir = dir.clone();
        for f in found {
            if self.written.contains(&f.name) {
                continue;
            }
            // Anyone may write here: a FIFO must not stall the session,
            // nor a huge file fill its memory.
            match f.bytes.and_then(|b| {
                ScheduleInput::parse(&b, cfg.target_fingerprint).map_err(|e| e.to_string())
            }) {
                Ok(input) => hub.publish(FROM_SYNC, input),
                Err(e) => self.skip(&dir.join(&f.label), &e, screen),
            }
        }
    }

    /// Says why an entry of the sync directory is of no use: the first
    /// few by name, then once that more are skipped.
    fn skip(&mut self, path: &Path, why: &str, screen: &mut Screen) {
        self.sync_skipped += 1;
        let msg = match self.sync_skipped {
            ..=SYNC_WARNINGS => {
                format!("skipping {} from the sync directory: {why}", path.display())
            }
            n if n == SYNC_WARNINGS + 1 => {
                "more unusable entries of the sync directory are skipped without a word".into()
            }
            _ => return,
        };
        screen.warn_once(
            path.display().to_string(),
            crate::escape::line(&msg).into_owned(),
        );
    }
}
