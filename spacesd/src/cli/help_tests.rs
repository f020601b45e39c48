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

/// The `spaces` MCP server a run gets (`space_tools`) is this CLI's own `mcp` command: its
/// command line parses as the CLI that serves it.
#[test]
#[allow(clippy::unwrap_used)]
fn the_spaces_server_parses_as_the_cli_that_serves_it() {
    use clap::Parser;
    use spaces_sdk::McpServer;
    use std::path::{Path, PathBuf};
    let server = spaces_host::supervisor::space_tools_server(&["/usr/bin/spacesd".to_owned()], Path::new("/var/spaces"), "proj");
    let McpServer::Stdio(s) = server else { panic!("a stdio server") };
    let cli = Cli::try_parse_from(std::iter::once(s.command).chain(s.args)).unwrap();
    assert_eq!(cli.state_dir, Some(PathBuf::from("/var/spaces")));
    match cli.command {
        super::Command::Mcp { space, no_autostart } => {
            assert_eq!(space.as_deref(), Some("proj"));
            assert!(no_autostart);
        }
        other => panic!("not `mcp`: {other:?}"),
    }
}
