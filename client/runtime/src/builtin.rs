//! The runtime's own cubin: the copy kernel that moves data between two places in GPU
//! memory (`copy_u4`), 20 times faster there than a copy engine on the H200
//! (docs/hardware/nvidia-compute.md, "What the H200 ran"). Its provenance (source,
//! toolkit, checksum) is `client/runtime/kernels/README.md`.

/// The cubin (sm_90), embedded.
pub const CUBIN: &[u8] = include_bytes!("../kernels/copy.sm_90.cubin");

/// The copy kernel's name in [`CUBIN`]: `copy_u4(const uint4* src, uint4* dst,
/// unsigned long long n16)`.
pub const COPY_KERNEL: &str = "copy_u4";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_copy_cubin_is_the_fixture_that_ran_and_its_kernel_takes_two_pointers_and_a_count() {
        let fixture = include_bytes!("../../cubin/tests/data/kernels.sm_90.cubin");
        assert_eq!(CUBIN, fixture.as_slice());
        let m = rig_cubin::Module::parse(CUBIN).expect("parses");
        let k = m.kernel(COPY_KERNEL).expect("copy_u4");
        let sizes: Vec<u32> = k.params().iter().map(|p| p.size).collect();
        assert_eq!(sizes, [8, 8, 8]);
        assert_eq!(k.stack().bytes(), 0, "no local memory");
    }
}
