//! Control connections: each line a [`Request`] to the loop, each answer a [`Reply`] line; a
//! connection also follows the journal's end for the daemon.

use super::*;

pub(super) async fn accept(listener: UnixListener, asked: mpsc::UnboundedSender<Asked>, end: watch::Receiver<Ends>) {
    while let Ok((conn, _)) = listener.accept().await {
        let (asked, end) = (asked.clone(), end.clone());
        tokio::spawn(async move {
            serve(conn, asked.clone(), end).await;
            // The connection's receiver is dropped: wake the loop, whose orphan check arms when
            // no connection is left (the reply goes nowhere).
            let _ = asked.send((Request::Status, oneshot::channel().0));
        });
    }
}

/// One control connection: a `Hello` first, then requests in order; `Watch` turns it into a
/// stream of journal lengths.
async fn serve(conn: UnixStream, asked: mpsc::UnboundedSender<Asked>, mut end: watch::Receiver<Ends>) {
    let (read, mut write) = conn.into_split();
    let mut lines = BufReader::new(read).lines();
    let mut greeted = false;
    while let Ok(Some(line)) = lines.next_line().await {
        let reply = match serde_json::from_str::<Request>(&line) {
            Err(e) => Reply::refuse(format!("not a request of shim protocol {PROTOCOL}: {e}")),
            Ok(Request::Hello { protocol }) if protocol != PROTOCOL => {
                Reply::refuse(format!("shim protocol version {protocol} is not supported: this shim speaks version {PROTOCOL}"))
            }
            Ok(req) if !greeted && !matches!(req, Request::Hello { .. }) => Reply::refuse("say hello first"),
            Ok(req) => {
                let watch = matches!(req, Request::Watch);
                greeted = true;
                let (tx, rx) = oneshot::channel();
                if asked.send((req, tx)).is_err() {
                    return;
                }
                let Ok(reply) = rx.await else { return };
                if watch {
                    let _ = send(&mut write, &reply).await;
                    loop {
                        let Ends { journal, out } = *end.borrow_and_update();
                        if write.write_all(format!("{{\"end\":{journal},\"out\":{out}}}\n").as_bytes()).await.is_err() {
                            return;
                        }
                        // The peer's end counts too: a daemon killed while its run was idle
                        // (nothing to write) otherwise held this connection, and with it the
                        // shim "followed", forever, so its orphan check never ran (the e2e
                        // suite left such shims and their agents alive).
                        tokio::select! {
                            changed = end.changed() => {
                                if changed.is_err() {
                                    return;
                                }
                            }
                            _ = lines.next_line() => return,
                        }
                    }
                }
                reply
            }
        };
        let refused = !reply.ok && !greeted;
        if send(&mut write, &reply).await.is_err() || refused {
            return;
        }
    }
}

async fn send(write: &mut tokio::net::unix::OwnedWriteHalf, reply: &Reply) -> std::io::Result<()> {
    let mut line = serde_json::to_vec(reply).map_err(std::io::Error::other)?;
    line.push(b'\n');
    write.write_all(&line).await
}
