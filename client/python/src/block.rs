//! The extension's one tokio runtime, and running a call on it with the GIL released.
//!
//! rig-client's sessions live on tokio (the side socket is a tokio stream); Python
//! calls are synchronous. One multi-threaded runtime with one worker drives every
//! session's I/O; each Python call blocks on its future from the caller's thread with
//! the GIL released (`Python::detach`), so other Python threads run meanwhile.
//!
//! Not here: fork. A child of `os.fork()` has no worker thread; it opens its own
//! sessions after exec (docs/python.md, "Threads and processes").

use std::{future::Future, sync::OnceLock};

use pyo3::{exceptions::PyRuntimeError, prelude::*};

static RUNTIME: OnceLock<Result<tokio::runtime::Runtime, String>> = OnceLock::new();

fn runtime() -> PyResult<&'static tokio::runtime::Runtime> {
    RUNTIME
        .get_or_init(|| {
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .thread_name("rig-io")
                .enable_all()
                .build()
                .map_err(|e| format!("Failed to start rig's I/O thread: {e}"))
        })
        .as_ref()
        .map_err(|e| PyRuntimeError::new_err(e.clone()))
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
