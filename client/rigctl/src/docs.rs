//! `rigctl generate-docs DIR` (hidden): rigctl.1, one rigctl-SUBCOMMAND.1 per visible
//! subcommand (DIR/man) and the bash, zsh and fish completions (DIR/completions), made
//! from the same clap definitions rigctl parses with, so no page is copied by hand and
//! a new flag shows up in both. packaging/deb/build.sh ships them; rigd's page comes
//! from daemon/examples/rigd-docs.rs.

use std::path::Path;

use clap_complete::Shell;

use crate::BoxError;

/// Writes the pages and completions of `cmd` (rigctl's) under `dir`; returns the files
/// under its `man` and `completions` folders, sorted.
///
/// # Errors
/// Creating the folders or writing a file.
pub fn write(cmd: &clap::Command, dir: &Path) -> Result<Vec<std::path::PathBuf>, BoxError> {
    let man = dir.join("man");
    let completions = dir.join("completions");
    std::fs::create_dir_all(&man)?;
    std::fs::create_dir_all(&completions)?;
    let cmd = visible(cmd);
    clap_mangen::generate_to(cmd.clone(), &man)?;
    for shell in [Shell::Bash, Shell::Zsh, Shell::Fish] {
        clap_complete::generate_to(shell, &mut cmd.clone(), "rigctl", &completions)?;
    }
    let mut written = Vec::new();
    for d in [&man, &completions] {
        for e in std::fs::read_dir(d)? {
            written.push(e?.path());
        }
    }
    written.sort();
    Ok(written)
}

/// `cmd` without its hidden subcommands: clap_mangen skips them, but clap_complete
/// would offer them.
fn visible(cmd: &clap::Command) -> clap::Command {
    let mut out = clap::Command::new("rigctl")
        .args(cmd.get_arguments().cloned())
        .subcommands(cmd.get_subcommands().filter(|s| !s.is_hide_set()).cloned())
        .subcommand_required(cmd.is_subcommand_required_set())
        .arg_required_else_help(cmd.is_arg_required_else_help_set());
    if cmd.get_version().is_some() {
        // #[command(version)]: the crate's, as `rigctl --version` prints it.
        out = out.version(env!("CARGO_PKG_VERSION"));
    }
    if let Some(a) = cmd.get_about() {
        out = out.about(a.clone());
    }
    if let Some(a) = cmd.get_long_about() {
        out = out.long_about(a.clone());
    }
    // The exit table (`exit::TABLE`): the page's last section.
    if let Some(a) = cmd.get_after_long_help() {
        out = out.after_long_help(a.clone());
    }
    out
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::*;

    #[test]
    fn pages_and_completions_cover_every_visible_subcommand_and_no_hidden_one() {
        let dir = tempfile::tempdir().expect("tempdir");
        let cmd = crate::Args::command();
        write(&cmd, dir.path()).expect("write");
        let read = |p: &str| std::fs::read_to_string(dir.path().join(p)).expect(p);
        let (bash, zsh, fish) = (
            read("completions/rigctl.bash"),
            read("completions/_rigctl"),
            read("completions/rigctl.fish"),
        );
        let top = read("man/rigctl.1");
        for sub in cmd.get_subcommands() {
            let name = sub.get_name();
            let page = dir.path().join(format!("man/rigctl-{name}.1"));
            if sub.is_hide_set() {
                assert!(!page.exists(), "{name} is hidden");
                for (shell, text) in [("bash", &bash), ("zsh", &zsh), ("fish", &fish)] {
                    assert!(!text.contains(name), "{shell} offers the hidden {name}");
                }
            } else {
                assert!(page.exists(), "no page for {name}");
                assert!(top.contains(name), "rigctl.1 does not list {name}");
                assert!(
                    fish.contains(&format!("-a \"{name}\"")),
                    "fish lacks {name}"
                );
                assert!(bash.contains(name) && zsh.contains(name), "{name}");
            }
        }
        assert!(
            top.contains("\\-\\-socket"),
            "the global flag is documented"
        );
    }
}
