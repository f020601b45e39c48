//! Running the synchronous tar/zstd/file work on blocking threads while the async side relays
//! progress and feeds downloads in as a stream.

use std::io::{self, Read};

use bytes::Bytes;
use futures_util::stream::BoxStream;
use futures_util::StreamExt;
use tokio::sync::mpsc;

use crate::error::{Result, VolumeError};
use crate::types::Progress;

type Update = (String, u64, Option<u64>);

/// A [`Progress`] usable from a blocking thread: forwards to the async caller's.
pub(crate) struct SendProgress(mpsc::UnboundedSender<Update>);

impl Progress for SendProgress {
    fn update(&self, step: &str, done_bytes: u64, total_bytes: Option<u64>) {
        let _ = self.0.send((step.to_string(), done_bytes, total_bytes));
    }
}

fn join_error(e: tokio::task::JoinError) -> VolumeError {
    VolumeError::io("<worker thread>", io::Error::other(e.to_string()))
}

/// Runs `f` on a blocking thread, relaying its progress updates to `progress`.
pub(crate) async fn blocking<T, F>(progress: &dyn Progress, f: F) -> Result<T>
where
    T: Send + 'static,
    F: FnOnce(&dyn Progress) -> Result<T> + Send + 'static,
{
    let (tx, mut rx) = mpsc::unbounded_channel();
    let mut handle = tokio::task::spawn_blocking(move || f(&SendProgress(tx)));
    loop {
        tokio::select! {
            r = &mut handle => {
                while let Ok((s, d, t)) = rx.try_recv() {
                    progress.update(&s, d, t);
                }
                return r.map_err(join_error)?;
            }
            Some((s, d, t)) = rx.recv() => progress.update(&s, d, t),
        }
    }
}

/// A blocking `Read` over chunks sent from the async side.
pub(crate) struct ChannelReader {
    rx: mpsc::Receiver<io::Result<Bytes>>,
    cur: Bytes,
}

impl Read for ChannelReader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        while self.cur.is_empty() {
            match self.rx.blocking_recv() {
                Some(Ok(b)) => self.cur = b,
                Some(Err(e)) => return Err(e),
                None => return Ok(0),
            }
        }
        let n = buf.len().min(self.cur.len());
        buf[..n].copy_from_slice(&self.cur[..n]);
        let _ = self.cur.split_to(n);
        Ok(n)
    }
}

async fn next_chunk(s: &mut Option<BoxStream<'static, object_store::Result<Bytes>>>) -> Option<object_store::Result<Bytes>> {
    match s.as_mut() {
        Some(s) => s.next().await,
        None => std::future::pending().await,
    }
}

/// Runs `f` on a blocking thread reading `stream` (a download) as it arrives.
pub(crate) async fn stream_into<T, F>(stream: BoxStream<'static, object_store::Result<Bytes>>, progress: &dyn Progress, f: F) -> Result<T>
where
    T: Send + 'static,
    F: FnOnce(ChannelReader, &dyn Progress) -> Result<T> + Send + 'static,
{
    let (dtx, drx) = mpsc::channel(16);
    let (ptx, mut prx) = mpsc::unbounded_channel();
    let mut handle = tokio::task::spawn_blocking(move || f(ChannelReader { rx: drx, cur: Bytes::new() }, &SendProgress(ptx)));
    let mut stream = Some(stream);
    let mut dtx = Some(dtx);
    loop {
        tokio::select! {
            biased;
            r = &mut handle => {
                while let Ok((s, d, t)) = prx.try_recv() {
                    progress.update(&s, d, t);
                }
                return r.map_err(join_error)?;
            }
            Some((s, d, t)) = prx.recv() => progress.update(&s, d, t),
            chunk = next_chunk(&mut stream), if stream.is_some() => match (chunk, dtx.as_ref()) {
                (Some(c), Some(tx)) => {
                    let c = c.map_err(|e| io::Error::other(format!("download failed: {e}")));
                    if tx.send(c).await.is_err() {
                        stream = None;
                        dtx = None;
                    }
                }
                _ => {
                    stream = None;
                    dtx = None;
                }
            },
        }
    }
}
