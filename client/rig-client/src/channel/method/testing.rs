//! Reading the `#define`s of NVIDIA's class headers, for this module's tests.

use std::collections::BTreeMap;

/// `#define NAME VALUE` lines of `header`.
pub(crate) fn defines(header: &str) -> BTreeMap<String, String> {
    header
        .lines()
        .filter_map(|l| l.trim().strip_prefix("#define "))
        .filter_map(|l| {
            let (name, value) = l.split_once(char::is_whitespace)?;
            Some((name.to_owned(), value.trim().to_owned()))
        })
        .collect()
}

/// The numeric value of `name`: `0x0298`, `(0x00000240)`.
pub(crate) fn value(h: &BTreeMap<String, String>, name: &str) -> u64 {
    let v = h
        .get(name)
        .unwrap_or_else(|| panic!("{name} is not in the header"));
    let v = v.trim_start_matches('(').trim_end_matches(')');
    u64::from_str_radix(v.trim_start_matches("0x"), 16)
        .unwrap_or_else(|e| panic!("{name} = {v}: {e}"))
}

/// The `hi:lo` bit range of field `name`.
pub(crate) fn field(h: &BTreeMap<String, String>, name: &str) -> (u32, u32) {
    let v = h
        .get(name)
        .unwrap_or_else(|| panic!("{name} is not in the header"));
    let (hi, lo) = v
        .split_once(':')
        .unwrap_or_else(|| panic!("{name} = {v} is not hi:lo"));
    (hi.parse().expect("hi"), lo.parse().expect("lo"))
}
