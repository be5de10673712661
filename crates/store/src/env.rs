//! The LMDB environment: opening one with the flags of a durability, and
//! the writer lock beside it. The lowest floor of the store: the handle
//! ([`crate::lmdb`]) and the search index both open theirs here.

use std::path::Path;

use heed::{Env, EnvFlags, EnvOpenOptions};

use crate::{Durability, StoreError, StoreResult};

/// Opens the LMDB environment in directory `path` with the flags of
/// `durability`.
pub(crate) fn open_env(
    path: &Path,
    map_size: usize,
    max_tables: u32,
    durability: Durability,
) -> StoreResult<Env> {
    let mut options = EnvOpenOptions::new();
    options
        .map_size(map_size)
        .max_dbs(max_tables)
        .max_readers(512);
    let flags = match durability {
        Durability::Full => EnvFlags::empty(),
        Durability::Meta => EnvFlags::NO_META_SYNC,
        Durability::None => EnvFlags::NO_SYNC,
    };
    // SAFETY: the flags are documented LMDB flags; each environment is
    // opened once per process and path, by the store that owns it (the
    // relay holds it for its lifetime).
    let env = unsafe {
        options.flags(flags | EnvFlags::NO_READ_AHEAD);
        options.open(path)?
    };
    Ok(env)
}

/// Takes the writer lock of the database in `dir`, released when the file
/// is closed (also when the process dies).
pub(crate) fn take_writer_lock(dir: &Path) -> StoreResult<std::fs::File> {
    let path = dir.join("writer.lock");
    let file = std::fs::File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(|e| StoreError::Lmdb(heed::Error::Io(e)))?;
    use std::os::fd::AsRawFd;
    // SAFETY: flock on a descriptor this function owns; no memory involved.
    if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0 {
        return Ok(file);
    }
    let e = std::io::Error::last_os_error();
    match e.kind() {
        std::io::ErrorKind::WouldBlock => Err(StoreError::Busy(format!(
            "{} is held by another process (a relay or an import on the same database)",
            path.display()
        ))),
        _ => Err(StoreError::Lmdb(heed::Error::Io(e))),
    }
}
