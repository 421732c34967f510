//! Files written so that a reader never sees half of one.

use std::io::Write;
use std::path::Path;

/// Writes `data` to `path` through a temporary file in the same directory
/// and a rename, so `path` holds either the old or the new contents.
pub fn write_atomically(path: &Path, data: &[u8]) -> std::io::Result<()> {
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let mut tmp = tempfile::NamedTempFile::new_in(dir)?;
    tmp.write_all(data)?;
    tmp.as_file().sync_all()?;
    tmp.persist(path).map_err(|e| e.error)?;
    Ok(())
}
