//! `--help` explains every flag and argument of every command (issue 32: several had no
//! description).

use clap::CommandFactory;

use super::Cli;

/// `cmd` and every subcommand below it, with its path (`spacesd agent start`).
fn walk(cmd: &clap::Command, path: String, out: &mut Vec<(String, clap::Command)>) {
    out.push((path.clone(), cmd.clone()));
    for sub in cmd.get_subcommands() {
        walk(sub, format!("{path} {}", sub.get_name()), out);
    }
}

#[test]
fn every_argument_of_every_command_has_help_text() {
    let mut cmds = Vec::new();
    walk(&Cli::command(), "spacesd".to_owned(), &mut cmds);
    let mut bare = Vec::new();
    for (path, cmd) in &cmds {
        if cmd.get_about().is_none() && !cmd.is_hide_set() {
            bare.push(format!("{path}: the command itself"));
        }
        for arg in cmd.get_arguments() {
            let builtin = matches!(arg.get_id().as_str(), "help" | "version");
            if !builtin && !arg.is_hide_set() && arg.get_help().is_none() && arg.get_long_help().is_none() {
                bare.push(format!("{path}: {}", arg.get_id()));
            }
        }
    }
    assert!(bare.is_empty(), "no help text for:\n{}", bare.join("\n"));
}
