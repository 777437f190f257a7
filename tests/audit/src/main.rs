//! rig-audit: every package of rig's lockfiles against the RustSec advisories (the
//! database cargo-audit and cargo-deny read), in a snapshot vendored in the repository
//! (`tests/audit/advisories`; `scripts/advisories.sh refresh` makes it, `check` runs
//! this), so the test command needs no network and gives the same answer every run;
//! and the same packages' licences and versions against `audit.toml`'s rules, the
//! parts of cargo-deny rig uses.
//!
//! What fails: a vulnerability, or an unsound crate, in any version a lockfile holds,
//! unless `audit.toml` ignores its id with a reason; a package the snapshot was not
//! made for (a new dependency: refresh the snapshot, so no crate goes unchecked because
//! the filter never saw it). What is printed and passes: unmaintained crates and
//! notices, and every ignored advisory with its reason. Packages from a path are rig's
//! own and skipped, except the patched copies of others' crates that the workspace's
//! `[patch.crates-io]` names (h2): those are checked as the crates.io version they
//! patch, which a scanner going by the lockfile's source alone would miss.
//!
//! Licences (`--licenses FILE`: a line `name<TAB>version<TAB>SPDX expression` per
//! package from outside the repository, which `scripts/advisories.sh` takes from `cargo
//! metadata`): each expression must be satisfiable with `[licenses] allow`'s licences
//! (`A OR B` needs either, `A AND B` both, `A WITH E` is allowed where A is, the old
//! `A/B` is `A OR B`); a package with none fails. Bans: a crate that `[bans]
//! single_version` names may stand in a lockfile in one version only (two tokios are
//! two runtimes; two nixes, two sets of rig's kernel bindings).
//!
//! Reference: the RustSec advisory format (`[versions] patched`/`unaffected`,
//! `informational`, `withdrawn`), read by the `rustsec` crate.

use std::{
    collections::BTreeSet,
    path::{Path, PathBuf},
    process::ExitCode,
};

use rustsec::{Collection, Database, Lockfile, advisory::Informational, database::Query};

const USAGE: &str =
    "usage: rig-audit --db DIR [--policy audit.toml] [--manifest Cargo.toml] LOCKFILE...";

type Res<T> = Result<T, Box<dyn std::error::Error>>;

/// `audit.toml`: advisories rig has looked at and accepts, each with why.
#[derive(Debug, Default)]
struct Policy {
    ignore: Vec<(String, String)>,
    /// `[licenses] allow`: SPDX identifiers (or `A WITH E`) accepted.
    allow: BTreeSet<String>,
    /// `[bans] single_version`: crates that may have one version per lockfile.
    single: BTreeSet<String>,
}

impl Policy {
    fn load(path: &Path) -> Res<Self> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let v: toml::Table = text
            .parse()
            .map_err(|e| format!("{}: {e}", path.display()))?;
        let mut ignore = Vec::new();
        for entry in v
            .get("ignore")
            .and_then(toml::Value::as_array)
            .into_iter()
            .flatten()
        {
            let id = entry.get("id").and_then(toml::Value::as_str);
            let reason = entry.get("reason").and_then(toml::Value::as_str);
            match (id, reason) {
                (Some(id), Some(reason)) if !reason.trim().is_empty() => {
                    ignore.push((id.to_owned(), reason.to_owned()));
                }
                _ => {
                    return Err(format!(
                        "{}: every [[ignore]] needs an id and a reason",
                        path.display()
                    )
                    .into());
                }
            }
        }
        let strings = |table: &str, key: &str| -> BTreeSet<String> {
            v.get(table)
                .and_then(|t| t.get(key))
                .and_then(toml::Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(toml::Value::as_str)
                .map(str::to_owned)
                .collect()
        };
        Ok(Self {
            ignore,
            allow: strings("licenses", "allow"),
            single: strings("bans", "single_version"),
        })
    }

    fn reason(&self, id: &str) -> Option<&str> {
        self.ignore
            .iter()
            .find(|(i, _)| i == id)
            .map(|(_, r)| r.as_str())
    }
}

/// The crates `[patch.crates-io]` of `manifest` replaces with a path.
fn patched(manifest: &Path) -> Res<BTreeSet<String>> {
    let text =
        std::fs::read_to_string(manifest).map_err(|e| format!("{}: {e}", manifest.display()))?;
    let v: toml::Table = text
        .parse()
        .map_err(|e| format!("{}: {e}", manifest.display()))?;
    Ok(v.get("patch")
        .and_then(|p| p.get("crates-io"))
        .and_then(toml::Value::as_table)
        .map(|t| t.keys().cloned().collect())
        .unwrap_or_default())
}

/// Whether the SPDX expression `expr` can be met with `allow`'s licences; None when it
/// does not parse.
fn licence_allowed(expr: &str, allow: &BTreeSet<String>) -> Option<bool> {
    let spaced = expr
        .replace('(', " ( ")
        .replace(')', " ) ")
        .replace('/', " OR ");
    let tokens: Vec<&str> = spaced.split_whitespace().collect();
    let mut at = 0;
    let ok = or_expr(&tokens, &mut at, allow)?;
    (at == tokens.len()).then_some(ok)
}

fn or_expr(t: &[&str], at: &mut usize, allow: &BTreeSet<String>) -> Option<bool> {
    let mut ok = and_expr(t, at, allow)?;
    while t.get(*at) == Some(&"OR") {
        *at += 1;
        ok |= and_expr(t, at, allow)?;
    }
    Some(ok)
}

fn and_expr(t: &[&str], at: &mut usize, allow: &BTreeSet<String>) -> Option<bool> {
    let mut ok = atom(t, at, allow)?;
    while t.get(*at) == Some(&"AND") {
        *at += 1;
        ok &= atom(t, at, allow)?;
    }
    Some(ok)
}

fn atom(t: &[&str], at: &mut usize, allow: &BTreeSet<String>) -> Option<bool> {
    let first = *t.get(*at)?;
    *at += 1;
    if first == "(" {
        let ok = or_expr(t, at, allow)?;
        (t.get(*at) == Some(&")")).then_some(())?;
        *at += 1;
        return Some(ok);
    }
    if matches!(first, ")" | "AND" | "OR" | "WITH") {
        return None;
    }
    let mut ok = allow.contains(first);
    if t.get(*at) == Some(&"WITH") {
        let exception = *t.get(*at + 1)?;
        *at += 2;
        ok |= allow.contains(&format!("{first} WITH {exception}"));
    }
    Some(ok)
}

/// Checks `--licenses` lines against `policy`; prints each failure, returns how many.
fn check_licences(path: &Path, policy: &Policy) -> Res<usize> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut failed = 0;
    let mut checked = 0;
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let mut f = line.splitn(3, '\t');
        let (name, version, expr) = (
            f.next().unwrap_or(""),
            f.next().unwrap_or(""),
            f.next().unwrap_or("").trim(),
        );
        checked += 1;
        let why = match licence_allowed(expr, &policy.allow) {
            Some(true) => continue,
            Some(false) => "not among [licenses] allow",
            None if expr.is_empty() => "no licence declared",
            None => "not an SPDX expression rig-audit reads",
        };
        failed += 1;
        println!("FAILED {name} {version}: licence `{expr}`: {why}");
    }
    println!("rig-audit: {checked} packages' licences against [licenses] allow: {failed} failing");
    Ok(failed)
}

fn main() -> ExitCode {
    match run() {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("rig-audit: {e}");
            ExitCode::from(2)
        }
    }
}

fn run() -> Res<bool> {
    let mut args = std::env::args().skip(1);
    let (mut db, mut policy, mut manifest, mut licences, mut locks) =
        (None, None, None, None, Vec::new());
    while let Some(a) = args.next() {
        match a.as_str() {
            "--db" => db = args.next().map(PathBuf::from),
            "--policy" => policy = args.next().map(PathBuf::from),
            "--manifest" => manifest = args.next().map(PathBuf::from),
            "--licenses" => licences = args.next().map(PathBuf::from),
            "-h" | "--help" => {
                println!("{USAGE}");
                return Ok(true);
            }
            _ => locks.push(PathBuf::from(a)),
        }
    }
    let Some(db) = db.filter(|_| !locks.is_empty()) else {
        return Err(USAGE.into());
    };
    let policy = policy.map_or_else(|| Ok(Policy::default()), |p| Policy::load(&p))?;
    let patched = manifest.map_or_else(|| Ok(BTreeSet::new()), |m| patched(&m))?;
    let covered: BTreeSet<String> = std::fs::read_to_string(db.join("COVERED"))
        .map_err(|e| format!("{}: {e}", db.join("COVERED").display()))?
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(str::to_owned)
        .collect();
    let snapshot = std::fs::read_to_string(db.join("SNAPSHOT")).unwrap_or_default();
    let database = Database::open(&db).map_err(|e| format!("{}: {e}", db.display()))?;

    let (mut failed, mut checked, mut uncovered) = (0usize, 0usize, BTreeSet::new());
    let mut seen = BTreeSet::new();
    for lock in &locks {
        let lockfile = Lockfile::load(lock).map_err(|e| format!("{}: {e}", lock.display()))?;
        for name in &policy.single {
            let versions: Vec<String> = lockfile
                .packages
                .iter()
                .filter(|p| p.name.as_str() == name)
                .map(|p| p.version.to_string())
                .collect();
            if versions.len() > 1 {
                failed += 1;
                println!(
                    "FAILED {name}: {} versions in {} ({}); [bans] single_version allows one",
                    versions.len(),
                    lock.display(),
                    versions.join(", ")
                );
            }
        }
        for p in &lockfile.packages {
            let name = p.name.as_str();
            if p.source.is_none() && !patched.contains(name) {
                continue;
            }
            if !seen.insert((name.to_owned(), p.version.clone())) {
                continue;
            }
            checked += 1;
            if !covered.contains(name) {
                uncovered.insert(name.to_owned());
                continue;
            }
            let q = Query::new()
                .collection(Collection::Crates)
                .package_name(p.name.clone())
                .package_version(p.version.clone())
                .withdrawn(false);
            for a in database.query(&q) {
                let m = &a.metadata;
                let what = match &m.informational {
                    None => "vulnerability",
                    Some(Informational::Unsound) => "unsound",
                    Some(Informational::Unmaintained) => "unmaintained",
                    Some(Informational::Notice) => "notice",
                    Some(_) => "informational",
                };
                let fails = matches!(what, "vulnerability" | "unsound");
                let line = format!(
                    "{} {} {}: {what}: {} ({})",
                    m.id,
                    name,
                    p.version,
                    m.title,
                    lock.display()
                );
                match policy.reason(m.id.as_str()) {
                    Some(reason) => println!("ignored {line}; audit.toml: {reason}"),
                    None if fails => {
                        failed += 1;
                        println!("FAILED {line}");
                    }
                    None => println!("warning {line}"),
                }
            }
        }
    }
    for name in &uncovered {
        println!(
            "FAILED {name}: the advisory snapshot was not made for this crate; run scripts/advisories.sh refresh"
        );
    }
    println!(
        "rig-audit: {checked} packages of {} lockfiles against RustSec {}: {failed} failing advisories, {} crates not covered",
        locks.len(),
        snapshot.trim(),
        uncovered.len()
    );
    if let Some(path) = licences {
        failed += check_licences(&path, &policy)?;
    }
    Ok(failed == 0 && uncovered.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spdx_expressions_are_met_as_cargo_deny_reads_them() {
        let allow: BTreeSet<String> = ["MIT", "Apache-2.0", "Unicode-3.0"]
            .map(String::from)
            .into();
        let ok = |e| licence_allowed(e, &allow);
        assert_eq!(ok("MIT"), Some(true));
        assert_eq!(ok("GPL-3.0"), Some(false));
        assert_eq!(ok("GPL-3.0 OR MIT"), Some(true));
        assert_eq!(ok("MIT AND GPL-3.0"), Some(false));
        assert_eq!(ok("(MIT OR Apache-2.0) AND Unicode-3.0"), Some(true));
        assert_eq!(ok("(MIT OR Apache-2.0) AND NCSA"), Some(false));
        assert_eq!(ok("MIT/Apache-2.0"), Some(true));
        assert_eq!(ok("Apache-2.0 WITH LLVM-exception"), Some(true));
        assert_eq!(ok("GPL-2.0 WITH Classpath-exception-2.0"), Some(false));
        assert_eq!(ok("(MIT"), None);
        assert_eq!(ok("MIT OR"), None);
        assert_eq!(ok(""), None);
    }
}
