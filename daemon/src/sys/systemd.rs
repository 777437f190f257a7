//! Sockets handed over by systemd (sd_listen_fds(3)): `LISTEN_PID` names this process,
//! `LISTEN_FDS` counts the descriptors from 3 on, `LISTEN_FDNAMES` names them
//! (colon-separated, `FileDescriptorName=` in the socket unit, default the unit's name).
//!
//! What is checked before rigd serves on a passed descriptor: the variables parse, the
//! count and the names agree, each descriptor is open, is a socket, is AF_UNIX and
//! SOCK_STREAM, and listens. Anything else is a typed [`ListenError`]: a socket unit
//! that passes the wrong thing should stop rigd, not make it bind a second socket beside
//! systemd's. `LISTEN_PID` naming another process is the one case sd_listen_fds(3)
//! ignores (variables inherited from an activated parent); the caller decides
//! ([`ListenError::OtherProcess`]). The variables are left in the environment (clearing
//! them is unsound once threads run): a child sees a `LISTEN_PID` that is not its own,
//! and the descriptors are close-on-exec.
//!
//! Binding a socket when nothing was passed is `service::socket`'s.

use std::{
    io,
    os::{
        fd::{AsFd, AsRawFd, FromRawFd, OwnedFd, RawFd},
        unix::net::UnixListener,
    },
    sync::atomic::{AtomicBool, Ordering},
};

use nix::sys::socket::{AddressFamily, SockType, SockaddrLike, SockaddrStorage, sockopt};

/// sd_listen_fds(3)'s `SD_LISTEN_FDS_START`.
pub const LISTEN_FDS_START: RawFd = 3;
/// The name sd_listen_fds_with_names(3) gives a descriptor when `LISTEN_FDNAMES` is unset.
pub const UNNAMED: &str = "unknown";
/// More than any socket unit rigd ships passes; a larger count is a broken environment.
const MAX_FDS: usize = 64;

/// Why systemd's sockets could not be used.
#[derive(Debug, thiserror::Error)]
pub enum ListenError {
    #[error("LISTEN_PID={value:?} is not a process id")]
    BadPid { value: String },
    #[error(
        "LISTEN_PID={pid} names another process (rigd is {ours}): the variables were inherited"
    )]
    OtherProcess { pid: u32, ours: u32 },
    #[error("LISTEN_FDS={value:?} is not a count of descriptors")]
    BadCount { value: String },
    #[error("LISTEN_FDS is 0: systemd passed no socket")]
    NoFds,
    #[error("LISTEN_FDS={count}: more descriptors than any socket unit passes ({MAX_FDS})")]
    TooMany { count: usize },
    #[error("LISTEN_FDS without LISTEN_PID")]
    NoPid,
    #[error("LISTEN_FDNAMES has {names} names for LISTEN_FDS={count}")]
    NameCount { names: usize, count: usize },
    #[error("No passed socket is named {want:?} (LISTEN_FDNAMES: {names})")]
    NoneNamed { want: String, names: String },
    #[error("Passed descriptor {fd} ({name}) is not open")]
    NotOpen {
        fd: RawFd,
        name: String,
        #[source]
        source: io::Error,
    },
    #[error("Passed descriptor {fd} ({name}) is not a socket")]
    NotASocket { fd: RawFd, name: String },
    #[error("Passed socket {fd} ({name}) is {what}, not a Unix stream socket")]
    WrongKind {
        fd: RawFd,
        name: String,
        what: String,
    },
    #[error("Passed socket {fd} ({name}) is not listening")]
    NotListening { fd: RawFd, name: String },
    #[error("Failed to inspect passed descriptor {fd} ({name})")]
    Inspect {
        fd: RawFd,
        name: String,
        #[source]
        source: io::Error,
    },
    #[error("systemd's sockets were already taken")]
    AlreadyTaken,
}

/// The three variables, as read from the environment (`None`: unset).
#[derive(Debug, Clone, Default)]
pub struct ListenVars {
    pub pid: Option<String>,
    pub fds: Option<String>,
    pub names: Option<String>,
}

impl ListenVars {
    /// `LISTEN_PID`, `LISTEN_FDS` and `LISTEN_FDNAMES` of this process.
    pub fn from_env() -> Self {
        let get = |k: &str| std::env::var_os(k).map(|v| v.to_string_lossy().into_owned());
        Self {
            pid: get("LISTEN_PID"),
            fds: get("LISTEN_FDS"),
            names: get("LISTEN_FDNAMES"),
        }
    }
}

/// One descriptor systemd says it passed, not yet checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Announced {
    pub fd: RawFd,
    pub name: String,
}

/// What the variables announce: `Ok(None)` when `LISTEN_FDS` is unset (not activated).
/// No I/O.
///
/// # Errors
/// [`ListenError`]: malformed or inconsistent variables, or `LISTEN_PID` not `ours`.
pub fn parse_listen_vars(
    vars: &ListenVars,
    ours: u32,
) -> Result<Option<Vec<Announced>>, ListenError> {
    let Some(fds) = vars.fds.as_deref() else {
        return Ok(None);
    };
    let pid_text = vars.pid.as_deref().ok_or(ListenError::NoPid)?;
    let pid: u32 = pid_text
        .trim()
        .parse()
        .ok()
        .filter(|p| *p > 0)
        .ok_or_else(|| ListenError::BadPid {
            value: pid_text.to_owned(),
        })?;
    if pid != ours {
        return Err(ListenError::OtherProcess { pid, ours });
    }
    let count: usize = fds.trim().parse().map_err(|_| ListenError::BadCount {
        value: fds.to_owned(),
    })?;
    if count == 0 {
        return Err(ListenError::NoFds);
    }
    if count > MAX_FDS {
        return Err(ListenError::TooMany { count });
    }
    let names: Vec<String> = match vars.names.as_deref() {
        // sd_listen_fds_with_names(3): every descriptor is "unknown" without names.
        None => vec![UNNAMED.to_owned(); count],
        Some(list) => list.split(':').map(str::to_owned).collect(),
    };
    if names.len() != count {
        return Err(ListenError::NameCount {
            names: names.len(),
            count,
        });
    }
    Ok(Some(
        names
            .into_iter()
            .enumerate()
            .map(|(i, name)| Announced {
                // CAST: i < MAX_FDS (64), so 3 + i fits an i32.
                fd: LISTEN_FDS_START + i32::try_from(i).expect("i < MAX_FDS"),
                name,
            })
            .collect(),
    ))
}

/// Which announced descriptor rigd serves on: the one named `want`, or the only one
/// when systemd named none.
///
/// # Errors
/// [`ListenError::NoneNamed`].
pub fn pick(announced: &[Announced], want: &str) -> Result<usize, ListenError> {
    if let Some(i) = announced.iter().position(|a| a.name == want) {
        return Ok(i);
    }
    if let [only] = announced
        && only.name == UNNAMED
    {
        return Ok(0);
    }
    Err(ListenError::NoneNamed {
        want: want.to_owned(),
        names: announced
            .iter()
            .map(|a| a.name.as_str())
            .collect::<Vec<_>>()
            .join(":"),
    })
}

/// Checks that `fd` is a listening AF_UNIX stream socket. `name` is for the error.
///
/// # Errors
/// [`ListenError::NotASocket`], [`ListenError::WrongKind`],
/// [`ListenError::NotListening`], or [`ListenError::Inspect`] when fstat/getsockopt fail.
pub fn check_listener(fd: impl AsFd, name: &str) -> Result<(), ListenError> {
    let fd = fd.as_fd();
    let raw = fd.as_raw_fd();
    let inspect = |e: nix::Error| ListenError::Inspect {
        fd: raw,
        name: name.to_owned(),
        source: e.into(),
    };
    let st = nix::sys::stat::fstat(fd).map_err(inspect)?;
    if st.st_mode & libc::S_IFMT != libc::S_IFSOCK {
        return Err(ListenError::NotASocket {
            fd: raw,
            name: name.to_owned(),
        });
    }
    let family = nix::sys::socket::getsockname::<SockaddrStorage>(raw)
        .map_err(inspect)?
        .family();
    let kind = nix::sys::socket::getsockopt(&fd, sockopt::SockType).map_err(inspect)?;
    if family != Some(AddressFamily::Unix) || kind != SockType::Stream {
        return Err(ListenError::WrongKind {
            fd: raw,
            name: name.to_owned(),
            what: format!("{family:?}/{kind:?}"),
        });
    }
    if !nix::sys::socket::getsockopt(&fd, sockopt::AcceptConn).map_err(inspect)? {
        return Err(ListenError::NotListening {
            fd: raw,
            name: name.to_owned(),
        });
    }
    Ok(())
}

/// The listener systemd passed, and the names of the passed descriptors rigd closed.
#[derive(Debug)]
pub struct Passed {
    pub listener: UnixListener,
    pub name: String,
    pub closed: Vec<String>,
}

/// Set once the passed descriptors are owned: a second claim would make two owners.
static TAKEN: AtomicBool = AtomicBool::new(false);

/// The listening socket named `want` that systemd passed, if rigd was socket-activated
/// (`Ok(None)`: `LISTEN_FDS` unset). Every passed descriptor is checked; the others
/// are closed and named in [`Passed::closed`].
///
/// # Errors
/// [`ListenError`], as [`parse_listen_vars`], [`pick`] and [`check_listener`] say, and
/// [`ListenError::AlreadyTaken`] on a second call.
pub fn take_listener(want: &str) -> Result<Option<Passed>, ListenError> {
    let Some(announced) = parse_listen_vars(&ListenVars::from_env(), std::process::id())? else {
        return Ok(None);
    };
    let chosen = pick(&announced, want)?;
    if TAKEN.swap(true, Ordering::SeqCst) {
        return Err(ListenError::AlreadyTaken);
    }
    let mut owned = Vec::with_capacity(announced.len());
    for a in &announced {
        owned.push(claim(a)?);
    }
    for (a, fd) in announced.iter().zip(&owned) {
        check_listener(fd, &a.name)?;
    }
    let mut listener = None;
    let mut closed = Vec::new();
    for (i, (a, fd)) in announced.into_iter().zip(owned).enumerate() {
        if i == chosen {
            listener = Some((UnixListener::from(fd), a.name));
        } else {
            closed.push(a.name);
        }
    }
    let (listener, name) = listener.expect("pick() returned an index of `announced`");
    Ok(Some(Passed {
        listener,
        name,
        closed,
    }))
}

/// Owns an announced descriptor, after checking it is open, and makes it close-on-exec
/// (as sd_listen_fds(3) does).
fn claim(a: &Announced) -> Result<OwnedFd, ListenError> {
    // SAFETY: fcntl(F_GETFD) takes an integer and reads no memory of ours; -1 (EBADF)
    // means the descriptor is not open, checked here.
    let flags = unsafe { libc::fcntl(a.fd, libc::F_GETFD) };
    if flags < 0 {
        return Err(ListenError::NotOpen {
            fd: a.fd,
            name: a.name.clone(),
            source: io::Error::last_os_error(),
        });
    }
    // SAFETY: the descriptor is open (checked above), systemd opened it for this process
    // (LISTEN_PID is ours, checked by parse_listen_vars), nothing else in rigd takes fds
    // 3..3+LISTEN_FDS, and TAKEN makes this the only claim: the OwnedFd is its sole owner.
    let fd = unsafe { OwnedFd::from_raw_fd(a.fd) };
    // SAFETY: as for F_GETFD: integers only; the result is checked.
    if unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_SETFD, flags | libc::FD_CLOEXEC) } < 0 {
        return Err(ListenError::Inspect {
            fd: a.fd,
            name: a.name.clone(),
            source: io::Error::last_os_error(),
        });
    }
    Ok(fd)
}

/// Whether stderr is the journal's stream: systemd sets `JOURNAL_STREAM=DEV:INO` for a
/// service whose output goes to the journal, and it still names stderr only if nothing
/// redirected it since (systemd.exec(5), "Environment variables set by systemd").
#[must_use]
pub fn stderr_is_journal() -> bool {
    let Some(value) = std::env::var_os("JOURNAL_STREAM") else {
        return false;
    };
    nix::sys::stat::fstat(std::io::stderr().as_fd())
        .is_ok_and(|st| journal_stream_is(&value.to_string_lossy(), st.st_dev, st.st_ino))
}

/// Whether `JOURNAL_STREAM`'s value names the file with device `dev` and inode `ino`.
#[must_use]
pub fn journal_stream_is(value: &str, dev: u64, ino: u64) -> bool {
    value
        .split_once(':')
        .and_then(|(d, i)| Some((d.parse::<u64>().ok()?, i.parse::<u64>().ok()?)))
        == Some((dev, ino))
}

#[cfg(test)]
mod tests {
    #[test]
    fn journal_stream_matches_only_its_own_device_and_inode() {
        assert!(journal_stream_is("8:1234", 8, 1234));
        assert!(!journal_stream_is("8:1234", 8, 1235));
        assert!(!journal_stream_is("9:1234", 8, 1234));
        assert!(!journal_stream_is("8", 8, 1234));
        assert!(!journal_stream_is("", 0, 0));
        assert!(!journal_stream_is("x:y", 0, 0));
    }
    use std::os::unix::net::{UnixDatagram, UnixStream};

    use super::*;

    fn vars(pid: Option<&str>, fds: Option<&str>, names: Option<&str>) -> ListenVars {
        ListenVars {
            pid: pid.map(str::to_owned),
            fds: fds.map(str::to_owned),
            names: names.map(str::to_owned),
        }
    }

    #[test]
    fn without_listen_fds_rigd_was_not_activated() {
        assert!(matches!(
            parse_listen_vars(&vars(Some("42"), None, None), 42),
            Ok(None)
        ));
    }

    #[test]
    fn another_process_id_is_refused_by_name() {
        let e = parse_listen_vars(&vars(Some("41"), Some("1"), None), 42).expect_err("other pid");
        assert!(
            matches!(e, ListenError::OtherProcess { pid: 41, ours: 42 }),
            "{e}"
        );
    }

    #[test]
    fn malformed_pids_and_counts_are_typed_errors() {
        for pid in ["", "x", "-1", "0"] {
            let e = parse_listen_vars(&vars(Some(pid), Some("1"), None), 42).expect_err(pid);
            assert!(matches!(e, ListenError::BadPid { .. }), "{pid}: {e}");
        }
        let e = parse_listen_vars(&vars(None, Some("1"), None), 42).expect_err("no pid");
        assert!(matches!(e, ListenError::NoPid), "{e}");
        for count in ["", "one", "-1", "1.5"] {
            let e = parse_listen_vars(&vars(Some("42"), Some(count), None), 42).expect_err(count);
            assert!(matches!(e, ListenError::BadCount { .. }), "{count}: {e}");
        }
    }

    #[test]
    fn a_count_of_zero_or_too_many_is_refused() {
        let e = parse_listen_vars(&vars(Some("42"), Some("0"), None), 42).expect_err("0");
        assert!(matches!(e, ListenError::NoFds), "{e}");
        let e = parse_listen_vars(&vars(Some("42"), Some("65"), None), 42).expect_err("65");
        assert!(matches!(e, ListenError::TooMany { count: 65 }), "{e}");
        let max = parse_listen_vars(&vars(Some("42"), Some("64"), None), 42)
            .expect("64 is the most")
            .expect("activated");
        assert_eq!(max.last().map(|a| a.fd), Some(66));
    }

    #[test]
    fn names_must_match_the_count() {
        let e = parse_listen_vars(&vars(Some("42"), Some("2"), Some("rigd")), 42)
            .expect_err("one name for two");
        assert!(
            matches!(e, ListenError::NameCount { names: 1, count: 2 }),
            "{e}"
        );
        let got = parse_listen_vars(&vars(Some("42"), Some("2"), Some("metrics:rigd")), 42)
            .expect("parses")
            .expect("activated");
        assert_eq!(
            got,
            [
                Announced {
                    fd: 3,
                    name: "metrics".into()
                },
                Announced {
                    fd: 4,
                    name: "rigd".into()
                }
            ]
        );
        assert_eq!(pick(&got, "rigd").expect("named"), 1);
    }

    #[test]
    fn one_unnamed_socket_is_taken_but_a_wrongly_named_one_is_not() {
        let unnamed = parse_listen_vars(&vars(Some("42"), Some("1"), None), 42)
            .expect("parses")
            .expect("activated");
        assert_eq!(unnamed[0].name, UNNAMED);
        assert_eq!(pick(&unnamed, "rigd").expect("the only one"), 0);
        let other = parse_listen_vars(&vars(Some("42"), Some("1"), Some("other")), 42)
            .expect("parses")
            .expect("activated");
        let e = pick(&other, "rigd").expect_err("not ours");
        assert!(matches!(e, ListenError::NoneNamed { .. }), "{e}");
        assert!(e.to_string().contains("other"), "{e}");
    }

    #[test]
    fn a_listening_unix_stream_socket_passes() {
        let dir = tempfile::tempdir().expect("tempdir");
        let l = UnixListener::bind(dir.path().join("s")).expect("bind");
        check_listener(&l, "rigd").expect("a listener");
    }

    #[test]
    fn a_file_is_not_a_socket() {
        let f = tempfile::tempfile().expect("file");
        let e = check_listener(&f, "rigd").expect_err("a file");
        assert!(matches!(e, ListenError::NotASocket { .. }), "{e}");
    }

    #[test]
    fn a_datagram_socket_is_the_wrong_kind() {
        let (a, _b) = UnixDatagram::pair().expect("pair");
        let e = check_listener(&a, "rigd").expect_err("datagram");
        assert!(matches!(e, ListenError::WrongKind { .. }), "{e}");
    }

    #[test]
    fn a_connected_stream_is_not_listening() {
        let (a, _b) = UnixStream::pair().expect("pair");
        let e = check_listener(&a, "rigd").expect_err("connected");
        assert!(matches!(e, ListenError::NotListening { .. }), "{e}");
    }

    #[test]
    fn an_internet_socket_is_the_wrong_kind() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let e = check_listener(&l, "rigd").expect_err("tcp");
        assert!(matches!(e, ListenError::WrongKind { .. }), "{e}");
    }
}
