//! The systemd journal's native protocol: one datagram of `FIELD=value` lines to
//! `/run/systemd/journal/socket` is one entry with those fields (systemd.io,
//! "Native Journal Protocol"; what `sd_journal_sendv(3)` sends). No `unsafe`: the
//! socket is std's; it is here because it is a system interface of its own. Used by
//! the audit trail (`audit`, to `[audit] journal_socket`) and rigd's log under systemd
//! (`journal_log`).
//!
//! Encoding: a value with no newline is `NAME=value\n`; one with a newline is `NAME\n`,
//! its length as 64-bit little-endian, the bytes, `\n`. Field names are upper-case
//! letters, digits and `_`, not starting with `_` (journald drops others). Not done:
//! entries larger than a datagram (the protocol's memfd route); an audit line is far
//! below the socket's limit, and a send that fails is reported to the caller.

use std::{
    io,
    os::unix::net::UnixDatagram,
    path::{Path, PathBuf},
};

/// Encodes one entry.
pub fn encode(fields: &[(&str, &str)]) -> Vec<u8> {
    let mut out = Vec::new();
    for (name, value) in fields {
        out.extend_from_slice(name.as_bytes());
        if value.contains('\n') {
            out.push(b'\n');
            out.extend_from_slice(&(value.len() as u64).to_le_bytes());
            out.extend_from_slice(value.as_bytes());
        } else {
            out.push(b'=');
            out.extend_from_slice(value.as_bytes());
        }
        out.push(b'\n');
    }
    out
}

/// Whether `name` is a field name journald keeps.
pub fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && !name.starts_with('_')
        && name
            .bytes()
            .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_')
}

/// The journal's socket, for sending entries.
#[derive(Debug)]
pub struct Journal {
    socket: UnixDatagram,
    path: PathBuf,
}

impl Journal {
    /// An unbound datagram socket that sends to `path`. Non-blocking: a journal that
    /// has fallen behind (its queue is `net.unix.max_dgram_qlen` deep, 10 by default)
    /// gets `WouldBlock`, never a stalled caller.
    ///
    /// # Errors
    /// When no socket can be made.
    pub fn new(path: &Path) -> io::Result<Self> {
        let socket = UnixDatagram::unbound()?;
        socket.set_nonblocking(true)?;
        Ok(Self {
            socket,
            path: path.to_owned(),
        })
    }

    /// Sends one entry.
    ///
    /// # Errors
    /// When the journal is not there (ENOENT, ECONNREFUSED), is behind (WouldBlock) or
    /// refuses the datagram.
    pub fn send(&self, fields: &[(&str, &str)]) -> io::Result<()> {
        self.socket.send_to(&encode(fields), &self.path).map(|_| ())
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// Decodes an entry of [`encode`]'s format (for tests, and a fake journal).
pub fn decode(mut bytes: &[u8]) -> Option<Vec<(String, String)>> {
    let mut fields = Vec::new();
    while !bytes.is_empty() {
        let end = bytes.iter().position(|b| *b == b'=' || *b == b'\n')?;
        let name = std::str::from_utf8(bytes.get(..end)?).ok()?.to_owned();
        let (value, rest) = if bytes.get(end) == Some(&b'=') {
            let line = bytes.get(end + 1..)?;
            let nl = line.iter().position(|b| *b == b'\n')?;
            (line.get(..nl)?, line.get(nl + 1..)?)
        } else {
            let len_bytes: [u8; 8] = bytes.get(end + 1..end + 9)?.try_into().ok()?;
            let len = usize::try_from(u64::from_le_bytes(len_bytes)).ok()?;
            let start = end + 9;
            let value = bytes.get(start..start.checked_add(len)?)?;
            if bytes.get(start + len) != Some(&b'\n') {
                return None;
            }
            (value, bytes.get(start + len + 1..)?)
        };
        fields.push((name, String::from_utf8_lossy(value).into_owned()));
        bytes = rest;
    }
    Some(fields)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_and_multiline_values_encode_as_the_protocol_says_and_decode_back() {
        let e = encode(&[("MESSAGE", "hi"), ("RIG_ERROR", "a\nb")]);
        let mut want = b"MESSAGE=hi\nRIG_ERROR\n".to_vec();
        want.extend_from_slice(&3u64.to_le_bytes());
        want.extend_from_slice(b"a\nb\n");
        assert_eq!(e, want);
        let d = decode(&e).expect("decodes");
        assert_eq!(
            d,
            [
                ("MESSAGE".to_owned(), "hi".to_owned()),
                ("RIG_ERROR".to_owned(), "a\nb".to_owned())
            ]
        );
        assert_eq!(
            decode(b"MESSAGE\n\x05\0\0\0\0\0\0\0ab\n"),
            None,
            "short value"
        );
    }

    #[test]
    fn field_names_are_upper_snake_not_starting_with_an_underscore() {
        assert!(valid_name("RIG_DURATION_US"));
        assert!(!valid_name("_UID"));
        assert!(!valid_name("rig_uid"));
        assert!(!valid_name(""));
    }

    #[test]
    fn an_entry_reaches_a_datagram_socket_and_a_missing_one_is_an_error() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("journal");
        let fake = UnixDatagram::bind(&path).expect("bind");
        let j = Journal::new(&path).expect("socket");
        j.send(&[("MESSAGE", "x"), ("PRIORITY", "6")])
            .expect("sent");
        let mut buf = [0u8; 256];
        let n = fake.recv(&mut buf).expect("received");
        assert_eq!(&buf[..n], b"MESSAGE=x\nPRIORITY=6\n");
        let gone = Journal::new(&dir.path().join("none")).expect("socket");
        assert!(gone.send(&[("MESSAGE", "x")]).is_err());
    }
}
