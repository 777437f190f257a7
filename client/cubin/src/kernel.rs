//! One kernel of a module: where its code is and what its launch must provide.
//!
//! Flow: `module` builds a [`Kernel`] per entry function while it parses; a launcher reads
//! it (rig-runtime's QMD builder and constant bank 0) and never changes it.
//!
//! Reference: the `.nv.info` attributes in `info` (registers, stack, parameters,
//! barriers, thread limits); docs/hardware/nvidia-compute.md (the cubin's sections).

/// The shared memory sm_90 reserves at the start of every CTA's window for the system:
/// sm_90 code addresses its own shared data from 0x400 (the fixtures' SASS), and nvcc
/// counts these bytes in `.nv.shared.<kernel>` (CUDA C++ Programming Guide, "Technical
/// Specifications per Compute Capability": 1 KB reserved per block from 8.x on).
pub const SM90_RESERVED_SHARED: u32 = 0x400;

/// One kernel parameter, as EIATTR_KPARAM_INFO describes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Param {
    /// Its position in the kernel's signature, from 0.
    pub ordinal: u16,
    /// Its offset from the kernel's parameter base in constant bank 0.
    pub offset: u16,
    /// Its size in bytes.
    pub size: u32,
}

/// The thread-count limit the kernel was compiled with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Threads {
    /// None beyond the hardware's.
    Any,
    /// `__launch_bounds__` / `.maxntid`: at most x·y·z threads per block
    /// (EIATTR_MAX_THREADS).
    Max([u32; 3]),
    /// `.reqntid`: exactly this block shape (EIATTR_REQNTID; Triton sets it from
    /// `num_warps`).
    Required([u32; 3]),
}

/// Per-thread local memory the kernel's code uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Stack {
    /// EIATTR_FRAME_SIZE: the entry function's own frame.
    pub frame: u32,
    /// EIATTR_MIN_STACK_SIZE: the stack the kernel and its callees need.
    pub min: u32,
    /// EIATTR_MAX_STACK_SIZE, when present.
    pub max: Option<u32>,
}

impl Stack {
    /// Bytes of stack per thread a launch must provide: the largest of the three.
    pub fn bytes(&self) -> u32 {
        self.frame.max(self.min).max(self.max.unwrap_or(0))
    }
}

/// Shared memory a kernel declares.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Shared {
    /// The size of `.nv.shared.<kernel>` (0 when the cubin has none): static `__shared__`
    /// data, and on sm_90 nvcc's builds the reserved 1 KiB too. `cuobjdump -res-usage`
    /// prints it as SHARED.
    pub static_bytes: u32,
    /// The system's reserved bytes ([`SM90_RESERVED_SHARED`]) when the module declares
    /// reserved shared memory (`.nv.shared.reserved.*`), else 0.
    pub reserved: u32,
}

impl Shared {
    /// Bytes per CTA before any dynamic shared memory: the static section, and at least
    /// the reserved bytes (Triton's cubins declare the reservation but no static section).
    /// Dynamic shared memory starts here.
    pub fn bytes(&self) -> u32 {
        self.static_bytes.max(self.reserved)
    }
}

/// One kernel (an entry function, `STO_CUDA_ENTRY`) of a module.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Kernel {
    pub(crate) name: String,
    /// Index into the module's loaded sections of its `.text.<name>`.
    pub(crate) text: usize,
    /// The entry's offset in its text section (`st_value`).
    pub(crate) entry: u64,
    pub(crate) registers: u32,
    pub(crate) barriers: u32,
    pub(crate) param_base: u32,
    pub(crate) param_bytes: u32,
    pub(crate) params: Vec<Param>,
    pub(crate) bank0: Vec<u8>,
    pub(crate) shared: Shared,
    pub(crate) stack: Stack,
    pub(crate) threads: Threads,
}

impl Kernel {
    /// Its name (the entry symbol's).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Registers per thread (EIATTR_REGCOUNT).
    pub fn registers(&self) -> u32 {
        self.registers
    }

    /// Named barriers the code uses (EIATTR_NUM_BARRIERS; 0 when absent).
    pub fn barriers(&self) -> u32 {
        self.barriers
    }

    /// The parameters, by ordinal.
    pub fn params(&self) -> &[Param] {
        &self.params
    }

    /// Where the parameters start in constant bank 0 (EIATTR_PARAM_CBANK; 0x210 on sm_90).
    pub fn param_base(&self) -> u32 {
        self.param_base
    }

    /// Bytes of parameters (EIATTR_CBANK_PARAM_SIZE).
    pub fn param_bytes(&self) -> u32 {
        self.param_bytes
    }

    /// The cubin's template of constant bank 0 (`.nv.constant0.<name>`): launch words,
    /// then the parameters. Its length is the bank's size.
    pub fn bank0_template(&self) -> &[u8] {
        &self.bank0
    }

    /// Shared memory.
    pub fn shared(&self) -> Shared {
        self.shared
    }

    /// Local memory (stack).
    pub fn stack(&self) -> Stack {
        self.stack
    }

    /// The block-shape limit it was compiled with.
    pub fn threads(&self) -> Threads {
        self.threads
    }

    /// The entry's offset in its code section.
    pub fn entry_offset(&self) -> u64 {
        self.entry
    }
}

/// What a kernel's attributes do not allow, or say inconsistently.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KernelError {
    /// Something every launchable kernel has is missing.
    #[error("it has no {what}")]
    Missing {
        /// What, e.g. "EIATTR_REGCOUNT".
        what: &'static str,
    },
    /// A record of its `.nv.info` section cannot be read.
    #[error("its .nv.info section is malformed")]
    Info(#[from] crate::info::InfoError),
    /// An attribute asks for something rig does not do.
    #[error("{attribute}: {reason}")]
    Unsupported {
        /// The attribute.
        attribute: crate::info::Eiattr,
        /// What it needs.
        reason: &'static str,
    },
    /// An attribute that may appear once appears again.
    #[error("{attribute} appears twice")]
    Duplicate {
        /// The attribute.
        attribute: crate::info::Eiattr,
    },
    /// The attributes contradict each other or the sections.
    #[error("{what}")]
    Inconsistent {
        /// What does not add up.
        what: String,
    },
}

/// What the module found for one entry function before its `.nv.info.<name>` records
/// are read.
#[derive(Debug)]
pub(crate) struct Found<'a> {
    pub name: &'a str,
    pub text: usize,
    /// Bytes of its code section (`.text.<name>`).
    pub code_size: u64,
    pub entry: u64,
    /// REGCOUNT, FRAME_SIZE, MIN_STACK_SIZE, MAX_STACK_SIZE from the symbol-keyed records.
    pub function: Function,
    pub records: &'a [crate::info::Record<'a>],
    pub bank0: Vec<u8>,
    /// The indices of the symbols defined in `.nv.constant0.<name>` (its section symbol):
    /// what EIATTR_PARAM_CBANK must name.
    pub bank0_symbols: &'a [usize],
    pub shared: Shared,
}

/// The symbol-keyed attributes of one function (global `.nv.info`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Function {
    pub registers: Option<u32>,
    pub stack: Stack,
}

/// The value of the single-valued attribute `attribute`, refusing a second one.
fn once<T>(slot: &mut Option<T>, attribute: crate::info::Eiattr, v: T) -> Result<(), KernelError> {
    if slot.replace(v).is_some() {
        return Err(KernelError::Duplicate { attribute });
    }
    Ok(())
}

/// The EIATTR_SW_WAR value every sm_90 cubin of CUDA 12.8 and 13.0 carries, launched as
/// it is by CUDA and by libcuda-free launchers; another value asks for a workaround rig
/// does not know.
const SW_WAR_KNOWN: u32 = 8;

/// Checks an EIATTR_INDIRECT_BRANCH_TARGETS record: a `BRX` at an offset of the
/// kernel's code, and the offsets it may jump to, each inside that code. The jump
/// table itself is a bank of the kernel's own (`.nv.constant2.<name>`), and the branch
/// is relative to the kernel's start, so nothing is relocated (docs/hardware/
/// nvidia-compute.md, "Constant banks"). Payload: u32 branch offset, u32 0, u32 count,
/// then count u32 targets (as cuobjdump -elf prints them).
fn indirect_branch(r: &crate::info::Record<'_>, code_size: u64) -> Result<(), KernelError> {
    let shape = || {
        KernelError::Info(crate::info::InfoError::Shape {
            attribute: r.attribute,
            at: r.at,
            expected: "an SVAL of a branch, a count and that many targets",
        })
    };
    let words: Vec<u32> = r
        .payload
        .chunks(4)
        .map(|c| c.try_into().map(u32::from_le_bytes))
        .collect::<Result<_, _>>()
        .map_err(|_| shape())?;
    let [branch, _, count, targets @ ..] = words.as_slice() else {
        return Err(shape());
    };
    if usize::try_from(*count).ok() != Some(targets.len()) {
        return Err(shape());
    }
    if let Some(off) = std::iter::once(branch)
        .chain(targets)
        .find(|&&o| u64::from(o) >= code_size)
    {
        return Err(KernelError::Inconsistent {
            what: format!(
                "an indirect branch or its target at {off:#x} lies outside its code \
                 ({code_size:#x} bytes)"
            ),
        });
    }
    Ok(())
}

/// Reads a kernel's `.nv.info.<name>` records into a [`Kernel`].
pub(crate) fn build(found: Found<'_>) -> Result<Kernel, KernelError> {
    use crate::info::{Eiattr, Policy};

    let inconsistent = |what: String| KernelError::Inconsistent { what };
    let mut cbank: Option<(u32, u32, u32)> = None;
    let mut param_size: Option<u32> = None;
    let mut barriers: Option<u32> = None;
    let mut threads: Option<Threads> = None;
    let mut params: Vec<Param> = Vec::new();
    for r in found.records {
        match r.attribute.policy() {
            Policy::Ignore => continue,
            Policy::Refuse(reason) => {
                return Err(KernelError::Unsupported {
                    attribute: r.attribute,
                    reason,
                });
            }
            Policy::Read => {}
        }
        match r.attribute {
            Eiattr::PARAM_CBANK => {
                let [sym, packed] = r.words::<2>("an SVAL of 8 bytes")?;
                once(
                    &mut cbank,
                    r.attribute,
                    (sym, packed & 0xffff, packed >> 16),
                )?;
            }
            Eiattr::CBANK_PARAM_SIZE => once(&mut param_size, r.attribute, u32::from(r.half()?))?,
            Eiattr::NUM_BARRIERS => once(&mut barriers, r.attribute, u32::from(r.half()?))?,
            Eiattr::KPARAM_INFO => {
                let [_index, ordinal_offset, flags] = r.words::<3>("an SVAL of 12 bytes")?;
                params.push(Param {
                    ordinal: u16::try_from(ordinal_offset & 0xffff).expect("masked to 16 bits"),
                    offset: u16::try_from(ordinal_offset >> 16).expect("the upper half of a u32"),
                    size: flags >> 18,
                });
            }
            Eiattr::MAX_THREADS => {
                let dims = r.words::<3>("an SVAL of 12 bytes")?;
                once(&mut threads, r.attribute, Threads::Max(dims))?;
            }
            Eiattr::REQNTID => {
                let dims = r.words::<3>("an SVAL of 12 bytes")?;
                once(&mut threads, r.attribute, Threads::Required(dims))?;
            }
            Eiattr::CRS_STACK_SIZE => {
                let [bytes] = r.words::<1>("an SVAL of 4 bytes")?;
                if bytes != 0 {
                    return Err(KernelError::Unsupported {
                        attribute: r.attribute,
                        reason: "a call-return stack rig does not size",
                    });
                }
            }
            Eiattr::INDIRECT_BRANCH_TARGETS => indirect_branch(r, found.code_size)?,
            Eiattr::SW_WAR => {
                let [bits] = r.words::<1>("an SVAL of 4 bytes")?;
                if bits != SW_WAR_KNOWN {
                    return Err(KernelError::Unsupported {
                        attribute: r.attribute,
                        reason: "a software workaround rig does not know (only 0x8 is)",
                    });
                }
            }
            // The symbol-keyed attributes (REGCOUNT, FRAME_SIZE, MIN/MAX_STACK_SIZE) belong
            // in the module's .nv.info; here they would name another function.
            other => {
                return Err(inconsistent(format!(
                    "{other} is in the kernel's own .nv.info section"
                )));
            }
        }
    }

    let registers = found.function.registers.ok_or(KernelError::Missing {
        what: "EIATTR_REGCOUNT",
    })?;
    let template = u32::try_from(found.bank0.len())
        .map_err(|_| inconsistent("constant bank 0 is larger than 4 GiB".into()))?;
    let (param_base, param_bytes) = match cbank {
        Some((sym, base, size)) => {
            if usize::try_from(sym).map_or(true, |s| !found.bank0_symbols.contains(&s)) {
                return Err(inconsistent(format!(
                    "EIATTR_PARAM_CBANK names symbol {sym}, not .nv.constant0.{}",
                    found.name
                )));
            }
            if param_size.is_some_and(|p| p != size) {
                return Err(inconsistent(format!(
                    "EIATTR_PARAM_CBANK says {size:#x} bytes of parameters, \
                     EIATTR_CBANK_PARAM_SIZE {:#x}",
                    param_size.unwrap_or_default()
                )));
            }
            (base, size)
        }
        None if params.is_empty() && param_size.unwrap_or(0) == 0 => (template, 0),
        None => {
            return Err(KernelError::Missing {
                what: "EIATTR_PARAM_CBANK",
            });
        }
    };
    if param_base
        .checked_add(param_bytes)
        .is_none_or(|end| end > template)
    {
        return Err(inconsistent(format!(
            "parameters at {param_base:#x}+{param_bytes:#x} run past constant bank 0 \
             ({template:#x} bytes)"
        )));
    }
    params.sort_by_key(|p| p.ordinal);
    for (i, p) in params.iter().enumerate() {
        if usize::from(p.ordinal) != i {
            return Err(inconsistent(format!(
                "parameter ordinals are not 0..{}: {} is missing or repeated",
                params.len(),
                i
            )));
        }
        if p.size == 0
            || u32::from(p.offset)
                .checked_add(p.size)
                .is_none_or(|end| end > param_bytes)
        {
            return Err(inconsistent(format!(
                "parameter {i} ({} bytes at {:#x}) does not lie in the {param_bytes:#x} \
                 bytes of parameters",
                p.size, p.offset
            )));
        }
    }
    Ok(Kernel {
        name: found.name.to_owned(),
        text: found.text,
        entry: found.entry,
        registers,
        barriers: barriers.unwrap_or(0),
        param_base,
        param_bytes,
        params,
        bank0: found.bank0,
        shared: found.shared,
        stack: found.function.stack,
        threads: threads.unwrap_or(Threads::Any),
    })
}
