//! A fake systemd journal for tests: a datagram socket at a path of the test's own that
//! keeps every entry sent to it (the native protocol, decoded by `sys::journal`), for
//! a test to read rigd's audit lines back.

use std::{
    collections::BTreeMap,
    io,
    os::unix::net::UnixDatagram,
    path::Path,
    sync::{Arc, Mutex, PoisonError},
};

/// One journal entry: its fields by name.
pub type JournalEntry = BTreeMap<String, String>;

/// The entries received so far.
#[derive(Debug, Clone, Default)]
pub struct FakeJournal {
    entries: Arc<Mutex<Vec<JournalEntry>>>,
}

impl FakeJournal {
    /// Binds `path` and collects what arrives there on a thread of its own, for as
    /// long as the process runs.
    ///
    /// # Errors
    /// The bind's.
    ///
    /// # Panics
    /// On a datagram that is not a journal entry (the thread's, failing the test).
    pub fn bind(path: &Path) -> io::Result<Self> {
        let socket = UnixDatagram::bind(path)?;
        let journal = Self::default();
        let sink = Arc::clone(&journal.entries);
        std::thread::spawn(move || {
            let mut buf = vec![0u8; 8192];
            while let Ok(n) = socket.recv(&mut buf) {
                let fields = crate::sys::journal::decode(&buf[..n]).expect("a journal entry");
                sink.lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .push(fields.into_iter().collect());
            }
        });
        Ok(journal)
    }

    /// Takes the entries received so far.
    pub fn take(&self) -> Vec<JournalEntry> {
        std::mem::take(&mut *self.entries.lock().unwrap_or_else(PoisonError::into_inner))
    }
}
