//! The daemon's Unix socket: bind (or take systemd's), reclaim a stale one, refuse to
//! start beside a live rigd, set its mode and group, remove it on the way out.

use std::{
    fs, io,
    os::unix::{
        fs::{FileTypeExt, MetadataExt, PermissionsExt},
        net::{UnixListener, UnixStream},
    },
    path::{Path, PathBuf},
};

/// Why the socket could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum SocketError {
    #[error("Another rigd is already serving on {path}")]
    InUse { path: PathBuf },
    #[error("{path} exists and is not a socket; refusing to replace it")]
    NotASocket { path: PathBuf },
    #[error("Failed to create the socket directory {path}")]
    Dir {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("Failed to bind {path}")]
    Bind {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("Failed to set owner and mode of {path}")]
    Permissions {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("Failed to use the socket systemd passed")]
    Systemd(#[source] crate::sys::systemd::ListenError),
}

/// The name rigd.socket gives its descriptor (`FileDescriptorName=`).
pub const SYSTEMD_NAME: &str = "rigd";

/// A bound listener; removes its socket file when dropped, if it created it.
#[derive(Debug)]
pub struct Bound {
    pub listener: UnixListener,
    owned_path: Option<(PathBuf, u64)>,
    /// Where it came from, for the log: `systemd (rigd)` or the bound path.
    pub origin: String,
}

impl Drop for Bound {
    fn drop(&mut self) {
        // Remove the file only if it is still the one we bound (same inode): a second
        // daemon that replaced it keeps its own.
        if let Some((path, ino)) = &self.owned_path
            && fs::symlink_metadata(path).is_ok_and(|m| m.ino() == *ino)
        {
            let _ = fs::remove_file(path);
        }
    }
}

/// Takes systemd's socket when one was passed (named [`SYSTEMD_NAME`], or the only
/// one), else binds `path` with `mode` and group. Variables inherited from another
/// activated process (`LISTEN_PID` not ours) are ignored, as sd_listen_fds(3) does.
///
/// # Errors
/// [`SocketError`]: what systemd passed is not a usable listener
/// ([`SocketError::Systemd`]), a live daemon on the path, a non-socket file there, or
/// bind, directory or permission failures.
pub fn listen(path: &Path, gid: Option<u32>) -> Result<Bound, SocketError> {
    use crate::sys::systemd::{ListenError, take_listener};
    match take_listener(SYSTEMD_NAME) {
        Ok(Some(passed)) => {
            for name in &passed.closed {
                tracing::warn!(
                    "systemd passed a socket named {name:?} that rigd does not use; closed it"
                );
            }
            Ok(Bound {
                listener: passed.listener,
                owned_path: None,
                origin: format!("systemd ({})", passed.name),
            })
        }
        Ok(None) => bind(path, gid),
        Err(e @ ListenError::OtherProcess { .. }) => {
            tracing::warn!("ignoring LISTEN_FDS: {e}");
            bind(path, gid)
        }
        Err(e) => Err(SocketError::Systemd(e)),
    }
}

/// Binds a fresh socket at `path`: 0660 with group `gid`, or 0600 when none is given.
///
/// # Errors
/// As [`listen`].
pub fn bind(path: &Path, gid: Option<u32>) -> Result<Bound, SocketError> {
    reclaim_stale(path)?;
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        fs::create_dir_all(dir).map_err(|source| SocketError::Dir {
            path: dir.to_owned(),
            source,
        })?;
    }
    let listener = UnixListener::bind(path).map_err(|source| SocketError::Bind {
        path: path.to_owned(),
        source,
    })?;
    let perms = |source| SocketError::Permissions {
        path: path.to_owned(),
        source,
    };
    let mode = if gid.is_some() { 0o660 } else { 0o600 };
    if let Some(gid) = gid {
        std::os::unix::fs::chown(path, None, Some(gid)).map_err(perms)?;
    }
    fs::set_permissions(path, fs::Permissions::from_mode(mode)).map_err(perms)?;
    let ino = fs::symlink_metadata(path).map_err(perms)?.ino();
    Ok(Bound {
        listener,
        owned_path: Some((path.to_owned(), ino)),
        origin: path.display().to_string(),
    })
}

/// Removes a socket nobody answers on; refuses when a daemon answers or the path is
/// something else.
fn reclaim_stale(path: &Path) -> Result<(), SocketError> {
    let Ok(meta) = fs::symlink_metadata(path) else {
        return Ok(());
    };
    if !meta.file_type().is_socket() {
        return Err(SocketError::NotASocket {
            path: path.to_owned(),
        });
    }
    match UnixStream::connect(path) {
        Ok(_) => Err(SocketError::InUse {
            path: path.to_owned(),
        }),
        Err(_) => fs::remove_file(path).map_err(|source| SocketError::Bind {
            path: path.to_owned(),
            source,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stale_socket_is_reclaimed_and_live_one_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("sub/rigd.sock");
        let mut first = bind(&path, None).expect("fresh bind");
        let mode = fs::metadata(&path).expect("exists").permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        assert!(matches!(bind(&path, None), Err(SocketError::InUse { .. })));
        // Leave the file behind without a listener: a crashed daemon's socket.
        first.owned_path = None;
        drop(first);
        assert!(path.exists(), "a crashed daemon leaves its socket");
        let second = bind(&path, None).expect("stale socket reclaimed");
        drop(second);
        assert!(!path.exists(), "socket removed on drop");
    }

    #[test]
    fn a_regular_file_in_the_way_is_not_replaced() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("rigd.sock");
        fs::write(&path, b"precious").expect("write");
        assert!(matches!(
            bind(&path, None),
            Err(SocketError::NotASocket { .. })
        ));
        assert_eq!(fs::read(&path).expect("kept"), b"precious");
    }

    #[test]
    fn group_gives_0660() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("rigd.sock");
        let gid = nix::unistd::getegid().as_raw();
        let _b = bind(&path, Some(gid)).expect("bind");
        let meta = fs::metadata(&path).expect("exists");
        assert_eq!(meta.permissions().mode() & 0o777, 0o660);
        assert_eq!(meta.gid(), gid);
    }
}
