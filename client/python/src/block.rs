//! The extension's one tokio runtime, and running a call on it with the GIL released.
//!
//! rig-client's sessions live on tokio (the side socket is a tokio stream); Python
//! calls are synchronous. One multi-threaded runtime with one worker drives every
//! session's I/O; each Python call blocks on its future from the caller's thread with
//! the GIL released (`Python::detach`), so other Python threads run meanwhile.
//!
//! A child of `os.fork()` has no worker thread (fork copies only the calling thread), so
//! a call there would wait forever for I/O nobody drives: every call checks the process
//! id the runtime was started in and raises `rig.RigError` in a child instead
//! (docs/python.md, "Threads and processes").

use std::{future::Future, sync::OnceLock};

use pyo3::{exceptions::PyRuntimeError, prelude::*};

use crate::errors::RigError;

/// The runtime, and the process it was started in.
static RUNTIME: OnceLock<Result<(u32, tokio::runtime::Runtime), String>> = OnceLock::new();

fn runtime() -> PyResult<&'static tokio::runtime::Runtime> {
    let (pid, rt) = RUNTIME
        .get_or_init(|| {
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .thread_name("rig-io")
                .enable_all()
                .build()
                .map(|rt| (std::process::id(), rt))
                .map_err(|e| format!("Failed to start rig's I/O thread: {e}"))
        })
        .as_ref()
        .map_err(|e| PyRuntimeError::new_err(e.clone()))?;
    if *pid != std::process::id() {
        return Err(RigError::new_err(
            "rig was used in a child of os.fork(): its I/O thread stayed in the parent. Open \
             sessions in a process started with multiprocessing's 'spawn' or 'forkserver' \
             method, or after exec",
        ));
    }
    Ok(rt)
}

/// Runs `f` to completion on the extension's runtime, the GIL released.
pub fn block<F>(py: Python<'_>, f: F) -> PyResult<F::Output>
where
    F: Future + Send,
    F::Output: Send,
{
    let rt = runtime()?;
    Ok(py.detach(|| rt.block_on(f)))
}

/// Runs `f` (blocking work: a wait on the GPU, or a lock another call may hold across
/// one) with the GIL released, inside the runtime's context; `f` gets the runtime to
/// block on futures with. Whatever `f` locks is locked without the GIL: a thread that
/// holds such a lock never waits for the GIL while another holds the GIL and waits for
/// the lock.
pub fn detached<T: Send>(
    py: Python<'_>,
    f: impl FnOnce(&tokio::runtime::Runtime) -> T + Send,
) -> PyResult<T> {
    let rt = runtime()?;
    Ok(py.detach(|| {
        let _enter = rt.enter();
        f(rt)
    }))
}
