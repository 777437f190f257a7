//! Thread priority (setpriority(2) on one thread): background work such as refilling
//! a DMA pool yields the CPU to request handling.

use std::io;

/// The nice value of background threads: the lowest priority short of `SCHED_IDLE`,
/// which could starve them on a busy machine.
pub const BACKGROUND_NICE: i32 = 19;

/// Sets the calling thread's nice value (threads it creates later inherit it).
///
/// # Errors
/// `EACCES`/`EPERM` when lowering the value needs `CAP_SYS_NICE`.
pub fn set_this_thread_nice(nice: i32) -> io::Result<()> {
    let tid = nix::unistd::gettid().as_raw();
    let who =
        libc::id_t::try_from(tid).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: setpriority takes plain integers and touches no memory of ours; on Linux
    // PRIO_PROCESS with a thread id changes that one thread. The result is checked.
    let r = unsafe { libc::setpriority(libc::PRIO_PROCESS, who, nice) };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_thread_can_lower_its_own_priority() {
        std::thread::spawn(|| {
            set_this_thread_nice(BACKGROUND_NICE).expect("raising nice needs no privilege");
            let tid = nix::unistd::gettid().as_raw();
            let stat =
                std::fs::read_to_string(format!("/proc/self/task/{tid}/stat")).expect("stat");
            // Field 19 is nice; the command name in field 2 has no spaces here.
            let nice: i32 = stat
                .split_whitespace()
                .nth(18)
                .expect("field")
                .parse()
                .expect("number");
            assert_eq!(nice, BACKGROUND_NICE);
        })
        .join()
        .expect("thread");
    }
}
