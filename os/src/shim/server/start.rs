//! Starting a shim's tree: become a subreaper, open the journal and the control socket, start
//! the program (in a warm sandbox, a spare's prepared child, or spawned anew) and answer the
//! daemon.

use super::*;

impl Shim {
    /// Become a subreaper, open the journal and the socket, start the agent.
    pub(super) async fn start(
        dir: &Path,
        spec: ShimSpec,
        mode: OutputMode,
        (nice, sandbox): (i32, Option<crate::sandbox::Policy>),
        redactor: Redactor,
        held: (Option<Cgroup>, Option<spare::Child>),
        (stdin_first, stdin_close): (Option<String>, bool),
    ) -> Result<Shim, String> {
        let (cgroup, child) = held;
        nix::sys::prctl::set_child_subreaper(true).map_err(|e| format!("cannot become a child subreaper: {e}"))?;
        let mut journal = JournalWriter::create(dir).map_err(|e| format!("cannot create the journal in {}: {e}", dir.display()))?;
        let sock = socket_path(dir);
        let _ = std::fs::remove_file(&sock);
        let listener = UnixListener::bind(&sock).map_err(|e| format!("cannot listen on {}: {e}", sock.display()))?;
        let stdin = if spec.stdin_pipe { StdinSpec::Pipe } else { StdinSpec::Null };
        let (stdio, writer) = match mode {
            OutputMode::Lines => (StdioSpec::Pipes { stdin }, None),
            OutputMode::Raw { tty, segment_bytes } => {
                let writer = OutputWriter::create(dir, segment_bytes)
                    .map_err(|e| format!("cannot create the output file in {}: {e}", dir.display()))?;
                let stdio = match tty {
                    Some((rows, cols)) => StdioSpec::Pty { rows, cols },
                    None => StdioSpec::Combined { stdin: StdinSpec::Pipe },
                };
                (stdio, Some(writer))
            }
        };
        // At the Landlock level the tree gets a private temporary directory here (bubblewrap
        // gives a private `/tmp`), removed when the shim ends ([`run`]).
        let mut sandbox = sandbox;
        let mut env = spec.env.clone();
        if let Some(policy) = sandbox.as_mut().filter(|p| p.level == crate::sandbox::Level::Landlock) {
            let tmp = dir.join(crate::sandbox::landlock::TMP_DIR);
            std::fs::create_dir_all(&tmp)
                .and_then(|()| std::fs::set_permissions(&tmp, std::os::unix::fs::PermissionsExt::from_mode(0o700)))
                .map_err(|e| format!("cannot make the sandbox's temporary directory {}: {e}", tmp.display()))?;
            env.insert("TMPDIR".to_owned(), tmp.display().to_string());
            policy.tmp = Some(tmp);
        }
        // Bubblewrap's outer process stands between the shim and the program (see `sandboxed`).
        let bubblewrap = sandbox.as_ref().is_some_and(|p| p.level == crate::sandbox::Level::Bubblewrap);
        // In a sandbox, the program is bubblewrap, which ends in `sandbox-exec` and the program
        // (at the Landlock level: `sandbox-exec` alone).
        let argv = match &sandbox {
            Some(policy) => crate::sandbox::command(policy, &sandbox_helper(), &spec.argv, &spec.cwd).map_err(|e| e.to_string())?,
            None => spec.argv.clone(),
        };
        let spawn = SpawnSpec {
            argv,
            cwd: spec.cwd.clone(),
            env,
            markers: spec.markers.clone(),
            tag: spec.tag.clone(),
            stdio,
            cgroups: cgroup.as_ref().map(Cgroup::dirs).unwrap_or_default(),
            // The agent starts at the daemon's priority; `demoter` lowers its tree to `nice`
            // once it proves CPU-hungry.
            nice: 0,
            sandboxed: bubblewrap,
        };
        // A spare's child, waiting in the cgroup already (or joining it now); a terminal, or
        // whatever went wrong with it, goes the usual way (the child is killed and reaped).
        let prepared = match child {
            Some(child) if child.warm.is_some() => {
                // A warm sandbox, for this very policy (every path of it still the file it
                // was) and the same kind of output (one stream, or split), in its cgroup
                // already: its helper execs the program; anything else drops it.
                let fits = child.joined
                    && bubblewrap
                    && child.warm == sandbox
                    && match spawn.stdio {
                        StdioSpec::Combined { stdin: StdinSpec::Pipe } => !child.split,
                        StdioSpec::Pipes { stdin: StdinSpec::Pipe } => child.split,
                        _ => false,
                    }
                    && sandbox.as_ref().is_some_and(|p| crate::sandbox::identity(p) == child.seen);
                fits.then(|| {
                    let env = process::program_env(&spawn.env, &spawn.markers, &spawn.tag);
                    let order = crate::sandbox::enter::Order { argv: spec.argv.clone(), cwd: spec.cwd.clone(), env };
                    child
                        .prepared
                        .start_warm(&order)
                        .map_err(|e| say!("spare shim: the warm sandbox could not start the program ({e}); starting it the usual way"))
                        .ok()
                })
                .flatten()
            }
            Some(child) if Prepared::fits(&spawn.stdio) => child
                .prepared
                .start(&spawn, child.joined)
                .map_err(|e| say!("spare shim: the prepared child could not start the program ({e}); starting it the usual way"))
                .ok(),
            _ => None,
        };
        let spawned = match prepared {
            Some(started) => started,
            None => {
                let spawned = process::spawn(&spawn).map_err(|e| e.to_string())?;
                // The loop reaps with waitpid(-1): tokio must never reap this child behind its back.
                std::mem::forget(spawned.child);
                Started { pid: spawned.pid, output: spawned.output, stderr: spawned.stderr, stdin: spawned.stdin }
            }
        };
        let pid = spawned.pid;
        journal
            .append(&Record::Start { protocol: PROTOCOL, gen: spec.gen, turn: spec.turn, pid }, Kind::Own)
            .map_err(|e| format!("cannot write the journal: {e}"))?;
        let (output_tx, output_rx) = mpsc::unbounded_channel();
        let (exited_tx, exited_rx) = watch::channel(false);
        let io = match writer {
            Some(writer) => {
                let drain = Duration::from_millis(spec.drain_ms);
                let writer = (writer, RedactStream::new(redactor.clone()));
                raw_reader((spawned.output, spawned.stdin), writer, exited_rx, drain, output_tx)
            }
            None => line_readers((spawned.output, spawned.stderr, spawned.stdin), spec.max_line_bytes, output_tx),
        }
        .map_err(|e| {
            let _ = killpg(Pid::from_raw(pid), Signal::SIGKILL);
            format!("cannot read the process's output: {e}")
        })?;
        // The launch's first input (a turn's prompt), then EOF if asked: from the shim itself, so
        // it reaches the agent whatever becomes of the daemon.
        let mut io = io;
        if let (Some(tx), Some(first)) = (&io.stdin, stdin_first) {
            let _ = tx.send(first.into_bytes());
        }
        if stdin_close {
            io.stdin = None;
        }
        let (end_tx, _) = watch::channel(Ends { journal: journal.end(), out: 0 });
        let (asked_tx, asked_rx) = mpsc::unbounded_channel();
        tokio::spawn(accept(listener, asked_tx, end_tx.subscribe()));
        ready(Ok(pid));
        log_to(dir);
        Ok(Shim {
            dir: dir.to_owned(),
            spec,
            pid,
            journal,
            end_tx,
            output_rx,
            asked_rx,
            stdin: io.stdin,
            raw_mode: io.raw.is_some(),
            raw: io.raw,
            exited_tx,
            eofs: io.eofs,
            out_closed: false,
            exit: None,
            exit_written: false,
            drain_deadline: None,
            dropped_lines: 0,
            fault: false,
            done: false,
            acked: 0,
            redactor,
            cgroup,
            demoter: Demoter::new(std::process::id() as i32, nice),
            sandboxed: bubblewrap,
        })
    }
}
