//! TLS (a leaf): the server's rustls context built from the `tls-*`
//! options, the handshake, and the encrypted stream the connection code
//! serves like a TCP socket.
//!
//! The stream has what `duplex::Duplex` asks of a socket, so `conn::serve`
//! is monomorphised for it: plain TCP keeps its own code with no branch for
//! TLS. OpenSSL settings map onto rustls where they can (`tls-ciphers` is
//! read as an OpenSSL cipher string over the suites rustls has); what rustls
//! cannot honour leaves nothing to serve and is refused, as Redis refuses a
//! bad value.

use crate::core::config::Config;
use crate::core::config::TlsAuth;
use bytes::BytesMut;
use rustls::crypto::ring::{cipher_suite as cs, default_provider};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::PrivateKeyDer;
use rustls::server::ServerConfig;
use rustls::{ServerConnection, SupportedCipherSuite};
use std::io::{self, Read, Write};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{ready, Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

mod trust;

use trust::load_certs;

/// Whether the options ask for a TLS context at all (Redis builds it only
/// then, so `tls-*` files may be set freely before).
pub fn wanted(cfg: &Config) -> bool {
    cfg.tls_port != 0 || cfg.tls_replication || cfg.tls_cluster
}

/// The contexts TLS connections start with: the `tls-port` listeners'
/// and the outgoing one (a replica's link). CONFIG SET replaces both, and
/// connections already up keep theirs.
pub struct Contexts {
    pub server: Arc<ServerConfig>,
    pub client: Arc<rustls::ClientConfig>,
}

#[derive(Default)]
pub struct Current(parking_lot::Mutex<Option<Arc<Contexts>>>);

impl Current {
    pub fn get(&self) -> Option<Arc<Contexts>> {
        self.0.lock().clone()
    }

    pub fn set(&self, ctx: Option<Arc<Contexts>>) {
        *self.0.lock() = ctx;
    }
}

/// Builds both contexts, as Redis builds its two at once (a client key
/// that does not open fails the configuration); the error is the line
/// Redis logs.
pub fn contexts(cfg: &Config) -> Result<Arc<Contexts>, String> {
    Ok(Arc::new(Contexts {
        server: server_context(cfg, cfg.tls_auth_clients)?,
        client: client_context(cfg)?,
    }))
}

fn server_context(cfg: &Config, auth: TlsAuth) -> Result<Arc<ServerConfig>, String> {
    if cfg.tls_cert_file.is_empty() {
        return Err("No tls-cert-file configured!".into());
    }
    if cfg.tls_key_file.is_empty() {
        return Err("No tls-key-file configured!".into());
    }
    let versions = protocols(&cfg.tls_protocols)?;
    let provider = provider(cfg)?;
    let needs_ca = auth != TlsAuth::No || cfg.tls_replication || cfg.tls_cluster;
    if needs_ca && cfg.tls_ca_cert_file.is_empty() && cfg.tls_ca_cert_dir.is_empty() {
        return Err("Either tls-ca-cert-file or tls-ca-cert-dir must be specified when tls-cluster, tls-replication or tls-auth-clients are enabled!".into());
    }
    let certs = load_certs(&cfg.tls_cert_file)
        .map_err(|e| format!("Failed to load certificate: {}: {e}", cfg.tls_cert_file))?;
    let key = load_key(&cfg.tls_key_file, &cfg.tls_key_file_pass)
        .map_err(|e| format!("Failed to load private key: {}: {e}", cfg.tls_key_file))?;
    let trust = if cfg.tls_ca_cert_file.is_empty() && cfg.tls_ca_cert_dir.is_empty() {
        None
    } else {
        Some(trust(cfg, provider.clone())?)
    };
    if !cfg.tls_dh_params_file.is_empty() {
        check_dh_params(&cfg.tls_dh_params_file)?;
    }
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&versions)
        .map_err(|_| {
            "Failed to configure ciphers: no cipher suite of tls-ciphers/tls-ciphersuites fits tls-protocols".to_string()
        })?;
    let builder = match (auth, trust) {
        (TlsAuth::No, _) | (_, None) => builder.with_no_client_auth(),
        (auth, Some(mut trust)) => {
            trust.mandatory = auth == TlsAuth::Yes;
            builder.with_client_cert_verifier(Arc::new(trust))
        }
    };
    let mut sc = builder.with_single_cert(certs, key).map_err(|e| match e {
        rustls::Error::InconsistentKeys(_) => format!(
            "Failed to load private key: {}: key values mismatch",
            cfg.tls_key_file
        ),
        // rustls reads only X.509 v3 certificates.
        e => format!("Failed to load certificate: {}: {e}", cfg.tls_cert_file),
    })?;
    sc.ignore_client_order = cfg.tls_prefer_server_ciphers;
    // Redis's OpenSSL resumes only from tickets: a client offering a
    // session id alone gets a full handshake.
    sc.session_storage = Arc::new(rustls::server::NoServerSessionStorage {});
    if cfg.tls_session_caching {
        sc.ticketer = Arc::new(trust::Tickets::new(Duration::from_secs(
            cfg.tls_session_cache_timeout as u64,
        ))?);
    } else {
        sc.send_tls13_tickets = 0;
    }
    Ok(Arc::new(sc))
}

/// The cluster bus's two sides under `tls-cluster`. Nodes always show each
/// other a certificate: Redis asks for one on the bus whatever
/// `tls-auth-clients` says (a node without one gets "certificate
/// required"); the outgoing side is the replica's.
pub struct Bus {
    pub accept: Arc<ServerConfig>,
    pub connect: Arc<rustls::ClientConfig>,
}

pub fn bus(cfg: &Config, ctx: &Contexts) -> Result<Bus, String> {
    Ok(Bus {
        accept: server_context(cfg, TlsAuth::Yes)?,
        connect: ctx.client.clone(),
    })
}

/// Fails unless the peer starts with a handshake record: a plain-text
/// peer is closed without an alert it would read as a reply.
pub async fn expect_handshake(tcp: &TcpStream) -> io::Result<()> {
    let mut first = [0u8; 1];
    match tcp.peek(&mut first).await? {
        0 => Err(io::ErrorKind::UnexpectedEof.into()),
        _ if first[0] != 0x16 => Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "wrong version number (not a TLS handshake)",
        )),
        _ => Ok(()),
    }
}

/// The replica's side of `tls-replication`: the CAs of `tls-ca-cert-*`,
/// and `tls-client-cert-file`/`tls-client-key-file` as its certificate, or
/// `tls-cert-file`/`tls-key-file` when those are not set, as Redis.
fn client_context(cfg: &Config) -> Result<Arc<rustls::ClientConfig>, String> {
    let (cert, key, pass) = if cfg.tls_client_cert_file.is_empty() {
        (
            &cfg.tls_cert_file,
            &cfg.tls_key_file,
            &cfg.tls_key_file_pass,
        )
    } else {
        (
            &cfg.tls_client_cert_file,
            &cfg.tls_client_key_file,
            &cfg.tls_client_key_file_pass,
        )
    };
    let provider = provider(cfg)?;
    let verifier = Arc::new(trust(cfg, provider.clone())?);
    let b = rustls::ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&protocols(&cfg.tls_protocols)?)
        .map_err(|e| e.to_string())?
        .dangerous()
        .with_custom_certificate_verifier(verifier);
    if cert.is_empty() {
        return Ok(Arc::new(b.with_no_client_auth()));
    }
    let chain = load_certs(cert).map_err(|e| format!("Failed to load certificate: {cert}: {e}"))?;
    let k = load_key(key, pass).map_err(|e| format!("Failed to load private key: {key}: {e}"))?;
    b.with_client_auth_cert(chain, k)
        .map(Arc::new)
        .map_err(|e| format!("Failed to load private key: {key}: {e}"))
}

/// `tls-dh-params-file` is refused as Redis refuses it: a file that cannot
/// be read, one without PKCS#3 parameters, a prime under the 2048 bits of
/// OpenSSL's default security level. The parameters are never used: rustls
/// has no DHE suites (`tls-ciphers` selects none).
fn check_dh_params(f: &str) -> Result<(), String> {
    let text = std::fs::read_to_string(f)
        .map_err(|e| format!("Failed to load {f}: {}", crate::core::os::strerror(&e)))?;
    let bits = match pkcs8::Document::from_pem(&text) {
        Ok(("DH PARAMETERS", doc)) => der_sequence(doc.as_bytes()).and_then(der_integer).map(|p| {
            let p = &p[p.iter().take_while(|b| **b == 0).count()..];
            (p.len() * 8).saturating_sub(p.first().map_or(0, |b| b.leading_zeros() as usize))
        }),
        _ => None,
    };
    match bits {
        None => Err(format!("{f}: failed to read DH params.")),
        Some(b) if b < 2048 => Err(format!(
            "Failed to load DH params file: {f}: dh key too small"
        )),
        Some(_) => Ok(()),
    }
}

/// A DER element's tag and contents.
fn der_element(b: &[u8]) -> Option<(u8, &[u8])> {
    let (&tag, rest) = b.split_first()?;
    let (&first, rest) = rest.split_first()?;
    let (len, rest) = if first < 0x80 {
        (first as usize, rest)
    } else {
        let n = (first & 0x7f) as usize;
        let len = rest
            .get(..n)?
            .iter()
            .fold(0usize, |l, b| l << 8 | *b as usize);
        (len, &rest[n..])
    };
    Some((tag, rest.get(..len)?))
}

fn der_sequence(b: &[u8]) -> Option<&[u8]> {
    der_element(b)
        .filter(|(tag, _)| *tag == 0x30)
        .map(|(_, c)| c)
}

fn der_integer(b: &[u8]) -> Option<&[u8]> {
    der_element(b)
        .filter(|(tag, _)| *tag == 0x02)
        .map(|(_, c)| c)
}

/// A PEM private key, or a PKCS#8 encrypted one opened with `pass`
/// (`tls-key-file-pass`).
fn load_key(path: &str, pass: &str) -> Result<PrivateKeyDer<'static>, String> {
    let text = std::fs::read(path).map_err(|e| crate::core::os::strerror(&e))?;
    if let Ok(key) = PrivateKeyDer::from_pem_slice(&text) {
        return Ok(key);
    }
    let text = String::from_utf8_lossy(&text);
    let (label, doc) =
        pkcs8::Document::from_pem(&text).map_err(|_| "no private key found".to_string())?;
    if label != "ENCRYPTED PRIVATE KEY" {
        return Err("no private key found".into());
    }
    let info =
        pkcs8::EncryptedPrivateKeyInfo::try_from(doc.as_bytes()).map_err(|e| e.to_string())?;
    let der = info.decrypt(pass).map_err(|_| "bad decrypt".to_string())?;
    Ok(PrivateKeyDer::Pkcs8(der.as_bytes().to_vec().into()))
}

/// ring with the suites of `tls-ciphersuites` and `tls-ciphers`, in order.
fn provider(cfg: &Config) -> Result<Arc<rustls::crypto::CryptoProvider>, String> {
    let mut suites = tls13_suites(&cfg.tls_ciphersuites)?;
    suites.extend(tls12_suites(&cfg.tls_ciphers)?);
    Ok(Arc::new(rustls::crypto::CryptoProvider {
        cipher_suites: suites,
        ..default_provider()
    }))
}

/// The trusted CAs of `tls-ca-cert-file` and `tls-ca-cert-dir`.
fn trust(
    cfg: &Config,
    provider: Arc<rustls::crypto::CryptoProvider>,
) -> Result<trust::Trust, String> {
    let file = match cfg.tls_ca_cert_file.as_str() {
        "" => Vec::new(),
        f => load_certs(f)
            .map_err(|e| format!("Failed to configure CA certificate(s) file/directory: {e}"))?,
    };
    Ok(trust::Trust::new(file, &cfg.tls_ca_cert_dir, provider))
}

/// `tls-protocols`: TLSv1 and TLSv1.1 are named but never served (rustls
/// has neither, and Debian's OpenSSL refuses them too); a list of only
/// those is refused.
fn protocols(s: &str) -> Result<Vec<&'static rustls::SupportedProtocolVersion>, String> {
    if s.trim().is_empty() {
        return Ok(vec![&rustls::version::TLS13, &rustls::version::TLS12]);
    }
    let mut out = Vec::new();
    for w in s.split_whitespace() {
        match w.to_ascii_lowercase().as_str() {
            "tlsv1" | "tlsv1.1" => {}
            "tlsv1.2" => out.push(&rustls::version::TLS12),
            "tlsv1.3" => out.push(&rustls::version::TLS13),
            _ => return Err("Invalid tls-protocols specified. Use a combination of 'TLSv1', 'TLSv1.1', 'TLSv1.2' and 'TLSv1.3'.".into()),
        }
    }
    if out.is_empty() {
        return Err("Invalid tls-protocols specified: TLSv1 and TLSv1.1 are not supported by this server; add 'TLSv1.2' or 'TLSv1.3'.".into());
    }
    Ok(out)
}

/// `tls-ciphersuites` (TLS 1.3, OpenSSL's names, `:`-separated). Names
/// OpenSSL knows and rustls lacks (the CCM suites) are left out; a list
/// with nothing left is refused.
fn tls13_suites(s: &str) -> Result<Vec<SupportedCipherSuite>, String> {
    let all = [
        ("TLS_AES_256_GCM_SHA384", Some(cs::TLS13_AES_256_GCM_SHA384)),
        (
            "TLS_CHACHA20_POLY1305_SHA256",
            Some(cs::TLS13_CHACHA20_POLY1305_SHA256),
        ),
        ("TLS_AES_128_GCM_SHA256", Some(cs::TLS13_AES_128_GCM_SHA256)),
        ("TLS_AES_128_CCM_SHA256", None),
        ("TLS_AES_128_CCM_8_SHA256", None),
    ];
    if s.is_empty() {
        return Ok(all.iter().filter_map(|(_, c)| *c).collect());
    }
    let mut out = Vec::new();
    for name in s.split(':').filter(|n| !n.is_empty()) {
        let Some((_, c)) = all.iter().find(|(n, _)| *n == name) else {
            return Err(format!("Failed to configure ciphersuites: {s}"));
        };
        out.extend(c.filter(|c| !out.contains(c)));
    }
    if out.is_empty() {
        return Err(format!("Failed to configure ciphersuites: {s}"));
    }
    Ok(out)
}

/// The TLS 1.2 suites rustls has, in OpenSSL's DEFAULT order, with the
/// words of OpenSSL's cipher-string language that select each.
const TLS12: &[(&str, &[&str])] = &[
    (
        "ECDHE-ECDSA-AES256-GCM-SHA384",
        &["aECDSA", "ECDSA", "AESGCM", "AES", "AES256", "SHA384"],
    ),
    (
        "ECDHE-RSA-AES256-GCM-SHA384",
        &["aRSA", "AESGCM", "AES", "AES256", "SHA384"],
    ),
    (
        "ECDHE-ECDSA-CHACHA20-POLY1305",
        &["aECDSA", "ECDSA", "CHACHA20", "SHA256"],
    ),
    (
        "ECDHE-RSA-CHACHA20-POLY1305",
        &["aRSA", "CHACHA20", "SHA256"],
    ),
    (
        "ECDHE-ECDSA-AES128-GCM-SHA256",
        &["aECDSA", "ECDSA", "AESGCM", "AES", "AES128", "SHA256"],
    ),
    (
        "ECDHE-RSA-AES128-GCM-SHA256",
        &["aRSA", "AESGCM", "AES", "AES128", "SHA256"],
    ),
];

/// Words every suite of `TLS12` answers to.
const TLS12_COMMON: &[&str] = &[
    "DEFAULT",
    "ALL",
    "HIGH",
    "ECDHE",
    "EECDH",
    "kECDHE",
    "kEECDH",
    "AEAD",
    "TLSv1.2",
    "COMPLEMENTOFALL",
];

fn tls12_suite(name: &str) -> SupportedCipherSuite {
    match name {
        "ECDHE-ECDSA-AES256-GCM-SHA384" => cs::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
        "ECDHE-RSA-AES256-GCM-SHA384" => cs::TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
        "ECDHE-ECDSA-CHACHA20-POLY1305" => cs::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
        "ECDHE-RSA-CHACHA20-POLY1305" => cs::TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
        "ECDHE-ECDSA-AES128-GCM-SHA256" => cs::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
        _ => cs::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
    }
}

/// `tls-ciphers` read as OpenSSL reads a cipher string, over the suites
/// rustls has: items separated by `:` (or `,`, space), `A+B` for suites
/// matching both, `-` removes, `!` removes for good, `+` moves to the end,
/// `@…` is ignored. Words naming other suites select nothing, as an
/// unknown word does in OpenSSL; a string selecting nothing is refused.
fn tls12_suites(s: &str) -> Result<Vec<SupportedCipherSuite>, String> {
    let s_or_default = if s.is_empty() { "DEFAULT" } else { s };
    let matches = |name: &str, words: &[&str], item: &str| {
        item.split('+')
            .all(|w| w == name || words.contains(&w) || TLS12_COMMON.contains(&w))
    };
    let mut list: Vec<&str> = Vec::new();
    let mut banned: Vec<&str> = Vec::new();
    for item in s_or_default
        .split([':', ',', ' '])
        .filter(|i| !i.is_empty())
    {
        let (op, body) = match item.as_bytes()[0] {
            b'!' | b'-' | b'+' => (item.as_bytes()[0], &item[1..]),
            b'@' => continue,
            _ => (0, item),
        };
        let hit: Vec<&str> = TLS12
            .iter()
            .filter(|(n, w)| matches(n, w, body))
            .map(|(n, _)| *n)
            .collect();
        match op {
            b'!' => {
                list.retain(|n| !hit.contains(n));
                banned.extend(hit);
            }
            b'-' => list.retain(|n| !hit.contains(n)),
            b'+' => {
                let (moved, kept): (Vec<&str>, Vec<&str>) =
                    list.iter().partition(|n| hit.contains(n));
                list = kept;
                list.extend(moved);
            }
            _ => {
                for n in hit {
                    if !list.contains(&n) && !banned.contains(&n) {
                        list.push(n);
                    }
                }
            }
        }
    }
    if list.is_empty() {
        return Err(format!("Failed to configure ciphers: {s}"));
    }
    Ok(list.into_iter().map(tls12_suite).collect())
}

/// Runs the server side of the handshake on an accepted socket.
pub async fn accept(ctx: Arc<ServerConfig>, tcp: TcpStream) -> io::Result<TlsStream> {
    expect_handshake(&tcp).await?;
    let s = tokio_rustls::TlsAcceptor::from(ctx).accept(tcp).await?;
    let (tcp, conn) = s.into_inner();
    Ok(TlsStream {
        tcp,
        conn,
        plain_left: true,
        eof: false,
        outbox: None,
        raw: BytesMut::new(),
        spare: BytesMut::new(),
    })
}

/// A TLS connection on a TCP socket, read and written without blocking.
pub struct TlsStream {
    tcp: TcpStream,
    conn: ServerConnection,
    /// Decrypted bytes may wait in `conn` (read readiness is not the
    /// socket's then).
    plain_left: bool,
    /// The socket reached its end.
    eof: bool,
    /// Where `seal`ed records wait for the round's end (conn.rs).
    outbox: Option<Arc<crate::core::round::Outbox>>,
    /// Records taken back from the outbox unsent: they go before any
    /// later record, as TLS needs them in order.
    raw: BytesMut,
    /// The buffer the next `seal` fills.
    spare: BytesMut,
}

/// `std::io` over the socket's non-blocking calls, for rustls.
struct Io<'a>(&'a TcpStream);

impl Read for Io<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.0.try_read(buf)
    }
}

impl Write for Io<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.try_write(buf)
    }
    fn write_vectored(&mut self, bufs: &[io::IoSlice<'_>]) -> io::Result<usize> {
        self.0.try_write_vectored(bufs)
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// The socket read through its poll interface, for a task: a short read
/// clears the socket's readiness, so the task's next read waits for data
/// instead of finding none with a system call (at -P 1 a reply's client
/// has sent nothing more, every time).
struct Polled<'a, 'b>(&'a mut TcpStream, &'a mut Context<'b>);

impl Read for Polled<'_, '_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let mut rb = ReadBuf::new(buf);
        match Pin::new(&mut *self.0).poll_read(self.1, &mut rb) {
            Poll::Ready(Ok(())) => Ok(rb.filled().len()),
            Poll::Ready(Err(e)) => Err(e),
            Poll::Pending => Err(io::ErrorKind::WouldBlock.into()),
        }
    }
}

impl TlsStream {
    /// How many decrypted bytes are ready (0 at the end of the stream),
    /// reading the socket once if none are; WouldBlock when it has
    /// nothing (with `cx`: the task is then woken when it has).
    fn pull(&mut self, mut cx: Option<&mut Context<'_>>) -> io::Result<usize> {
        loop {
            let st = match self.conn.process_new_packets() {
                Ok(st) => st,
                Err(e) => {
                    // The alert rustls queued, if the socket takes it.
                    let _ = self.send();
                    return Err(io::Error::new(io::ErrorKind::InvalidData, e));
                }
            };
            let n = st.plaintext_bytes_to_read();
            if n > 0 || st.peer_has_closed() || self.eof {
                // A key update's answer, if any.
                let _ = self.send();
                return Ok(n);
            }
            let n = match cx.as_deref_mut() {
                Some(cx) => self.conn.read_tls(&mut Polled(&mut self.tcp, cx))?,
                None => self.conn.read_tls(&mut Io(&self.tcp))?,
            };
            if n == 0 {
                self.eof = true;
            }
        }
    }

    /// Writes what rustls has encrypted; WouldBlock while some is left.
    fn send(&mut self) -> io::Result<()> {
        // Records still in the outbox were sealed first: they go first.
        if let Some(ob) = &self.outbox {
            ob.take(&mut self.raw);
        }
        while !self.raw.is_empty() {
            match self.tcp.try_write(&self.raw)? {
                0 => return Err(io::ErrorKind::WriteZero.into()),
                n => bytes::Buf::advance(&mut self.raw, n),
            }
        }
        while self.conn.wants_write() {
            if self.conn.write_tls(&mut Io(&self.tcp))? == 0 {
                return Err(io::ErrorKind::WriteZero.into());
            }
        }
        Ok(())
    }

    /// Encrypts what the session's buffer takes of `buf` and sends what the
    /// socket takes; the rest goes with the next write (see `buffered`).
    fn write_plain(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.send()?;
        let n = self.conn.writer().write(buf)?;
        match self.send() {
            Err(e) if e.kind() != io::ErrorKind::WouldBlock => Err(e),
            _ => Ok(n),
        }
    }
}

/// What `duplex::Duplex` asks of a socket (conn.rs implements it with these).
impl TlsStream {
    pub fn readable(&self) -> impl std::future::Future<Output = io::Result<()>> + Send + '_ {
        let ready = self.plain_left;
        async move {
            if ready {
                return Ok(());
            }
            self.tcp.readable().await
        }
    }

    pub fn writable(&self) -> impl std::future::Future<Output = io::Result<()>> + Send + '_ {
        self.tcp.writable()
    }

    pub fn try_read_buf(&mut self, buf: &mut BytesMut) -> io::Result<usize> {
        // Everything decrypted is taken below, or there was nothing.
        self.plain_left = false;
        let n = self.pull(None)?;
        let len = buf.len();
        buf.resize(len + n, 0);
        self.conn.reader().read_exact(&mut buf[len..])?;
        Ok(n)
    }

    pub fn try_write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.write_plain(buf)
    }

    pub fn buffered(&self) -> bool {
        !self.raw.is_empty() || self.conn.wants_write()
    }

    /// The connection's outbox, which sealed records are put in.
    pub fn attach(&mut self, ob: Arc<crate::core::round::Outbox>) {
        self.outbox = Some(ob);
    }

    /// Takes back what the outbox has not written (see `send`).
    pub fn reclaim(&mut self, ob: &crate::core::round::Outbox) -> bool {
        ob.take(&mut self.raw)
    }

    /// Encrypts all of `out` in place, so that the round's end can write
    /// it raw. False, with `out` untouched, while earlier records wait:
    /// they must leave first.
    pub fn seal(&mut self, out: &mut BytesMut) -> bool {
        if self.buffered() {
            return false;
        }
        let mut sealed = std::mem::take(&mut self.spare);
        sealed.clear();
        let mut off = 0;
        while off < out.len() {
            match self.conn.writer().write(&out[off..]) {
                Ok(n) if n > 0 => off += n,
                // Records made so far go first; the rest is written as
                // plain text by the task.
                _ => {
                    self.raw = sealed;
                    bytes::Buf::advance(out, off);
                    return false;
                }
            }
            while self.conn.wants_write() {
                if self
                    .conn
                    .write_tls(&mut bytes::BufMut::writer(&mut sealed))
                    .is_err()
                {
                    break;
                }
            }
        }
        std::mem::swap(out, &mut sealed);
        self.spare = sealed;
        true
    }
}

impl AsyncRead for TlsStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        match this.pull(Some(cx)) {
            Ok(0) => Poll::Ready(Ok(())),
            Ok(n) => {
                let dst = buf.initialize_unfilled_to(n.min(buf.remaining()));
                let k = this.conn.reader().read(dst)?;
                buf.advance(k);
                this.plain_left = k < n;
                Poll::Ready(Ok(()))
            }
            // The socket's poll registered the task's waker.
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                this.plain_left = false;
                Poll::Pending
            }
            Err(e) => Poll::Ready(Err(e)),
        }
    }
}

impl AsyncWrite for TlsStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        loop {
            match this.write_plain(buf) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    ready!(this.tcp.poll_write_ready(cx))?
                }
                r => return Poll::Ready(r),
            }
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        loop {
            match this.send() {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    ready!(this.tcp.poll_write_ready(cx))?
                }
                r => return Poll::Ready(r),
            }
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.poll_flush(cx)
    }
}

impl std::os::fd::AsRawFd for TlsStream {
    fn as_raw_fd(&self) -> std::os::fd::RawFd {
        self.tcp.as_raw_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(s: &str) -> Vec<&'static str> {
        let suites = tls12_suites(s).unwrap();
        TLS12
            .iter()
            .map(|(n, _)| *n)
            .filter(|n| suites.contains(&tls12_suite(n)))
            .collect()
    }

    #[test]
    fn cipher_strings() {
        assert_eq!(names("").len(), 6);
        assert_eq!(names("DEFAULT:-AES128-SHA256").len(), 6);
        assert_eq!(
            names("ECDHE-RSA-AES128-GCM-SHA256"),
            ["ECDHE-RSA-AES128-GCM-SHA256"]
        );
        assert_eq!(names("HIGH:!aECDSA:!CHACHA20").len(), 2);
        assert_eq!(names("aRSA+AES128").len(), 1);
        assert!(tls12_suites("garbage").is_err());
        assert!(tls12_suites("-ALL:AES128-SHA256").is_err());
        // `+` moves to the end: the server's order when it prefers its own.
        let order = tls12_suites("ECDHE-RSA-AES128-GCM-SHA256:ECDHE-RSA-AES256-GCM-SHA384:+AES128")
            .unwrap();
        assert_eq!(order[0], cs::TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384);
    }

    #[test]
    fn ciphersuites_and_protocols() {
        assert_eq!(tls13_suites("").unwrap().len(), 3);
        assert_eq!(tls13_suites("TLS_AES_128_GCM_SHA256").unwrap().len(), 1);
        assert!(tls13_suites("garbage").is_err());
        assert!(tls13_suites("TLS_AES_128_CCM_SHA256").is_err());
        assert_eq!(protocols("tlsv1.2").unwrap().len(), 1);
        assert_eq!(protocols("TLSv1.1 TLSv1.2 TLSv1.3").unwrap().len(), 2);
        assert!(protocols("TLSv1 TLSv1.1").is_err());
        assert!(protocols("TLSv1.4").is_err());
    }
}
