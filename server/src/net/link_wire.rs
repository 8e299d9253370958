//! The wire of the replica's link to its master: reading the master's
//! lines and blocks under `repl-timeout`, and writing commands to it.

use bytes::{Buf, BytesMut};
use std::io;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// Reads one line (without CRLF), skipping the newlines a master sends as
/// keep-alives before it.
pub(super) async fn line<S: AsyncRead + Unpin>(
    sock: &mut S,
    buf: &mut BytesMut,
) -> io::Result<String> {
    loop {
        while buf.first() == Some(&b'\n') {
            buf.advance(1);
        }
        if let Some(i) = buf.iter().position(|&b| b == b'\n') {
            let l = buf.split_to(i + 1);
            return Ok(String::from_utf8_lossy(&l).trim_end().to_string());
        }
        read_more(sock, buf).await?;
    }
}

tokio::task_local! {
    /// `repl-timeout` when the link started: the longest silence of the
    /// master (which sends newlines while the replica waits) before the
    /// link is dropped.
    pub(super) static REPL_TIMEOUT: Duration;
}

/// Reads more of the master's bytes into `buf`, waiting at most
/// [`REPL_TIMEOUT`] for them.
pub(super) async fn read_more<S: AsyncRead + Unpin>(
    sock: &mut S,
    buf: &mut BytesMut,
) -> io::Result<()> {
    buf.reserve(64 * 1024);
    let t = REPL_TIMEOUT
        .try_with(|t| *t)
        .unwrap_or(Duration::from_secs(60));
    let n = tokio::time::timeout(t, sock.read_buf(buf))
        .await
        .map_err(|_| io::Error::other("Timeout connecting to the MASTER..."))??;
    if n == 0 {
        return Err(io::Error::other("the master closed the connection"));
    }
    Ok(())
}

/// `args` as a RESP command.
pub(super) fn resp(args: &[&str]) -> Vec<u8> {
    let mut v = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        v.extend_from_slice(format!("${}\r\n{a}\r\n", a.len()).as_bytes());
    }
    v
}

/// Sends a command to the master and reads its one-line reply.
pub(super) async fn ask<S: AsyncRead + AsyncWrite + Unpin>(
    sock: &mut S,
    buf: &mut BytesMut,
    args: &[&str],
) -> io::Result<String> {
    sock.write_all(&resp(args)).await?;
    sock.flush().await?;
    line(sock, buf).await
}
