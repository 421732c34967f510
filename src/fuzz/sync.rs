//! The sync directory: a folder fuzzers share, perhaps with other users,
//! each under its own name (`<dir>/<id>/queue`, `<dir>/<id>/findings`).
//!
//! Anyone who shares it may plant links or odd files in it, so every path
//! below the directory is resolved from descriptors opened once, without
//! following symbolic links, and written as a temporary file renamed into
//! place. Reading the others' entries is done in slices of bounded size
//! and time, resumed on the next tick, so a directory of a hundred
//! thousand entries cannot hold up the session's end or Ctrl-C.

use std::io::{Read, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::time::Instant;

use rustix::fs::{Dir, FileType, Mode, OFlags};

/// At most this many entries are looked at per slice of a scan.
pub const ENTRIES_PER_SLICE: usize = 2000;

/// Opening a directory below the sync directory: never through a link.
const DIR_FLAGS: OFlags = OFlags::RDONLY
    .union(OFlags::DIRECTORY)
    .union(OFlags::NOFOLLOW)
    .union(OFlags::CLOEXEC);

/// An entry of another fuzzer, read (or why it could not be).
pub struct Found {
    /// `<peer>/queue/<name>`, for messages.
    pub label: String,
    /// The file's name.
    pub name: String,
    pub bytes: Result<Vec<u8>, String>,
}

pub struct SyncDir {
    path: PathBuf,
    root: OwnedFd,
    id: String,
    /// The others' entries being read: the peers, and the queue of the
    /// peer being read.
    scan: Option<(Dir, Option<(String, Dir)>)>,
}

impl SyncDir {
    /// Opens the sync directory `path` for the fuzzer named `id`.
    pub fn open(path: &Path, id: &str) -> std::io::Result<SyncDir> {
        let root = rustix::fs::open(
            path,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        if !is_name(id) {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("{id:?} cannot be a name in the sync directory"),
            ));
        }
        Ok(SyncDir {
            path: path.to_path_buf(),
            root,
            id: id.to_string(),
            scan: None,
        })
    }

    /// This fuzzer's `kind` directory, made if need be. A sync directory
    /// whose path no longer leads to the one opened (an unmounted share, or
    /// one moved away) is an error: nothing is made again under its name.
    fn own(&self, kind: &str) -> std::io::Result<OwnedFd> {
        let now = rustix::fs::stat(&self.path).ok();
        let then = rustix::fs::fstat(&self.root)?;
        if now.is_none_or(|s| (s.st_dev, s.st_ino) != (then.st_dev, then.st_ino)) {
            return Err(std::io::Error::new(
                std::io::ErrorKind::NotFound,
                "it is gone",
            ));
        }
        let mine = subdir(&self.root, &self.id)?;
        subdir(&mine, kind)
    }

    /// Writes `data` as `kind/name` of this fuzzer with `mode`, replacing
    /// whatever has that name (a link is replaced, never followed).
    pub fn publish(&self, kind: &str, name: &str, data: &[u8], mode: u32) -> std::io::Result<()> {
        if !is_name(name) {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("{name:?} cannot be a file name"),
            ));
        }
        let dir = self.own(kind)?;
        let tmp = format!(".{name}.tmp-{}", std::process::id());
        let fd = rustix::fs::openat(
            &dir,
            tmp.as_str(),
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::from_raw_mode(mode & 0o777),
        );
        // A temporary file left by a session that was killed: ours by name.
        let fd = match fd {
            Err(rustix::io::Errno::EXIST) => {
                rustix::fs::unlinkat(&dir, tmp.as_str(), rustix::fs::AtFlags::empty())?;
                rustix::fs::openat(
                    &dir,
                    tmp.as_str(),
                    OFlags::WRONLY
                        | OFlags::CREATE
                        | OFlags::EXCL
                        | OFlags::NOFOLLOW
                        | OFlags::CLOEXEC,
                    Mode::from_raw_mode(mode & 0o777),
                )?
            }
            r => r?,
        };
        let mut file = std::fs::File::from(fd);
        let written = file
            .write_all(data)
            .and_then(|_| file.sync_all())
            .and_then(|_| Ok(rustix::fs::renameat(&dir, tmp.as_str(), &dir, name)?));
        if written.is_err() {
            let _ = rustix::fs::unlinkat(&dir, tmp.as_str(), rustix::fs::AtFlags::empty());
        }
        written
    }

    /// Reads the next slice of the others' `.json` queue entries: until
    /// `until`, at most [`ENTRIES_PER_SLICE`] entries, reading only those
    /// `wanted` accepts (by label) and at most `limit` bytes each. `true`
    /// once the scan has been through every entry (the next call starts
    /// another).
    pub fn scan_slice(
        &mut self,
        until: Instant,
        limit: u64,
        mut wanted: impl FnMut(&str) -> bool,
        found: &mut Vec<Found>,
    ) -> std::io::Result<bool> {
        if self.scan.is_none() {
            self.scan = Some((Dir::read_from(&self.root)?, None));
        }
        let Some((peers, current)) = &mut self.scan else {
            unreachable!("started above")
        };
        let mut looked = 0;
        let mut ended = None;
        while looked < ENTRIES_PER_SLICE && Instant::now() < until {
            looked += 1;
            let Some((peer, queue)) = current else {
                match peers.next() {
                    None => {
                        ended = Some(Ok(true));
                        break;
                    }
                    Some(Err(e)) => {
                        ended = Some(Err(e.into()));
                        break;
                    }
                    Some(Ok(e)) => {
                        let name = e.file_name().to_string_lossy().into_owned();
                        if !is_name(&name) || name == self.id {
                            continue;
                        }
                        // Links, files and unreadable peers are passed by.
                        let queue = subdir_existing(&self.root, &name)
                            .and_then(|p| subdir_existing(&p, "queue"))
                            .and_then(|q| Ok(Dir::new(q)?));
                        if let Ok(q) = queue {
                            *current = Some((name, q));
                        }
                    }
                }
                continue;
            };
            let entry = match queue.next() {
                Some(Ok(e)) => e,
                Some(Err(_)) | None => {
                    *current = None;
                    continue;
                }
            };
            let name = entry.file_name().to_string_lossy().into_owned();
            if !name.ends_with(".json") || !is_name(&name) {
                continue;
            }
            let label = format!("{peer}/queue/{name}");
            if !wanted(&label) {
                continue;
            }
            let bytes = queue
                .fd()
                .map_err(|e| std::io::Error::from(e).to_string())
                .and_then(|fd| read_entry(fd, &name, limit));
            found.push(Found { label, name, bytes });
        }
        match ended {
            Some(r) => {
                self.scan = None;
                r
            }
            None => Ok(false),
        }
    }
}

/// Whether `s` is one name in a directory (no separator, not `.`/`..`).
fn is_name(s: &str) -> bool {
    !s.is_empty() && s != "." && s != ".." && !s.contains('/') && !s.contains('\0')
}

/// The directory `name` in `dir`, opened without following a link.
fn subdir_existing(dir: &impl AsFd, name: &str) -> std::io::Result<OwnedFd> {
    Ok(rustix::fs::openat(dir, name, DIR_FLAGS, Mode::empty())?)
}

/// The directory `name` in `dir`, made if missing, never through a link.
fn subdir(dir: &impl AsFd, name: &str) -> std::io::Result<OwnedFd> {
    match rustix::fs::mkdirat(dir, name, Mode::from_raw_mode(0o755)) {
        Ok(()) | Err(rustix::io::Errno::EXIST) => {}
        Err(e) => return Err(e.into()),
    }
    subdir_existing(dir, name)
}

/// Reads the entry `name` of `dir`: a regular file of at most `limit`
/// bytes, reached without following a link or blocking on a FIFO.
fn read_entry(dir: impl AsFd, name: &str, limit: u64) -> Result<Vec<u8>, String> {
    let fd = rustix::fs::openat(
        dir,
        name,
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| match e {
        rustix::io::Errno::LOOP => "a symbolic link, not followed".to_string(),
        e => std::io::Error::from(e).to_string(),
    })?;
    let st = rustix::fs::fstat(&fd).map_err(|e| std::io::Error::from(e).to_string())?;
    if FileType::from_raw_mode(st.st_mode) != FileType::RegularFile {
        return Err("not a regular file".into());
    }
    if st.st_size as u64 > limit {
        return Err(format!(
            "{} bytes, more than the {limit} bytes such a file may have",
            st.st_size
        ));
    }
    let mut data = Vec::with_capacity(st.st_size as usize);
    // A file that grows while it is read is cut at the limit.
    std::fs::File::from(fd)
        .take(limit + 1)
        .read_to_end(&mut data)
        .map_err(|e| e.to_string())?;
    if data.len() as u64 > limit {
        return Err(format!("more than the {limit} bytes such a file may have"));
    }
    Ok(data)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_planted_link_is_replaced_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("victim");
        std::fs::write(&victim, "keep").unwrap();
        let sync = dir.path().join("sync");
        std::fs::create_dir_all(sync.join("me").join("queue")).unwrap();
        let entry = sync.join("me").join("queue").join("a.json");
        std::os::unix::fs::symlink(&victim, &entry).unwrap();
        let s = SyncDir::open(&sync, "me").unwrap();
        s.publish("queue", "a.json", b"new", 0o644).unwrap();
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep");
        assert_eq!(std::fs::read_to_string(&entry).unwrap(), "new");
    }

    #[test]
    fn a_scan_goes_in_slices_and_skips_links_and_odd_files() {
        let dir = tempfile::tempdir().unwrap();
        let sync = dir.path().join("sync");
        let q = sync.join("peer").join("queue");
        std::fs::create_dir_all(&q).unwrap();
        for i in 0..5000 {
            std::fs::write(q.join(format!("{i}.json")), "{}").unwrap();
        }
        std::os::unix::fs::symlink("/etc/passwd", q.join("link.json")).unwrap();
        std::fs::create_dir(q.join("dir.json")).unwrap();
        let mut s = SyncDir::open(&sync, "me").unwrap();
        let mut found = Vec::new();
        let far = Instant::now() + std::time::Duration::from_secs(600);
        let mut slices = 0;
        while !s.scan_slice(far, 100, |_| true, &mut found).unwrap() {
            slices += 1;
        }
        assert!(slices >= 5000 / ENTRIES_PER_SLICE, "{slices}");
        assert_eq!(found.len(), 5002);
        let err = |n: &str| {
            found
                .iter()
                .find(|f| f.name == n)
                .unwrap()
                .bytes
                .clone()
                .unwrap_err()
        };
        assert!(err("link.json").contains("symbolic link"));
        assert!(err("dir.json").contains("not a regular file"));
    }
}
