//! The fixture cubins of rig-cubin, parsed, for this crate's unit tests.

use rig_cubin::Module;

const KERNELS: &[u8] = include_bytes!("../../cubin/tests/data/kernels.sm_90.cubin");
const TRITON: &[u8] = include_bytes!("../../cubin/tests/data/triton_add.sm_90.cubin");
const COOP: &[u8] = include_bytes!("../../cubin/tests/data/coop.sm_90.cubin");

/// kernels.cu built by nvcc for sm_90.
pub(crate) fn kernels() -> Module {
    Module::parse(KERNELS).expect("the fixture parses")
}

/// Triton's vector add: EIATTR_REQNTID (128, 1, 1).
pub(crate) fn triton() -> Module {
    Module::parse(TRITON).expect("the fixture parses")
}

/// Triton's vector add with its EIATTR_REQNTID record turned into EIATTR_MAX_THREADS:
/// at most 128 threads per block.
pub(crate) fn triton_bounded() -> Module {
    let reqntid = [4u8, 0x10, 12, 0, 0x80, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0];
    let mut bytes = TRITON.to_vec();
    let at = bytes
        .windows(reqntid.len())
        .position(|w| w == reqntid)
        .expect("the fixture's REQNTID record");
    bytes[at + 1] = 0x05;
    Module::parse(&bytes).expect("the patched fixture parses")
}

/// coop.cu built by nvcc for sm_90: warp shuffles, votes, CUB and a grid sync.
pub(crate) fn coop() -> Module {
    Module::parse(COOP).expect("the fixture parses")
}
