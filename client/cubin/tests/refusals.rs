//! What rig-cubin refuses, shown on a good cubin with one field changed: each refusal is
//! typed and names what it refuses (the attribute, the relocation type and section, the
//! header field), and what is harmless (relocations of debug sections) is not refused.
#![expect(clippy::unwrap_used, clippy::cast_possible_truncation)]

use std::path::PathBuf;

use rig_cubin::info::{self, Eiattr};
use rig_cubin::{ImageError, KernelError, Module, ModuleError, RelocError, RelocType};
use rig_elf::ElfIndex;
use rig_model::addr::GpuVa;

fn good() -> Vec<u8> {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/kernels.sm_90.cubin");
    std::fs::read(p).unwrap()
}

/// File offset of section `name`'s bytes.
fn section_at(bytes: &[u8], name: &str) -> usize {
    let idx = ElfIndex::parse(bytes).unwrap();
    idx.section(name).unwrap().offset as usize
}

/// File offset of the first record of `attribute` in section `name`.
fn record_at(bytes: &[u8], name: &str, attribute: Eiattr) -> usize {
    let at = section_at(bytes, name);
    let idx = ElfIndex::parse(bytes).unwrap();
    let size = idx.section(name).unwrap().size as usize;
    let records = info::records(&bytes[at..at + size]).unwrap();
    at + records
        .iter()
        .find(|r| r.attribute == attribute)
        .unwrap()
        .at
}

/// Sets the type of relocation `entry` of RELA section `name`.
fn set_reloc_type(bytes: &mut [u8], name: &str, entry: usize, kind: u32) {
    let at = section_at(bytes, name) + entry * 24 + 8;
    bytes[at..at + 4].copy_from_slice(&kind.to_le_bytes());
}

#[test]
fn an_unsupported_relocation_of_a_loaded_section_names_its_type_and_section() {
    let mut bytes = good();
    set_reloc_type(&mut bytes, ".rela.nv.constant4", 0, 0x37);
    let err = Module::parse(&bytes).unwrap_err();
    let ModuleError::Relocation { section, kind, .. } = &err else {
        panic!("{err:?}");
    };
    assert_eq!(
        (section.as_str(), *kind),
        (".rela.nv.constant4", RelocType(0x37))
    );
    let text = err.to_string();
    assert!(
        text.contains("R_CUDA_ABS32_32") && text.contains(".rela.nv.constant4"),
        "{text}"
    );
}

#[test]
fn relocations_of_debug_frame_are_ignored_whatever_their_type() {
    let mut bytes = good();
    set_reloc_type(&mut bytes, ".rela.debug_frame", 0, 0x73);
    let module = Module::parse(&bytes).unwrap();
    assert!(
        module
            .relocations()
            .iter()
            .all(|r| r.kind == RelocType::R_CUDA_64)
    );
}

#[test]
fn an_unknown_attribute_of_a_kernel_is_refused_naming_its_code() {
    let mut bytes = good();
    let at = record_at(&bytes, ".nv.info.saxpy", Eiattr::SPARSE_MMA_MASK);
    bytes[at + 1] = 0xee;
    let err = Module::parse(&bytes).unwrap_err();
    let ModuleError::Kernel { kernel, source } = &err else {
        panic!("{err:?}");
    };
    assert_eq!(kernel, "saxpy");
    assert!(
        matches!(
            source,
            KernelError::Unsupported {
                attribute: Eiattr(0xee),
                ..
            }
        ),
        "{source:?}"
    );
    assert!(source.to_string().contains("EIATTR 0xee"), "{source}");
}

#[test]
fn a_refused_attribute_of_the_module_names_it() {
    let mut bytes = good();
    let at = record_at(&bytes, ".nv.info", Eiattr::FRAME_SIZE);
    bytes[at + 1] = Eiattr::SYSCALL_OFFSETS.0;
    let err = Module::parse(&bytes).unwrap_err();
    assert!(
        matches!(
            &err,
            ModuleError::Unsupported {
                attribute: Eiattr::SYSCALL_OFFSETS,
                ..
            }
        ),
        "{err:?}"
    );
    assert!(err.to_string().contains("EIATTR_SYSCALL_OFFSETS"), "{err}");
}

#[test]
fn a_software_workaround_other_than_0x8_is_refused() {
    let mut bytes = good();
    let at = record_at(&bytes, ".nv.info.empty", Eiattr::SW_WAR);
    bytes[at + 4] = 0x9;
    let err = Module::parse(&bytes).unwrap_err();
    assert!(
        matches!(
            &err,
            ModuleError::Kernel {
                source: KernelError::Unsupported {
                    attribute: Eiattr::SW_WAR,
                    ..
                },
                ..
            }
        ),
        "{err:?}"
    );
}

#[test]
fn r_cuda_32_applies_below_4_gib_and_is_refused_above() {
    let mut bytes = good();
    set_reloc_type(&mut bytes, ".rela.nv.constant4", 0, RelocType::R_CUDA_32.0);
    let module = Module::parse(&bytes).unwrap();
    let layout = module.layout().unwrap();
    let low = layout.place(GpuVa(0x1000_0000)).unwrap();
    let b4 = low.banks().iter().find(|b| b.index == 4).unwrap();
    let at = (b4.addr.get() - low.base().get()) as usize + 8;
    let bias = low.variable("bias").unwrap().get();
    assert_eq!(&low.bytes()[at..at + 4], &(bias as u32).to_le_bytes());
    let err = layout.place(GpuVa(0x1_0000_0000)).unwrap_err();
    assert!(
        matches!(
            &err,
            ImageError::Relocation {
                source: RelocError::Value {
                    kind: RelocType::R_CUDA_32,
                    ..
                },
                ..
            }
        ),
        "{err:?}"
    );
}

#[test]
fn header_fields_of_another_machine_abi_or_type_are_refused_by_name() {
    let mut bytes = good();
    bytes[18] = 62; // EM_X86_64
    assert!(matches!(
        Module::parse(&bytes),
        Err(ModuleError::Machine { found: 62 })
    ));
    let mut bytes = good();
    bytes[8] = 9;
    assert!(matches!(
        Module::parse(&bytes),
        Err(ModuleError::AbiVersion { found: 9 })
    ));
    let mut bytes = good();
    bytes[16] = 3; // ET_DYN
    assert!(matches!(
        Module::parse(&bytes),
        Err(ModuleError::Type { found: 3 })
    ));
    let mut bytes = good();
    bytes[0x31] = 100; // e_flags bits 15:8: sm_100
    let err = Module::parse(&bytes).unwrap_err();
    assert!(err.to_string().contains("sm_100"), "{err}");
}

#[test]
fn an_allocated_section_rig_does_not_place_is_refused_by_name() {
    let mut bytes = good();
    // Rename .nv.global.init (allocated) to .nv.globbl.init: a section rig does not know.
    let idx = ElfIndex::parse(&bytes[..]).unwrap();
    let shstrtab = &idx.sections[1];
    let start = shstrtab.offset as usize;
    let names = &bytes[start..start + shstrtab.size as usize];
    let at = start
        + names
            .windows(16)
            .position(|w| w == b".nv.global.init\0")
            .unwrap();
    bytes[at + 8] = b'b';
    let err = Module::parse(&bytes).unwrap_err();
    assert!(
        matches!(&err, ModuleError::Section { name, .. } if name == ".nv.globbl.init"),
        "{err:?}"
    );
}

#[test]
fn an_indirect_branch_to_outside_the_kernels_code_is_refused() {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/tinygrad.sm_90.nvrtc.cubin");
    let mut bytes = std::fs::read(p).unwrap();
    let name = ".nv.info.r_2_2_2_3_3_3_6_7_6";
    Module::parse(&bytes).unwrap();
    // The record's payload: branch, 0, count, targets; the first target moves past the
    // end of the kernel's code.
    let at = record_at(&bytes, name, Eiattr::INDIRECT_BRANCH_TARGETS) + 4 + 12;
    bytes[at..at + 4].copy_from_slice(&0x00ff_0000u32.to_le_bytes());
    let err = Module::parse(&bytes).unwrap_err();
    assert!(
        format!("{err:?}").contains("lies outside its code"),
        "{err:?}"
    );
    // A count that does not match the targets is a malformed record.
    let mut bytes = std::fs::read(
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/tinygrad.sm_90.nvrtc.cubin"),
    )
    .unwrap();
    let at = record_at(&bytes, name, Eiattr::INDIRECT_BRANCH_TARGETS) + 4 + 8;
    bytes[at..at + 4].copy_from_slice(&9u32.to_le_bytes());
    let err = Module::parse(&bytes).unwrap_err();
    assert!(format!("{err:?}").contains("Shape"), "{err:?}");
}

#[test]
fn a_kernels_own_bank_that_is_also_the_modules_is_refused() {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/tinygrad.sm_90.nvrtc.cubin");
    let mut bytes = std::fs::read(p).unwrap();
    // `.nv.callgraph` renamed `.nv.constant2` (the same length): a module-wide bank 2
    // beside r_2_2_2_3_3_3_6_7_6's own.
    let at = bytes
        .windows(14)
        .position(|w| w == b".nv.callgraph\0")
        .unwrap();
    bytes[at..at + 13].copy_from_slice(b".nv.constant2");
    // ... and PROGBITS (1), as a bank is: section 0xc's sh_type.
    let shoff = u64::from_le_bytes(bytes[0x28..0x30].try_into().unwrap()) as usize;
    let ty = shoff + 0xc * 64 + 4;
    bytes[ty..ty + 4].copy_from_slice(&1u32.to_le_bytes());
    let err = Module::parse(&bytes).unwrap_err();
    let ModuleError::Section { name, reason } = &err else {
        panic!("{err:?}");
    };
    assert_eq!(name, ".nv.constant2.r_2_2_2_3_3_3_6_7_6");
    assert!(reason.contains("also the module's"), "{reason}");
}
