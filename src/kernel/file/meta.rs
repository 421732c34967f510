//! What `stat` says of a file: by path, or of an open description of any
//! kind. Made up and the same on every machine, save a host file's times,
//! owner and links, which are the host's as recorded.

use crate::kernel::Kernel;
use crate::kernel::file::pty;
use crate::kernel::files::FileKind;
use crate::kernel::synth::{device, exe_link, is_proc_dir, is_virtual_tree, proc_path, synthetic};
use crate::kernel::vfs::{HostStat, Resolved, inode_of};

/// File metadata as the guest sees it.
pub(in crate::kernel) struct Meta {
    pub(in crate::kernel) mode: u32,
    pub(in crate::kernel) size: u64,
    pub(in crate::kernel) ino: u64,
    pub(in crate::kernel) rdev: u64,
    pub(in crate::kernel) nlink: u64,
    /// The host's metadata, for a host file: its times, owner, links and
    /// allocation replace the made-up ones.
    pub(in crate::kernel) stat: Option<HostStat>,
}

impl Meta {
    /// Made-up metadata: one link, no device, nothing of the host's.
    fn new(mode: u32, size: u64, ino: u64) -> Meta {
        Meta {
            mode,
            size,
            ino,
            rdev: 0,
            nlink: 1,
            stat: None,
        }
    }
}

pub(in crate::kernel) const S_IFREG: u32 = 0o100000;
pub(in crate::kernel) const S_IFDIR: u32 = 0o040000;
pub(in crate::kernel) const S_IFLNK: u32 = 0o120000;
pub(in crate::kernel) const S_IFSOCK: u32 = 0o140000;
pub(in crate::kernel) const S_IFCHR: u32 = 0o020000;

/// What `stat` says of an end of pseudoterminal pair `id`: the
/// multiplexer's device (`/dev/ptmx`, which every master is; devpts's own
/// `/dev/pts/ptmx` has no permissions) or the slave's (`/dev/pts/N`,
/// root's and private, devpts's default when mounted with no options).
fn pty_meta(id: u32, end: pty::End, path: &str) -> Meta {
    let mode = match end {
        pty::End::Master if path == "/dev/pts/ptmx" => 0,
        pty::End::Master => 0o666,
        pty::End::Slave => 0o600,
    };
    Meta {
        rdev: pty::rdev(id, end),
        ..Meta::new(S_IFCHR | mode, 0, inode_of(path))
    }
}

/// What `stat` says of `path` (of where it leads, with `follow`).
pub(in crate::kernel) fn meta_of_path(
    k: &mut Kernel,
    path: &str,
    follow: bool,
) -> Result<Meta, i32> {
    let ino = inode_of(path);
    if path == "/dev/tty" {
        return Ok(Meta {
            // 5:0, as on Linux.
            rdev: 0x500,
            ..Meta::new(S_IFCHR | 0o666, 0, ino)
        });
    }
    if path == "/dev/ptmx" || path == "/dev/pts/ptmx" {
        return Ok(pty_meta(0, pty::End::Master, path));
    }
    if let Some(id) = pty::slave_named(k, path) {
        return Ok(pty_meta(id, pty::End::Slave, path));
    }
    if let Some(kind) = device(path) {
        let rdev = match kind {
            FileKind::Null => 0x103,
            FileKind::Zero => 0x105,
            _ => 0x109,
        };
        return Ok(Meta {
            mode: S_IFCHR | 0o666,
            size: 0,
            ino,
            rdev,
            nlink: 1,
            stat: None,
        });
    }
    if is_virtual_tree(path) {
        if synthetic(k, path).is_some() {
            return Ok(Meta::new(S_IFREG | 0o444, 0, ino));
        }
        let dirs = [
            "/proc",
            "/proc/self",
            "/sys",
            "/sys/devices",
            "/sys/devices/system",
            "/sys/devices/system/cpu",
        ];
        let proc = proc_path(k, path);
        if path == "/proc/self" && !follow {
            return Ok(Meta::new(S_IFLNK | 0o777, 0, ino));
        }
        if dirs.contains(&path) || proc.is_some_and(|p| is_proc_dir(p.rest)) {
            return Ok(Meta {
                nlink: 2,
                ..Meta::new(S_IFDIR | 0o555, 0, ino)
            });
        }
        if proc.is_some_and(|p| p.rest == "/exe" || p.rest.starts_with("/fd/")) && !follow {
            return Ok(Meta::new(S_IFLNK | 0o777, 0, ino));
        }
        if let Some(p) = proc.filter(|p| p.rest == "/exe") {
            let exe = exe_link(k, p.pid).ok_or(libc::ENOENT)?;
            return meta_of_path(k, &exe, true);
        }
        return Err(libc::ENOENT);
    }
    let (resolved, host) = k.vfs.resolve_with_stat(path, follow);
    let host_meta = |m: Meta| -> Meta {
        match host {
            Some(st) => Meta {
                nlink: st.nlink,
                size: if m.mode & S_IFDIR == S_IFDIR {
                    st.size
                } else {
                    m.size
                },
                stat: Some(st),
                ..m
            },
            None => m,
        }
    };
    let meta = match resolved {
        Resolved::HostFile { size, mode } => Ok(Meta::new(S_IFREG | mode, size, ino)),
        Resolved::OverlayFile {
            mode,
            size,
            number,
            links,
            ..
        } => Ok(Meta {
            nlink: links.max(1).into(),
            ..Meta::new(S_IFREG | mode, size, number)
        }),
        Resolved::HostDir { mode } | Resolved::OverlayDir { mode } => Ok(Meta {
            nlink: 2,
            ..Meta::new(S_IFDIR | mode, 4096, ino)
        }),
        Resolved::Symlink { target } => Ok(Meta::new(S_IFLNK | 0o777, target.len() as u64, ino)),
        Resolved::Socket { mode, .. } => Ok(Meta::new(S_IFSOCK | mode, 0, ino)),
        Resolved::Missing => Err(k.vfs.absent_errno(path)),
    };
    meta.map(host_meta)
}

/// What `fstat` says of descriptor `fd`.
pub(in crate::kernel) fn meta_of_fd(k: &mut Kernel, fd: i32) -> Result<Meta, i32> {
    let f = k.files().get(fd).ok_or(libc::EBADF)?.clone();
    let ino = inode_of(&f.path);
    match &f.kind {
        FileKind::Host(d) => Ok(Meta::new(S_IFREG | 0o644, d.len() as u64, ino)).map(|m| {
            match k.vfs.resolve_with_stat(&f.path, true) {
                (Resolved::HostFile { mode, .. }, stat) => Meta {
                    mode: S_IFREG | mode,
                    nlink: stat.map_or(1, |s| s.nlink),
                    stat,
                    ..m
                },
                _ => m,
            }
        }),
        FileKind::Overlay => meta_of_path(k, &f.path, true),
        FileKind::Synthetic(_) => Ok(Meta::new(S_IFREG | 0o444, 0, ino)),
        FileKind::Dir(_) | FileKind::PathOnly => meta_of_path(k, &f.path, true),
        FileKind::Stdin | FileKind::Output(_) => {
            // A pipe, as when a test runs under a harness that captures output.
            Ok(Meta::new(0o010000 | 0o600, 0, 1000 + fd as u64))
        }
        FileKind::Null | FileKind::Zero | FileKind::Random => meta_of_path(k, &f.path, true),
        // The host's terminal, or what stands for it.
        FileKind::HostStream(_) => Ok(Meta::new(libc::S_IFCHR | 0o620, 0, 1100 + fd as u64)),
        // Anonymous inodes, as Linux's eventfd and epoll.
        FileKind::TimerFd { id, .. } => Ok(Meta::new(0o600, 0, 7000 + *id)),
        FileKind::SignalFd { .. } => Ok(Meta::new(0o600, 0, 8000 + fd as u64)),
        FileKind::PidFd { pid } => Ok(Meta::new(0o600, 0, 6000 + u64::from(pid.0))),
        FileKind::EventFd { id, .. } | FileKind::Epoll { id } => {
            Ok(Meta::new(0o600, 0, 4000 + *id))
        }
        FileKind::Pipe { id, .. } => Ok(Meta::new(libc::S_IFIFO | 0o600, 0, 3000 + *id)),
        FileKind::PtyMaster { id } => Ok(pty_meta(*id, pty::End::Master, &f.path)),
        FileKind::PtySlave { id } => Ok(pty_meta(*id, pty::End::Slave, &f.path)),
        FileKind::Socket { .. } | FileKind::BoundSocket { .. } | FileKind::SocketPair { .. } => {
            Ok(Meta::new(libc::S_IFSOCK | 0o777, 0, 2000 + fd as u64))
        }
    }
}

/// Owner, allocated blocks and the time (seconds, nanoseconds) `stat`
/// reports: the host's for a host file, else root's, the size's, and the
/// run's boot time.
pub(in crate::kernel) fn times_and_owner(k: &Kernel, m: &Meta) -> (u32, u32, u64, i64, u32) {
    match m.stat {
        Some(st) => (st.uid, st.gid, st.blocks, st.mtime, st.mtime_nsec),
        None => (0, 0, m.size.div_ceil(512), k.config.epoch as i64, 0),
    }
}
