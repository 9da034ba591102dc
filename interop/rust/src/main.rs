//! A rust-yamux 0.13 peer (the muxer of rust-libp2p and litep2p) on a raw
//! TCP socket, driven by braid's interop tests (interop/extpeer_test.go).
//!
//!   yamux-peer listen          prints "listening HOST:PORT"
//!   yamux-peer dial HOST:PORT
//!
//! Each stream the Go side opens starts with one command line; the commands
//! and their replies are described in interop/extpeer_test.go (the same as
//! interop/js/peer.mjs). Lines on stdout are events for the test; the process
//! exits when its connection ends.

mod sha256;

use std::collections::{HashMap, VecDeque};
use std::io::Write as _;
use std::net::Shutdown;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use futures::channel::{mpsc, oneshot};
use futures::future::poll_fn;
use futures::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use futures::StreamExt;
use tokio_util::compat::TokioAsyncReadCompatExt;
use yamux::{Config, Connection, ConnectionError, Mode, Stream};

/// Bytes per write of a bulk transfer.
const CHUNK: usize = 64 * 1024;
/// How often watchgoaway probes whether new streams are refused.
const PROBE: Duration = Duration::from_millis(5);

fn out(line: &str) {
    let mut o = std::io::stdout().lock();
    let _ = writeln!(o, "{line}");
    let _ = o.flush();
}

/// What a stream handler asks of the task that owns the connection.
enum Req {
    Open(oneshot::Sender<Result<Stream, ConnectionError>>),
    Close,
}

/// Shared by every handler: a way to the connection and to the socket.
#[derive(Clone)]
struct Ctx {
    reqs: mpsc::UnboundedSender<Req>,
    /// A duplicate of the connection's socket, to cut it under the muxer.
    raw: std::sync::Arc<std::net::TcpStream>,
    /// Data bytes written to the socket, by stream (Sniff).
    sent: Sent,
    /// Tags of watchgoaway commands, reported when the connection ends
    /// (rust-yamux ends the connection on a go-away): as refused only when
    /// the peer's go-away ended it.
    watchers: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
}

/// No go-away read yet (GoAwaySeen's value).
const NO_GO_AWAY: u64 = u64::MAX;

/// The code of the first go-away frame read from the socket, NO_GO_AWAY
/// until one is. rust-yamux ends a connection that reads a go-away with
/// ConnectionError::Closed, whatever its code (connection.rs, on_frame:
/// `Tag::GoAway => return Err(ConnectionError::Closed)`), and it ends one
/// whose socket reaches its end with the same error (Active::poll, the
/// frame stream's `None`); poll_next_inbound turns both into `None`. Only
/// the frames read tell a go-away from a closed socket.
type GoAwaySeen = Arc<AtomicU64>;

/// The data frame payload bytes written to the socket so far, by stream id:
/// a stream's write returns once rust-yamux has queued its frames, not once
/// they left, and `cut` must not end the socket before its bytes did.
type Sent = Arc<std::sync::Mutex<HashMap<u32, u64>>>;

/// Frames walks the yamux frames of a byte stream given in pieces: each
/// whole header (12 bytes, big-endian: version, type, flags, stream id,
/// length; a data frame, type 0, carries `length` bytes of payload, the
/// others none) and each piece of payload after it. Both sniffers below use
/// it, one on what is read, one on what is written.
struct Frames {
    hdr: [u8; 12],
    have: usize,
    skip: u64,
}

impl Frames {
    fn new() -> Self {
        Frames { hdr: [0; 12], have: 0, skip: 0 }
    }

    /// Feeds p: `header` gets each whole header and returns false to stop
    /// (then feed returns false and takes nothing more of p); `payload`
    /// gets the length of each piece of a data frame's payload, which
    /// belongs to the last header.
    fn feed(&mut self, mut p: &[u8], mut header: impl FnMut(&[u8; 12]) -> bool, mut payload: impl FnMut(u64)) -> bool {
        while !p.is_empty() {
            if self.skip > 0 {
                let n = self.skip.min(p.len() as u64) as usize;
                self.skip -= n as u64;
                payload(n as u64);
                p = &p[n..];
                continue;
            }
            let n = (12 - self.have).min(p.len());
            self.hdr[self.have..self.have + n].copy_from_slice(&p[..n]);
            self.have += n;
            p = &p[n..];
            if self.have < 12 {
                return true;
            }
            self.have = 0;
            if !header(&self.hdr) {
                return false;
            }
            if self.hdr[1] == 0 {
                self.skip = u64::from(frame_length(&self.hdr));
            }
        }
        true
    }
}

/// frame_length is a header's length field.
fn frame_length(hdr: &[u8; 12]) -> u32 {
    u32::from_be_bytes([hdr[8], hdr[9], hdr[10], hdr[11]])
}

/// Decodes the yamux frame headers of what is written to the socket, to
/// count each stream's data payload bytes (into Sent) as they are written.
struct WriteSniff {
    frames: Frames,
    stream: u32,
    sent: Sent,
}

impl WriteSniff {
    fn observe(&mut self, p: &[u8]) {
        // The payload closure reads the stream the header closure sets.
        let stream = std::cell::Cell::new(self.stream);
        let sent = &self.sent;
        self.frames.feed(
            p,
            |hdr| {
                if hdr[1] == 0 {
                    stream.set(u32::from_be_bytes([hdr[4], hdr[5], hdr[6], hdr[7]]));
                }
                true
            },
            |n| *sent.lock().expect("sent").entry(stream.get()).or_default() += n,
        );
        self.stream = stream.get();
    }
}

/// Sniff is the connection's socket, with the yamux frame headers of what
/// is read from it decoded (Frames), to record the first go-away's code.
/// It stops at a header of another version than 0, which rust-yamux does
/// not decode either. What is written is decoded too (WriteSniff).
struct Sniff<T> {
    inner: T,
    frames: Frames,
    stopped: bool,
    go_away: GoAwaySeen,
    written: WriteSniff,
}

impl<T> Sniff<T> {
    fn new(inner: T, go_away: GoAwaySeen, sent: Sent) -> Self {
        let written = WriteSniff { frames: Frames::new(), stream: 0, sent };
        Sniff { inner, frames: Frames::new(), stopped: false, go_away, written }
    }

    fn observe(&mut self, p: &[u8]) {
        if self.stopped {
            return;
        }
        let go_away = &self.go_away;
        let more = self.frames.feed(
            p,
            |hdr| {
                if hdr[0] != 0 {
                    return false;
                }
                if hdr[1] == 3 {
                    let (none, code) = (NO_GO_AWAY, u64::from(frame_length(hdr)));
                    let _ = go_away.compare_exchange(none, code, Ordering::SeqCst, Ordering::SeqCst);
                }
                true
            },
            |_| {},
        );
        self.stopped = !more;
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for Sniff<T> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut [u8]) -> Poll<std::io::Result<usize>> {
        let this = &mut *self;
        let r = Pin::new(&mut this.inner).poll_read(cx, buf);
        if let Poll::Ready(Ok(n)) = r {
            this.observe(&buf[..n]);
        }
        r
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Sniff<T> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        let this = &mut *self;
        let r = Pin::new(&mut this.inner).poll_write(cx, buf);
        if let Poll::Ready(Ok(n)) = r {
            this.written.observe(&buf[..n]);
        }
        r
    }
    fn poll_write_vectored(mut self: Pin<&mut Self>, cx: &mut Context<'_>, bufs: &[std::io::IoSlice<'_>]) -> Poll<std::io::Result<usize>> {
        let this = &mut *self;
        let r = Pin::new(&mut this.inner).poll_write_vectored(cx, bufs);
        if let Poll::Ready(Ok(mut n)) = r {
            for b in bufs {
                if n == 0 {
                    break;
                }
                let k = n.min(b.len());
                this.written.observe(&b[..k]);
                n -= k;
            }
        }
        r
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }
    fn poll_close(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_close(cx)
    }
}

impl Ctx {
    async fn open(&self) -> Result<Stream, String> {
        let (tx, rx) = oneshot::channel();
        self.reqs
            .unbounded_send(Req::Open(tx))
            .map_err(|_| "connection gone".to_string())?;
        match rx.await {
            Ok(Ok(s)) => Ok(s),
            Ok(Err(e)) => Err(format!("{e}")),
            Err(_) => Err("connection gone".to_string()),
        }
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (tcp, mode) = match args.get(1).map(String::as_str) {
        Some("listen") => {
            let ln = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("listen");
            out(&format!("listening {}", ln.local_addr().expect("addr")));
            let (tcp, _) = ln.accept().await.expect("accept");
            (tcp, Mode::Server)
        }
        Some("dial") if args.len() > 2 => {
            let tcp = tokio::net::TcpStream::connect(&args[2]).await.expect("dial");
            (tcp, Mode::Client)
        }
        _ => {
            eprintln!("usage: yamux-peer listen | yamux-peer dial HOST:PORT");
            std::process::exit(2);
        }
    };
    tcp.set_nodelay(true).expect("nodelay");
    let raw = {
        let std = tcp.into_std().expect("into_std");
        let dup = std.try_clone().expect("dup");
        (std, dup)
    };
    let tcp = tokio::net::TcpStream::from_std(raw.0).expect("from_std");
    let mut cfg = Config::default();
    cfg.set_max_num_streams(1024);
    let go_away: GoAwaySeen = Arc::new(AtomicU64::new(NO_GO_AWAY));
    let sent: Sent = Default::default();
    let mut conn = Connection::new(Sniff::new(tcp.compat(), go_away.clone(), sent.clone()), cfg, mode);
    let (reqs, mut rx) = mpsc::unbounded();
    let ctx = Ctx { reqs, raw: std::sync::Arc::new(raw.1), sent, watchers: Default::default() };

    let mut opens: VecDeque<oneshot::Sender<Result<Stream, ConnectionError>>> = VecDeque::new();
    let mut closing = false;
    // How the connection ended; `closed`: with ConnectionError::Closed
    // (poll_next_inbound's None), not by our own close or another error.
    let (end, closed): (String, bool) = poll_fn(|cx| {
        while let Poll::Ready(Some(req)) = rx.poll_next_unpin(cx) {
            match req {
                Req::Open(tx) => opens.push_back(tx),
                Req::Close => closing = true,
            }
        }
        if closing {
            return match conn.poll_close(cx) {
                Poll::Ready(Ok(())) => Poll::Ready(("closed by us".to_string(), false)),
                Poll::Ready(Err(e)) => Poll::Ready((format!("close failed: {e}"), false)),
                Poll::Pending => Poll::Pending,
            };
        }
        while !opens.is_empty() {
            match conn.poll_new_outbound(cx) {
                Poll::Ready(r) => {
                    let _ = opens.pop_front().expect("waiting opener").send(r);
                }
                Poll::Pending => break,
            }
        }
        loop {
            match conn.poll_next_inbound(cx) {
                Poll::Ready(Some(Ok(s))) => {
                    let ctx = ctx.clone();
                    tokio::spawn(async move {
                        if let Err(e) = command(ctx, s).await {
                            out(&format!("error {e}"));
                        }
                    });
                }
                Poll::Ready(Some(Err(e))) => return Poll::Ready((format!("{e}"), false)),
                Poll::Ready(None) => return Poll::Ready(("ended".to_string(), true)),
                Poll::Pending => return Poll::Pending,
            }
        }
    })
    .await;
    // The peer's go-away ended the connection: it ended with Closed and a
    // go-away was read (the frame ends it as soon as it is decoded, so
    // nothing read after it can have).
    let code = go_away.load(Ordering::SeqCst);
    let end = match (closed, code) {
        (true, NO_GO_AWAY) => "closed, no go-away read".to_string(),
        (true, code) => format!("goaway {code}"),
        (false, NO_GO_AWAY) => end,
        (false, code) => format!("{end} (after a go-away {code})"),
    };
    for tag in ctx.watchers.lock().expect("watchers").iter() {
        if closed && code != NO_GO_AWAY {
            out(&format!("report {tag} refused goaway {code}"));
        } else {
            out(&format!("report {tag} ended {end}"));
        }
    }
    out(&format!("closed {end}"));
    std::process::exit(0);
}

/// pattern fills b with the transfer pattern from offset off: byte i of a
/// transfer is i mod 251 (a prime, so a lost or repeated chunk shows).
fn pattern(off: usize, b: &mut [u8]) {
    for (i, x) in b.iter_mut().enumerate() {
        *x = ((off + i) % 251) as u8;
    }
}

async fn send_pattern(s: &mut Stream, total: usize) -> std::io::Result<()> {
    let mut buf = vec![0u8; CHUNK];
    let mut off = 0;
    while off < total {
        let n = CHUNK.min(total - off);
        pattern(off, &mut buf[..n]);
        s.write_all(&buf[..n]).await?;
        off += n;
    }
    s.flush().await
}

/// read_line reads the command line byte by byte, so no data behind it is
/// consumed.
async fn read_line(s: &mut Stream) -> std::io::Result<String> {
    let mut line = Vec::new();
    let mut b = [0u8; 1];
    loop {
        if s.read(&mut b).await? == 0 {
            return Err(std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "stream ended before a command line"));
        }
        if b[0] == b'\n' {
            return Ok(String::from_utf8_lossy(&line).into_owned());
        }
        line.push(b[0]);
    }
}

/// drain reads to the end: the byte count and SHA-256 (hex).
async fn drain(s: &mut Stream) -> std::io::Result<(usize, String)> {
    let mut h = sha256::Sha256::new();
    let mut buf = vec![0u8; CHUNK];
    let mut total = 0;
    loop {
        let n = s.read(&mut buf).await?;
        if n == 0 {
            return Ok((total, h.hex()));
        }
        h.update(&buf[..n]);
        total += n;
    }
}

async fn command(ctx: Ctx, mut s: Stream) -> Result<(), String> {
    let line = read_line(&mut s).await.map_err(|e| format!("{e}"))?;
    let args: Vec<&str> = line.split(' ').collect();
    let num = |i: usize| -> Result<usize, String> {
        args.get(i).and_then(|a| a.parse().ok()).ok_or_else(|| format!("bad command {line:?}"))
    };
    let io = |e: std::io::Error| format!("{}: {e}", args[0]);
    match args[0] {
        "echo" => {
            let mut buf = vec![0u8; CHUNK];
            loop {
                let n = s.read(&mut buf).await.map_err(io)?;
                if n == 0 {
                    break;
                }
                s.write_all(&buf[..n]).await.map_err(io)?;
            }
            s.close().await.map_err(io)
        }
        "send" => {
            send_pattern(&mut s, num(1)?).await.map_err(io)?;
            s.close().await.map_err(io)
        }
        "recv" => {
            let (n, hex) = drain(&mut s).await.map_err(io)?;
            s.write_all(format!("{n} {hex}\n").as_bytes()).await.map_err(io)?;
            s.close().await.map_err(io)
        }
        "finfirst" => {
            send_pattern(&mut s, num(2)?).await.map_err(io)?;
            s.close().await.map_err(io)?;
            let (n, hex) = drain(&mut s).await.map_err(io)?;
            out(&format!("report {} {n} {hex}", args[1]));
            Ok(())
        }
        "waitreset" => {
            s.write_all(b"ready\n").await.map_err(io)?;
            s.flush().await.map_err(io)?;
            // rust-yamux 0.13 reads a reset as the end of the stream (read
            // returns 0, stream.rs 342-345); the state tells them apart: a
            // FIN on a stream we did not close leaves it RecvClosed, a reset
            // makes it Closed.
            let how = match drain(&mut s).await {
                Ok(_) if s.is_closed() => "reset".to_string(),
                Ok(_) => "eof".to_string(),
                Err(e) => format!("error {e}"),
            };
            out(&format!("report {} {how}", args[1]));
            Ok(())
        }
        "reset" => {
            send_pattern(&mut s, num(1)?).await.map_err(io)?;
            drop(s); // rust-yamux resets a stream dropped while open (connection.rs 517-524)
            Ok(())
        }
        "cut" => {
            let n = num(1)?;
            send_pattern(&mut s, n).await.map_err(io)?;
            // wait for the Go side's go-ahead (sent with the command line
            // when the bytes are to be in flight at the cut)
            let _ = read_line(&mut s).await;
            // and for every byte to have been written to the socket: a TCP
            // FIN then follows them all
            let id = s.id().val();
            for _ in 0..10_000 {
                if ctx.sent.lock().expect("sent").get(&id).copied().unwrap_or(0) >= n as u64 {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
            if args.get(2) == Some(&"rst") {
                let _ = socket2::SockRef::from(&*ctx.raw).set_linger(Some(Duration::ZERO));
            } else {
                let _ = ctx.raw.shutdown(Shutdown::Write);
            }
            out("closed cut");
            std::process::exit(0);
        }
        "goaway" => {
            ctx.reqs.unbounded_send(Req::Close).map_err(|_| "connection gone".to_string())
        }
        "watchgoaway" => {
            ctx.watchers.lock().expect("watchers").push(args.get(1).unwrap_or(&"").to_string());
            s.write_all(b"ready\n").await.map_err(io)?;
            s.flush().await.map_err(io)?;
            loop {
                tokio::time::sleep(PROBE).await;
                match ctx.open().await {
                    // a stream opened before the go-away arrived: close it
                    Ok(mut o) => {
                        let _ = o.close().await;
                    }
                    // not a go-away: that ends the connection, and main
                    // reports it
                    Err(e) => {
                        out(&format!("report {} ended open failed: {e}", args[1]));
                        return Ok(());
                    }
                }
            }
        }
        "ping" => {
            // rust-yamux 0.13 has no ping API: it pings on its own, at the
            // start and every 10 s, to measure the round-trip time.
            s.write_all(b"unsupported\n").await.map_err(io)?;
            s.close().await.map_err(io)
        }
        "open" => {
            let (n, size) = (num(1)?, num(2)?);
            // Each check opens its stream and writes at once: rust-yamux
            // sends the SYN with a stream's first frame and lets at most 256
            // streams wait for their ACK (lib.rs MAX_ACK_BACKLOG), so
            // opening all 300 before writing on any would wait forever.
            let checks = (0..n).map(|_| async {
                let mut o = ctx.open().await?;
                let data: Vec<u8> = (0..size).map(|_| rand_byte()).collect();
                let (mut r, mut w) = AsyncReadExt::split(&mut o);
                let write = async {
                    w.write_all(&data).await?;
                    w.close().await
                };
                let read = async {
                    let mut got = Vec::with_capacity(size);
                    r.read_to_end(&mut got).await?;
                    Ok::<_, std::io::Error>(got)
                };
                let (wr, got) = futures::join!(write, read);
                wr.map_err(|e| format!("write: {e}"))?;
                let got = got.map_err(|e| format!("read: {e}"))?;
                if got != data {
                    return Err(format!("echo of {size} bytes came back as {} different bytes", got.len()));
                }
                Ok(())
            });
            let results = futures::future::join_all(checks).await;
            let failed: Vec<&String> = results.iter().filter_map(|r| r.as_ref().err()).collect();
            let reply = if failed.is_empty() {
                format!("ok {n}\n")
            } else {
                format!("fail {} of {n}: {}\n", failed.len(), failed[0])
            };
            s.write_all(reply.as_bytes()).await.map_err(io)?;
            s.close().await.map_err(io)
        }
        other => Err(format!("unknown command {other:?}")),
    }
}

/// rand_byte is a cheap non-cryptographic byte source (xorshift), enough
/// for echo payloads that must not be a repeating pattern.
fn rand_byte() -> u8 {
    use std::cell::Cell;
    thread_local!(static STATE: Cell<u64> = Cell::new(0x9E37_79B9_7F4A_7C15 ^ std::process::id() as u64));
    STATE.with(|s| {
        let mut x = s.get();
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        s.set(x);
        (x >> 24) as u8
    })
}
