//! Black-box test harness: starts the built `cinnabar-server` (or, for
//! recording reference replies, the real `redis-server`) on a free port in a
//! temporary directory and talks to it over TCP.
//!
//! Nothing here builds the server: CI runs `cargo build` first. The binary is
//! `$CINNABAR_BIN` if set (point it at `redis-server` to check a test against
//! the real Redis), else the newer of `target/{release,debug}/cinnabar-server`
//! under `$CARGO_TARGET_DIR` or the workspace's `target/`.

pub mod golden;

use protocol::Frame;
use std::collections::HashSet;
use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

pub use protocol::{parse_reply, Frame as RespFrame};

/// The server binary the tests run.
pub fn server_bin() -> PathBuf {
    if let Some(p) = std::env::var_os("CINNABAR_BIN") {
        return PathBuf::from(p);
    }
    let root = workspace_root();
    let target = match std::env::var_os("CARGO_TARGET_DIR") {
        Some(t) => {
            let t = PathBuf::from(t);
            if t.is_absolute() {
                t
            } else {
                root.join(t)
            }
        }
        None => root.join("target"),
    };
    let candidates = ["release", "debug"].map(|p| target.join(p).join("cinnabar-server"));
    // The newer one, so a stale release build never shadows a fresh `cargo build`.
    candidates
        .iter()
        .filter_map(|p| Some((p.metadata().ok()?.modified().ok()?, p)))
        .max_by_key(|(t, _)| *t)
        .map(|(_, p)| p.clone())
        .unwrap_or_else(|| {
            panic!(
                "cinnabar-server not found in {}/{{release,debug}}: run `cargo build` first or set CINNABAR_BIN",
                target.display()
            )
        })
}

pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ has a parent")
        .to_path_buf()
}

/// True when the tests run against the real redis-server (CINNABAR_BIN).
pub fn is_real_redis() -> bool {
    server_bin()
        .file_name()
        .is_some_and(|n| n.to_string_lossy().starts_with("redis-server"))
}

/// A port nobody listens on right now, never handed out twice in this
/// process. Taken from 10000-19999: below the kernel's ephemeral range
/// (32768+), so that client sockets (thousands in the churn test) cannot be
/// holding it, and below the ports Redis's own suites use (native 21111+,
/// cluster 30000+ and 40000+), so that a run of either beside `cargo test`
/// cannot take ours. The server
/// may still lose a race for it with another process, so [`Server::start`]
/// retries with another one.
pub fn free_port() -> u16 {
    static USED: Mutex<Option<HashSet<u16>>> = Mutex::new(None);
    static STATE: AtomicU64 = AtomicU64::new(0);
    let mut used = USED.lock().unwrap_or_else(|e| e.into_inner());
    let used = used.get_or_insert_with(HashSet::new);
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
        ^ ((std::process::id() as u64) << 32);
    let _ = STATE.compare_exchange(0, seed | 1, Ordering::Relaxed, Ordering::Relaxed);
    for _ in 0..1000 {
        // xorshift: good enough to spread processes over the range.
        let mut x = STATE.load(Ordering::Relaxed);
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        STATE.store(x, Ordering::Relaxed);
        let port = 10000 + (x % 10000) as u16;
        if used.contains(&port) {
            continue;
        }
        if TcpListener::bind(("127.0.0.1", port)).is_ok() {
            used.insert(port);
            return port;
        }
    }
    panic!("no free port in 10000-19999")
}

/// A running server, killed (and its directory removed) on drop.
pub struct Server {
    pub port: u16,
    pub dir: PathBuf,
    /// `requirepass`, if given, so the client helpers can authenticate.
    pub password: Option<String>,
    child: Child,
}

static SEQ: AtomicU32 = AtomicU32::new(0);

fn temp_dir() -> PathBuf {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let d = std::env::temp_dir().join(format!(
        "cinnabar-test-{}-{}-{nanos}",
        std::process::id(),
        SEQ.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&d).expect("create temp dir");
    d
}

impl Server {
    /// Starts the server under test with `--name value` options, e.g.
    /// `&[("requirepass", "123456")]`.
    pub fn start(opts: &[(&str, &str)]) -> Server {
        Server::start_bin(&server_bin(), opts)
    }

    /// Starts `bin` (cinnabar-server or redis-server) with `opts`.
    /// The server accepts connections while it loads its dataset; this
    /// returns once it has loaded it.
    pub fn start_bin(bin: &Path, opts: &[(&str, &str)]) -> Server {
        let s = Server::start_listening(bin, opts);
        s.wait_loaded();
        s
    }

    /// Starts `bin` and returns as soon as it accepts connections, which
    /// may be while it still loads (commands then answer -LOADING).
    pub fn start_listening(bin: &Path, opts: &[(&str, &str)]) -> Server {
        let mut last_log = String::new();
        for _ in 0..5 {
            match Server::try_start(bin, opts) {
                Ok(s) => return s,
                Err(log) => last_log = log,
            }
        }
        panic!("{} did not start:\n{last_log}", bin.display());
    }

    /// Waits until PING no longer answers -LOADING.
    pub fn wait_loaded(&self) {
        let deadline = Instant::now() + Duration::from_secs(60);
        let Ok(mut c) = RawClient::try_connect(self.port) else {
            return;
        };
        if let Some(p) = &self.password {
            c.send_cmd(&["AUTH", p]);
            if c.try_read().is_err() {
                return;
            }
        }
        while Instant::now() < deadline {
            c.send_cmd(&["PING"]);
            match c.try_read() {
                Ok(Frame::Error(e)) if e.starts_with(b"LOADING") => {
                    std::thread::sleep(Duration::from_millis(10))
                }
                _ => return,
            }
        }
    }

    fn try_start(bin: &Path, opts: &[(&str, &str)]) -> Result<Server, String> {
        let port = free_port();
        let dir = temp_dir();
        let log = dir.join("server.log");
        let mut args: Vec<String> = vec![
            "--port".into(),
            port.to_string(),
            "--bind".into(),
            "127.0.0.1".into(),
            "--save".into(),
            String::new(),
        ];
        for (k, v) in opts {
            args.push(format!("--{k}"));
            // `--replicaof host port`: two arguments, as redis-server takes them.
            if *k == "replicaof" {
                args.extend(v.split_whitespace().map(str::to_string));
            } else {
                args.push(v.to_string());
            }
        }
        let out = std::fs::File::create(&log).map_err(|e| e.to_string())?;
        let err = out.try_clone().map_err(|e| e.to_string())?;
        let child = Command::new(bin)
            .args(&args)
            .current_dir(&dir)
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .map_err(|e| format!("spawn {}: {e}", bin.display()))?;
        let password = opts
            .iter()
            .find(|(k, _)| *k == "requirepass")
            .map(|(_, v)| v.to_string());
        let mut s = Server {
            port,
            dir,
            password,
            child,
        };
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            if TcpStream::connect(("127.0.0.1", port)).is_ok() {
                // If our server failed to bind, whoever answered is not ours.
                std::thread::sleep(Duration::from_millis(20));
                if let Ok(Some(status)) = s.child.try_wait() {
                    let text = std::fs::read_to_string(&log).unwrap_or_default();
                    return Err(format!("exited with {status}:\n{text}"));
                }
                return Ok(s);
            }
            if let Ok(Some(status)) = s.child.try_wait() {
                let text = std::fs::read_to_string(&log).unwrap_or_default();
                return Err(format!("exited with {status}:\n{text}"));
            }
            if Instant::now() > deadline {
                return Err("not accepting connections after 15s".into());
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    pub fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// The server's pid (for /proc inspection).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Whether the process is still running.
    pub fn alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// The exit code once the process has ended (`None` while it runs or
    /// when a signal ended it).
    pub fn exit_code(&mut self) -> Option<i32> {
        self.child.try_wait().ok().flatten().and_then(|s| s.code())
    }

    /// The server's log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("server.log")).unwrap_or_default()
    }

    /// A raw RESP connection, not authenticated.
    pub fn raw(&self) -> RawClient {
        RawClient::try_connect(self.port).unwrap_or_else(|e| {
            panic!(
                "connect to port {}: {e}; server log:\n{}",
                self.port,
                self.log()
            )
        })
    }

    /// A replica by SYNC that has read its RDB: what it reads next is the
    /// replication stream.
    pub fn sync_replica(&self) -> RawClient {
        use std::io::Read;
        let mut c = self.raw();
        c.send(b"SYNC\r\n");
        let mut head = Vec::new();
        let mut b = [0u8; 1];
        loop {
            c.sock.read_exact(&mut b).expect("bulk header");
            match b[0] {
                b'\n' if head.is_empty() => {}
                b'\n' => break,
                x => head.push(x),
            }
        }
        let head = String::from_utf8(head).unwrap();
        let len: usize = head.trim_end().strip_prefix('$').unwrap().parse().unwrap();
        let mut rdb = vec![0u8; len];
        c.sock.read_exact(&mut rdb).expect("rdb");
        assert_eq!(&rdb[..5], b"REDIS");
        c
    }

    /// A raw RESP connection, authenticated if the server has a password.
    pub fn raw_auth(&self) -> RawClient {
        let mut c = self.raw();
        if let Some(p) = &self.password {
            let r = c.cmd(&["AUTH", p]);
            assert_eq!(r, Frame::Simple("OK".into()), "AUTH failed");
        }
        c
    }

    /// A `redis` crate connection, authenticated if the server has a password.
    pub fn redis(&self) -> redis::Connection {
        let url = match &self.password {
            Some(p) => format!("redis://:{p}@127.0.0.1:{}/", self.port),
            None => format!("redis://127.0.0.1:{}/", self.port),
        };
        let c = redis::Client::open(url).expect("redis url");
        c.get_connection_with_timeout(Duration::from_secs(10))
            .expect("redis crate connection")
    }

    /// Runs `redis-cli -p PORT args...` (no `-a`: pass it yourself).
    pub fn cli(&self, args: &[&str]) -> Output {
        Command::new("redis-cli")
            .arg("-p")
            .arg(self.port.to_string())
            .args(args)
            .stdin(Stdio::null())
            .output()
            .expect("run redis-cli (apt-get install redis-tools)")
    }

    /// `redis-cli` stdout as a string, trailing blank lines removed.
    pub fn cli_out(&self, args: &[&str]) -> String {
        let o = self.cli(args);
        String::from_utf8_lossy(&o.stdout).trim_end().to_string()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Encodes a request as a RESP multibulk.
pub fn encode<A: AsRef<[u8]>>(args: &[A]) -> Vec<u8> {
    let mut v = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        let a = a.as_ref();
        v.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        v.extend_from_slice(a);
        v.extend_from_slice(b"\r\n");
    }
    v
}

/// How a read ended when it got no complete reply.
#[derive(Debug, PartialEq, Eq)]
pub enum ReadEnd {
    Closed,
    Timeout,
}

/// A plain TCP connection speaking RESP by hand: for protocol edge cases and
/// for seeing replies exactly as sent.
pub struct RawClient {
    pub sock: TcpStream,
    buf: Vec<u8>,
}

impl RawClient {
    pub fn connect(port: u16) -> RawClient {
        RawClient::try_connect(port).expect("connect")
    }

    pub fn try_connect(port: u16) -> std::io::Result<RawClient> {
        let sock = TcpStream::connect(("127.0.0.1", port))?;
        sock.set_read_timeout(Some(Duration::from_secs(10))).ok();
        sock.set_nodelay(true).ok();
        Ok(RawClient {
            sock,
            buf: Vec::new(),
        })
    }

    pub fn set_timeout(&mut self, d: Duration) {
        self.sock.set_read_timeout(Some(d)).ok();
    }

    /// Writes raw bytes.
    pub fn send(&mut self, bytes: &[u8]) {
        self.sock.write_all(bytes).expect("write to server");
    }

    /// Writes `bytes`; an error once the server has closed the connection.
    pub fn try_send(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.sock.write_all(bytes)
    }

    /// Writes a request (multibulk) without reading.
    pub fn send_cmd<A: AsRef<[u8]>>(&mut self, args: &[A]) {
        self.send(&encode(args));
    }

    /// Sends a request and reads its reply.
    pub fn cmd<A: AsRef<[u8]>>(&mut self, args: &[A]) -> Frame {
        self.send_cmd(args);
        self.read()
    }

    /// One reply's raw bytes, or how the stream ended.
    pub fn read_raw(&mut self) -> Result<Vec<u8>, ReadEnd> {
        loop {
            if let Some((_, used)) = parse_reply(&self.buf) {
                return Ok(self.buf.drain(..used).collect());
            }
            let mut chunk = [0u8; 64 * 1024];
            match self.sock.read(&mut chunk) {
                Ok(0) => return Err(ReadEnd::Closed),
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) =>
                {
                    return Err(ReadEnd::Timeout)
                }
                Err(_) => return Err(ReadEnd::Closed),
            }
        }
    }

    /// One reply; panics on close or timeout.
    pub fn read(&mut self) -> Frame {
        match self.try_read() {
            Ok(f) => f,
            Err(e) => panic!("no reply: {e:?}"),
        }
    }

    pub fn try_read(&mut self) -> Result<Frame, ReadEnd> {
        let raw = self.read_raw()?;
        Ok(parse_reply(&raw).expect("complete reply").0)
    }

    /// Asserts the server closes the connection (after any replies already
    /// read) within the read timeout, with no further reply.
    pub fn expect_closed(&mut self) {
        match self.read_raw() {
            Err(ReadEnd::Closed) => {}
            Err(ReadEnd::Timeout) => panic!("connection still open"),
            Ok(r) => panic!(
                "expected close, got reply {:?}",
                String::from_utf8_lossy(&r)
            ),
        }
    }

    /// Asserts nothing arrives within `d` and the connection stays open.
    pub fn expect_silence(&mut self, d: Duration) {
        self.sock.set_read_timeout(Some(d)).ok();
        let r = self.read_raw();
        self.sock
            .set_read_timeout(Some(Duration::from_secs(10)))
            .ok();
        match r {
            Err(ReadEnd::Timeout) => {}
            Err(ReadEnd::Closed) => panic!("connection closed, expected it open"),
            Ok(r) => panic!("unexpected reply {:?}", String::from_utf8_lossy(&r)),
        }
    }

    pub fn shutdown(&self) {
        let _ = self.sock.shutdown(Shutdown::Both);
    }
}

/// Shorthands for expected frames.
pub fn ok() -> Frame {
    Frame::Simple("OK".into())
}
pub fn simple(s: &str) -> Frame {
    Frame::Simple(s.to_string().into())
}
pub fn err(s: &str) -> Frame {
    Frame::Error(s.to_string().into())
}
pub fn bulk<B: AsRef<[u8]>>(b: B) -> Frame {
    Frame::Bulk(b.as_ref().to_vec().into())
}
pub fn int(i: i64) -> Frame {
    Frame::Integer(i)
}
pub fn nil() -> Frame {
    Frame::Null
}

/// A reply as text: the bytes of a string or error, an integer's digits,
/// else its debug form (which no expected text matches).
/// A field of INFO `section`, "" if it is missing.
pub fn info_field(c: &mut RawClient, section: &str, field: &str) -> String {
    let info = text(&c.cmd(&["INFO", section]));
    let key = format!("{field}:");
    info.lines()
        .find_map(|l| l.strip_prefix(key.as_str()))
        .unwrap_or_default()
        .trim()
        .to_string()
}

/// An integer field of INFO `section`; panics if it is missing.
pub fn info_int(c: &mut RawClient, section: &str, name: &str) -> i64 {
    info_field(c, section, name)
        .parse()
        .unwrap_or_else(|_| panic!("no {name} in INFO {section}"))
}

pub fn text(f: &Frame) -> String {
    match f {
        Frame::Simple(b) | Frame::Bulk(b) | Frame::Error(b) | Frame::Verbatim(b) => {
            String::from_utf8_lossy(b).into_owned()
        }
        Frame::Integer(i) => i.to_string(),
        other => format!("{other:?}"),
    }
}

/// Whether the server knows `name` (probes with COMMAND INFO, falling back
/// to "unknown command" detection when COMMAND itself is missing).
pub fn has_command(c: &mut RawClient, name: &str) -> bool {
    match c.cmd(&["COMMAND", "INFO", name]) {
        Frame::Array(v) => v.first().is_some_and(|f| *f != Frame::Null),
        _ => false,
    }
}

/// A program on PATH (`command -v`). The ones `./test.sh` installs
/// ([`INSTALLED`]) must be there: a test that cannot run fails rather than
/// pass, unless `CINNABAR_SKIP_MISSING=1` says skipping is intended (then
/// `None`, and the test says it skipped).
pub fn tool(name: &str) -> Option<PathBuf> {
    let found = std::process::Command::new("sh")
        .args(["-c", &format!("command -v {name}")])
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .filter(|p| !p.is_empty())
        .map(PathBuf::from);
    let skipping = std::env::var_os("CINNABAR_SKIP_MISSING").is_some_and(|v| v == "1");
    if found.is_none() && INSTALLED.contains(&name) && !skipping {
        panic!("{name} is not installed (./test.sh installs it; CINNABAR_SKIP_MISSING=1 skips the tests that need it)");
    }
    if found.is_none() {
        eprintln!("SKIPPED: {name} is not installed");
    }
    found
}

/// What `./test.sh` installs for the tests.
pub const INSTALLED: &[&str] = &[
    "redis-server",
    "redis-cli",
    "redis-benchmark",
    "redis-check-rdb",
    "redis-check-aof",
    "ss",
    "strace",
];

/// A scratch directory of a test's own, removed when dropped (a `Server`
/// removes only the one it makes itself).
pub struct TempDir(PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        let d = std::env::temp_dir().join(format!("cinnabar-{tag}-{}-{nanos}", std::process::id()));
        std::fs::create_dir_all(&d).expect("create a temporary directory");
        TempDir(d)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }

    pub fn dir(&self) -> &str {
        self.0.to_str().expect("temporary paths are UTF-8")
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Polls `f` until it holds; fails the test after 20 s, naming `what`.
/// `bin` in cluster mode (a 2 s node timeout, no save points) with `extra`,
/// and the free bus port it listens on (for CLUSTER MEET).
pub fn cluster_node(bin: &Path, extra: &[(&str, &str)]) -> (Server, String) {
    let cport = free_port().to_string();
    let mut opts = vec![
        ("cluster-enabled", "yes"),
        ("cluster-node-timeout", "2000"),
        ("cluster-port", &cport),
        ("save", ""),
    ];
    opts.extend_from_slice(extra);
    (Server::start_bin(bin, &opts), cport)
}

pub fn wait_for(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while !f() {
        assert!(std::time::Instant::now() < deadline, "timed out: {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

pub fn openssl(dir: &Path, args: &[&str]) {
    let out = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("run openssl");
    assert!(
        out.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A CA `ca` and, signed by it, `ca-server` (for 127.0.0.1 and localhost)
/// and `ca-client`.
pub fn make_ca(dir: &Path, ca: &str) {
    openssl(dir, &["genrsa", "-out", &format!("{ca}.key"), "2048"]);
    openssl(
        dir,
        &[
            "req",
            "-x509",
            "-new",
            "-nodes",
            "-sha256",
            "-days",
            "30",
            "-key",
            &format!("{ca}.key"),
            "-subj",
            &format!("/O=Test/CN={ca}"),
            "-out",
            &format!("{ca}.crt"),
        ],
    );
    std::fs::write(
        dir.join("ext.cnf"),
        "[server]\nsubjectAltName = IP:127.0.0.1,DNS:localhost\n[client]\nkeyUsage = digitalSignature\n",
    )
    .unwrap();
    for (who, ext) in [("server", "server"), ("client", "client")] {
        let name = format!("{ca}-{who}");
        openssl(dir, &["genrsa", "-out", &format!("{name}.key"), "2048"]);
        openssl(
            dir,
            &[
                "req",
                "-new",
                "-sha256",
                "-key",
                &format!("{name}.key"),
                "-subj",
                &format!("/O=Test/CN={name}"),
                "-out",
                &format!("{name}.csr"),
            ],
        );
        openssl(
            dir,
            &[
                "x509",
                "-req",
                "-sha256",
                "-days",
                "30",
                "-in",
                &format!("{name}.csr"),
                "-CA",
                &format!("{ca}.crt"),
                "-CAkey",
                &format!("{ca}.key"),
                "-CAcreateserial",
                "-extfile",
                "ext.cnf",
                "-extensions",
                ext,
                "-out",
                &format!("{name}.crt"),
            ],
        );
    }
}
