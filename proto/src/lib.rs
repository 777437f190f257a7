//! rig's wire types: the gRPC API between rigd and its clients.
//!
//! Generated at build time from `proto/rig/v1/*.proto` by protox and tonic-prost-build.
//! Only `daemon/src/service` and `client/` use these types; hardware and firmware
//! types never appear here, and clients get the client library's own types.
//!
//! Flow: rigd → `rig-model`'s types → [`convert`] (here, both directions, exact
//! inverses, one pair per type) → the wire → [`convert`] → `rig-client`. Not here: the
//! model itself (`rig-model`), messages made of one side's own types (beside their
//! RPCs in rigd's `service` and rig-client).

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
///
/// Still 1 after the side socket's types were renamed for what they carry
/// (`DmaSideRequest`/`DmaSideReply`/`DmaSideError` → `SessionRequest`/`SessionReply`/
/// `SessionError`, `DmaErrorCode` → `SessionErrorCode`, `DmaClaim` → `SessionClaim`,
/// `DmaChannelOpen`/`Close` → `ChannelOpen`/`Close`, and their replies): a side packet is
/// one encoded message with fields by number and no type name, and every field's name
/// and number and every enum value's number stayed; no gRPC service, method or
/// message of a method was renamed, so gRPC paths are the same. ErrorInfo reasons,
/// derived from the code's name less its prefix, are unchanged. What a peer can see is
/// the descriptor reflection serves: a client that looks those message types up by
/// name finds the new names.
pub const API_VERSION: u32 = 1;
