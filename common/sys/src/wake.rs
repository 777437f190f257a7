//! Wake descriptors: an eventfd(2) that rigd writes when a GPU raised a non-stall
//! interrupt, and that a client's blocked wait polls.
//!
//! Flow: rigd makes a [`Wake`] per lent channel ([`Wake::pair`]: its own end and a
//! duplicate to send by SCM_RIGHTS) and [`Wake::signal`]s it from the thread that
//! watches the GPU's interrupts; the client wraps what it received ([`Wake::from`])
//! and [`Wake::wait`]s on it, or hands [`Wake::fd`] to an event loop and calls
//! [`Wake::drain`] when it turns readable.
//!
//! Invariants: the counter is only a hint. A wake says "something on the GPU may have
//! landed", never what: whoever wakes re-reads its semaphore, and a value that landed
//! before the wait began is seen by that first read, so a wake consumed by an earlier
//! wait costs nothing. The descriptor is non-blocking (`EFD_NONBLOCK`), so
//! [`Wake::signal`] never blocks rigd's thread and [`Wake::drain`] never blocks a
//! client.
//!
//! Everything here goes through nix's safe wrappers: no `unsafe`. Reference:
//! eventfd(2), poll(2).

use std::{
    io,
    os::fd::{AsFd, BorrowedFd, OwnedFd},
    time::Duration,
};

use nix::{
    errno::Errno,
    poll::{PollFd, PollFlags, PollTimeout, poll},
    sys::eventfd::{EfdFlags, EventFd},
    unistd::{read, write},
};

/// One wake descriptor.
#[derive(Debug)]
pub struct Wake(OwnedFd);

impl From<OwnedFd> for Wake {
    /// A descriptor rigd sent: an eventfd it signals.
    fn from(fd: OwnedFd) -> Self {
        Self(fd)
    }
}

impl Wake {
    /// A fresh eventfd (`EFD_NONBLOCK | EFD_CLOEXEC`, count 0), and a duplicate of it
    /// to hand over.
    ///
    /// # Errors
    /// eventfd(2)'s and dup(2)'s.
    pub fn pair() -> io::Result<(Self, OwnedFd)> {
        let fd = OwnedFd::from(EventFd::from_flags(
            EfdFlags::EFD_NONBLOCK | EfdFlags::EFD_CLOEXEC,
        )?);
        let dup = fd.try_clone()?;
        Ok((Self(fd), dup))
    }

    /// The descriptor, readable (POLLIN) once signalled until drained.
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.0.as_fd()
    }

    /// Adds one to the count: whoever polls wakes. A count at its limit already wakes
    /// them (`EAGAIN`), which is not an error.
    ///
    /// # Errors
    /// write(2)'s, but `EAGAIN`.
    pub fn signal(&self) -> io::Result<()> {
        match write(&self.0, &1u64.to_ne_bytes()) {
            Ok(_) | Err(Errno::EAGAIN) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    /// Resets the count; true if it was signalled.
    ///
    /// # Errors
    /// read(2)'s, but `EAGAIN` (nothing to drain).
    pub fn drain(&self) -> io::Result<bool> {
        let mut count = [0u8; 8];
        match read(&self.0, &mut count) {
            Ok(_) => Ok(true),
            Err(Errno::EAGAIN) => Ok(false),
            Err(e) => Err(e.into()),
        }
    }

    /// Blocks until signalled or `timeout` passes (rounded up to a millisecond, at
    /// most about 24 days), then drains; true if it was signalled. A signal (EINTR)
    /// ends the wait early as if the time had passed.
    ///
    /// # Errors
    /// poll(2)'s and read(2)'s.
    pub fn wait(&self, timeout: Duration) -> io::Result<bool> {
        let ms = timeout.as_micros().div_ceil(1000);
        let ms = i32::try_from(ms).unwrap_or(i32::MAX);
        let mut fds = [PollFd::new(self.0.as_fd(), PollFlags::POLLIN)];
        match poll(
            &mut fds,
            PollTimeout::try_from(ms).unwrap_or(PollTimeout::MAX),
        ) {
            Ok(0) | Err(Errno::EINTR) => Ok(false),
            Ok(_) => self.drain(),
            Err(e) => Err(e.into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use super::*;

    #[test]
    fn a_signal_on_either_end_wakes_the_other_once() {
        let (rigd, sent) = Wake::pair().expect("eventfd");
        let client = Wake::from(sent);
        assert!(!client.wait(Duration::from_millis(1)).expect("poll"));
        rigd.signal().expect("signal");
        rigd.signal().expect("signal");
        // Two signals are one wake: the count is drained whole.
        assert!(client.wait(Duration::from_secs(5)).expect("poll"));
        assert!(!client.drain().expect("read"));
    }

    #[test]
    fn a_wait_blocks_until_another_thread_signals() {
        let (rigd, sent) = Wake::pair().expect("eventfd");
        let client = Wake::from(sent);
        let start = Instant::now();
        let t = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(30));
            rigd.signal().expect("signal");
        });
        assert!(client.wait(Duration::from_secs(10)).expect("poll"));
        let took = start.elapsed();
        assert!(took >= Duration::from_millis(25), "woke early: {took:?}");
        t.join().expect("signaller");
    }

    #[test]
    fn a_wait_with_no_signal_ends_at_its_timeout() {
        let (_rigd, sent) = Wake::pair().expect("eventfd");
        let start = Instant::now();
        assert!(
            !Wake::from(sent)
                .wait(Duration::from_millis(20))
                .expect("poll")
        );
        assert!(start.elapsed() >= Duration::from_millis(20));
    }
}
