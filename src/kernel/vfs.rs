//! The guest's filesystem: the host's files read-only, seen through a
//! recording source, with the guest's own writes kept in a private overlay.
//!
//! Every host lookup the guest causes (a file's bytes, a directory listing,
//! a symlink, or the fact that a path does not exist) is recorded, so a
//! reproducer can carry exactly what the run saw and replay without the host's
//! copy. Metadata is synthesized from content so that it is the same on every
//! machine: no host inode numbers, owners or times leak into a run.

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};

/// The kind of a directory entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum NodeKind {
    File,
    Dir,
    Symlink,
    /// A unix socket's name (only the overlay has them).
    Socket,
}

/// What a host path was found to be.
#[derive(Clone, Debug)]
pub enum HostNode {
    /// A regular file. Its bytes are read only when the guest reads it
    /// (opens or runs it): a `stat` needs no more than its size.
    File {
        data: Option<Arc<Vec<u8>>>,
        size: u64,
        mode: u32,
    },
    Dir {
        mode: u32,
        /// Filled in when the guest lists the directory.
        entries: Option<Vec<(String, NodeKind)>>,
    },
    Symlink {
        target: String,
    },
    Missing,
}

/// What `stat` tells of a host file beyond its kind, mode and contents:
/// its time, owner, links and allocation, recorded with it so that a
/// replay elsewhere sees the same.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostStat {
    pub mtime: i64,
    pub mtime_nsec: u32,
    pub uid: u32,
    pub gid: u32,
    pub nlink: u64,
    pub size: u64,
    pub blocks: u64,
}

impl HostStat {
    fn of(meta: &std::fs::Metadata) -> HostStat {
        use std::os::unix::fs::MetadataExt;
        HostStat {
            mtime: meta.mtime(),
            mtime_nsec: meta.mtime_nsec() as u32,
            uid: meta.uid(),
            gid: meta.gid(),
            nlink: meta.nlink(),
            size: meta.size(),
            blocks: meta.blocks(),
        }
    }
}

/// Where host paths are looked up: the live host filesystem (recording what
/// it finds), or a recording (a reproducer's archive).
#[derive(Debug)]
pub struct FileSource {
    live: bool,
    nodes: BTreeMap<String, HostNode>,
    /// The metadata of the nodes that exist, by the same keys.
    stats: BTreeMap<String, HostStat>,
    /// Lookups a recording left to the host (files kept out of a
    /// reproducer): made live, the first time they are needed.
    from_host: std::collections::BTreeSet<String>,
    /// Whether lookups a recording lacks go to the host (a visitor's
    /// programs, see `kernel::visit`: a shell is no part of the run).
    host_beyond: bool,
}

/// A source shared by every run of one target (host lookups are cached, so
/// a file that changes on the host during fuzzing does not change runs).
pub type SharedSource = Arc<Mutex<FileSource>>;

impl FileSource {
    /// Reads the host filesystem.
    pub fn host() -> SharedSource {
        Arc::new(Mutex::new(FileSource {
            live: true,
            nodes: BTreeMap::new(),
            stats: BTreeMap::new(),
            from_host: Default::default(),
            host_beyond: false,
        }))
    }

    /// Replays a recording; paths it lacks do not exist.
    pub fn recorded(nodes: BTreeMap<String, HostNode>) -> SharedSource {
        Self::recorded_with_host(nodes, Default::default(), Default::default())
    }

    /// Replays a recording, but makes the lookups in `from_host` (keys as
    /// in [`FileSource::recording`]) on the host.
    pub fn recorded_with_host(
        nodes: BTreeMap<String, HostNode>,
        stats: BTreeMap<String, HostStat>,
        from_host: std::collections::BTreeSet<String>,
    ) -> SharedSource {
        Arc::new(Mutex::new(FileSource {
            live: false,
            nodes,
            stats,
            from_host,
            host_beyond: false,
        }))
    }

    /// From now on, looks up on the host what the recording lacks: what
    /// the run looked up stays as recorded, the rest of the host's files
    /// are there for a visitor's programs.
    pub fn reach_beyond_recording(&mut self) {
        self.host_beyond = true;
    }

    /// Whether a lookup the recording lacks goes to the host.
    fn to_host(&self, key: &str) -> bool {
        self.live || self.host_beyond || self.from_host.contains(key)
    }

    /// Provides a file the monitor itself supplies (the shim), recorded
    /// like any host file. A recording that already holds the path keeps its
    /// own copy, so a reproducer replays with the shim it was made with.
    pub fn provide(&mut self, path: &str, data: Arc<Vec<u8>>, mode: u32) {
        if matches!(
            self.nodes.get(path),
            Some(HostNode::File { data: Some(_), .. })
        ) {
            return;
        }
        let size = data.len() as u64;
        let node = HostNode::File {
            data: Some(data),
            size,
            mode,
        };
        self.nodes.insert(path.to_string(), node);
        self.nodes.insert(
            super::vfs::parent_of(path),
            HostNode::Dir {
                mode: 0o755,
                entries: None,
            },
        );
    }

    /// Everything looked up so far.
    pub fn recording(&self) -> &BTreeMap<String, HostNode> {
        &self.nodes
    }

    /// The metadata recorded with [`FileSource::recording`], by its keys.
    pub fn recorded_stats(&self) -> &BTreeMap<String, HostStat> {
        &self.stats
    }

    /// The metadata of what `path` was found to be (a recording made before
    /// metadata was recorded has none: the caller makes it up).
    pub fn stat(&mut self, path: &str, follow: bool) -> Option<HostStat> {
        self.stats.get(&key_of(path, follow)).copied()
    }

    /// What `path` (absolute, normalized) is, following symlinks on the host
    /// when `follow` is set. A file's bytes are not read (see
    /// [`FileSource::contents`]).
    pub fn lookup(&mut self, path: &str, follow: bool) -> HostNode {
        let key = key_of(path, follow);
        if let Some(n) = self.nodes.get(&key) {
            return n.clone();
        }
        let (node, stat) = if let Some(node) = made_up_dev(path) {
            (node, None)
        } else if self.to_host(&key) {
            read_host(path, follow)
        } else {
            (HostNode::Missing, None)
        };
        if let Some(st) = stat {
            self.stats.insert(key.clone(), st);
        }
        self.nodes.insert(key, node.clone());
        node
    }

    /// The bytes of the file at `path`, read (and recorded) the first time
    /// they are needed; none when it is no file, or when a recording holds
    /// only its metadata (the run it was made from never read it).
    pub fn contents(&mut self, path: &str, follow: bool) -> Option<Arc<Vec<u8>>> {
        let key = key_of(path, follow);
        let HostNode::File { data, size, mode } = self.lookup(path, follow) else {
            return None;
        };
        if let Some(d) = data {
            return Some(d);
        }
        if !self.to_host(&key) {
            return None;
        }
        let real = host_real(path, follow)?;
        // The bytes the run sees are those of the size it was told: a file
        // that changes on the host afterwards does not change the run.
        let mut bytes = std::fs::read(real).ok()?;
        bytes.resize(size as usize, 0);
        let data = Arc::new(bytes);
        let node = HostNode::File {
            data: Some(data.clone()),
            size,
            mode,
        };
        self.nodes.insert(key, node);
        Some(data)
    }

    /// The entries of directory `path`.
    pub fn list(&mut self, path: &str) -> Option<Vec<(String, NodeKind)>> {
        match self.lookup(path, true) {
            HostNode::Dir {
                entries: Some(e), ..
            } => Some(e),
            HostNode::Dir {
                mode,
                entries: None,
            } => {
                if !(self.live || self.host_beyond) {
                    return Some(Vec::new());
                }
                let mut entries = Vec::new();
                if let Ok(rd) = std::fs::read_dir(path) {
                    for e in rd.flatten() {
                        let kind = match e.file_type() {
                            Ok(t) if t.is_dir() => NodeKind::Dir,
                            Ok(t) if t.is_symlink() => NodeKind::Symlink,
                            _ => NodeKind::File,
                        };
                        entries.push((e.file_name().to_string_lossy().into_owned(), kind));
                    }
                }
                entries.sort();
                self.nodes.insert(
                    path.to_string(),
                    HostNode::Dir {
                        mode,
                        entries: Some(entries.clone()),
                    },
                );
                Some(entries)
            }
            _ => None,
        }
    }
}

/// The key a lookup is recorded under.
fn key_of(path: &str, follow: bool) -> String {
    if follow {
        path.to_string()
    } else {
        format!("{path}\0nofollow")
    }
}

fn read_host(path: &str, follow: bool) -> (HostNode, Option<HostStat>) {
    let Some(real) = host_real(path, follow) else {
        return (HostNode::Missing, None);
    };
    // No link is left in `real` but the last when `follow` is not set.
    let Ok(meta) = std::fs::symlink_metadata(&real) else {
        return (HostNode::Missing, None);
    };
    let mode = meta.permissions().mode() & 0o7777;
    let node = if meta.file_type().is_symlink() {
        match std::fs::read_link(&real) {
            Ok(t) => HostNode::Symlink {
                target: t.to_string_lossy().into_owned(),
            },
            Err(_) => HostNode::Missing,
        }
    } else if meta.is_dir() {
        HostNode::Dir {
            mode,
            entries: None,
        }
    } else if meta.is_file() {
        use std::os::unix::fs::MetadataExt;
        HostNode::File {
            data: None,
            size: meta.size(),
            mode,
        }
    } else {
        // Devices, sockets and FIFOs of the host are not part of the guest's world.
        HostNode::Missing
    };
    if matches!(node, HostNode::Missing) {
        return (node, None);
    }
    (node, Some(HostStat::of(&meta)))
}

/// Whether a host path lies in a tree that describes the monitor or the
/// host's devices rather than files: the guest's `/proc`, `/sys` and
/// `/dev` are made up, and the host's are never looked at for it.
fn monitors_own(p: &Path) -> bool {
    p.starts_with("/proc") || p.starts_with("/sys") || p.starts_with("/dev")
}

/// The guest's `/dev` directories (its devices are made up by the kernel
/// before a lookup gets here; `/dev/shm` holds POSIX shared memory, in
/// the overlay).
fn made_up_dev(path: &str) -> Option<HostNode> {
    let names: &[(&str, NodeKind)] = match path {
        "/dev" => &[
            ("fd", NodeKind::Symlink),
            ("null", NodeKind::File),
            ("ptmx", NodeKind::File),
            ("pts", NodeKind::Dir),
            ("random", NodeKind::File),
            ("shm", NodeKind::Dir),
            ("stderr", NodeKind::Symlink),
            ("stdin", NodeKind::Symlink),
            ("stdout", NodeKind::Symlink),
            ("tty", NodeKind::File),
            ("urandom", NodeKind::File),
            ("zero", NodeKind::File),
        ],
        "/dev/shm" => &[],
        // Its slaves are listed by the kernel, which knows the pairs.
        "/dev/pts" => &[("ptmx", NodeKind::File)],
        p if monitors_own(Path::new(p)) && p.starts_with("/dev") => return Some(HostNode::Missing),
        _ => return None,
    };
    let entries = names.iter().map(|(n, k)| (n.to_string(), *k)).collect();
    let mode = if path == "/dev/shm" { 0o1777 } else { 0o755 };
    Some(HostNode::Dir {
        mode,
        entries: Some(entries),
    })
}

/// The host path that `path` (absolute) names, resolved one component at
/// a time with every symlink on the way (and the last one too when
/// `follow` is set) replaced by its target, so that nothing but the last
/// component can be a link. None when it leads into the host's `/proc`,
/// `/sys` or `/dev` by any way (`/tmp/x -> /proc`, `l -> /proc/self`),
/// through a loop, or through a part that is missing or no directory.
fn host_real(path: &str, follow: bool) -> Option<std::path::PathBuf> {
    use std::path::PathBuf;
    let mut todo: Vec<String> = path.split('/').rev().map(String::from).collect();
    let mut done = PathBuf::from("/");
    let mut links = 0;
    while let Some(c) = todo.pop() {
        match c.as_str() {
            "" | "." => continue,
            ".." => {
                done.pop();
                continue;
            }
            _ => {}
        }
        let here = done.join(&c);
        if monitors_own(&here) {
            return None;
        }
        let last = todo.iter().all(|t| t.is_empty() || t == ".");
        if last && !follow {
            return Some(here);
        }
        let meta = match std::fs::symlink_metadata(&here) {
            Ok(m) => m,
            // A missing last part is the answer; a missing directory on
            // the way means the path is missing too.
            Err(_) if last => return Some(here),
            Err(_) => return None,
        };
        if meta.file_type().is_symlink() {
            links += 1;
            if links > 40 {
                return None;
            }
            let target = std::fs::read_link(&here).ok()?;
            let target = target.to_str()?;
            if target.starts_with('/') {
                done = PathBuf::from("/");
            }
            todo.extend(target.split('/').rev().map(String::from));
        } else if !last && !meta.is_dir() {
            return None;
        } else {
            done = here;
        }
    }
    (!monitors_own(&done)).then_some(done)
}

/// A file of the guest's private overlay: its bytes and mode, shared by
/// every name linked to it (hard links), as an inode is.
#[derive(Clone, Debug)]
pub struct Inode {
    pub data: FileData,
    pub mode: u32,
    /// Names linked to it, and how many of them are hidden: the names
    /// unlinked files that are still open live under (see `sys_tree`).
    links: u32,
    hidden: u32,
    /// What `stat` reports as its inode number: made from the path it was
    /// created at, so a file keeps its number across renames and links.
    pub number: u64,
}

/// The largest file the overlay holds (EFBIG past it).
pub const MAX_FILE_SIZE: u64 = 1 << 30;
/// What the overlay's files may hold together unless the run sets it (the
/// kernel makes it the guest's memory, as a tmpfs may grow to).
pub const DEFAULT_OVERLAY_LIMIT: u64 = 1 << 30;
/// The unit a file's bytes are kept in: a block of zeros is not kept.
const BLOCK: u64 = 4096;

/// The bytes the overlay's files hold together, and how many they may:
/// counted in whole blocks, from what the guest wrote alone, so a write
/// that finds no room fails the same way on every machine.
#[derive(Clone, Copy, Debug)]
pub struct Space {
    used: u64,
    limit: u64,
}

impl Space {
    /// Takes `bytes` more, or ENOSPC.
    fn take(&mut self, bytes: u64) -> Result<(), i32> {
        if self.used.saturating_add(bytes) > self.limit {
            return Err(libc::ENOSPC);
        }
        self.used += bytes;
        Ok(())
    }
}

/// A file's bytes, sparse: blocks that were never written (or were cut off
/// by a truncation) are absent and read as zeros, so `ftruncate` to a GiB
/// costs nothing. Blocks are shared between copies (snapshots) until one
/// is written.
#[derive(Clone, Debug, Default)]
pub struct FileData {
    blocks: BTreeMap<u64, Arc<[u8; BLOCK as usize]>>,
    len: u64,
}

impl FileData {
    /// Its size.
    pub fn len(&self) -> u64 {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The bytes its blocks take.
    fn stored(&self) -> u64 {
        self.blocks.len() as u64 * BLOCK
    }

    /// Up to `n` bytes from `off`, as many as lie before its end.
    pub fn read(&self, off: u64, n: usize) -> Vec<u8> {
        let end = off.saturating_add(n as u64).min(self.len);
        let mut out = vec![0; end.saturating_sub(off) as usize];
        if out.is_empty() {
            return out;
        }
        for (&b, block) in self.blocks.range(off / BLOCK..=(end - 1) / BLOCK) {
            let start = (b * BLOCK).max(off);
            let stop = ((b + 1) * BLOCK).min(end);
            out[(start - off) as usize..(stop - off) as usize]
                .copy_from_slice(&block[(start - b * BLOCK) as usize..(stop - b * BLOCK) as usize]);
        }
        out
    }

    /// All its bytes.
    pub fn to_vec(&self) -> Vec<u8> {
        self.read(0, self.len as usize)
    }

    /// Writes `data` at `off`, growing the file; ENOSPC (and nothing
    /// written) when the blocks it needs do not fit in `space`.
    pub fn write_at(&mut self, off: u64, data: &[u8], space: &mut Space) -> Result<(), i32> {
        self.write(off, data, space, true)
    }

    /// Writes back what a shared mapping changed: never refused, since the
    /// pages it comes from are the guest's memory already; the blocks it
    /// adds count all the same.
    pub fn write_back(&mut self, off: u64, data: &[u8], space: &mut Space) {
        // A page of zeros over a hole changes nothing.
        let end = (off + data.len() as u64).min(self.len);
        if end <= off {
            return;
        }
        let data = &data[..(end - off) as usize];
        let b = off / BLOCK;
        if !self.blocks.contains_key(&b) && data.iter().all(|&x| x == 0) {
            return;
        }
        let _ = self.write(off, data, space, false);
    }

    fn write(
        &mut self,
        off: u64,
        data: &[u8],
        space: &mut Space,
        enforce: bool,
    ) -> Result<(), i32> {
        let end = off.checked_add(data.len() as u64).ok_or(libc::EFBIG)?;
        if end > MAX_FILE_SIZE {
            return Err(libc::EFBIG);
        }
        if data.is_empty() {
            return Ok(());
        }
        let (first, last) = (off / BLOCK, (end - 1) / BLOCK);
        let new = (first..=last)
            .filter(|b| !self.blocks.contains_key(b))
            .count() as u64;
        match enforce {
            true => space.take(new * BLOCK)?,
            false => space.used += new * BLOCK,
        }
        for b in first..=last {
            let block = Arc::make_mut(
                self.blocks
                    .entry(b)
                    .or_insert_with(|| Arc::new([0; BLOCK as usize])),
            );
            let start = (b * BLOCK).max(off);
            let stop = ((b + 1) * BLOCK).min(end);
            block[(start - b * BLOCK) as usize..(stop - b * BLOCK) as usize]
                .copy_from_slice(&data[(start - off) as usize..(stop - off) as usize]);
        }
        self.len = self.len.max(end);
        Ok(())
    }

    /// Sets its size: growing adds a hole, shrinking drops what lies past
    /// the new end (and gives its blocks back).
    pub fn set_len(&mut self, len: u64, space: &mut Space) -> Result<(), i32> {
        if len > MAX_FILE_SIZE {
            return Err(libc::EFBIG);
        }
        if len < self.len {
            let keep = len.div_ceil(BLOCK);
            let dropped = self.blocks.split_off(&keep);
            space.used -= dropped.len() as u64 * BLOCK;
            // The tail of the last block kept reads as zeros again.
            if len % BLOCK != 0 {
                if let Some(block) = self.blocks.get_mut(&(len / BLOCK)) {
                    Arc::make_mut(block)[(len % BLOCK) as usize..].fill(0);
                }
            }
        }
        self.len = len;
        Ok(())
    }
}

/// A node of the guest's private overlay.
#[derive(Clone, Debug)]
pub enum OverlayNode {
    /// A name of inode `ino` (see [`Vfs::inode`]).
    File {
        ino: u64,
    },
    Dir {
        mode: u32,
    },
    Symlink {
        target: String,
    },
    /// A unix socket's name (`bind`): bound socket `id` of `sys_net`.
    Socket {
        id: u64,
        mode: u32,
    },
    /// A host path the guest deleted.
    Deleted,
}

/// What a path resolves to for the guest.
#[derive(Clone, Debug)]
pub enum Resolved {
    /// A host file; [`Vfs::host_contents`] reads its bytes.
    HostFile {
        size: u64,
        mode: u32,
    },
    HostDir {
        mode: u32,
    },
    /// A file of the overlay: inode `ino`, with its `stat` number and
    /// link count.
    OverlayFile {
        mode: u32,
        size: u64,
        ino: u64,
        number: u64,
        links: u32,
    },
    OverlayDir {
        mode: u32,
    },
    Symlink {
        target: String,
    },
    Socket {
        id: u64,
        mode: u32,
    },
    Missing,
}

impl Resolved {
    pub fn exists(&self) -> bool {
        !matches!(self, Resolved::Missing)
    }
    pub fn is_dir(&self) -> bool {
        matches!(self, Resolved::HostDir { .. } | Resolved::OverlayDir { .. })
    }
}

/// The guest's view of the filesystem.
#[derive(Clone, Debug)]
pub struct Vfs {
    source: SharedSource,
    overlay: BTreeMap<String, OverlayNode>,
    /// The overlay's files, by inode.
    inodes: BTreeMap<u64, Inode>,
    next_ino: u64,
    /// What the overlay's files hold, against its limit.
    space: Space,
    pub umask: u32,
}

/// Makes `path` absolute (against directory `base`) and removes `.`,
/// `..` and repeated slashes.
pub fn normalize(base: &str, path: &str) -> String {
    let mut parts: Vec<&str> = Vec::new();
    let full;
    let p = if path.starts_with('/') {
        path
    } else {
        full = format!("{base}/{path}");
        &full
    };
    for c in p.split('/') {
        match c {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            c => parts.push(c),
        }
    }
    format!("/{}", parts.join("/"))
}

impl Vfs {
    pub fn new(source: SharedSource) -> Self {
        Vfs {
            source,
            overlay: BTreeMap::new(),
            inodes: BTreeMap::new(),
            next_ino: 1,
            space: Space {
                used: 0,
                limit: DEFAULT_OVERLAY_LIMIT,
            },
            umask: 0o022,
        }
    }

    /// The source behind the overlay.
    pub fn source(&self) -> &SharedSource {
        &self.source
    }

    /// Sets how many bytes the overlay's files may hold together.
    pub fn set_overlay_limit(&mut self, limit: u64) {
        self.space.limit = limit;
    }

    /// The bytes of the host file at `path` (as [`Vfs::resolve`] found it
    /// with the same `follow`), read on first use.
    pub fn host_contents(&mut self, path: &str, follow: bool) -> Option<Arc<Vec<u8>>> {
        self.source.lock().unwrap().contents(path, follow)
    }

    /// What `path` (normalized) is. Symlinks in the overlay are followed
    /// here; host symlinks are followed by the host.
    pub fn resolve(&mut self, path: &str, follow: bool) -> Resolved {
        self.resolve_with_stat(path, follow).0
    }

    /// [`Vfs::resolve`], with the host's metadata of what it found there
    /// (none for the overlay's files, or a recording without metadata).
    pub fn resolve_with_stat(&mut self, path: &str, follow: bool) -> (Resolved, Option<HostStat>) {
        let mut path = path.to_string();
        for _ in 0..40 {
            match self.overlay.get(&path) {
                Some(OverlayNode::File { ino }) => {
                    let f = &self.inodes[ino];
                    let r = Resolved::OverlayFile {
                        mode: f.mode,
                        size: f.data.len(),
                        ino: *ino,
                        number: f.number,
                        links: f.links - f.hidden,
                    };
                    return (r, None);
                }
                Some(OverlayNode::Dir { mode }) => {
                    return (Resolved::OverlayDir { mode: *mode }, None);
                }
                Some(OverlayNode::Socket { id, mode }) => {
                    let r = Resolved::Socket {
                        id: *id,
                        mode: *mode,
                    };
                    return (r, None);
                }
                Some(OverlayNode::Deleted) => return (Resolved::Missing, None),
                Some(OverlayNode::Symlink { target }) => {
                    if !follow {
                        let r = Resolved::Symlink {
                            target: target.clone(),
                        };
                        return (r, None);
                    }
                    let parent = parent_of(&path);
                    path = normalize(&parent, &target.clone());
                    continue;
                }
                None => {}
            }
            if self.deleted_ancestor(&path) {
                return (Resolved::Missing, None);
            }
            let mut source = self.source.lock().unwrap();
            let node = source.lookup(&path, follow);
            let stat = source.stat(&path, follow);
            let r = match node {
                HostNode::File { size, mode, .. } => Resolved::HostFile { size, mode },
                HostNode::Dir { mode, .. } => Resolved::HostDir { mode },
                HostNode::Symlink { target } => Resolved::Symlink { target },
                HostNode::Missing => Resolved::Missing,
            };
            return (r, stat);
        }
        (Resolved::Missing, None)
    }

    /// The path a chain of symlinks at `path` ends at (the path itself when
    /// it is no symlink): where a write through a link must go, so that the
    /// link stays a link. Stops after 40 links, as Linux does.
    pub fn final_path(&mut self, path: &str) -> String {
        let mut path = path.to_string();
        for _ in 0..40 {
            match self.resolve(&path, false) {
                Resolved::Symlink { target } => {
                    let parent = parent_of(&path);
                    path = normalize(&parent, &target);
                }
                _ => return path,
            }
        }
        path
    }

    /// `path` (absolute) with every symbolic link in it resolved, as Linux
    /// names an open file (`/proc/PID/exe`): `/bin/sh` is `/usr/bin/dash`
    /// where `/bin` and `/bin/sh` are links. A part that does not resolve
    /// is kept as it is.
    pub fn canonical(&mut self, path: &str) -> String {
        let mut todo: Vec<String> = path.split('/').rev().map(String::from).collect();
        let mut done: Vec<String> = Vec::new();
        let mut links = 0;
        while let Some(c) = todo.pop() {
            match c.as_str() {
                "" | "." => continue,
                ".." => {
                    done.pop();
                    continue;
                }
                _ => {}
            }
            let here = match done.is_empty() {
                true => format!("/{c}"),
                false => format!("/{}/{c}", done.join("/")),
            };
            match self.resolve(&here, false) {
                Resolved::Symlink { target } if links < 40 => {
                    links += 1;
                    if target.starts_with('/') {
                        done.clear();
                    }
                    todo.extend(target.split('/').rev().map(String::from));
                }
                _ => done.push(c),
            }
        }
        format!("/{}", done.join("/"))
    }

    /// The errno for a path that does not resolve: `ENOTDIR` when one of
    /// its ancestors is not a directory (`file.txt/x`), else `ENOENT`.
    pub fn absent_errno(&mut self, path: &str) -> i32 {
        let mut ancestors = Vec::new();
        let mut p = parent_of(path);
        while p != "/" {
            ancestors.push(p.clone());
            p = parent_of(&p);
        }
        for a in ancestors.iter().rev() {
            match self.resolve(a, true) {
                Resolved::Missing => return libc::ENOENT,
                r if !r.is_dir() => return libc::ENOTDIR,
                _ => {}
            }
        }
        libc::ENOENT
    }

    fn deleted_ancestor(&self, path: &str) -> bool {
        let mut p = parent_of(path);
        while p != "/" {
            if matches!(self.overlay.get(&p), Some(OverlayNode::Deleted)) {
                return true;
            }
            p = parent_of(&p);
        }
        false
    }

    /// The inode a file of the overlay at `path` names (no link is
    /// followed).
    pub fn overlay_inode(&self, path: &str) -> Option<u64> {
        match self.overlay.get(path) {
            Some(OverlayNode::File { ino }) => Some(*ino),
            _ => None,
        }
    }

    /// An inode of the overlay, while some name or open file keeps it.
    pub fn inode(&self, ino: u64) -> Option<&Inode> {
        self.inodes.get(&ino)
    }

    /// The bytes of a file in the overlay (holes read as zeros).
    pub fn overlay_data(&self, path: &str) -> Option<Vec<u8>> {
        self.inode(self.overlay_inode(path)?)
            .map(|f| f.data.to_vec())
    }

    /// The size of a file in the overlay.
    pub fn overlay_len(&self, path: &str) -> Option<u64> {
        self.inode(self.overlay_inode(path)?).map(|f| f.data.len())
    }

    /// An inode's bytes, writable, with the overlay's space they count
    /// against.
    pub fn file_mut(&mut self, ino: u64) -> Option<(&mut FileData, &mut Space)> {
        let f = self.inodes.get_mut(&ino)?;
        Some((&mut f.data, &mut self.space))
    }

    /// Creates or replaces a file in the overlay: a new inode holding
    /// `data`; ENOSPC when the overlay has no room for it.
    pub fn put_file(&mut self, path: &str, data: &[u8], mode: u32) -> Result<(), i32> {
        let mut file = FileData::default();
        file.write_at(0, data, &mut self.space)?;
        let ino = self.next_ino;
        self.next_ino += 1;
        let number = inode_of(path);
        self.inodes.insert(
            ino,
            Inode {
                data: file,
                mode,
                links: 0,
                hidden: 0,
                number,
            },
        );
        self.name(path, OverlayNode::File { ino });
        Ok(())
    }

    /// Links the overlay file at `from` under the name `to` too (a hard
    /// link: one inode, two names); whether `from` is an overlay file.
    pub fn link_file(&mut self, from: &str, to: &str) -> bool {
        let Some(ino) = self.overlay_inode(from) else {
            return false;
        };
        self.name(to, OverlayNode::File { ino });
        true
    }

    /// Sets the mode of the overlay file at `path` (every name's).
    pub fn set_mode(&mut self, path: &str, mode: u32) {
        if let Some(ino) = self.overlay_inode(path) {
            self.inodes.get_mut(&ino).expect("named").mode = mode;
        }
    }

    /// Puts `node` at `path`, counting the links of the inodes it names
    /// and replaces. An inode no name is linked to any more is gone (open
    /// descriptors keep theirs under a hidden name, see `sys_tree`).
    fn name(&mut self, path: &str, node: OverlayNode) {
        let hidden = u32::from(path.starts_with('\0'));
        if let OverlayNode::File { ino } = node {
            let f = self.inodes.get_mut(&ino).expect("a live inode");
            f.links += 1;
            f.hidden += hidden;
        }
        if let Some(OverlayNode::File { ino }) = self.overlay.insert(path.to_string(), node) {
            let f = self.inodes.get_mut(&ino).expect("a live inode");
            f.links -= 1;
            f.hidden -= hidden;
            if f.links == 0 {
                let gone = self.inodes.remove(&ino).expect("a live inode");
                self.space.used -= gone.data.stored();
            }
        }
    }

    /// Creates a directory in the overlay.
    pub fn put_dir(&mut self, path: &str, mode: u32) {
        self.name(path, OverlayNode::Dir { mode });
    }

    /// Creates a symlink in the overlay.
    pub fn put_symlink(&mut self, path: &str, target: &str) {
        let target = target.to_string();
        self.name(path, OverlayNode::Symlink { target });
    }

    /// Names a unix socket: bound socket `id` of `sys_net`.
    pub fn put_socket(&mut self, path: &str, id: u64, mode: u32) {
        self.name(path, OverlayNode::Socket { id, mode });
    }

    /// How many paths the overlay holds (a fresh suffix for a hidden one).
    pub fn overlay_paths(&self) -> usize {
        self.overlay.len()
    }

    /// Removes a path (hiding the host's copy, if any).
    pub fn remove(&mut self, path: &str) {
        self.name(path, OverlayNode::Deleted);
    }

    /// Moves an overlay node (a host node is copied up first by the caller).
    pub fn rename(&mut self, from: &str, to: &str) {
        let moved: Vec<(String, OverlayNode)> = self
            .overlay
            .range(from.to_string()..)
            .take_while(|(k, _)| k.as_str() == from || k.starts_with(&format!("{from}/")))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        for (k, v) in moved {
            let dest = format!("{to}{}", &k[from.len()..]);
            // The name moves: link it at its new place first.
            self.name(&dest, v);
            self.name(&k, OverlayNode::Deleted);
        }
    }

    /// The entries of a directory: the host's, changed by the overlay,
    /// sorted by name.
    pub fn list(&mut self, path: &str) -> Vec<(String, NodeKind)> {
        let mut map: BTreeMap<String, NodeKind> = BTreeMap::new();
        let host_visible = !matches!(self.overlay.get(path), Some(OverlayNode::Dir { .. }))
            || self.source.lock().unwrap().lookup(path, true).is_dir();
        if host_visible && !self.deleted_ancestor(path) {
            if let Some(entries) = self.source.lock().unwrap().list(path) {
                map.extend(entries);
            }
        }
        let prefix = if path == "/" {
            "/".to_string()
        } else {
            format!("{path}/")
        };
        for (k, v) in self.overlay.range(prefix.clone()..) {
            if !k.starts_with(&prefix) {
                break;
            }
            let name = &k[prefix.len()..];
            if name.contains('/') {
                continue;
            }
            match v {
                OverlayNode::Deleted => {
                    map.remove(name);
                }
                OverlayNode::File { .. } => {
                    map.insert(name.to_string(), NodeKind::File);
                }
                OverlayNode::Dir { .. } => {
                    map.insert(name.to_string(), NodeKind::Dir);
                }
                OverlayNode::Symlink { .. } => {
                    map.insert(name.to_string(), NodeKind::Symlink);
                }
                OverlayNode::Socket { .. } => {
                    map.insert(name.to_string(), NodeKind::Socket);
                }
            }
        }
        map.into_iter().collect()
    }

    /// Whether the guest wrote anything.
    pub fn overlay_is_empty(&self) -> bool {
        self.overlay.is_empty()
    }
}

impl HostNode {
    fn is_dir(&self) -> bool {
        matches!(self, HostNode::Dir { .. })
    }
}

/// The directory part of a normalized path.
pub fn parent_of(path: &str) -> String {
    match path.rfind('/') {
        Some(0) | None => "/".to_string(),
        Some(i) => path[..i].to_string(),
    }
}

/// A stable inode number for a path (the same on every machine).
pub fn inode_of(path: &str) -> u64 {
    xxhash_rust::xxh3::xxh3_64(path.as_bytes()) & 0x7fff_ffff_ffff
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vfs() -> Vfs {
        Vfs::new(FileSource::recorded(BTreeMap::new()))
    }

    #[test]
    fn paths_are_normalized_against_the_cwd() {
        assert_eq!(normalize("/work", "a/./b/../c"), "/work/a/c");
        assert_eq!(normalize("/work", "/x//y/"), "/x/y");
        assert_eq!(normalize("/work", "../../.."), "/");
    }

    #[test]
    fn hard_links_name_one_inode_that_lives_while_a_name_does() {
        let mut v = vfs();
        v.put_dir("/work", 0o755);
        v.put_file("/work/a", b"one", 0o644).unwrap();
        assert!(v.link_file("/work/a", "/work/b"));
        let ino = v.overlay_inode("/work/b").unwrap();
        let (data, space) = v.file_mut(ino).unwrap();
        data.write_at(3, b"!", space).unwrap();
        assert_eq!(v.overlay_data("/work/a").unwrap(), b"one!");
        let Resolved::OverlayFile {
            ino, links, number, ..
        } = v.resolve("/work/a", true)
        else {
            panic!("a file");
        };
        assert_eq!(links, 2);
        assert_eq!(
            number,
            inode_of("/work/a"),
            "its number is its first name's"
        );
        v.remove("/work/a");
        assert!(v.inode(ino).is_some(), "b still names it");
        v.rename("/work/b", "/work/c");
        assert_eq!(v.overlay_inode("/work/c"), Some(ino));
        v.put_file("/work/c", &[], 0o644).unwrap();
        assert!(v.inode(ino).is_none(), "replaced: no name is left");
    }

    #[test]
    fn canonical_paths_resolve_every_link_on_the_way() {
        let mut v = vfs();
        v.put_dir("/usr", 0o755);
        v.put_dir("/usr/bin", 0o755);
        v.put_file("/usr/bin/dash", &[], 0o755).unwrap();
        v.put_symlink("/bin", "usr/bin");
        v.put_symlink("/usr/bin/sh", "dash");
        assert_eq!(v.canonical("/bin/sh"), "/usr/bin/dash");
        assert_eq!(v.canonical("/bin/../bin/./sh"), "/usr/bin/dash");
        assert_eq!(v.canonical("/usr/bin/missing"), "/usr/bin/missing");
        v.put_symlink("/loop", "/loop");
        assert_eq!(v.canonical("/loop"), "/loop", "a loop ends");
    }

    #[test]
    fn overlay_files_shadow_and_deletions_hide() {
        let mut v = vfs();
        v.put_dir("/work", 0o755);
        v.put_file("/work/f", b"hi", 0o644).unwrap();
        assert!(matches!(
            v.resolve("/work/f", true),
            Resolved::OverlayFile { size: 2, .. }
        ));
        assert_eq!(v.list("/work"), vec![("f".to_string(), NodeKind::File)]);
        v.rename("/work/f", "/work/g");
        assert!(!v.resolve("/work/f", true).exists());
        assert!(v.resolve("/work/g", true).exists());
        v.remove("/work/g");
        assert!(v.list("/work").is_empty());
    }

    #[test]
    fn host_lookups_are_recorded_including_misses() {
        let src = FileSource::host();
        let mut v = Vfs::new(src.clone());
        let missing = "/etc/hostname-that-does-not-exist";
        assert!(!v.resolve(missing, true).exists());
        assert!(matches!(v.resolve("/etc", true), Resolved::HostDir { .. }));
        let rec = src.lock().unwrap();
        assert!(matches!(
            rec.recording().get("/etc/hostname-that-does-not-exist"),
            Some(HostNode::Missing)
        ));
    }
}
