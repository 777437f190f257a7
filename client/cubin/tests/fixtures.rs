//! rig-cubin against real cubins and against cuobjdump's own account of them: every
//! kernel of the sm_90 builds (nvcc, nvcc -lineinfo, ptxas, NVRTC) and of Triton's cubin
//! parses, and what the parser reads equals what `cuobjdump -res-usage` and
//! `cuobjdump -elf` printed for the same file (tests/data/*.res.txt, *.elf.txt).
//! The cubins rig must refuse are refused, naming why.
#![expect(clippy::unwrap_used, clippy::cast_possible_truncation)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use rig_cubin::module::Kind;
use rig_cubin::{Eiattr, KernelError, Module, ModuleError, RelocType, Threads};
use rig_model::addr::GpuVa;

fn data(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name)
}

fn read(name: &str) -> Vec<u8> {
    std::fs::read(data(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn text(name: &str) -> String {
    String::from_utf8(read(name)).unwrap()
}

fn num(s: &str) -> u64 {
    let s = s.trim();
    match s.strip_prefix("0x") {
        Some(h) => u64::from_str_radix(h, 16).unwrap_or_else(|e| panic!("{s:?}: {e}")),
        None => s.parse().unwrap_or_else(|e| panic!("{s:?}: {e}")),
    }
}

/// `cuobjdump -res-usage`: per function, REG, STACK, SHARED, CONSTANT[0]; and the
/// module's common line (GLOBAL, CONSTANT[n]).
struct ResUsage {
    functions: BTreeMap<String, BTreeMap<String, u64>>,
    common: BTreeMap<String, u64>,
}

fn fields(line: &str) -> BTreeMap<String, u64> {
    line.split_whitespace()
        .filter_map(|f| f.split_once(':'))
        .map(|(k, v)| (k.to_owned(), num(v)))
        .collect()
}

fn res_usage(cubin: &str) -> ResUsage {
    let t = text(&format!("{cubin}.res.txt"));
    let mut lines = t.lines();
    let mut functions = BTreeMap::new();
    let mut common = BTreeMap::new();
    while let Some(line) = lines.next() {
        let line = line.trim();
        if line == "Common:" {
            common = fields(lines.next().unwrap());
        } else if let Some(name) = line
            .strip_prefix("Function ")
            .and_then(|n| n.strip_suffix(':'))
        {
            functions.insert(name.to_owned(), fields(lines.next().unwrap()));
        }
    }
    assert!(!functions.is_empty(), "{cubin}: no functions in the view");
    ResUsage { functions, common }
}

/// The attribute blocks of one `.nv.info.<kernel>` section in `cuobjdump -elf`.
fn elf_attributes(elf: &str, kernel: &str) -> Vec<(String, String)> {
    let head = format!("\n.nv.info.{kernel}\n");
    let start = elf.find(&head).unwrap_or_else(|| panic!("no {head:?}")) + head.len();
    let body = &elf[start..];
    // The block ends where the next section starts (an INDIRECT_BRANCH_TARGETS value
    // has a blank line inside it).
    let body = &body[..body.find("\n\n.").unwrap_or(body.len())];
    let mut out = Vec::new();
    let mut name = None;
    let mut value = String::new();
    for line in body.lines() {
        let line = line.trim();
        if let Some(a) = line.strip_prefix("Attribute:") {
            if let Some(n) = name.take() {
                out.push((n, std::mem::take(&mut value)));
            }
            name = Some(a.trim().to_owned());
        } else if let Some(v) = line.strip_prefix("Value:") {
            value = v.trim().to_owned();
        } else if !line.starts_with("Format:") && !line.starts_with('<') {
            value.push('\t');
            value.push_str(line);
        }
    }
    if let Some(n) = name {
        out.push((n, value));
    }
    out
}

/// `Key : 0x..` pairs of a KPARAM_INFO value.
fn kv(value: &str) -> BTreeMap<String, u64> {
    value
        .split('\t')
        .filter_map(|p| p.split_once(':'))
        .filter(|(_, v)| v.trim().starts_with("0x"))
        .map(|(k, v)| (k.trim().to_owned(), num(v)))
        .collect()
}

const SM90: [&str; 7] = [
    "kernels.sm_90.cubin",
    "kernels.sm_90.lineinfo.cubin",
    "kernels.sm_90.ptxas.cubin",
    "kernels.sm_90.nvrtc.cubin",
    "triton_add.sm_90.cubin",
    "tinygrad.sm_90.nvrtc.cubin",
    "coop.sm_90.cubin",
];

const LAUNCH_TESTS: [&str; 11] = [
    "empty",
    "saxpy",
    "grid_fill",
    "reduce_sum",
    "local_array",
    "const_global",
    "read_counter",
    "spin",
    "store_at",
    "copy_u4",
    "mixed_params",
];

#[test]
fn every_kernel_matches_cuobjdump_res_usage() {
    for cubin in SM90 {
        let module = Module::parse(&read(cubin)).unwrap_or_else(|e| panic!("{cubin}: {e:?}"));
        let res = res_usage(cubin);
        let names: BTreeSet<_> = module
            .kernels()
            .iter()
            .map(|k| k.name().to_owned())
            .collect();
        assert_eq!(names, res.functions.keys().cloned().collect(), "{cubin}");
        for k in module.kernels() {
            let r = &res.functions[k.name()];
            let ctx = format!("{cubin} {}", k.name());
            assert_eq!(u64::from(k.registers()), r["REG"], "{ctx}: REG");
            assert_eq!(u64::from(k.stack().bytes()), r["STACK"], "{ctx}: STACK");
            assert_eq!(
                u64::from(k.shared().static_bytes),
                r["SHARED"],
                "{ctx}: SHARED"
            );
            assert_eq!(
                k.bank0_template().len() as u64,
                r["CONSTANT[0]"],
                "{ctx}: CONSTANT[0]"
            );
            assert_eq!(r["LOCAL"], 0, "{ctx}: no kernel here uses .nv.local");
            // Banks of the kernel's own (`.nv.constant<N>.<kernel>`, N > 0).
            let own: BTreeMap<_, _> = module
                .sections()
                .iter()
                .filter_map(|s| match s.kind {
                    Kind::KernelBank(n) if s.name == format!(".nv.constant{n}.{}", k.name()) => {
                        Some((format!("CONSTANT[{n}]"), s.size))
                    }
                    _ => None,
                })
                .collect();
            let listed: BTreeMap<_, _> = r
                .iter()
                .filter(|(n, _)| n.starts_with("CONSTANT[") && n.as_str() != "CONSTANT[0]")
                .map(|(n, v)| (n.clone(), *v))
                .collect();
            assert_eq!(own, listed, "{ctx}: the kernel's own constant banks");
        }
        // The module's common line: every constant bank and the global data.
        let mut banks = BTreeMap::new();
        let mut global = 0;
        for s in module.sections() {
            match s.kind {
                Kind::Bank(n) => {
                    banks.insert(format!("CONSTANT[{n}]"), s.size);
                }
                Kind::Global | Kind::GlobalInit => global += s.size,
                Kind::Code | Kind::KernelBank(_) => {}
            }
        }
        assert_eq!(global, res.common["GLOBAL"], "{cubin}: GLOBAL");
        let common_banks: BTreeMap<_, _> = res
            .common
            .iter()
            .filter(|(k, _)| k.starts_with("CONSTANT["))
            .map(|(k, v)| (k.clone(), *v))
            .collect();
        assert_eq!(banks, common_banks, "{cubin}: constant banks");
    }
}

#[test]
fn parameters_barriers_and_thread_limits_match_cuobjdump_elf() {
    for cubin in SM90 {
        let module = Module::parse(&read(cubin)).unwrap();
        let elf = text(&format!("{cubin}.elf.txt"));
        for k in module.kernels() {
            let ctx = format!("{cubin} {}", k.name());
            let attrs = elf_attributes(&elf, k.name());
            let mut params: Vec<(u64, u64, u64)> = attrs
                .iter()
                .filter(|(a, _)| a == "EIATTR_KPARAM_INFO")
                .map(|(_, v)| {
                    let m = kv(v);
                    (m["Ordinal"], m["Offset"], m["Size"])
                })
                .collect();
            params.sort_unstable();
            let ours: Vec<_> = k
                .params()
                .iter()
                .map(|p| (u64::from(p.ordinal), u64::from(p.offset), u64::from(p.size)))
                .collect();
            assert_eq!(ours, params, "{ctx}: KPARAM_INFO");
            let value = |name: &str| {
                attrs
                    .iter()
                    .find(|(a, _)| a == name)
                    .map(|(_, v)| v.clone())
            };
            match value("EIATTR_PARAM_CBANK") {
                Some(v) => {
                    let packed = num(v.split_whitespace().nth(1).unwrap());
                    assert_eq!(u64::from(k.param_base()), packed & 0xffff, "{ctx}: base");
                    assert_eq!(u64::from(k.param_bytes()), packed >> 16, "{ctx}: size");
                    assert_eq!(k.param_base(), 0x210, "{ctx}: sm_90's parameter base");
                }
                None => assert!(k.params().is_empty(), "{ctx}"),
            }
            let size = value("EIATTR_CBANK_PARAM_SIZE").map_or(0, |v| num(&v));
            assert_eq!(u64::from(k.param_bytes()), size, "{ctx}: CBANK_PARAM_SIZE");
            let barriers = value("EIATTR_NUM_BARRIERS").map_or(0, |v| num(&v));
            assert_eq!(u64::from(k.barriers()), barriers, "{ctx}: NUM_BARRIERS");
            let dims = |v: String| -> [u32; 3] {
                let d: Vec<u32> = v.split_whitespace().map(|x| num(x) as u32).collect();
                [d[0], d[1], d[2]]
            };
            match (value("EIATTR_REQNTID"), value("EIATTR_MAX_THREADS")) {
                (Some(v), _) => assert_eq!(k.threads(), Threads::Required(dims(v)), "{ctx}"),
                (None, Some(v)) => assert_eq!(k.threads(), Threads::Max(dims(v)), "{ctx}"),
                (None, None) => assert_eq!(k.threads(), Threads::Any, "{ctx}"),
            }
        }
    }
}

#[test]
fn module_relocations_match_cuobjdump_elf() {
    let cubin = "kernels.sm_90.cubin";
    let module = Module::parse(&read(cubin)).unwrap();
    let elf = text(&format!("{cubin}.elf.txt"));
    let head = ".section .rela.nv.constant4\tRELA\n";
    let start = elf.find(head).unwrap() + head.len();
    let mut theirs: Vec<(u64, String, String)> = elf[start..]
        .lines()
        .take_while(|l| !l.trim().is_empty())
        .map(|l| {
            let f: Vec<_> = l.split_whitespace().collect();
            (num(f[0]), f[1].to_owned(), f[2].to_owned())
        })
        .collect();
    theirs.sort();
    let mut ours: Vec<(u64, String, String)> = module
        .relocations()
        .iter()
        .map(|r| {
            assert_eq!(module.sections()[r.section].name, ".nv.constant4");
            (
                r.offset,
                r.symbol.clone(),
                r.kind.name().unwrap().to_owned(),
            )
        })
        .collect();
    ours.sort();
    assert_eq!(ours, theirs);
    assert_eq!(theirs.len(), 2, "counter and bias");
}

#[test]
fn the_launch_test_kernels_are_all_there_with_their_parameters() {
    let module = Module::parse(&read("kernels.sm_90.cubin")).unwrap();
    for name in LAUNCH_TESTS {
        module.kernel(name).unwrap();
    }
    let saxpy = module.kernel("saxpy").unwrap();
    let layout: Vec<_> = saxpy.params().iter().map(|p| (p.offset, p.size)).collect();
    assert_eq!(layout, [(0, 4), (8, 8), (0x10, 8), (0x18, 8)]);
    let mixed = module.kernel("mixed_params").unwrap();
    let layout: Vec<_> = mixed.params().iter().map(|p| (p.offset, p.size)).collect();
    assert_eq!(layout, [(0, 1), (8, 0x20), (0x28, 8), (0x30, 2), (0x38, 8)]);
    assert_eq!(module.kernel("reduce_sum").unwrap().barriers(), 1);
    assert_eq!(module.kernel("local_array").unwrap().stack().bytes(), 0x400);
    assert_eq!(module.kernel("reduce_sum").unwrap().shared().bytes(), 0x410);
    assert!(matches!(
        module.kernel("nope"),
        Err(ModuleError::NoKernel { .. })
    ));
}

#[test]
fn tritons_cubin_of_the_older_abi_is_sm_90_with_the_reserved_shared_memory() {
    let module = Module::parse(&read("triton_add.sm_90.cubin")).unwrap();
    assert_eq!(module.target().abi_version, 7);
    assert_eq!(module.target().sm, 90);
    let k = module.kernel("add_kernel").unwrap();
    assert_eq!(k.shared().static_bytes, 0);
    assert_eq!(
        k.shared().bytes(),
        0x400,
        "the module declares reserved shared memory"
    );
    assert_eq!(
        k.params().len(),
        6,
        "four arguments and Triton's two scratch pointers"
    );
}

#[test]
fn the_image_lays_out_code_banks_and_globals_and_relocates_bank_4() {
    let module = Module::parse(&read("kernels.sm_90.cubin")).unwrap();
    let layout = module.layout().unwrap();
    let base = 0x7f00_0000_0000u64;
    let image = layout.place(GpuVa(base)).unwrap();
    let code_end = module
        .sections()
        .iter()
        .enumerate()
        .filter(|(_, s)| s.kind == Kind::Code)
        .map(|(i, s)| layout.offset(i).unwrap() + s.size)
        .max()
        .unwrap();
    for k in module.kernels() {
        let entry = image.entry(k).unwrap().get();
        assert_eq!(entry % 128, 0, "{}", k.name());
        let at = (entry - base) as usize;
        let code = module.code(k).unwrap();
        assert_eq!(&image.bytes()[at..at + code.len()], code, "{}", k.name());
    }
    let bank = |n| *image.banks().iter().find(|b| b.index == n).unwrap();
    let (b3, b4) = (bank(3), bank(4));
    let (b3_addr, b4_addr) = (b3.addr.get(), b4.addr.get());
    assert!(
        b3_addr - base >= code_end + 0x1000,
        "4 KiB of slack after the code"
    );
    assert!(
        image.bytes()[code_end as usize..(code_end + 0x1000) as usize]
            .iter()
            .all(|&b| b == 0)
    );
    assert_eq!((b3_addr % 256, b4_addr % 256), (0, 0));
    assert_eq!((b3.size, b4.size), (64, 16));
    let word = |addr: u64, n: usize| {
        let at = (addr - base) as usize;
        image.bytes()[at..at + n].to_vec()
    };
    let table: Vec<u8> = [3u32, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9, 7, 9, 3]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    assert_eq!(word(b3_addr, 64), table, "__constant__ table in bank 3");
    let counter = image.variable("counter").unwrap().get();
    let bias = image.variable("bias").unwrap().get();
    assert_eq!(
        word(b4_addr, 8),
        counter.to_le_bytes(),
        "bank 4 slot 0: &counter"
    );
    assert_eq!(
        word(b4_addr + 8, 8),
        bias.to_le_bytes(),
        "bank 4 slot 8: &bias"
    );
    assert_eq!(
        word(bias, 4),
        0x0100_0000u32.to_le_bytes(),
        "bias's initial value"
    );
    let (zero_at, zero_len) = image.zeroed();
    let zero_at = zero_at.get();
    assert!(
        zero_at <= counter && counter + 8 <= zero_at + zero_len,
        "counter is zeroed"
    );
    assert_eq!(zero_at + zero_len, base + layout.size());
    assert_eq!(base + image.bytes().len() as u64, zero_at);
}

#[test]
fn tinygrads_kernels_load_with_a_jump_table_in_their_own_bank_2() {
    // NVRTC 13.0's cubin of three kernels tinygrad generated (tinygrad.cu): a jump table
    // in .nv.constant2.<kernel> (EIATTR_INDIRECT_BRANCH_TARGETS), spill annotations and
    // partly used vector loads.
    let bytes = read("tinygrad.sm_90.nvrtc.cubin");
    let module = Module::parse(&bytes).unwrap();
    let elf = text("tinygrad.sm_90.nvrtc.cubin.elf.txt");
    for attr in [
        "EIATTR_INDIRECT_BRANCH_TARGETS",
        "EIATTR_ANNOTATIONS",
        "EIATTR_UNUSED_LOAD_BYTE_OFFSET",
    ] {
        assert!(elf.contains(attr), "the fixture carries {attr}");
    }
    let name = "r_2_2_2_3_3_3_6_7_6";
    let table = module
        .sections()
        .iter()
        .find(|s| s.name == format!(".nv.constant2.{name}"))
        .unwrap();
    assert_eq!(table.kind, Kind::KernelBank(2));
    assert_eq!(table.size, 0x20, "eight 4-byte branch targets");
    let layout = module.layout().unwrap();
    let base = 0x7f00_0000_0000u64;
    let image = layout.place(GpuVa(base)).unwrap();
    let own: Vec<_> = image.kernel_banks(name).collect();
    assert_eq!(own.len(), 1, "{own:?}");
    assert_eq!((own[0].index, own[0].size), (2, 0x20));
    assert_eq!(own[0].addr.get() % 256, 0);
    let at = (own[0].addr.get() - base) as usize;
    assert_eq!(&image.bytes()[at..at + 0x20], table.data.as_slice());
    // The table holds offsets into the kernel's code (the branch is relative).
    let code = module
        .code(module.kernels().iter().find(|k| k.name() == name).unwrap())
        .unwrap();
    for t in table.data.chunks(4) {
        assert!((u32::from_le_bytes(t.try_into().unwrap()) as usize) < code.len());
    }
    // Other kernels bind no bank of their own; no bank 2 is the module's.
    assert_eq!(image.kernel_banks("E_7").count(), 0);
    assert!(image.banks().iter().all(|b| b.index != 2));
}

/// Each instruction of `kernel` in a `cuobjdump -sass` view, by its offset: the
/// mnemonic without its predicate (`@P0 EXIT` is `EXIT`).
fn sass_mnemonics(sass: &str, kernel: &str) -> BTreeMap<u64, String> {
    let head = format!("Function : {kernel}\n");
    let start = sass.find(&head).unwrap_or_else(|| panic!("no {head:?}")) + head.len();
    let body = &sass[start..];
    let body = &body[..body.find("Function : ").unwrap_or(body.len())];
    body.lines()
        .filter_map(|line| {
            let rest = line.trim().strip_prefix("/*")?;
            let (at, text) = rest.split_once("*/")?;
            let mut words = text.split_whitespace();
            let mut op = words.next()?;
            if op.starts_with('@') {
                op = words.next()?;
            }
            Some((num(&format!("0x{at}")), op.to_owned()))
        })
        .collect()
}

/// nvcc's warp-synchronous kernels load, and what their three attributes list is what
/// rig ignores them as (docs/hardware/nvidia-compute.md, "Warp-synchronous code"):
/// instructions that synchronise threads by a member mask, and registers of the kernel.
#[test]
fn cooperative_groups_attributes_name_synchronising_instructions_and_registers() {
    let cubin = "coop.sm_90.cubin";
    let module = Module::parse(&read(cubin)).unwrap();
    let elf = text(&format!("{cubin}.elf.txt"));
    let sass = text(&format!("{cubin}.sass.txt"));
    let mut seen = BTreeSet::new();
    for k in module.kernels() {
        let ctx = format!("{cubin} {}", k.name());
        let attrs = elf_attributes(&elf, k.name());
        let list = |name: &str| -> Vec<u64> {
            attrs
                .iter()
                .find(|(a, _)| a == name)
                .map(|(_, v)| v.split_whitespace().map(num).collect())
                .unwrap_or_default()
        };
        let ops = sass_mnemonics(&sass, k.name());
        let sync = ["SHFL", "VOTE", "VOTEU", "WARPSYNC", "REDUX", "BAR", "MATCH"];
        let op_at = |at: u64| -> &str {
            let op = ops
                .get(&at)
                .unwrap_or_else(|| panic!("{ctx}: no instruction at {at:#x}"));
            op.split('.').next().unwrap()
        };
        let coop = list("EIATTR_COOP_GROUP_INSTR_OFFSETS");
        let masks = list("EIATTR_COOP_GROUP_MASK_REGIDS");
        assert_eq!(
            coop.len(),
            masks.len(),
            "{ctx}: one mask register per instruction"
        );
        for (&at, &mask) in coop.iter().zip(&masks) {
            let op = op_at(at);
            assert!(sync.contains(&op), "{ctx}: {op} at {at:#x}");
            seen.insert(op.to_owned());
            assert!(
                mask == 0xffff_ffff
                    || (mask >> 24 == 0x05 && (mask & 0xff_ffff) < u64::from(k.registers())),
                "{ctx}: mask register {mask:#x} of a kernel of {} registers",
                k.registers()
            );
        }
        for at in list("EIATTR_INT_WARP_WIDE_INSTR_OFFSETS") {
            let op = op_at(at);
            assert!(sync.contains(&op), "{ctx}: warp-wide {op} at {at:#x}");
        }
    }
    // The fixture covers every kind the attribute names: shuffles, votes, a WARPSYNC,
    // REDUX and block barriers.
    for op in ["SHFL", "VOTE", "WARPSYNC", "REDUX", "BAR"] {
        assert!(seen.contains(op), "no {op} among {seen:?}");
    }
    let names: BTreeSet<_> = module.kernels().iter().map(|k| k.name()).collect();
    for k in [
        "shuffle_atomic",
        "take_total",
        "partial_warp",
        "cub_block",
        "grid_sum",
        "grid_env",
    ] {
        assert!(names.contains(k), "{k} missing from {names:?}");
    }
}

#[test]
fn a_misaligned_base_is_refused() {
    let module = Module::parse(&read("kernels.sm_90.cubin")).unwrap();
    let layout = module.layout().unwrap();
    assert_eq!(layout.align(), 256);
    assert!(matches!(
        layout.place(GpuVa(0x1000_0080)),
        Err(rig_cubin::ImageError::Base { align: 256, .. })
    ));
}

#[test]
fn a_cubin_for_sm_89_is_refused_naming_sm_89() {
    let err = Module::parse(&read("kernels.sm_89.cubin")).unwrap_err();
    assert!(matches!(err, ModuleError::Arch { sm: 89 }), "{err:?}");
    assert!(err.to_string().contains("sm_89"), "{err}");
}

#[test]
fn a_relocatable_cubin_is_refused_as_needing_a_link_step() {
    let err = Module::parse(&read("kernels.sm_90.rdc.cubin")).unwrap_err();
    assert!(matches!(err, ModuleError::Relocatable), "{err:?}");
    assert!(err.to_string().contains("link"), "{err}");
}

#[test]
fn a_cluster_kernel_is_refused_naming_the_cluster_attribute() {
    let err = Module::parse(&read("cluster.sm_90.cubin")).unwrap_err();
    let ModuleError::Kernel { kernel, source } = &err else {
        panic!("{err:?}");
    };
    assert_eq!(kernel, "clustered");
    let KernelError::Unsupported { attribute, .. } = source else {
        panic!("{source:?}");
    };
    assert!(
        [Eiattr::EXPLICIT_CLUSTER, Eiattr::CTA_PER_CLUSTER].contains(attribute),
        "{attribute}"
    );
    assert!(source.to_string().contains("CLUSTER"), "{source}");
}

#[test]
fn a_printf_kernel_is_refused_naming_the_runtime_call() {
    let err = Module::parse(&read("printf.sm_90.cubin")).unwrap_err();
    let ModuleError::Kernel { kernel, source } = &err else {
        panic!("{err:?}");
    };
    assert_eq!(kernel, "hello");
    let KernelError::Unsupported { attribute, .. } = source else {
        panic!("{source:?}");
    };
    assert!(
        [Eiattr::EXTERNS, Eiattr::SYSCALL_OFFSETS].contains(attribute),
        "{attribute}"
    );
}

/// The end of what the parser reads: the section header table and every section's bytes
/// (the program headers after them are not read).
fn read_extent(bytes: &[u8]) -> usize {
    let u16_at = |at: usize| usize::from(u16::from_le_bytes(bytes[at..at + 2].try_into().unwrap()));
    let u64_at = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap()) as usize;
    let (shoff, shnum) = (u64_at(0x28), u16_at(0x3c));
    let table_end = shoff + shnum * 64;
    (0..shnum)
        .map(|i| shoff + i * 64)
        .filter(|&h| u32::from_le_bytes(bytes[h + 4..h + 8].try_into().unwrap()) != 8)
        .map(|h| u64_at(h + 24) + u64_at(h + 32))
        .fold(table_end, usize::max)
}

#[test]
fn every_truncation_into_what_the_parser_reads_is_an_error() {
    for cubin in ["kernels.sm_90.cubin", "triton_add.sm_90.cubin"] {
        let bytes = read(cubin);
        let extent = read_extent(&bytes);
        assert!(
            extent <= bytes.len() && extent > bytes.len() / 2,
            "{cubin}: {extent}"
        );
        for len in (0..extent).filter(|l| l % 7 == 0 || *l < 256 || extent - l < 256) {
            assert!(
                Module::parse(&bytes[..len]).is_err(),
                "{cubin} cut at {len}"
            );
        }
        // What lies past it (the program headers) is not needed.
        Module::parse(&bytes[..extent]).unwrap();
    }
}

#[test]
fn relocation_types_the_module_applies_are_named_as_cuobjdump_names_them() {
    assert_eq!(RelocType::R_CUDA_64.name(), Some("R_CUDA_64"));
    assert_eq!(
        RelocType::R_CUDA_ABS32_LO_32.name(),
        Some("R_CUDA_ABS32_LO_32")
    );
}

mod mutations {
    use proptest::prelude::*;

    use super::*;

    fn parse_and_place(bytes: &[u8]) {
        if let Ok(m) = Module::parse(bytes)
            && let Ok(layout) = m.layout()
        {
            let _ = layout.place(GpuVa(0x1_0000_0000));
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        /// Flipped bytes anywhere in a good cubin give an error or a module; never a panic.
        #[test]
        fn flipped_bytes_never_panic(
            flips in proptest::collection::vec((any::<prop::sample::Index>(), 1u8..=255), 1..8),
            which in 0usize..SM90.len(),
        ) {
            let mut bytes = read(SM90[which]);
            for (at, x) in &flips {
                let i = at.index(bytes.len());
                bytes[i] ^= x;
            }
            parse_and_place(&bytes);
        }

        /// The same in the ELF header and section header table, where offsets live.
        #[test]
        fn flipped_header_and_table_bytes_never_panic(
            flips in proptest::collection::vec((0usize..64, any::<u8>()), 1..4),
            table in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..4),
        ) {
            let mut bytes = read("kernels.sm_90.cubin");
            let shoff = u64::from_le_bytes(bytes[0x28..0x30].try_into().unwrap()) as usize;
            for (at, v) in &flips {
                bytes[*at] = *v;
            }
            for (at, v) in &table {
                let i = shoff + at.index(bytes.len() - shoff);
                bytes[i] = *v;
            }
            parse_and_place(&bytes);
        }
    }
}
