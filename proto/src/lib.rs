//! rig's wire types: the gRPC API between rigd and its clients.
//!
//! Generated at build time from `proto/rig/v1/*.proto` by protox and tonic-prost-build.
//! Only `daemon/src/service` and `client/` use these types; hardware and firmware
//! types never appear here, and clients get the client library's own types.

/// Version 1 of the API.
#[expect(missing_docs, clippy::all, clippy::pedantic, reason = "generated code")]
pub mod v1 {
    tonic::include_proto!("rig.v1");

    /// The encoded descriptor set, for gRPC server reflection.
    pub const FILE_DESCRIPTOR_SET: &[u8] = tonic::include_file_descriptor_set!("rig_v1_descriptor");
}

/// The API version this crate speaks; a daemon reports its own in `VersionReply`.
pub const API_VERSION: u32 = 1;
