//! Events shared between sessions of one uid for Python (CUDA's IPC events):
//! `rig.SharedEvent` (one this session exported: its `token` goes to another process
//! by any means, a pipe, a file) and `rig.ImportedEvent` (one imported by that token).
//! `Runtime.record_shared`, `Runtime.wait_shared` and `Runtime.wait_event` use them
//! (`runtime`); rig-client's `event` does the work.
//!
//! Not here: the page and who may import it (rigd), the words (rig-client).

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use pyo3::{prelude::*, types::PyBytes};
use rig_client::{
    event::{ExportedEvent, ImportedEvent as RImported, Token},
    session::Session as RSession,
};

use crate::{
    block::block,
    errors::{IntoPy, closed},
};

/// An event this session exported: `Runtime.record_shared(event)` records it, and a
/// process of the same uid that imports its `token` waits for the records.
#[pyclass(module = "rig_gpu._rig", frozen)]
#[derive(Debug)]
pub struct SharedEvent {
    pub(crate) session: Arc<RSession>,
    pub(crate) inner: Mutex<Option<ExportedEvent>>,
    token: Token,
}

/// An event another session (of this uid, on this GPU) exported, imported here.
#[pyclass(module = "rig_gpu._rig", frozen)]
#[derive(Debug)]
pub struct ImportedEvent {
    pub(crate) session: Arc<RSession>,
    pub(crate) inner: Mutex<Option<RImported>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Either kind of event, taken out of its Python object to be closed.
enum Closable {
    Exported(ExportedEvent),
    Imported(RImported),
}

/// Closes `ev` in rigd (the lock already let go: the call releases the GIL); `None`
/// (closed before) is nothing.
fn give_back(py: Python<'_>, session: &RSession, ev: Option<Closable>) -> PyResult<()> {
    match ev {
        None => Ok(()),
        Some(Closable::Exported(e)) => block(py, e.close(session))?.py(),
        Some(Closable::Imported(e)) => block(py, e.close(session))?.py(),
    }
}

impl SharedEvent {
    pub(crate) fn export(py: Python<'_>, session: &Arc<RSession>) -> PyResult<Self> {
        let ev = block(py, ExportedEvent::export(session))?.py()?;
        Ok(Self {
            session: Arc::clone(session),
            token: ev.token(),
            inner: Mutex::new(Some(ev)),
        })
    }
}

impl SharedEvent {
    /// `f` on the event, or `rig.Closed`.
    fn with<T>(&self, f: impl FnOnce(&ExportedEvent) -> T) -> PyResult<T> {
        lock(&self.inner)
            .as_ref()
            .map(f)
            .ok_or_else(|| closed("shared event"))
    }
}

impl ImportedEvent {
    pub(crate) fn import(py: Python<'_>, session: &Arc<RSession>, token: &[u8]) -> PyResult<Self> {
        let token = Token::try_from(token).map_err(|_| {
            pyo3::exceptions::PyValueError::new_err(format!(
                "a shared event's token is 16 bytes, not {}",
                token.len()
            ))
        })?;
        let ev = block(py, RImported::import(session, &token))?.py()?;
        Ok(Self {
            session: Arc::clone(session),
            inner: Mutex::new(Some(ev)),
        })
    }

    /// `f` on the import, or `rig.Closed`.
    pub(crate) fn with<T>(&self, f: impl FnOnce(&RImported) -> T) -> PyResult<T> {
        lock(&self.inner)
            .as_ref()
            .map(f)
            .ok_or_else(|| closed("imported event"))
    }
}

#[pymethods]
impl SharedEvent {
    /// The 16 bytes another process of this uid imports it by (`Runtime.import_event`).
    #[getter]
    fn token<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.token)
    }

    /// The last value recorded (0: none yet).
    #[getter]
    fn last(&self) -> PyResult<u64> {
        self.with(ExportedEvent::last)
    }

    /// The value the work released, and the GPU's time of it in nanoseconds.
    #[getter]
    fn released(&self) -> PyResult<(u64, u64)> {
        self.with(ExportedEvent::released)
    }

    /// Gives the event back: importers' waits for values not yet released raise
    /// `rig.ExporterGone`. Closing twice does nothing.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        let taken = lock(&self.inner).take();
        give_back(py, &self.session, taken.map(Closable::Exported))
    }

    fn __repr__(&self) -> String {
        match lock(&self.inner).as_ref() {
            Some(e) => format!("<rig.SharedEvent {} last {}>", e.id(), e.last()),
            None => "<rig.SharedEvent closed>".to_owned(),
        }
    }
}

#[pymethods]
impl ImportedEvent {
    /// The exporter's last record: what a wait made now waits for.
    #[getter]
    fn target(&self) -> PyResult<u64> {
        self.with(RImported::target)
    }

    /// The value released, and the GPU's time of it in nanoseconds.
    #[getter]
    fn released(&self) -> PyResult<(u64, u64)> {
        self.with(RImported::released)
    }

    /// The exporting session's id.
    #[getter]
    fn exporter(&self) -> PyResult<u64> {
        self.with(|e| e.exporter().0)
    }

    /// Whether the exporter's work released `value`; raises `rig.ExporterGone` when it
    /// ended first (a GPU wait for it then passed without it).
    fn check(&self, value: u64) -> PyResult<bool> {
        self.with(|e| e.check(value))?.py()
    }

    /// Unmaps it from this session. Closing twice does nothing.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        let taken = lock(&self.inner).take();
        give_back(py, &self.session, taken.map(Closable::Imported))
    }

    fn __repr__(&self) -> String {
        match lock(&self.inner).as_ref() {
            Some(e) => format!(
                "<rig.ImportedEvent {} of session {} target {}>",
                e.id(),
                e.exporter().0,
                e.target()
            ),
            None => "<rig.ImportedEvent closed>".to_owned(),
        }
    }
}
