//! What rigd serves, for Python: `rig.devices()`, the GPUs rigd lends through their
//! driver, each with its health and its compute engine's shape, from rigd's status on
//! its main socket (the call `rigctl status` makes). What a session can do with one is
//! `session`'s; this says which ones there are (tinygrad's RIG device takes them when
//! `RIG_GPU` is unset).
//!
//! Not here: sessions (`session`), the socket's default (`rig_client::DEFAULT_SOCKET`).

use std::path::PathBuf;

use pyo3::{prelude::*, types::PyDict};
use rig_client::Client;

use crate::{block::block, errors::IntoPy};

/// rigd's socket: `socket`, else `$RIG_SOCKET`, else the default (as `Session` does).
pub fn socket_path(socket: Option<PathBuf>) -> PathBuf {
    socket
        .or_else(|| {
            std::env::var_os("RIG_SOCKET")
                .filter(|s| !s.is_empty())
                .map(Into::into)
        })
        .unwrap_or_else(|| rig_client::DEFAULT_SOCKET.into())
}

/// The GPUs rigd serves through their driver, in PCI order: a dict each, with `bdf`,
/// `health` (`"serving"`, `"stalled"`, `"lost"`), `reason` (why it lends nothing, or
/// empty), `copy_engines` (the copy engines, COPY0 + n, sessions' copy channels run on;
/// empty: beside their kernels in the session's GR0 group), `interrupts` (the GPU's
/// non-stall interrupts rigd has seen, which wake sleeping waits; None: rigd does not
/// watch them, so waits never sleep), and, when the RM said,
/// `arch` (`"sm_90"`), `sms` and `max_warps_per_sm`.
#[pyfunction]
#[pyo3(signature = (socket = None))]
pub fn devices(py: Python<'_>, socket: Option<PathBuf>) -> PyResult<Vec<Bound<'_, PyDict>>> {
    let path = socket_path(socket);
    let status = block(py, async {
        let mut c = Client::connect(&path).await?;
        c.status().await
    })?
    .py()?;
    status
        .served
        .iter()
        .map(|g| {
            let d = PyDict::new(py);
            d.set_item("bdf", &g.bdf)?;
            d.set_item("health", &g.health)?;
            d.set_item("reason", &g.reason)?;
            d.set_item("copy_engines", &g.copy_engines)?;
            d.set_item("interrupts", g.interrupts)?;
            d.set_item("wakes_given", g.wakes_given)?;
            d.set_item("wakes_passed", g.wakes_passed)?;
            if let Some(c) = g.geometry {
                d.set_item(
                    "arch",
                    format!("sm_{}{}", c.sm_version >> 8, c.sm_version & 0xff),
                )?;
                d.set_item("sms", c.sms())?;
                d.set_item("max_warps_per_sm", c.max_warps_per_sm)?;
            }
            Ok(d)
        })
        .collect()
}
