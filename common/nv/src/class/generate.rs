//! The generator of this folder's modules: reads each vendored header's `#define`s and
//! writes one Rust constant per definition, so no method offset, field position or
//! value is typed by hand. It runs as a test: `generated_modules_match_the_headers`
//! fails when a committed module differs from what its header gives, and with
//! `RIG_NV_REGENERATE=1` it rewrites the modules instead.
//!
//! What a `#define` becomes (the forms NVIDIA's class headers use):
//! - `NAME 0x02b4`, `NAME (0x0000C86F)`, `NAME 8`: `pub const NAME: u32` (a method
//!   offset, a class id or a field value; the header does not say which);
//! - `NAME 30:10`: `pub const NAME: Field` (bits of a method's data word);
//! - `NAME MW(21:16)`: `pub const NAME: MwField` (bits of a multi-word structure);
//! - `NAME(i) (0x0320+(i)*4)`: `pub const fn NAME(i: u32) -> u32`;
//! - `NAME(i) MW((320+(i)*16):(320+(i)*16))`: `pub const fn NAME(i: u32) -> MwField`;
//! - an include guard (no value) or an alias of another name is listed at the head of
//!   the module as skipped. Anything else stops the generator with the line.

use std::fmt::Write as _;

/// Every header the crate generates a module from: (module, header text, module text).
const MODULES: &[(&str, &str, &str)] = &[
    module!("clc361"),
    module!("clc56f"),
    module!("clc661"),
    module!("clc86f"),
    module!("clc8b5"),
    module!("clcbc0"),
    module!("clcbc0qmd"),
    module!("clc96f"),
    module!("clc9b5"),
    module!("clcdc0"),
    module!("clcdc0qmd"),
];

macro_rules! module {
    ($stem:literal) => {
        (
            $stem,
            include_str!(concat!("../../headers/", $stem, ".h")),
            include_str!(concat!($stem, ".rs")),
        )
    };
}
use module;

/// One `#define`, decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Def {
    Value(u32),
    Field {
        hi: u32,
        lo: u32,
    },
    Range {
        hi: u32,
        lo: u32,
    },
    Mw {
        hi: u32,
        lo: u32,
    },
    IndexedValue {
        base: u32,
        strides: Vec<u32>,
    },
    IndexedMw {
        hi: (u32, Vec<u32>),
        lo: (u32, Vec<u32>),
    },
}

fn number(s: &str) -> Option<u32> {
    let s = s.trim_end_matches(['U', 'u']);
    match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(hex) => u32::from_str_radix(hex, 16).ok(),
        None => s.parse().ok(),
    }
}

fn strip_parens(s: &str) -> &str {
    s.strip_prefix('(')
        .and_then(|s| s.strip_suffix(')'))
        .unwrap_or(s)
}

fn range(s: &str) -> Option<(u32, u32)> {
    let (hi, lo) = s.split_once(':')?;
    let (hi, lo) = (number(hi)?, number(lo)?);
    (lo <= hi).then_some((hi, lo))
}

/// `B+(i)*S` or `B+(i)*S+(j)*T` (the parentheses around it already gone) as B and one
/// stride per argument, in the arguments' order.
fn indexed(s: &str, args: &[&str]) -> Option<(u32, Vec<u32>)> {
    let mut rest = s;
    let mut strides = Vec::new();
    let at = rest.find("+(")?;
    let base = number(&rest[..at])?;
    rest = &rest[at..];
    for arg in args {
        rest = rest.strip_prefix(&format!("+({arg})*"))?;
        let end = rest.find('+').unwrap_or(rest.len());
        strides.push(number(&rest[..end])?);
        rest = &rest[end..];
    }
    rest.is_empty().then_some((base, strides))
}

/// The value part of a `#define` (comments and all whitespace removed), decoded; `None`
/// for a form the generator does not know.
fn decode(args: &[&str], value: &str) -> Option<Def> {
    if !args.is_empty() {
        let arg = args;
        if let Some(mw) = value.strip_prefix("MW(").and_then(|v| v.strip_suffix(')')) {
            let (hi, lo) = mw.split_once("):(")?;
            let hi = indexed(hi.strip_prefix('(')?, arg)?;
            let lo = indexed(lo.strip_suffix(')')?, arg)?;
            return Some(Def::IndexedMw { hi, lo });
        }
        let (base, strides) = indexed(strip_parens(value), arg)?;
        return Some(Def::IndexedValue { base, strides });
    }
    if let Some(mw) = value.strip_prefix("MW(").and_then(|v| v.strip_suffix(')')) {
        let (hi, lo) = range(mw)?;
        return Some(Def::Mw { hi, lo });
    }
    if value.contains(':') {
        let (hi, lo) = range(value)?;
        return Some(if hi < 32 {
            Def::Field { hi, lo }
        } else {
            Def::Range { hi, lo }
        });
    }
    number(strip_parens(value)).map(Def::Value)
}

fn is_identifier(s: &str) -> bool {
    !s.is_empty()
        && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !s.starts_with(|c: char| c.is_ascii_digit())
}

/// A `NVxxxx_QMDVnn_nn_` prefix's length, if `name` has one.
fn structure_prefix(name: &str) -> usize {
    name.find("_QMDV")
        .and_then(|at| {
            let rest = &name[at + 5..];
            let version = rest.get(..6)?;
            let ok = version.chars().enumerate().all(|(i, c)| {
                if i == 2 || i == 5 {
                    c == '_'
                } else {
                    c.is_ascii_digit()
                }
            });
            ok.then_some(at + 5 + 6)
        })
        .unwrap_or(0)
}

/// `base + i * s + j * t` for arguments `args` and strides `strides`.
fn term(base: u32, strides: &[u32], args: &[String], hex: bool) -> String {
    let mut parts = Vec::new();
    if base != 0 {
        parts.push(if hex {
            format!("{base:#06x}")
        } else {
            base.to_string()
        });
    }
    for (arg, stride) in args.iter().zip(strides) {
        parts.push(match stride {
            0 => continue,
            1 => arg.clone(),
            s => format!("{arg} * {s}"),
        });
    }
    if parts.is_empty() {
        "0".to_string()
    } else {
        parts.join(" + ")
    }
}

fn params(args: &[String]) -> String {
    args.iter()
        .map(|a| format!("{a}: u32"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The module for `header`, named `stem` in its head.
///
/// # Errors
/// The first line of a form the generator does not know, or a name defined twice with
/// different values.
pub(crate) fn generate(stem: &str, header: &str) -> Result<String, String> {
    let mut defs: Vec<(String, Vec<String>, Def)> = Vec::new();
    let mut skipped = Vec::new();
    let structs = structs(stem, header)?;
    for (n, line) in header.lines().enumerate() {
        let Some(rest) = line.trim_start().strip_prefix("#define") else {
            continue;
        };
        let rest = rest.split("//").next().unwrap_or("");
        let rest = rest.split("/*").next().unwrap_or("");
        let rest = rest.trim();
        let (head, value) = match rest.find(|c: char| c.is_whitespace() || c == '(') {
            Some(at) if rest[at..].starts_with('(') => {
                let close = rest.find(')').ok_or(format!("line {}: {line}", n + 1))?;
                (&rest[..=close], &rest[close + 1..])
            }
            Some(at) => (&rest[..at], &rest[at..]),
            None => (rest, ""),
        };
        let value: String = value.chars().filter(|c| !c.is_whitespace()).collect();
        let (name, args) = match head.split_once('(') {
            Some((name, args)) => (
                name,
                args.trim_end_matches(')')
                    .split(',')
                    .map(str::trim)
                    .collect(),
            ),
            None => (head, Vec::new()),
        };
        if value.is_empty()
            || (args.is_empty() && is_identifier(&value) && number(&value).is_none())
        {
            skipped.push(name.to_string());
            continue;
        }
        let def = decode(&args, &value).ok_or(format!("{stem}.h line {}: {line}", n + 1))?;
        match defs.iter().find(|(other, ..)| other == name) {
            Some((_, _, d)) if *d == def => {}
            Some(_) => return Err(format!("{stem}.h: {name} is defined twice, differently")),
            None => defs.push((
                name.to_string(),
                args.iter().map(|a| a.to_string()).collect(),
                def,
            )),
        }
    }
    let mut out = String::new();
    let w = &mut out;
    // `write!` to a String cannot fail.
    let _ = writeln!(
        w,
        "// Generated from headers/{stem}.h by rig-nv's test `class::generate` \
         (RIG_NV_REGENERATE=1 cargo test -p rig-nv class::generate rewrites it); do not edit.\n"
    );
    if !skipped.is_empty() {
        let _ = writeln!(
            w,
            "// Skipped (include guards and aliases): {}.\n",
            skipped.join(", ")
        );
    }
    let _ = writeln!(
        w,
        "#[allow(unused_imports)]\nuse crate::field::{{Field, MwField}};\n"
    );
    for (name, args, def) in &defs {
        let short = &name[structure_prefix(name)..];
        let _ = match def {
            Def::Value(v) => writeln!(w, "pub const {name}: u32 = {v:#x};"),
            Def::Field { hi, lo } => {
                writeln!(w, "pub const {name}: Field = Field::new({hi}, {lo});")
            }
            Def::Range { hi, lo } => writeln!(
                w,
                "pub const {name}: core::ops::RangeInclusive<u32> = {lo:#x}..={hi:#x};"
            ),
            Def::Mw { hi, lo } => {
                writeln!(
                    w,
                    "pub const {name}: MwField = MwField::new(\"{short}\", {hi}, {lo});"
                )
            }
            Def::IndexedValue { base, strides } => {
                let params = params(args);
                let body = term(*base, strides, args, true);
                writeln!(w, "pub const fn {name}({params}) -> u32 {{\n    {body}\n}}")
            }
            Def::IndexedMw { hi, lo } => {
                let params = params(args);
                let (ctor, index) = match args.as_slice() {
                    [i] => ("indexed", i.clone()),
                    _ => ("indexed2", args.join(", ")),
                };
                let (hi, lo) = (
                    term(hi.0, &hi.1, args, false),
                    term(lo.0, &lo.1, args, false),
                );
                writeln!(
                    w,
                    "pub const fn {name}({params}) -> MwField {{\n    \
                     MwField::{ctor}(\"{short}\", {index}, {hi}, {lo})\n}}"
                )
            }
        };
    }
    for (name, members) in &structs {
        let _ = writeln!(
            w,
            "\n/// Byte offsets of `{name}`'s members.\npub mod {name} {{"
        );
        for (member, offset) in members {
            let _ = writeln!(w, "    pub const {member}: usize = {offset:#x};");
        }
        let _ = writeln!(w, "}}");
    }
    Ok(out)
}

/// The `typedef volatile struct X_struct { NvU32 A; NvU32 B[0x10]; … } Name, …;` blocks
/// of `header`: each typedef's first name with its members' byte offsets.
/// A struct's name and its members' names and byte offsets.
type Struct = (String, Vec<(String, u32)>);

fn structs(stem: &str, header: &str) -> Result<Vec<Struct>, String> {
    let mut out = Vec::new();
    let mut current: Option<(Vec<(String, u32)>, u32)> = None;
    for (n, line) in header.lines().enumerate() {
        let code = line.split("/*").next().unwrap_or("").trim();
        let err = || format!("{stem}.h line {}: {line}", n + 1);
        match current.as_mut() {
            None if code.starts_with("typedef volatile struct") && code.ends_with('{') => {
                current = Some((Vec::new(), 0));
            }
            None => {}
            Some((members, offset)) => {
                if let Some(names) = code.strip_prefix('}') {
                    let name = names.trim_end_matches(';').split(',').next().unwrap_or("");
                    let name = name.trim();
                    if !is_identifier(name) {
                        return Err(err());
                    }
                    out.push((name.to_string(), std::mem::take(members)));
                    current = None;
                    continue;
                }
                let decl = code
                    .strip_prefix("NvU32")
                    .and_then(|d| d.trim().strip_suffix(';'))
                    .ok_or_else(err)?;
                let (member, count) = match decl.split_once('[') {
                    Some((m, c)) => (m.trim(), number(c.trim_end_matches(']')).ok_or_else(err)?),
                    None => (decl.trim(), 1),
                };
                if !is_identifier(member) {
                    return Err(err());
                }
                members.push((member.to_string(), *offset));
                *offset += 4 * count;
            }
        }
    }
    Ok(out)
}

#[test]
fn generated_modules_match_the_headers() {
    let regenerate = std::env::var_os("RIG_NV_REGENERATE").is_some();
    let mut stale = Vec::new();
    for (stem, header, committed) in MODULES {
        let fresh = generate(stem, header).unwrap_or_else(|e| panic!("{e}"));
        if fresh == *committed {
            continue;
        }
        if regenerate {
            let path = format!("{}/src/class/{stem}.rs", env!("CARGO_MANIFEST_DIR"));
            std::fs::write(&path, fresh).unwrap_or_else(|e| panic!("writing {path}: {e}"));
        }
        stale.push(*stem);
    }
    assert!(
        stale.is_empty() || regenerate,
        "src/class/{{{}}}.rs differ from their headers: run RIG_NV_REGENERATE=1 cargo test \
         -p rig-nv class::generate, then review the diff",
        stale.join(",")
    );
}

#[test]
fn an_edited_header_constant_changes_the_generated_module() {
    let (stem, header, committed) = MODULES
        .iter()
        .find(|(stem, ..)| *stem == "clcbc0")
        .expect("clcbc0 is generated");
    let line = "#define NVCBC0_SEND_PCAS_A                                                                                 0x02b4";
    assert!(
        header.contains(line),
        "the header has the line this test edits"
    );
    let edited = header.replace(line, &line.replace("0x02b4", "0x02b8"));
    let fresh = generate(stem, &edited).expect("generates");
    assert_ne!(fresh, *committed);
    assert!(fresh.contains("pub const NVCBC0_SEND_PCAS_A: u32 = 0x2b8;"));
}

#[test]
fn every_form_decodes() {
    let h = "#define _guard_h_\n\
             #define  CLS                 (0x0000C86F)\n\
             #define NVX_ALIAS CLSChannel\n\
             #define NVX_M                0x02b4 // a method\n\
             #define NVX_M_F              30:10\n\
             #define NVX_M_F_V            0x00000001 /* a value */\n\
             #define NVX_I(i)             (0x0320+(i)*4)\n\
             #define NVX_QMDV05_00_G      MW(149:144)\n\
             #define NVX_QMDV05_00_R(i)   MW((288+(i)*16):(288+(i)*16))\n\
             #define NVX_QMDV05_00_C(i)   MW((640+(i)*1):(640+(i)*1))\n\
             #define NVX_QMDV05_01_S(i,j) MW((886+(i)*416+(j)*202):(886+(i)*416+(j)*202))\n\
             #define NVX                  0x0081ffff:0x00810000\n\
             typedef volatile struct X_struct {\n\
              NvU32 Ignored00[0x022]; /* 0000-0087 */\n\
              NvU32 GPGet;\n\
              NvU32 GPPut;\n\
             } XControl, XAlias;\n";
    let out = generate("x", h).expect("generates");
    for want in [
        "Skipped (include guards and aliases): _guard_h_, NVX_ALIAS.",
        "pub const CLS: u32 = 0xc86f;",
        "pub const NVX_M: u32 = 0x2b4;",
        "pub const NVX_M_F: Field = Field::new(30, 10);",
        "pub const NVX_M_F_V: u32 = 0x1;",
        "pub const fn NVX_I(i: u32) -> u32 {\n    0x0320 + i * 4\n}",
        "pub const NVX_QMDV05_00_G: MwField = MwField::new(\"G\", 149, 144);",
        "MwField::indexed(\"R\", i, 288 + i * 16, 288 + i * 16)",
        "MwField::indexed(\"C\", i, 640 + i, 640 + i)",
        "pub const NVX: core::ops::RangeInclusive<u32> = 0x810000..=0x81ffff;",
        "pub mod XControl {\n    pub const Ignored00: usize = 0x0;\n    \
         pub const GPGet: usize = 0x88;\n    pub const GPPut: usize = 0x8c;\n}",
        "pub const fn NVX_QMDV05_01_S(i: u32, j: u32) -> MwField {\n    \
         MwField::indexed2(\"S\", i, j, 886 + i * 416 + j * 202, 886 + i * 416 + j * 202)\n}",
    ] {
        assert!(out.contains(want), "{want:?} missing from\n{out}");
    }
}

#[test]
fn an_unknown_form_or_a_conflicting_repeat_is_an_error() {
    generate("x", "#define NVX_A (1<<3)\n").expect_err("an expression");
    generate("x", "#define NVX_F 3:40\n").expect_err("a field upside down");
    generate("x", "typedef volatile struct S_struct {\n NvU64 A;\n} S;\n")
        .expect_err("a member not NvU32");
    generate("x", "#define NVX_A 1\n#define NVX_A 2\n").expect_err("two values");
    generate("x", "#define NVX_A 1\n#define NVX_A 1\n").expect("the same value twice");
}
