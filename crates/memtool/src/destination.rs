//! Where a command's output goes, by name: standard output or a file (its
//! symlinks followed), and the temporary name the file is written under
//! until it is renamed into place. Below both `output`, which writes there,
//! and `supervise`, which removes the temporary name a killed child left.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

/// Whether output for `-o path` goes to standard output: no `-o`, or `-o -`.
pub fn is_stdout(path: Option<&Path>) -> bool {
    path.is_none_or(|p| p.as_os_str() == "-")
}

/// The file `path` names once its symlinks are followed (each link's target
/// read relative to the link's folder), or `path` when it is no symlink. A
/// dangling link gives the path it points to, where the output is created,
/// as a shell's `>` does.
pub fn follow_links(path: &Path) -> io::Result<PathBuf> {
    let mut path = path.to_path_buf();
    // Linux's own limit on links followed in one lookup.
    for _ in 0..40 {
        match fs::symlink_metadata(&path) {
            Ok(meta) if meta.file_type().is_symlink() => {
                let to = fs::read_link(&path)?;
                path = match path.parent() {
                    Some(dir) => dir.join(to),
                    None => to,
                };
            }
            _ => return Ok(path),
        }
    }
    Err(io::Error::other("too many levels of symbolic links"))
}

/// The name of the temporary file the output for `path` (followed through
/// its symlinks) is written under until it is renamed into place
/// (`output::write_atomically`): `.NAME.memtool-PID.tmp` beside it, PID the
/// one the caller sees (the supervisor's, `supervise::visible_pid`), so the
/// supervisor can remove it when the process writing it is killed.
pub fn temporary_name(path: &Path, pid: u32) -> PathBuf {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    dir.join(format!(".{name}.memtool-{pid}.tmp"))
}
