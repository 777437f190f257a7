//! A cubin's bytes to a typed [`Module`]: the ELF checks, the kernels, the sections a
//! launch loads, and the relocations between them.
//!
//! Flow: bytes → rig-elf's index → [`Module::parse`] (header checks, sections, `.nv.info`
//! records through `info`, each kernel through `kernel`, relocations through `reloc`) →
//! `image` lays the loaded sections out at GPU addresses.
//!
//! Invariants: the module owns copies of the bytes it loads (code, constant banks,
//! initialised globals), so it outlives the input. Everything a launch would need but rig
//! cannot provide is refused here, by name: another GPU, relocatable (`-rdc`) output, an
//! attribute of `info`'s refused list, a relocation type `reloc` does not apply, a
//! relocation against a symbol the cubin does not define, an allocated section rig does
//! not place.
//!
//! References: LLVM `llvm/include/llvm/BinaryFormat/ELF.h` (`EM_CUDA`,
//! `ELFABIVERSION_CUDA_V1`/`_V2`, `EF_CUDA_SM`, `EF_CUDA_SM_MASK`); the cubin's sections
//! as docs/hardware/nvidia-compute.md describes them. Not here: GPU addresses (`image`).

use rig_elf::{ElfClass, ElfError, ElfIndex, Section, Symbol};

use crate::info::{self, Eiattr, InfoError, Policy, Record};
use crate::kernel::{self, Found, Function, Kernel, KernelError, SM90_RESERVED_SHARED, Shared};
use crate::reloc::RelocType;

/// `EM_CUDA`.
pub const EM_CUDA: u16 = 190;
/// `ELFABIVERSION_CUDA_V1`: the SM is `e_flags` bits 7:0 (`EF_CUDA_SM`).
pub const ELFABIVERSION_CUDA_V1: u8 = 7;
/// `ELFABIVERSION_CUDA_V2`: the SM is `e_flags` bits 15:8 (`EF_CUDA_SM_MASK`).
pub const ELFABIVERSION_CUDA_V2: u8 = 8;
const EF_CUDA_SM: u32 = 0xff;
const EF_CUDA_SM_MASK: u32 = 0xff00;
const EF_CUDA_SM_OFFSET: u32 = 8;
/// `st_other` bit of a kernel's entry symbol.
pub const STO_CUDA_ENTRY: u8 = 0x10;
/// `sh_type` of `.nv.info` sections.
pub const SHT_CUDA_INFO: u32 = 0x7000_0000;
/// The SM rig runs code for: its GPU generation's (rig-nv's `generation`: Hopper,
/// sm_90). The facts this parser reads (EIATTRs, bank 0) were measured on sm_90.
pub const SM: u32 = rig_nv::generation::HOPPER.sm;
/// Constant banks a QMD binds: 0 to 7.
pub const MAX_BANKS: u8 = 8;
/// The largest constant bank (64 KiB).
pub const MAX_BANK_BYTES: u64 = 0x1_0000;
/// The largest section alignment rig lays out.
const MAX_ALIGN: u64 = 0x1000;

const ET_REL: u16 = 1;
const ET_EXEC: u16 = 2;
const SHT_PROGBITS: u32 = 1;
const SHT_SYMTAB: u32 = 2;
const SHT_RELA: u32 = 4;
const SHT_NOBITS: u32 = 8;
const SHT_REL: u32 = 9;
const SHF_ALLOC: u64 = 0x2;
const SHF_EXECINSTR: u64 = 0x4;
const STT_OBJECT: u8 = 1;
const STT_FUNC: u8 = 2;
const SHN_LORESERVE: u16 = 0xff00;

/// The GPU the code was compiled for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Target {
    /// The SM (`e_flags`' SM field): 90 for sm_90 and sm_90a.
    pub sm: u32,
    /// `e_ident[EI_ABIVERSION]`: 7 (CUDA 12, Triton's ptxas) or 8 (CUDA 13).
    pub abi_version: u8,
}

/// What a loaded section holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `.text.<function>`: code.
    Code,
    /// `.nv.constant<N>`: constant bank N (3: `__constant__` data; 4: the addresses of
    /// `__device__` data, filled by relocations).
    Bank(u8),
    /// `.nv.constant<N>.<kernel>` for N other than 0: a bank of one kernel's own (2:
    /// what ptxas puts there, such as a `switch`'s jump table), bound only in that
    /// kernel's launches (docs/hardware/nvidia-compute.md, "Constant banks").
    KernelBank(u8),
    /// `.nv.global.init`: initialised `__device__` data.
    GlobalInit,
    /// `.nv.global`: zero-initialised `__device__` data (no bytes in the file).
    Global,
}

/// A section the image places.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Loaded {
    /// Its name.
    pub name: String,
    /// What it holds.
    pub kind: Kind,
    /// Its alignment in the image (a power of two).
    pub align: u64,
    /// Its size in bytes.
    pub size: u64,
    /// Its bytes (empty for [`Kind::Global`], which is zeroed).
    pub data: Vec<u8>,
}

/// A relocation into a loaded section: `value + addend` of a symbol in another (or the
/// same) loaded section, written as `kind` says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Relocation {
    /// The loaded section written to.
    pub section: usize,
    /// Where in it.
    pub offset: u64,
    /// How.
    pub kind: RelocType,
    /// The symbol's name, for errors.
    pub symbol: String,
    /// The loaded section the symbol is defined in.
    pub target: usize,
    /// The symbol's offset in that section.
    pub value: u64,
    /// `r_addend`.
    pub addend: i64,
}

/// A named `__constant__` or `__device__` variable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Variable {
    /// Its name.
    pub name: String,
    /// The loaded section it lives in.
    pub section: usize,
    /// Its offset there.
    pub offset: u64,
    /// Its size.
    pub size: u64,
}

/// A parsed sm_90 cubin.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Module {
    target: Target,
    kernels: Vec<Kernel>,
    sections: Vec<Loaded>,
    relocations: Vec<Relocation>,
    variables: Vec<Variable>,
}

/// Why a cubin cannot be loaded.
#[derive(Debug, thiserror::Error)]
pub enum ModuleError {
    /// The ELF structures are malformed.
    #[error("not an ELF file rig can read")]
    Elf(#[from] ElfError),
    /// Not ELF64.
    #[error("a 32-bit ELF file; cubins are ELF64")]
    Class,
    /// `e_machine` is not `EM_CUDA`.
    #[error("e_machine is {found}, not EM_CUDA (190): not a cubin")]
    Machine {
        /// `e_machine`.
        found: u16,
    },
    /// An `e_ident[EI_ABIVERSION]` whose `e_flags` layout is unknown.
    #[error("CUDA ELF ABI version {found}; rig reads versions 7 and 8")]
    AbiVersion {
        /// `e_ident[EI_ABIVERSION]`.
        found: u8,
    },
    /// Code for another GPU.
    #[error("the cubin is for sm_{sm}; rig runs sm_{SM} code (Hopper: the H100 and H200)")]
    Arch {
        /// The SM in `e_flags`.
        sm: u32,
    },
    /// `ET_REL`: separately compiled device code that needs `nvlink`.
    #[error("a relocatable cubin (nvcc -rdc, ET_REL) needs a link step (nvlink) first")]
    Relocatable,
    /// Neither `ET_EXEC` nor `ET_REL`.
    #[error("e_type is {found}; a cubin is ET_EXEC (2)")]
    Type {
        /// `e_type`.
        found: u16,
    },
    /// A section every cubin has is missing.
    #[error("no {what} section")]
    Missing {
        /// Which.
        what: &'static str,
    },
    /// A section rig cannot place or read.
    #[error("section {name}: {reason}")]
    Section {
        /// Its name.
        name: String,
        /// Why.
        reason: String,
    },
    /// A `.nv.info` section is malformed.
    #[error("section {section} is malformed")]
    Info {
        /// Its name.
        section: String,
        /// What is wrong.
        #[source]
        source: InfoError,
    },
    /// An attribute of the module's `.nv.info` asks for what rig does not do.
    #[error("section {section}: {attribute}: {reason}")]
    Unsupported {
        /// The section.
        section: String,
        /// The attribute.
        attribute: Eiattr,
        /// What it needs.
        reason: &'static str,
    },
    /// A kernel cannot be launched by rig.
    #[error("kernel {kernel}")]
    Kernel {
        /// Its name.
        kernel: String,
        /// Why.
        #[source]
        source: KernelError,
    },
    /// A relocation rig does not apply.
    #[error("{section}: the relocation at {offset:#x} ({kind}) {reason}")]
    Relocation {
        /// The relocation section.
        section: String,
        /// `r_offset`.
        offset: u64,
        /// Its type.
        kind: RelocType,
        /// Why it is refused.
        reason: String,
    },
    /// No kernel of that name.
    #[error("no kernel named {name:?} in the module")]
    NoKernel {
        /// The name asked for.
        name: String,
    },
}

/// The target of a CUDA ELF header, or why it is refused.
fn target(index: &ElfIndex) -> Result<Target, ModuleError> {
    if index.class != ElfClass::Elf64 {
        return Err(ModuleError::Class);
    }
    if index.machine != EM_CUDA {
        return Err(ModuleError::Machine {
            found: index.machine,
        });
    }
    let sm = match index.abi_version {
        ELFABIVERSION_CUDA_V1 => index.flags & EF_CUDA_SM,
        ELFABIVERSION_CUDA_V2 => (index.flags & EF_CUDA_SM_MASK) >> EF_CUDA_SM_OFFSET,
        found => return Err(ModuleError::AbiVersion { found }),
    };
    if sm != SM {
        return Err(ModuleError::Arch { sm });
    }
    match index.e_type {
        ET_EXEC => Ok(Target {
            sm,
            abi_version: index.abi_version,
        }),
        ET_REL => Err(ModuleError::Relocatable),
        found => Err(ModuleError::Type { found }),
    }
}

fn section_err(s: &Section, reason: impl Into<String>) -> ModuleError {
    ModuleError::Section {
        name: s.name.clone(),
        reason: reason.into(),
    }
}

/// `N` of `.nv.constant<N>`, and the kernel of `.nv.constant<N>.<kernel>`.
pub(crate) fn bank_name(name: &str) -> Option<(u8, Option<&str>)> {
    let rest = name.strip_prefix(".nv.constant")?;
    let (digits, kernel) = match rest.split_once('.') {
        Some((d, k)) => (d, Some(k)),
        None => (rest, None),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some((digits.parse().unwrap_or(u8::MAX), kernel))
}

/// The section's bytes (empty for `SHT_NOBITS`), read through the checked index.
fn bytes_of(bytes: &[u8], s: &Section) -> Result<Vec<u8>, ModuleError> {
    if s.sh_type == SHT_NOBITS {
        return Ok(Vec::new());
    }
    let range = usize::try_from(s.span.offset())
        .ok()
        .zip(usize::try_from(s.span.end()).ok())
        .and_then(|(a, b)| bytes.get(a..b))
        .ok_or_else(|| section_err(s, "its bytes lie outside the file"))?;
    Ok(range.to_vec())
}

/// The alignment to place `s` at: its own, at least `min`.
fn align_of(s: &Section, min: u64) -> Result<u64, ModuleError> {
    let own = s.align.max(1);
    if !own.is_power_of_two() || own > MAX_ALIGN {
        return Err(section_err(
            s,
            format!(
                "sh_addralign {:#x} is not a power of two up to 4 KiB",
                s.align
            ),
        ));
    }
    Ok(own.max(min))
}

/// Sorts the sections of `index` into those the image places (`loaded`, with a map from
/// ELF section index to loaded index) and refuses allocated sections it cannot place.
fn load(index: &ElfIndex, bytes: &[u8]) -> Result<(Vec<Loaded>, Vec<Option<usize>>), ModuleError> {
    let mut loaded = Vec::new();
    let mut by_elf = vec![None; index.sections.len()];
    for s in &index.sections {
        let kind = if s.name.starts_with(".text.") {
            if s.sh_type != SHT_PROGBITS || s.flags & SHF_EXECINSTR == 0 {
                return Err(section_err(
                    s,
                    "a .text section that is not executable PROGBITS",
                ));
            }
            Some((Kind::Code, 128))
        } else if let Some((n, kernel)) = bank_name(&s.name) {
            match kernel {
                None if n == 0 => return Err(section_err(s, "bank 0 belongs to each kernel")),
                None if n >= MAX_BANKS => {
                    return Err(section_err(s, "the QMD binds constant banks 0 to 7"));
                }
                None => Some((Kind::Bank(n), 256)),
                Some(_) if n == 0 => None, // a kernel's bank 0 template, read by `kernel`
                Some(_) if n >= MAX_BANKS => {
                    return Err(section_err(s, "the QMD binds constant banks 0 to 7"));
                }
                // A kernel's bank N and the module's bank N cannot both be bound.
                Some(_) if index.section(&format!(".nv.constant{n}")).is_some() => {
                    return Err(section_err(
                        s,
                        format!("constant bank {n} is also the module's"),
                    ));
                }
                Some(_) => Some((Kind::KernelBank(n), 256)),
            }
        } else if s.name == ".nv.global" {
            if s.sh_type != SHT_NOBITS {
                return Err(section_err(s, ".nv.global is not NOBITS"));
            }
            Some((Kind::Global, 16))
        } else if s.name == ".nv.global.init" {
            Some((Kind::GlobalInit, 16))
        } else if s.name.starts_with(".nv.shared.") {
            if s.sh_type != SHT_NOBITS {
                return Err(section_err(s, "shared memory is not NOBITS"));
            }
            None // per CTA, sized by `kernel`
        } else if s.flags & SHF_ALLOC != 0 {
            return Err(section_err(s, "an allocated section rig does not place"));
        } else {
            None
        };
        let Some((kind, min_align)) = kind else {
            continue;
        };
        if matches!(kind, Kind::Bank(_) | Kind::KernelBank(_)) && s.size > MAX_BANK_BYTES {
            return Err(section_err(s, "a constant bank larger than 64 KiB"));
        }
        if kind != Kind::Global && s.sh_type != SHT_PROGBITS {
            return Err(section_err(s, "not PROGBITS"));
        }
        by_elf[s.index] = Some(loaded.len());
        loaded.push(Loaded {
            name: s.name.clone(),
            kind,
            align: align_of(s, min_align)?,
            size: s.size,
            data: bytes_of(bytes, s)?,
        });
    }
    Ok((loaded, by_elf))
}

/// Every record of every `.nv.info` section, by section.
fn info_sections<'a>(
    index: &'a ElfIndex,
    bytes: &'a [u8],
) -> Result<Vec<(&'a Section, Vec<Record<'a>>)>, ModuleError> {
    index
        .sections
        .iter()
        .filter(|s| s.sh_type == SHT_CUDA_INFO)
        .map(|s| {
            let data = usize::try_from(s.span.offset())
                .ok()
                .zip(usize::try_from(s.span.end()).ok())
                .and_then(|(a, b)| bytes.get(a..b))
                .ok_or_else(|| section_err(s, "its bytes lie outside the file"))?;
            let records = info::records(data).map_err(|source| ModuleError::Info {
                section: s.name.clone(),
                source,
            })?;
            Ok((s, records))
        })
        .collect()
}

/// REGCOUNT, FRAME_SIZE, MIN_STACK_SIZE and MAX_STACK_SIZE of the module's `.nv.info`,
/// by function symbol index; every other record there is checked against its policy.
fn functions(
    section: &Section,
    records: &[Record<'_>],
    symbols: usize,
) -> Result<Vec<Function>, ModuleError> {
    let mut out = vec![Function::default(); symbols];
    let info_err = |source| ModuleError::Info {
        section: section.name.clone(),
        source,
    };
    for r in records {
        let slot = |out: &mut Vec<Function>, sym: u32| {
            usize::try_from(sym)
                .ok()
                .filter(|&s| s < out.len())
                .ok_or_else(|| section_err(section, format!("{} names symbol {sym}", r.attribute)))
        };
        match (r.attribute, r.attribute.policy()) {
            (_, Policy::Ignore) => {}
            (a, Policy::Refuse(reason)) => {
                return Err(ModuleError::Unsupported {
                    section: section.name.clone(),
                    attribute: a,
                    reason,
                });
            }
            (Eiattr::REGCOUNT, _) => {
                let [sym, v] = r.words::<2>("an SVAL of 8 bytes").map_err(info_err)?;
                let i = slot(&mut out, sym)?;
                out[i].registers = Some(v);
            }
            (Eiattr::FRAME_SIZE, _) => {
                let [sym, v] = r.words::<2>("an SVAL of 8 bytes").map_err(info_err)?;
                let i = slot(&mut out, sym)?;
                out[i].stack.frame = v;
            }
            (Eiattr::MIN_STACK_SIZE, _) => {
                let [sym, v] = r.words::<2>("an SVAL of 8 bytes").map_err(info_err)?;
                let i = slot(&mut out, sym)?;
                out[i].stack.min = v;
            }
            (Eiattr::MAX_STACK_SIZE, _) => {
                let [sym, v] = r.words::<2>("an SVAL of 8 bytes").map_err(info_err)?;
                let i = slot(&mut out, sym)?;
                out[i].stack.max = Some(v);
            }
            (a, Policy::Read) => {
                return Err(section_err(
                    section,
                    format!("{a} belongs in a kernel's own .nv.info section"),
                ));
            }
        }
    }
    Ok(out)
}

impl Module {
    /// Reads an sm_90 cubin.
    ///
    /// # Errors
    /// [`ModuleError`]: malformed ELF structures, another GPU ([`ModuleError::Arch`] names
    /// its SM), relocatable output, and every refusal listed in the module's docs, each
    /// naming what it refuses.
    pub fn parse(bytes: &[u8]) -> Result<Module, ModuleError> {
        let index = ElfIndex::parse(bytes)?;
        let target = target(&index)?;
        let mut symtabs = index.sections.iter().filter(|s| s.sh_type == SHT_SYMTAB);
        let symtab = symtabs
            .next()
            .ok_or(ModuleError::Missing { what: ".symtab" })?;
        if symtabs.next().is_some() {
            return Err(section_err(symtab, "a second symbol table"));
        }
        let symbols = index.symbols(bytes, symtab)?;
        let (sections, by_elf) = load(&index, bytes)?;
        let infos = info_sections(&index, bytes)?;
        let functions = match infos.iter().find(|(s, _)| s.name == ".nv.info") {
            Some((s, records)) => functions(s, records, symbols.len())?,
            None => return Err(ModuleError::Missing { what: ".nv.info" }),
        };
        let kernels = kernels(&index, bytes, &symbols, &by_elf, &infos, &functions)?;
        let relocations = relocations(&index, bytes, &symbols, &by_elf, &sections)?;
        let variables = symbols
            .iter()
            .filter(|s| s.kind() == STT_OBJECT && !s.name.is_empty())
            .filter_map(|s| {
                let section = (*by_elf.get(usize::from(s.shndx))?)?;
                Some(Variable {
                    name: s.name.clone(),
                    section,
                    offset: s.value,
                    size: s.size,
                })
            })
            .collect();
        Ok(Module {
            target,
            kernels,
            sections,
            relocations,
            variables,
        })
    }

    /// The GPU the code is for.
    pub fn target(&self) -> Target {
        self.target
    }

    /// Every kernel, in symbol-table order.
    pub fn kernels(&self) -> &[Kernel] {
        &self.kernels
    }

    /// The kernel called `name`.
    ///
    /// # Errors
    /// [`ModuleError::NoKernel`].
    pub fn kernel(&self, name: &str) -> Result<&Kernel, ModuleError> {
        self.kernels
            .iter()
            .find(|k| k.name() == name)
            .ok_or_else(|| ModuleError::NoKernel { name: name.into() })
    }

    /// The sections an image places, in file order.
    pub fn sections(&self) -> &[Loaded] {
        &self.sections
    }

    /// The relocations an image applies.
    pub fn relocations(&self) -> &[Relocation] {
        &self.relocations
    }

    /// The named `__constant__` and `__device__` variables.
    pub fn variables(&self) -> &[Variable] {
        &self.variables
    }

    /// The code section of `kernel` (a kernel of this module).
    pub fn code(&self, kernel: &Kernel) -> Option<&[u8]> {
        self.sections.get(kernel.text).map(|s| s.data.as_slice())
    }
}

/// Every entry function with its attributes read.
fn kernels(
    index: &ElfIndex,
    bytes: &[u8],
    symbols: &[Symbol],
    by_elf: &[Option<usize>],
    infos: &[(&Section, Vec<Record<'_>>)],
    functions: &[Function],
) -> Result<Vec<Kernel>, ModuleError> {
    let reserved = if index
        .sections
        .iter()
        .any(|s| s.name.starts_with(".nv.shared.reserved."))
    {
        SM90_RESERVED_SHARED
    } else {
        0
    };
    let mut out: Vec<Kernel> = Vec::new();
    for sym in symbols
        .iter()
        .filter(|s| s.kind() == STT_FUNC && s.other & STO_CUDA_ENTRY != 0)
    {
        let name = sym.name.as_str();
        let kernel_err = |source| ModuleError::Kernel {
            kernel: name.to_owned(),
            source,
        };
        let inconsistent = |what: String| kernel_err(KernelError::Inconsistent { what });
        if out.iter().any(|k| k.name() == name) {
            return Err(inconsistent("a second entry symbol of that name".into()));
        }
        let text_name = format!(".text.{name}");
        let text = by_elf
            .get(usize::from(sym.shndx))
            .copied()
            .flatten()
            .filter(|_| {
                index
                    .sections
                    .get(usize::from(sym.shndx))
                    .is_some_and(|s| s.name == text_name)
            })
            .ok_or_else(|| inconsistent(format!("its symbol is not defined in {text_name}")))?;
        let code_size = index
            .sections
            .get(usize::from(sym.shndx))
            .map_or(0, |s| s.size);
        if sym.value >= code_size
            || sym
                .value
                .checked_add(sym.size)
                .is_none_or(|e| e > code_size)
        {
            return Err(inconsistent(format!(
                "its entry {:#x}+{:#x} is outside {text_name} ({code_size:#x} bytes)",
                sym.value, sym.size
            )));
        }
        let info_name = format!(".nv.info.{name}");
        let records = infos
            .iter()
            .find(|(s, _)| s.name == info_name)
            .map(|(_, r)| r.as_slice())
            .ok_or_else(|| {
                kernel_err(KernelError::Missing {
                    what: "own .nv.info section",
                })
            })?;
        let bank0_name = format!(".nv.constant0.{name}");
        let bank0 = index.section(&bank0_name).ok_or_else(|| {
            kernel_err(KernelError::Missing {
                what: ".nv.constant0 section",
            })
        })?;
        if bank0.size > MAX_BANK_BYTES {
            return Err(inconsistent("constant bank 0 is larger than 64 KiB".into()));
        }
        let bank0_symbols: Vec<usize> = symbols
            .iter()
            .filter(|s| usize::from(s.shndx) == bank0.index)
            .map(|s| s.index)
            .collect();
        let static_bytes = match index.section(&format!(".nv.shared.{name}")) {
            Some(s) => u32::try_from(s.size)
                .map_err(|_| inconsistent("more than 4 GiB of shared memory".into()))?,
            None => 0,
        };
        let found = Found {
            name,
            text,
            code_size,
            entry: sym.value,
            function: functions.get(sym.index).copied().unwrap_or_default(),
            records,
            bank0: bytes_of(bytes, bank0)?,
            bank0_symbols: &bank0_symbols,
            shared: Shared {
                static_bytes,
                reserved,
            },
        };
        out.push(kernel::build(found).map_err(kernel_err)?);
    }
    Ok(out)
}

/// Every relocation into a loaded section, checked; relocations of sections that are not
/// loaded (`.debug_frame`, `.debug_line`, …: not allocated) are ignored.
fn relocations(
    index: &ElfIndex,
    bytes: &[u8],
    symbols: &[Symbol],
    by_elf: &[Option<usize>],
    loaded: &[Loaded],
) -> Result<Vec<Relocation>, ModuleError> {
    let mut out = Vec::new();
    for rela in index
        .sections
        .iter()
        .filter(|s| s.sh_type == SHT_RELA || s.sh_type == SHT_REL)
    {
        let target = usize::try_from(rela.info)
            .ok()
            .and_then(|i| index.sections.get(i))
            .ok_or_else(|| section_err(rela, format!("sh_info {} is not a section", rela.info)))?;
        if target.flags & SHF_ALLOC == 0 {
            continue;
        }
        let section = by_elf.get(target.index).copied().flatten().ok_or_else(|| {
            section_err(
                rela,
                format!("relocates {}, which rig does not place", target.name),
            )
        })?;
        if rela.sh_type == SHT_REL {
            return Err(section_err(
                rela,
                "SHT_REL relocations (cubins use SHT_RELA)",
            ));
        }
        for r in index.relocations(bytes, rela)? {
            let kind = RelocType(r.kind);
            let refuse = |reason: String| ModuleError::Relocation {
                section: rela.name.clone(),
                offset: r.offset,
                kind,
                reason,
            };
            let (start, len) = kind.field().ok_or_else(|| {
                refuse(format!("is a type rig does not apply to {}", target.name))
            })?;
            let placed = &loaded[section];
            if placed.kind == Kind::Global
                || r.offset
                    .checked_add(start)
                    .and_then(|a| a.checked_add(len))
                    .is_none_or(|end| end > placed.size)
            {
                return Err(refuse(format!(
                    "writes outside the bytes of {}",
                    target.name
                )));
            }
            let sym = usize::try_from(r.sym)
                .ok()
                .and_then(|i| symbols.get(i))
                .ok_or_else(|| refuse(format!("names symbol {}, which does not exist", r.sym)))?;
            if sym.shndx == 0 || sym.shndx >= SHN_LORESERVE {
                return Err(refuse(format!(
                    "needs symbol {:?}, which the cubin does not define",
                    sym.name
                )));
            }
            let defined = by_elf
                .get(usize::from(sym.shndx))
                .copied()
                .flatten()
                .ok_or_else(|| {
                    refuse(format!(
                        "needs symbol {:?}, in a section rig does not place",
                        sym.name
                    ))
                })?;
            out.push(Relocation {
                section,
                offset: r.offset,
                kind,
                symbol: sym.name.clone(),
                target: defined,
                value: sym.value,
                addend: r.addend,
            });
        }
    }
    Ok(out)
}
