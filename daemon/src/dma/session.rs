//! Sessions: who opened one, on which pool, its one-time token and its leases.
//!
//! A session's handles ([`LeaseId`]) are looked up in that session only, so a client
//! can never name another's lease, let alone map or free it. Ids come from one
//! counter and are never reused, so a stale handle cannot name a newer lease either.
//! Who opened it is the kernel's word for the gRPC connection's peer (a
//! `rig_sys::scm::PeerCred`, the one credential type of rigd and its client).

use std::{collections::BTreeMap, fs::File, io::Read, path::Path};

use rig_sys::scm::PeerCred;

use super::DmaError;

/// A session's number (not a secret: the token is) and a lease's handle, valid in the
/// session that made it: the shared vocabulary's.
pub use rig_model::dma::{LeaseId, SessionId};

/// The bytes that claim a session on the side socket.
pub type Token = [u8; 16];

const URANDOM: &str = "/dev/urandom";

/// A fresh random token.
///
/// # Errors
/// [`DmaError::Token`] when `/dev/urandom` cannot be read.
pub fn new_token() -> Result<Token, DmaError> {
    let mut t = Token::default();
    File::open(URANDOM)
        .and_then(|mut f| f.read_exact(&mut t))
        .map_err(|source| DmaError::Token {
            path: Path::new(URANDOM).to_owned(),
            source,
        })?;
    Ok(t)
}

/// Compares tokens in time independent of where they differ.
pub fn same_token(a: &Token, b: &[u8]) -> bool {
    b.len() == a.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Whether `claimer` (a side socket's peer) is the process that opened the session:
/// the same uid and pid. The gid is not part of it.
pub fn same_opener(opener: &PeerCred, claimer: &PeerCred) -> bool {
    opener.uid == claimer.uid && opener.pid == claimer.pid
}

/// One session's record in [`super::Pools`].
#[derive(Debug)]
pub(crate) struct Session {
    pub peer: PeerCred,
    pub pool: String,
    pub token: Token,
    pub claimed: bool,
    /// Lease → bytes.
    pub leases: BTreeMap<LeaseId, u64>,
    /// Told `true` when the session ends, whoever ends it.
    pub ended: tokio::sync::watch::Sender<bool>,
    /// Told `true` when it is claimed, and dropped with it: what ends the watch for an
    /// unclaimed session (`service::dma`), which holds a pidfd of the opener.
    pub settled: tokio::sync::watch::Sender<bool>,
    /// Its own device address space (RM-served GPUs), once made.
    pub device_map: Option<std::sync::Arc<dyn super::DeviceMap>>,
}

impl Session {
    /// Bytes this session holds.
    pub fn bytes(&self) -> u64 {
        self.leases.values().sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_random_and_compare_exactly() {
        let a = new_token().expect("urandom");
        let b = new_token().expect("urandom");
        assert_ne!(a, b);
        assert!(same_token(&a, &a));
        assert!(!same_token(&a, &b));
        assert!(!same_token(&a, &a[..15]));
    }

    #[test]
    fn only_the_opening_uid_and_pid_claim_a_session() {
        let opener = PeerCred {
            uid: 1000,
            gid: 1000,
            pid: 10,
        };
        assert!(same_opener(&opener, &opener));
        assert!(same_opener(&opener, &PeerCred { gid: 27, ..opener }));
        assert!(!same_opener(&opener, &PeerCred { pid: 11, ..opener }));
        assert!(!same_opener(&opener, &PeerCred { uid: 0, ..opener }));
    }
}
