//! A builder of small, synthetic ELF files, for tests and fuzz seeds.
//!
//! It lays out what a test asks for and nothing more; it indexes and casts freely and
//! panics on nonsense input, which only a test can give it. rig-firmware builds its GSP-RM
//! and FMC fixtures on it; the crate itself never reads what it builds.
#![expect(
    clippy::cast_possible_truncation,
    reason = "fixture files are a few KiB, every size fits the field it is written to"
)]

/// ELF class of a built file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Class {
    /// ELFCLASS32.
    Elf32,
    /// ELFCLASS64.
    Elf64,
}

#[derive(Clone, Debug)]
struct BuiltSection {
    name: String,
    sh_type: u32,
    flags: u64,
    addr: u64,
    link: u32,
    info: u32,
    entsize: u64,
    data: Vec<u8>,
}

/// Builds a little-endian ELF file: header, section data, `.shstrtab`, then the section
/// header table (the layout the GSP-RM images use). By default `e_type` is `ET_REL` and the
/// OS ABI bytes and `e_flags` are 0.
#[derive(Clone, Debug)]
pub struct ElfBuilder {
    class: Class,
    machine: u16,
    e_type: u16,
    os_abi: u8,
    abi_version: u8,
    flags: u32,
    sections: Vec<BuiltSection>,
}

impl ElfBuilder {
    /// A file of `class` for `e_machine = machine`.
    pub fn new(class: Class, machine: u16) -> Self {
        ElfBuilder {
            class,
            machine,
            e_type: 1,
            os_abi: 0,
            abi_version: 0,
            flags: 0,
            sections: Vec::new(),
        }
    }

    /// Sets `e_type`, `e_ident[EI_OSABI]`, `e_ident[EI_ABIVERSION]` and `e_flags`.
    pub fn header(mut self, e_type: u16, os_abi: u8, abi_version: u8, flags: u32) -> Self {
        self.e_type = e_type;
        self.os_abi = os_abi;
        self.abi_version = abi_version;
        self.flags = flags;
        self
    }

    /// Adds a section at address 0.
    pub fn section(self, name: &str, sh_type: u32, flags: u64, data: &[u8]) -> Self {
        self.section_at(name, sh_type, flags, 0, data)
    }

    /// Adds a section with an explicit `sh_addr`.
    pub fn section_at(
        mut self,
        name: &str,
        sh_type: u32,
        flags: u64,
        addr: u64,
        data: &[u8],
    ) -> Self {
        self.sections.push(BuiltSection {
            name: name.to_owned(),
            sh_type,
            flags,
            addr,
            link: 0,
            info: 0,
            entsize: 0,
            data: data.to_vec(),
        });
        self
    }

    /// Sets `sh_link`, `sh_info` and `sh_entsize` of the section added last (0 by default).
    /// Section indices count from 1 in the order sections were added.
    pub fn link(mut self, link: u32, info: u32, entsize: u64) -> Self {
        let last = self.sections.last_mut().expect("link() follows a section");
        last.link = link;
        last.info = info;
        last.entsize = entsize;
        self
    }

    /// Lays the file out.
    pub fn build(&self) -> Vec<u8> {
        let (ehsize, shentsize) = match self.class {
            Class::Elf64 => (64usize, 64usize),
            Class::Elf32 => (52, 40),
        };
        let mut shstrtab = vec![0u8];
        let mut name_offsets = Vec::new();
        for s in &self.sections {
            name_offsets.push(shstrtab.len());
            shstrtab.extend_from_slice(s.name.as_bytes());
            shstrtab.push(0);
        }
        let shstrtab_name = shstrtab.len();
        shstrtab.extend_from_slice(b".shstrtab\0");

        let mut out = vec![0u8; ehsize];
        let mut placed = Vec::new();
        for s in &self.sections {
            placed.push(out.len());
            out.extend_from_slice(&s.data);
        }
        let strtab_at = out.len();
        out.extend_from_slice(&shstrtab);
        while !out.len().is_multiple_of(8) {
            out.push(0);
        }
        let shoff = out.len();
        let shnum = self.sections.len() + 2;
        out.extend(std::iter::repeat_n(0u8, shentsize)); // SHT_NULL
        for ((s, at), name) in self.sections.iter().zip(&placed).zip(&name_offsets) {
            out.extend(self.shdr(*name as u32, s, *at as u64));
        }
        let shstrtab_section = BuiltSection {
            name: String::new(),
            sh_type: 3,
            flags: 0,
            addr: 0,
            link: 0,
            info: 0,
            entsize: 0,
            data: shstrtab.clone(),
        };
        out.extend(self.shdr(shstrtab_name as u32, &shstrtab_section, strtab_at as u64));

        // ELF header.
        out[..4].copy_from_slice(b"\x7fELF");
        out[4] = match self.class {
            Class::Elf64 => 2,
            Class::Elf32 => 1,
        };
        out[5] = 1; // little-endian
        out[6] = 1; // EV_CURRENT
        out[7] = self.os_abi;
        out[8] = self.abi_version;
        put16(&mut out, 16, self.e_type);
        put16(&mut out, 18, self.machine);
        put32(&mut out, 20, 1);
        match self.class {
            Class::Elf64 => {
                put64(&mut out, 0x28, shoff as u64);
                put32(&mut out, 0x30, self.flags);
                put16(&mut out, 0x34, ehsize as u16);
                put16(&mut out, 0x3a, shentsize as u16);
                put16(&mut out, 0x3c, shnum as u16);
                put16(&mut out, 0x3e, (shnum - 1) as u16);
            }
            Class::Elf32 => {
                put32(&mut out, 0x20, shoff as u32);
                put32(&mut out, 0x24, self.flags);
                put16(&mut out, 0x28, ehsize as u16);
                put16(&mut out, 0x2e, shentsize as u16);
                put16(&mut out, 0x30, shnum as u16);
                put16(&mut out, 0x32, (shnum - 1) as u16);
            }
        }
        out
    }

    fn shdr(&self, name: u32, s: &BuiltSection, offset: u64) -> Vec<u8> {
        let size = s.data.len() as u64;
        let mut h = Vec::new();
        h.extend_from_slice(&name.to_le_bytes());
        h.extend_from_slice(&s.sh_type.to_le_bytes());
        match self.class {
            Class::Elf64 => {
                h.extend_from_slice(&s.flags.to_le_bytes());
                h.extend_from_slice(&s.addr.to_le_bytes());
                h.extend_from_slice(&offset.to_le_bytes());
                h.extend_from_slice(&size.to_le_bytes());
                h.extend_from_slice(&s.link.to_le_bytes());
                h.extend_from_slice(&s.info.to_le_bytes());
                h.extend_from_slice(&1u64.to_le_bytes()); // align
                h.extend_from_slice(&s.entsize.to_le_bytes());
            }
            Class::Elf32 => {
                h.extend_from_slice(&(s.flags as u32).to_le_bytes());
                h.extend_from_slice(&(s.addr as u32).to_le_bytes());
                h.extend_from_slice(&(offset as u32).to_le_bytes());
                h.extend_from_slice(&(size as u32).to_le_bytes());
                h.extend_from_slice(&s.link.to_le_bytes());
                h.extend_from_slice(&s.info.to_le_bytes());
                h.extend_from_slice(&1u32.to_le_bytes());
                h.extend_from_slice(&(s.entsize as u32).to_le_bytes());
            }
        }
        h
    }
}

fn put16(out: &mut [u8], at: usize, v: u16) {
    out[at..at + 2].copy_from_slice(&v.to_le_bytes());
}

fn put32(out: &mut [u8], at: usize, v: u32) {
    out[at..at + 4].copy_from_slice(&v.to_le_bytes());
}

fn put64(out: &mut [u8], at: usize, v: u64) {
    out[at..at + 8].copy_from_slice(&v.to_le_bytes());
}
