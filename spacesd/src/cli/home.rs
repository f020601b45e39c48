//! `spacesd home ...`: persistent agents' homes in the daemon's volume (the `home_*`
//! operations and `persistent_agent_send`). Paths given here are made absolute before they go
//! to the daemon, which reads and writes them on this host. Long transfers show how long they
//! have run on stderr (a terminal only); the daemon logs byte counts as they go.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use clap::Subcommand;
use spaces_sdk::client::Client;
use spaces_sdk::{
    Empty, HomeExportRequest, HomeImportRequest, HomeMoveRequest, HomeRequest, HomeRestoreRequest, HomeTransferReport,
    PersistentAgentSendRequest,
};

use super::text_from;

#[derive(Debug, Subcommand)]
pub enum HomeCmd {
    /// Every persistent agent's home: snapshots, the latest one's size, who holds its lease; a
    /// home that cannot be read whole is listed with a BROKEN line saying why.
    List {
        /// Print the JSON records instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// The snapshots of NAME's home, oldest first (ids for --at); one whose manifest cannot be
    /// read says BROKEN and why.
    Snapshots {
        /// The persistent agent's name (its home on the volume; `home list` lists them).
        name: String,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Write a snapshot of NAME's home to FILE as one .tar.zst (replaced atomically).
    Export {
        /// The persistent agent's name (its home on the volume; `home list` lists them).
        name: String,
        /// Where to write the archive (`.tar.zst`; replaced atomically).
        file: PathBuf,
        /// The snapshot id (default: the latest).
        #[arg(long)]
        at: Option<String>,
    },
    /// Make FILE (.tar.zst, from `home export` or a tar of a home) NAME's newest snapshot.
    /// Refused while a run holds the agent.
    Import {
        /// The persistent agent's name (its home on the volume; `home list` lists them).
        name: String,
        /// The archive to import (`.tar.zst`).
        file: PathBuf,
    },
    /// Point-in-time restore. With --to DIR: the snapshot's files into DIR (replaced
    /// atomically), the volume unchanged. Without: the snapshot becomes NAME's newest again,
    /// so its next run starts from it (refused while a run holds the agent).
    Restore {
        /// The persistent agent's name (its home on the volume; `home list` lists them).
        name: String,
        /// The snapshot id (default: the latest).
        #[arg(long)]
        at: Option<String>,
        /// Write the snapshot's files into this directory instead (replaced atomically); the volume stays as it is.
        #[arg(long, value_name = "DIR")]
        to: Option<PathBuf>,
    },
    /// Delete NAME's home and every snapshot of it (refused while a run holds the agent).
    Delete {
        /// The persistent agent's name (its home on the volume; `home list` lists them).
        name: String,
    },
    /// Give NAME's home to Space SPACE: only that Space's runs may use it from then on (a home
    /// belongs to the Space that created it). Refused while a run holds the agent.
    Move {
        /// The persistent agent's name (its home on the volume; `home list` lists them).
        name: String,
        /// The Space that owns the home from now on.
        #[arg(long, value_name = "SPACE")]
        space: String,
    },
    /// Send TEXT to the persistent agent NAME: a follow-up to its live run on this host, or a
    /// fresh run with its home restored (refused mid-turn). `-` reads TEXT from stdin, `@FILE`
    /// from FILE.
    Send {
        /// The persistent agent's name (its home on the volume; `home list` lists them).
        name: String,
        /// The message; `-` reads it from stdin, `@FILE` from FILE.
        text: String,
        /// Then follow the run's events until the turn ends (as `agent send --follow`).
        #[arg(long)]
        follow: bool,
        /// Print the report as JSON.
        #[arg(long)]
        json: bool,
    },
}

/// Run one `home` subcommand against the daemon.
pub async fn run(client: &Client, cmd: HomeCmd) -> anyhow::Result<()> {
    match cmd {
        HomeCmd::List { json } => {
            let homes = client.home_list(&Empty {}).await?;
            if json {
                println!("{}", serde_json::to_string_pretty(&homes)?);
            } else if homes.is_empty() {
                println!("no persistent agents yet (start one with `spacesd agent start AGENT PROMPT --home NAME`)");
            } else {
                println!("{:<24} {:<16} {:>9} {:>12} {:<16} LEASE", "NAME", "SPACE", "SNAPSHOTS", "SIZE", "AGENT");
                for h in homes {
                    let size = h.latest.as_ref().map_or(0, |s| s.bytes);
                    let field = |k: &str| h.latest.as_ref().and_then(|s| s.meta.get(k)).and_then(|a| a.as_str()).filter(|a| !a.is_empty());
                    let (agent, space) = (field("agent").unwrap_or("-").to_owned(), field("space").unwrap_or("(none)").to_owned());
                    let lease =
                        h.lease.map_or("free".to_owned(), |l| format!("{} (for {} more)", l.holder, super::print::until(l.expires_ms)));
                    println!("{:<24} {:<16} {:>9} {:>12} {:<16} {lease}", h.name, space, h.snapshots, bytes(size), agent);
                    if let Some(why) = &h.broken {
                        println!("  BROKEN {}: {why}", h.name);
                    }
                }
            }
        }
        HomeCmd::Snapshots { name, json } => {
            let snaps = client.home_snapshots(&HomeRequest { name }).await?;
            if json {
                println!("{}", serde_json::to_string_pretty(&snaps)?);
            } else {
                println!("{:<28} {:>8} {:>8} {:>12} {:<20} SESSION", "ID", "AGE", "FILES", "SIZE", "HOST");
                for s in snaps {
                    if let Some(why) = &s.broken {
                        println!("{:<28} BROKEN: {why}", s.id);
                        continue;
                    }
                    let session = s.meta.get("session_id").and_then(|v| v.as_str()).unwrap_or("-").to_owned();
                    println!(
                        "{:<28} {:>8} {:>8} {:>12} {:<20} {session}",
                        s.id,
                        super::print::age(s.created_ms),
                        s.files,
                        bytes(s.bytes),
                        s.host
                    );
                }
            }
        }
        HomeCmd::Export { name, file, at } => {
            let req = HomeExportRequest { name, at, path: absolute(&file)? };
            let r = with_ticker("exporting", client.home_export(&req)).await?;
            done("exported", &r);
        }
        HomeCmd::Import { name, file } => {
            let req = HomeImportRequest { name, path: absolute(&file)? };
            let r = with_ticker("importing", client.home_import(&req)).await?;
            done("imported", &r);
        }
        HomeCmd::Restore { name, at, to } => {
            let to = to.as_deref().map(absolute).transpose()?;
            let req = HomeRestoreRequest { name, at, to };
            let r = with_ticker("restoring", client.home_restore(&req)).await?;
            done("restored", &r);
        }
        HomeCmd::Delete { name } => {
            let r = client.home_delete(&HomeRequest { name }).await?;
            println!("deleted home {:?} ({} objects)", r.name, r.objects);
        }
        HomeCmd::Move { name, space } => {
            let r = client.home_move(&HomeMoveRequest { name, space }).await?;
            match r.from.as_deref() {
                Some(from) if from == r.space => println!("home {:?} already belongs to Space {:?}", r.name, r.space),
                from => println!(
                    "home {:?} now belongs to Space {:?} (was {}; snapshot {})",
                    r.name,
                    r.space,
                    from.map_or("no Space".to_owned(), |f| format!("{f:?}")),
                    r.snapshot.id
                ),
            }
        }
        HomeCmd::Send { name, text, follow, json } => {
            let text = text_from(&text, "the message")?;
            let r = client.persistent_agent_send(&PersistentAgentSendRequest { name: name.clone(), text: text.clone() }).await?;
            if json {
                println!("{}", serde_json::to_string_pretty(&r)?);
            } else if r.started {
                let home = if r.restored { "its home restored from the volume first" } else { "a new home" };
                println!("started run {} for {name:?} ({home})", r.run_id);
            } else {
                println!("sent to {name:?}'s live run {}", r.run_id);
            }
            if follow {
                let space = super::agent::resolve_run(client, super::SpaceArg { space: None }, &r.run_id).await?;
                // The turn this message started: from the run's start, or from just before the
                // last `user_message` carrying this text.
                let from = if r.started { 0 } else { super::follow::before_message(client, &space, &r.run_id, &text).await? };
                let ended = super::follow::follow_events(client, &space, &r.run_id, from).await?;
                super::follow::turn_outcome(ended)?;
            }
        }
    }
    Ok(())
}

fn absolute(path: &Path) -> anyhow::Result<String> {
    Ok(std::path::absolute(path)?.display().to_string())
}

/// Await `call`, showing on a terminal's stderr how long it has run, every second.
async fn with_ticker<T>(verb: &str, call: impl std::future::Future<Output = T>) -> T {
    if !std::io::stderr().is_terminal() {
        return call.await;
    }
    let started = Instant::now();
    tokio::pin!(call);
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    loop {
        tokio::select! {
            out = &mut call => {
                eprint!("\r\x1b[2K");
                return out;
            }
            _ = tick.tick() => eprint!("\r{verb}... {} s", started.elapsed().as_secs()),
        }
    }
}

fn done(verb: &str, r: &HomeTransferReport) {
    let place = r.path.as_deref().map(|p| format!(" ({p})")).unwrap_or_default();
    println!(
        "{verb} home {:?} snapshot {}{place}: {} files, {} in {} ms",
        r.name,
        r.snapshot.id,
        r.snapshot.files,
        bytes(r.bytes),
        r.elapsed_ms
    );
}

/// `1.2 MiB` style sizes.
fn bytes(n: u64) -> String {
    const UNITS: [&str; 4] = ["B", "KiB", "MiB", "GiB"];
    let mut v = n as f64;
    let mut unit = 0;
    while v >= 1024.0 && unit < UNITS.len() - 1 {
        v /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{n} B")
    } else {
        format!("{v:.1} {}", UNITS[unit])
    }
}
