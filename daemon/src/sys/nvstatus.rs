//! The status codes the NVIDIA RM answers with (`NV_STATUS`), by their RM names.
//!
//! Source: NVIDIA/open-gpu-kernel-modules `src/common/sdk/nvidia/inc/nvstatuscodes.h`
//! at tag 580.142 (`1a5075f8`). `sys::nvrm` returns these (the escapes' `status`).
//! No I/O and no `unsafe` here.

use std::fmt;

/// A status the RM returned other than `NV_OK` (`nvstatuscodes.h`), by its RM name.
/// Codes rig has no name for keep their number.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NvStatus {
    BufferTooSmall,
    FeatureNotEnabled,
    Generic,
    GpuInFullchipReset,
    GpuIsLost,
    InUse,
    InsufficientPermissions,
    InsufficientResources,
    InvalidAddress,
    InvalidArgument,
    InvalidChannel,
    InvalidClass,
    InvalidClient,
    InvalidDevice,
    InvalidFlags,
    InvalidLimit,
    InvalidObject,
    InvalidObjectHandle,
    InvalidObjectNew,
    InvalidObjectParent,
    InvalidOffset,
    InvalidOperation,
    InvalidParamStruct,
    InvalidParameter,
    InvalidPointer,
    InvalidRequest,
    InvalidState,
    NoMemory,
    NotReady,
    NotSupported,
    ObjectNotFound,
    OperatingSystem,
    PageTableNotAvail,
    RcError,
    ResetRequired,
    StateInUse,
    Timeout,
    UvmAddressInUse,
    /// A code without a name here.
    Other(u32),
}

/// `NV_OK`.
pub const NV_OK: u32 = 0;

/// (variant, `nvstatuscodes.h` name, value) for every named code.
const NV_STATUS_CODES: [(NvStatus, &str, u32); 38] = [
    (NvStatus::BufferTooSmall, "NV_ERR_BUFFER_TOO_SMALL", 0x02),
    (
        NvStatus::FeatureNotEnabled,
        "NV_ERR_FEATURE_NOT_ENABLED",
        0x6D,
    ),
    (NvStatus::Generic, "NV_ERR_GENERIC", 0xFFFF),
    (
        NvStatus::GpuInFullchipReset,
        "NV_ERR_GPU_IN_FULLCHIP_RESET",
        0x10,
    ),
    (NvStatus::GpuIsLost, "NV_ERR_GPU_IS_LOST", 0x0F),
    (NvStatus::InUse, "NV_ERR_IN_USE", 0x17),
    (
        NvStatus::InsufficientPermissions,
        "NV_ERR_INSUFFICIENT_PERMISSIONS",
        0x1B,
    ),
    (
        NvStatus::InsufficientResources,
        "NV_ERR_INSUFFICIENT_RESOURCES",
        0x1A,
    ),
    (NvStatus::InvalidAddress, "NV_ERR_INVALID_ADDRESS", 0x1E),
    (NvStatus::InvalidArgument, "NV_ERR_INVALID_ARGUMENT", 0x1F),
    (NvStatus::InvalidChannel, "NV_ERR_INVALID_CHANNEL", 0x21),
    (NvStatus::InvalidClass, "NV_ERR_INVALID_CLASS", 0x22),
    (NvStatus::InvalidClient, "NV_ERR_INVALID_CLIENT", 0x23),
    (NvStatus::InvalidDevice, "NV_ERR_INVALID_DEVICE", 0x26),
    (NvStatus::InvalidFlags, "NV_ERR_INVALID_FLAGS", 0x29),
    (NvStatus::InvalidLimit, "NV_ERR_INVALID_LIMIT", 0x2E),
    (NvStatus::InvalidObject, "NV_ERR_INVALID_OBJECT", 0x31),
    (
        NvStatus::InvalidObjectHandle,
        "NV_ERR_INVALID_OBJECT_HANDLE",
        0x33,
    ),
    (
        NvStatus::InvalidObjectNew,
        "NV_ERR_INVALID_OBJECT_NEW",
        0x34,
    ),
    (
        NvStatus::InvalidObjectParent,
        "NV_ERR_INVALID_OBJECT_PARENT",
        0x36,
    ),
    (NvStatus::InvalidOffset, "NV_ERR_INVALID_OFFSET", 0x37),
    (NvStatus::InvalidOperation, "NV_ERR_INVALID_OPERATION", 0x38),
    (
        NvStatus::InvalidParamStruct,
        "NV_ERR_INVALID_PARAM_STRUCT",
        0x3A,
    ),
    (NvStatus::InvalidParameter, "NV_ERR_INVALID_PARAMETER", 0x3B),
    (NvStatus::InvalidPointer, "NV_ERR_INVALID_POINTER", 0x3D),
    (NvStatus::InvalidRequest, "NV_ERR_INVALID_REQUEST", 0x3F),
    (NvStatus::InvalidState, "NV_ERR_INVALID_STATE", 0x40),
    (NvStatus::NoMemory, "NV_ERR_NO_MEMORY", 0x51),
    (NvStatus::NotReady, "NV_ERR_NOT_READY", 0x55),
    (NvStatus::NotSupported, "NV_ERR_NOT_SUPPORTED", 0x56),
    (NvStatus::ObjectNotFound, "NV_ERR_OBJECT_NOT_FOUND", 0x57),
    (NvStatus::OperatingSystem, "NV_ERR_OPERATING_SYSTEM", 0x59),
    (
        NvStatus::PageTableNotAvail,
        "NV_ERR_PAGE_TABLE_NOT_AVAIL",
        0x5D,
    ),
    (NvStatus::RcError, "NV_ERR_RC_ERROR", 0x60),
    (NvStatus::ResetRequired, "NV_ERR_RESET_REQUIRED", 0x62),
    (NvStatus::StateInUse, "NV_ERR_STATE_IN_USE", 0x63),
    (NvStatus::Timeout, "NV_ERR_TIMEOUT", 0x65),
    (NvStatus::UvmAddressInUse, "NV_ERR_UVM_ADDRESS_IN_USE", 0x68),
];

impl NvStatus {
    /// `None` for `NV_OK`, otherwise the named code or [`NvStatus::Other`].
    pub fn from_raw(raw: u32) -> Option<Self> {
        if raw == NV_OK {
            return None;
        }
        Some(
            NV_STATUS_CODES
                .iter()
                .find(|(_, _, v)| *v == raw)
                .map_or(Self::Other(raw), |(s, _, _)| *s),
        )
    }

    /// The value on the wire.
    pub fn raw(self) -> u32 {
        match self {
            Self::Other(raw) => raw,
            named => NV_STATUS_CODES
                .iter()
                .find(|(s, _, _)| *s == named)
                .map_or(0, |(_, _, v)| *v),
        }
    }

    /// Whether the status says the GPU itself is gone until it is reset: the RM answers
    /// NV_ERR_RESET_REQUIRED to every allocation once its recovery action is a reset
    /// (docs/hardware/nvidia-rm.md, "When the GPU needs a reset").
    pub fn means_gpu_lost(self) -> bool {
        matches!(
            self,
            Self::ResetRequired | Self::GpuIsLost | Self::GpuInFullchipReset
        )
    }

    /// The RM's name (`NV_ERR_…`), or `None` for [`NvStatus::Other`].
    pub fn name(self) -> Option<&'static str> {
        NV_STATUS_CODES
            .iter()
            .find(|(s, _, _)| *s == self)
            .map(|(_, n, _)| *n)
    }
}

impl fmt::Display for NvStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name() {
            Some(name) => write!(f, "{name} ({:#x})", self.raw()),
            None => write!(f, "RM status {:#x}", self.raw()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_codes_keep_the_rm_names_and_unknown_ones_their_number() {
        assert_eq!(NvStatus::from_raw(0), None);
        assert_eq!(NvStatus::from_raw(0x1F), Some(NvStatus::InvalidArgument));
        assert_eq!(NvStatus::from_raw(0x26), Some(NvStatus::InvalidDevice));
        assert_eq!(NvStatus::from_raw(0x3A), Some(NvStatus::InvalidParamStruct));
        assert_eq!(NvStatus::from_raw(0x1234), Some(NvStatus::Other(0x1234)));
        assert_eq!(
            NvStatus::InsufficientPermissions.to_string(),
            "NV_ERR_INSUFFICIENT_PERMISSIONS (0x1b)"
        );
        assert_eq!(NvStatus::Other(0x1234).to_string(), "RM status 0x1234");
    }

    #[test]
    fn every_named_status_round_trips_through_its_value() {
        for (s, _, v) in NV_STATUS_CODES {
            assert_eq!(NvStatus::from_raw(v), Some(s));
            assert_eq!(s.raw(), v);
        }
    }
}
