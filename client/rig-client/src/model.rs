//! The client library's own types: what `Client` returns and what `rigctl --json` prints.
//!
//! The decoded PCI function is `rig-model`'s, re-exported here as this crate's
//! documented JSON schema (docs/rigctl-json.md): rigd's `pci` decodes into the same
//! types, so there is one spelling of every field. The wire types in `rig-proto` may
//! grow without changing them. Absent values are `None`/empty, never sentinels.
//! Not here: the take-over types (`take`), the conversion from the wire
//! (`rig-proto`'s `convert`, called from `convert`).

use serde::{Deserialize, Serialize};

pub use rig_model::*;

/// The daemon's version.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Version {
    pub daemon: String,
    pub api: u32,
    pub sysfs_root: String,
}
