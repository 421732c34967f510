//! Files in and out of the host: written so that a reader never sees half
//! of one and nothing but a regular file is ever replaced; read only when
//! they are regular files of a bounded size.

use std::io::{Read, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Who may read a file written by [`write_atomically_as`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Readers {
    /// 0644 minus the umask, as files people hand on should be.
    Everyone,
    /// 0600: the contents are private (a reproducer holding files only its
    /// owner could read).
    Owner,
}

/// Whether `path` may be written: a missing path or a regular file, never a
/// symbolic link (it would be replaced, not followed), a device, a FIFO, a
/// socket or a directory. The message says what to do instead.
pub fn check_destination(path: &Path) -> std::io::Result<()> {
    let refuse = |what: &str| {
        Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!(
                "{} is {what}, not a regular file: give the path of a new or regular file",
                path.display()
            ),
        ))
    };
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_symlink() => refuse("a symbolic link"),
        Ok(m) if m.is_dir() => refuse("a directory"),
        Ok(m) if !m.is_file() => refuse("a device, FIFO or socket"),
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
    }
}

/// Writes `data` to `path` for everyone to read (see
/// [`write_atomically_as`]).
pub fn write_atomically(path: &Path, data: &[u8]) -> std::io::Result<()> {
    write_atomically_as(path, data, Readers::Everyone)
}

/// Writes `data` to `path` through a temporary file in the same directory
/// and a rename, so `path` holds either the old or the new contents. Only a
/// missing path or a regular file is replaced ([`check_destination`]).
pub fn write_atomically_as(path: &Path, data: &[u8], readers: Readers) -> std::io::Result<()> {
    check_destination(path)?;
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let mut tmp = tempfile::NamedTempFile::new_in(dir)?;
    let mode = match readers {
        Readers::Everyone => 0o644 & !umask(),
        Readers::Owner => 0o600,
    };
    tmp.as_file()
        .set_permissions(std::fs::Permissions::from_mode(mode))?;
    tmp.write_all(data)?;
    tmp.as_file().sync_all()?;
    // Checked again just before the rename: the window is what a rename
    // leaves, and nothing here follows a link.
    check_destination(path)?;
    tmp.persist(path).map_err(|e| e.error)?;
    Ok(())
}

/// The process's umask, read without changing it (`umask(2)` can only be
/// read by setting it, which would race with other threads creating files).
fn umask() -> u32 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Umask:"))
                .and_then(|v| u32::from_str_radix(v.trim(), 8).ok())
        })
        .unwrap_or(0o022)
}

/// Reads a file someone else may have made (a reproducer, a schedule, a
/// corpus or sync entry): opened without blocking (a FIFO cannot stall the
/// reader), and read only if it is a regular file of at most `limit` bytes.
pub fn read_foreign(path: &Path, limit: u64) -> std::io::Result<Vec<u8>> {
    let file = open_foreign(path)?;
    let meta = file.metadata()?;
    if meta.len() > limit {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!(
                "{} bytes, more than the {} bytes such a file may have",
                meta.len(),
                limit
            ),
        ));
    }
    let mut data = Vec::with_capacity(meta.len() as usize);
    // A file that grows while it is read is cut at the limit.
    file.take(limit + 1).read_to_end(&mut data)?;
    if data.len() as u64 > limit {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("more than the {limit} bytes such a file may have"),
        ));
    }
    Ok(data)
}

/// Opens a file someone else may have made, to read: without blocking (a
/// FIFO cannot stall the reader) and only if it is a regular file.
pub fn open_foreign(path: &Path) -> std::io::Result<std::fs::File> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)?;
    if !file.metadata()?.is_file() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "not a regular file",
        ));
    }
    Ok(file)
}

/// rewind-fuzz's cache directory: `$XDG_CACHE_HOME/rewind-fuzz`, else
/// `~/.cache/rewind-fuzz`, else one under the system's temporary directory.
pub fn cache_dir() -> PathBuf {
    std::env::var_os("XDG_CACHE_HOME")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .unwrap_or_else(std::env::temp_dir)
        .join("rewind-fuzz")
}

/// Whether files can be created in `dir` (made if missing).
pub fn is_writable_dir(dir: &Path) -> bool {
    if std::fs::create_dir_all(dir).is_err() {
        return false;
    }
    // A new file of a random name (O_CREAT | O_EXCL, which follows no
    // link and truncates nothing), removed when dropped.
    tempfile::Builder::new()
        .prefix(".write-test-")
        .tempfile_in(dir)
        .is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probing_a_directory_leaves_what_its_names_point_at_alone() {
        let dir = tempfile::tempdir().unwrap();
        let kept = dir.path().join("kept");
        std::fs::write(&kept, "keep me").unwrap();
        let old = dir
            .path()
            .join(format!(".write-test-{}", std::process::id()));
        std::os::unix::fs::symlink(&kept, &old).unwrap();
        assert!(is_writable_dir(dir.path()));
        assert_eq!(std::fs::read_to_string(&kept).unwrap(), "keep me");
        let mut names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        names.sort();
        assert_eq!(names.len(), 2, "the probe is gone: {names:?}");
    }

    #[test]
    fn only_missing_paths_and_regular_files_are_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("f");
        write_atomically(&file, b"one").unwrap();
        write_atomically(&file, b"two").unwrap();
        assert_eq!(std::fs::read(&file).unwrap(), b"two");
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&file, &link).unwrap();
        assert!(write_atomically(&link, b"three").is_err());
        assert!(
            std::fs::symlink_metadata(&link)
                .unwrap()
                .file_type()
                .is_symlink()
        );
        assert_eq!(std::fs::read(&file).unwrap(), b"two");
        assert!(write_atomically(Path::new("/dev/null"), b"x").is_err());
        assert!(write_atomically(dir.path(), b"x").is_err());
    }

    #[test]
    fn files_are_readable_by_everyone_unless_private() {
        let dir = tempfile::tempdir().unwrap();
        let open = dir.path().join("open");
        write_atomically(&open, b"x").unwrap();
        let mode = std::fs::metadata(&open).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o644 & !umask());
        let private = dir.path().join("private");
        write_atomically_as(&private, b"x", Readers::Owner).unwrap();
        let mode = std::fs::metadata(&private).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
    }

    #[test]
    fn foreign_files_must_be_regular_and_small() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
        assert!(
            read_foreign(&fifo, 100).is_err(),
            "a FIFO is refused, without blocking"
        );
        let big = dir.path().join("big");
        std::fs::write(&big, vec![0u8; 101]).unwrap();
        assert!(read_foreign(&big, 100).is_err());
        assert_eq!(read_foreign(&big, 101).unwrap().len(), 101);
    }
}
