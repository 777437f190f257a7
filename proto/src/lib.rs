//! rig's wire types: the gRPC API between rigd and its clients.
//!
//! Generated at build time from `proto/rig/v1/*.proto` by protox and tonic-prost-build.
//! Only `daemon/src/service` and `client/` use these types; hardware and firmware
//! types never appear here, and clients get the client library's own types.
//!
//! Flow: rigd's `pci` → `rig_model::Device` → [`convert`] (here, both directions, exact
//! inverses) → the wire → [`convert`] → `rig-client`. Not here: the model itself
//! (`rig-model`), the take-over and DMA conversions (beside their RPCs).

/// Version 1 of the API.
#[expect(missing_docs, clippy::all, clippy::pedantic, reason = "generated code")]
pub mod v1 {
    tonic::include_proto!("rig.v1");

    /// The encoded descriptor set, for gRPC server reflection.
    pub const FILE_DESCRIPTOR_SET: &[u8] = tonic::include_file_descriptor_set!("rig_v1_descriptor");
}

pub mod convert;

pub use convert::ConvertError;

/// The API version this crate speaks; a daemon reports its own in `VersionReply`.
///
/// Still 1 after strings that carried a closed set became enums: they took new field
/// numbers and the old ones are reserved, so a mismatched peer reads them as unset
/// (refused by `convert`, or the request's default), never as garbage; rigd and
/// rig-client ship together from this workspace.
pub const API_VERSION: u32 = 1;
