//! Actors started and revived (the map itself: `mailbox.rs`).
//! [`launch`] starts the actor of a new run; [`ask`] sends a command to a run's actor, reviving
//! one from the stored run when it had retired, and awaits its answer; [`Actors::retire`] lets a
//! dormant actor go. Commands are sent and actors removed under one lock, so a command can never
//! slip in between an actor's last look at its channel and its removal.

use std::sync::Arc;

use spaces_harnesses::Harness;
use spaces_sdk::ErrorCode;
use spaces_store::runs::RunRow;
use spaces_store::JournalPos;
use tokio::sync::{mpsc, oneshot};

use super::actor::{Actor, Retire};
use super::mailbox::Cmd;
use super::secrets::RunSecrets;
use super::shared::Inner;
use crate::error::{refuse, Error, Result};

/// The actor of `run`, with the failures in a row its last actor left (case P7's back-off
/// outlives an actor).
fn new_actor(inner: &Arc<Inner>, run: RunRow, harness: &'static dyn Harness, secrets: RunSecrets) -> Actor {
    let fast_failures = inner.fast_failures(&run.run_id);
    Actor::new(inner.clone(), run, harness, secrets, fast_failures)
}

/// The harness of a stored `run` and its secrets, to make its actor again. Errors: the run's
/// agent is unknown to this host (`HARNESS_UNAVAILABLE`), or its secrets unreadable.
fn harness_and_secrets(inner: &Inner, run: &RunRow) -> Result<(&'static dyn Harness, RunSecrets)> {
    let harness = spaces_harnesses::by_id(&run.agent).ok_or_else(|| {
        refuse(ErrorCode::HarnessUnavailable, format!("run {} uses agent {:?}, which this host does not know", run.run_id, run.agent))
    })?;
    Ok((harness, RunSecrets::load(&inner.cfg.run_dir(&run.run_id))?))
}

/// Run an actor until it retires (or the daemon stops: [`super::mailbox::Actors::stop`]);
/// what it held is then given back to the system shortly after (`spaces_os::memory`: at a
/// thousand runs stopped, the daemon kept its peak memory).
fn spawn_actor(inner: &Inner, actor: impl std::future::Future<Output = ()> + Send + 'static) {
    inner.actors.spawn(async move {
        actor.await;
        spaces_os::memory::give_back_soon();
    });
}

/// How the actor of `run_id` leaves the map once dormant: with no command waiting for it, it is
/// removed and the failures in a row it counted are kept for the next one.
fn retire(inner: &Arc<Inner>, run_id: &str) -> Retire {
    let (inner, run_id) = (inner.clone(), run_id.to_owned());
    Box::new(move |cmds, fast_failures| {
        inner.set_fast_failures(&run_id, fast_failures);
        inner.actors.retire(&run_id, cmds)
    })
}

/// Start the actor of the new run `run`, whose first turn is `prompt`. Not once the daemon is
/// stopping: the run is stored, and the next start's recovery starts its first turn, as after a
/// kill -9.
pub(super) fn launch(inner: &Arc<Inner>, run: RunRow, harness: &'static dyn Harness, secrets: RunSecrets, prompt: String) {
    if inner.actors.is_stopping() {
        return;
    }
    let (tx, rx) = mpsc::unbounded_channel();
    inner.actors.lock().insert(run.run_id.clone(), tx);
    let retire = retire(inner, &run.run_id);
    let actor = new_actor(inner, run, harness, secrets);
    spawn_actor(inner, actor.run(Some(prompt), rx, retire));
}

/// Re-adopt the agent process of `run` after a daemon restart (its events stored up to `pos`)
/// and start its actor. Errors: the run's agent is unknown, its secrets or journal unreadable.
pub(super) async fn adopt(inner: &Arc<Inner>, run: RunRow, pos: JournalPos) -> Result<()> {
    let (harness, secrets) = harness_and_secrets(inner, &run)?;
    let run_id = run.run_id.clone();
    let actor = new_actor(inner, run, harness, secrets).adopt(pos).await?;
    let (tx, rx) = mpsc::unbounded_channel();
    let retire = retire(inner, &run_id);
    inner.actors.lock().insert(run_id, tx);
    spawn_actor(inner, actor.run(None, rx, retire));
    Ok(())
}

/// After a daemon restart, start again the turn in flight of `run`, whose agent never started
/// (the previous daemon died first), with `text` (the first prompt), and start its actor: a
/// run whose first turn was not even recorded starts it as a new run's actor does. Errors: the
/// run's agent is unknown, or its secrets unreadable.
pub(super) fn restart(inner: &Arc<Inner>, run: RunRow, text: String) -> Result<()> {
    let (harness, secrets) = harness_and_secrets(inner, &run)?;
    if run.turns == 0 {
        launch(inner, run, harness, secrets, text);
        return Ok(());
    }
    let (tx, rx) = mpsc::unbounded_channel();
    inner.actors.lock().insert(run.run_id.clone(), tx);
    let retire = retire(inner, &run.run_id);
    let actor = new_actor(inner, run, harness, secrets);
    spawn_actor(inner, async move { actor.restart_turn(text).await.run(None, rx, retire).await });
    Ok(())
}

/// After a daemon restart, start the actor of `run`, whose turn in flight was lost, for the
/// follow-ups still queued behind that turn (the actor starts the first one at once). Errors:
/// the run's agent is unknown, or its secrets unreadable.
pub(super) fn revive_queue(inner: &Arc<Inner>, run: RunRow) -> Result<()> {
    let (harness, secrets) = harness_and_secrets(inner, &run)?;
    let (tx, rx) = mpsc::unbounded_channel();
    inner.actors.lock().insert(run.run_id.clone(), tx);
    let retire = retire(inner, &run.run_id);
    spawn_actor(inner, new_actor(inner, run, harness, secrets).run(None, rx, retire));
    Ok(())
}

/// Send the command `cmd(reply)` to the actor of `run` and await the actor's answer. Once the
/// daemon is stopping (`Actors::stop`) this never answers: no actor starts then, and a caller
/// whose connection drops as the daemon exits retries with its key against the next one (an
/// error here would be an answer it does not retry).
pub(super) async fn ask<T>(
    inner: &Arc<Inner>,
    run: RunRow,
    cmd: impl FnOnce(oneshot::Sender<std::result::Result<T, spaces_sdk::ApiError>>) -> Cmd,
) -> Result<T> {
    if inner.actors.is_stopping() {
        return std::future::pending().await;
    }
    let (reply, rx) = oneshot::channel();
    dispatch(inner, run, cmd(reply))?;
    let answer = match rx.await {
        Ok(answer) => answer,
        // The actor left its loop with the command unread: the daemon is stopping.
        Err(_) if inner.actors.is_stopping() => return std::future::pending().await,
        Err(_) => return Err(refuse(ErrorCode::Internal, "the run's actor ended before answering; check the run's status")),
    };
    answer.map_err(Error::Api)
}

/// Send `cmd` to the run's actor, reviving one from the stored run if it retired.
fn dispatch(inner: &Arc<Inner>, run: RunRow, cmd: Cmd) -> Result<()> {
    let mut map = inner.actors.lock();
    let cmd = match map.get(&run.run_id) {
        Some(tx) => match tx.send(cmd) {
            Ok(()) => return Ok(()),
            Err(mpsc::error::SendError(cmd)) => cmd,
        },
        None => cmd,
    };
    // Reload under the lock: a retiring actor saved its final state before leaving.
    let run = inner.store.run_get(&run.run_id)?.unwrap_or(run);
    let (harness, secrets) = harness_and_secrets(inner, &run)?;
    let (tx, rx) = mpsc::unbounded_channel();
    let run_id = run.run_id.clone();
    let retire = retire(inner, &run_id);
    let actor = new_actor(inner, run, harness, secrets);
    spawn_actor(inner, actor.run(None, rx, retire));
    let _ = tx.send(cmd);
    map.insert(run_id, tx);
    Ok(())
}
