//! Who may reach the filer's data: file and socket modes, and a loud word
//! when NBD is open to the network.
//!
//! Every LUN lies in plain files (the disk images, and the NVLog's recent
//! writes), so anyone who can read them reads every LUN, and anyone who can
//! connect to an NBD socket reads and writes them. The server therefore
//! keeps its data owner-only whatever it inherits: it adds `077` to the
//! process's umask before creating anything (so the configuration's
//! temporary file, a replacement disk and every socket are born without
//! group or other bits), creates its own files with mode `0600` explicitly,
//! and takes group and other bits off the data directory and the files it
//! knows (the configuration, the lock, the NVLog, the disks) when it finds
//! them there, saying so in the log: the directory is the one gate, and a
//! directory made by hand (`mkdir` gives 0755) or loosened later is closed
//! again rather than refused, since closing it is what the administrator
//! would be told to do. The NBD Unix sockets get mode `0600` unless
//! `--socket-mode` says otherwise. Plain TCP has no access control (only
//! a client with a TLS certificate is masked), so listening on anything but
//! a loopback address without `--tls-require --tls-ca` is allowed but
//! warned about on standard error.

use std::fs;
use std::io;
use std::net::SocketAddr;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use rustix::fs::Mode;

/// The mode of the files the server creates in its data directory.
pub(crate) const DATA_FILE_MODE: u32 = 0o600;
/// The bits no one but the owner may have on data.
const OTHERS: u32 = 0o077;

/// Adds group and other bits to the process's umask, so that nothing the
/// server creates is born readable by others, whoever creates it.
pub(crate) fn restrict_umask() {
    let current = rustix::process::umask(Mode::from_raw_mode(OTHERS));
    rustix::process::umask(current | Mode::from_raw_mode(OTHERS));
}

/// Takes group and other bits off `path` if it has any; returns the mode it
/// had when it changed it.
pub(crate) fn make_owner_only(path: &Path) -> io::Result<Option<u32>> {
    let mode = fs::metadata(path)?.permissions().mode() & 0o7777;
    if mode & OTHERS == 0 {
        return Ok(None);
    }
    fs::set_permissions(path, fs::Permissions::from_mode(mode & !OTHERS))?;
    Ok(Some(mode))
}

/// Makes the data directory and the given files in it owner-only, logging
/// each one it had to close. Files that do not exist are left to the checks
/// that look for them.
pub(crate) fn secure_data_dir(dir: &Path, files: &[&str]) -> io::Result<()> {
    if let Some(was) = make_owner_only(dir)? {
        tracing::warn!(
            "data directory {} was mode {was:04o}, open to other users: set to {:04o}",
            dir.display(),
            was & !OTHERS
        );
    }
    for name in files {
        let path = dir.join(name);
        match make_owner_only(&path) {
            Ok(Some(was)) => tracing::warn!(
                "{} was mode {was:04o}: set to {:04o}",
                path.display(),
                was & !OTHERS
            ),
            Ok(None) => {}
            Err(error) if error.kind() == io::ErrorKind::NotFound => {}
            Err(error) => return Err(error),
        }
    }
    Ok(())
}

/// Logs a warning when `address` reaches beyond this machine.
pub(crate) fn warn_if_exposed(address: &SocketAddr) {
    if address.ip().is_loopback() {
        return;
    }
    tracing::warn!(
        "WARNING: NBD on {address} is open to the network with no access control (plain \
         clients are not masked): any host that reaches it can read and write every LUN. \
         Listen on a loopback address or a --socket, or require TLS with client certificates \
         (--tls-require --tls-ca), unless every host on that network is trusted"
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_group_and_other_bits_are_taken_off() {
        let dir = tempfile::tempdir().expect("a scratch directory");
        let path = dir.path().join("f");
        fs::write(&path, b"x").expect("written");
        fs::set_permissions(&path, fs::Permissions::from_mode(0o754)).expect("chmod");
        assert_eq!(make_owner_only(&path).expect("chmod"), Some(0o754));
        let mode = fs::metadata(&path).expect("stat").permissions().mode() & 0o7777;
        assert_eq!(mode, 0o700);
        assert_eq!(make_owner_only(&path).expect("chmod"), None);
    }
}
