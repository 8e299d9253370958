//! TLS: `tls-port` beside `port`, client certificates (`tls-auth-clients`
//! yes/optional/no), redis-cli and a tokio-rustls client over TLS, plain
//! text and hostile handshakes on the TLS port, CONFIG SET reloading the
//! context. Certificates are made by the test with the openssl CLI.

use cinnabar_tests::RespFrame as Frame;
use cinnabar_tests::*;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

struct Tls {
    dir: TempDir,
}

impl Tls {
    /// Two CAs, `ca` (the server's) and `other`.
    fn new() -> Tls {
        let dir = TempDir::new("tls");
        make_ca(dir.path(), "ca");
        make_ca(dir.path(), "other");
        Tls { dir }
    }

    fn file(&self, name: &str) -> String {
        self.dir.path().join(name).to_string_lossy().into_owned()
    }

    /// A server with `tls-port` beside its plain port (returned too).
    fn server(&self, extra: &[(&str, &str)]) -> (Server, u16) {
        self.server_bin(&server_bin(), extra)
    }

    fn server_bin(&self, bin: &Path, extra: &[(&str, &str)]) -> (Server, u16) {
        for _ in 0..5 {
            let port = free_port();
            let (p, cert, key, ca) = (
                port.to_string(),
                self.file("ca-server.crt"),
                self.file("ca-server.key"),
                self.file("ca.crt"),
            );
            let mut opts = vec![
                ("tls-port", p.as_str()),
                ("tls-cert-file", cert.as_str()),
                ("tls-key-file", key.as_str()),
                ("tls-ca-cert-file", ca.as_str()),
            ];
            opts.extend_from_slice(extra);
            let s = Server::start_bin(bin, &opts);
            if TcpStream::connect(("127.0.0.1", port)).is_ok() {
                return (s, port);
            }
        }
        panic!("no TLS port");
    }

    /// redis-cli over TLS, trusting `ca`, with `ca`'s client certificate
    /// unless `cert` is None.
    fn cli(&self, port: u16, ca: &str, cert: Option<&str>, args: &[&str]) -> String {
        let mut c = Command::new("redis-cli");
        c.args([
            "-p",
            &port.to_string(),
            "--tls",
            "--cacert",
            &self.file(&format!("{ca}.crt")),
        ]);
        if let Some(who) = cert {
            c.args(["--cert", &self.file(&format!("{who}.crt"))]);
            c.args(["--key", &self.file(&format!("{who}.key"))]);
        }
        let out = c.args(args).output().expect("run redis-cli");
        String::from_utf8_lossy(&out.stdout).trim_end().to_string()
            + &String::from_utf8_lossy(&out.stderr)
    }

    fn client_config(&self, ca: &str, cert: Option<&str>) -> Arc<rustls::ClientConfig> {
        let ring = rustls::crypto::ring::default_provider();
        let versions = rustls::DEFAULT_VERSIONS;
        self.client_with(ca, cert, versions, &ring.cipher_suites)
    }

    /// A client of `versions` offering `suites`, in that order.
    fn client_with(
        &self,
        ca: &str,
        cert: Option<&str>,
        versions: &[&'static rustls::SupportedProtocolVersion],
        suites: &[rustls::SupportedCipherSuite],
    ) -> Arc<rustls::ClientConfig> {
        use rustls::pki_types::pem::PemObject;
        use rustls::pki_types::{CertificateDer, PrivateKeyDer};
        let mut roots = rustls::RootCertStore::empty();
        for c in CertificateDer::pem_file_iter(self.file(&format!("{ca}.crt"))).unwrap() {
            roots.add(c.unwrap()).unwrap();
        }
        let provider = Arc::new(rustls::crypto::CryptoProvider {
            cipher_suites: suites.to_vec(),
            ..rustls::crypto::ring::default_provider()
        });
        let b = rustls::ClientConfig::builder_with_provider(provider)
            .with_protocol_versions(versions)
            .unwrap()
            .with_root_certificates(roots);
        Arc::new(match cert {
            Some(who) => {
                let chain = CertificateDer::pem_file_iter(self.file(&format!("{who}.crt")))
                    .unwrap()
                    .map(|c| c.unwrap())
                    .collect();
                let key = PrivateKeyDer::from_pem_file(self.file(&format!("{who}.key"))).unwrap();
                b.with_client_auth_cert(chain, key).unwrap()
            }
            None => b.with_no_client_auth(),
        })
    }
}

type Stream = tokio_rustls::client::TlsStream<tokio::net::TcpStream>;

async fn connect(cfg: Arc<rustls::ClientConfig>, port: u16) -> std::io::Result<Stream> {
    let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port)).await?;
    let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
    tokio_rustls::TlsConnector::from(cfg)
        .connect(name, tcp)
        .await
}

/// Sends `req` and reads until `want` replies have arrived.
async fn exchange(s: &mut Stream, req: &[u8], want: usize) -> std::io::Result<Vec<Frame>> {
    s.write_all(req).await?;
    s.flush().await?;
    let mut buf = Vec::new();
    let mut out = Vec::new();
    let mut chunk = vec![0u8; 64 * 1024];
    while out.len() < want {
        while let Some((f, used)) = parse_reply(&buf) {
            out.push(f);
            buf.drain(..used);
        }
        if out.len() == want {
            break;
        }
        let n = tokio::time::timeout(Duration::from_secs(10), s.read(&mut chunk))
            .await
            .map_err(|_| std::io::Error::from(std::io::ErrorKind::TimedOut))??;
        if n == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    Ok(out)
}

/// Whether a TLS client with `ca`'s trust and `cert` gets PONG.
async fn pings(cfg: Arc<rustls::ClientConfig>, port: u16) -> bool {
    match connect(cfg, port).await {
        // TLS 1.3: a refused client certificate shows at the first read.
        Ok(mut s) => {
            matches!(exchange(&mut s, &encode(&["PING"]), 1).await.as_deref(), Ok([f]) if *f == simple("PONG"))
        }
        Err(_) => false,
    }
}

/// The log line is written just after the connection closes.
fn wait_log(s: &Server, line: &str) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while !s.log().contains(line) {
        assert!(Instant::now() < deadline, "no {line:?} in:\n{}", s.log());
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

#[test]
fn redis_cli_round_trip_and_client_certificates() {
    let t = Tls::new();
    let (s, port) = t.server(&[]);
    assert_eq!(
        t.cli(port, "ca", Some("ca-client"), &["SET", "k", "v"]),
        "OK"
    );
    assert_eq!(t.cli(port, "ca", Some("ca-client"), &["GET", "k"]), "v");
    // tls-auth-clients yes: no certificate, or one of another CA, is refused.
    assert_ne!(t.cli(port, "ca", None, &["PING"]), "PONG");
    assert_ne!(t.cli(port, "ca", Some("other-client"), &["PING"]), "PONG");
    let mut admin = s.raw();
    assert_eq!(
        admin.cmd(&["CONFIG", "SET", "tls-auth-clients", "optional"]),
        ok()
    );
    assert_eq!(t.cli(port, "ca", None, &["PING"]), "PONG");
    assert_eq!(t.cli(port, "ca", Some("ca-client"), &["PING"]), "PONG");
    assert_ne!(t.cli(port, "ca", Some("other-client"), &["PING"]), "PONG");
    assert_eq!(
        admin.cmd(&["CONFIG", "SET", "tls-auth-clients", "no"]),
        ok()
    );
    assert_eq!(t.cli(port, "ca", None, &["PING"]), "PONG");
    // The server's certificate is still checked by the client.
    assert_ne!(t.cli(port, "other", None, &["PING"]), "PONG");
    wait_log(&s, "Error accepting a client connection:");
}

#[test]
fn rust_client_pipelines_and_large_values() {
    let t = Tls::new();
    let (s, port) = t.server(&[]);
    let rt = rt();
    rt.block_on(async {
        assert!(!pings(t.client_config("ca", None), port).await);
        assert!(!pings(t.client_config("ca", Some("other-client")), port).await);
        let mut c = connect(t.client_config("ca", Some("ca-client")), port)
            .await
            .unwrap();
        // A pipeline of 1000, and a 4 MB value both ways: replies larger
        // than a TLS record and than the socket takes at once.
        let mut req = Vec::new();
        for _ in 0..1000 {
            req.extend(encode(&["INCR", "n"]));
        }
        let r = exchange(&mut c, &req, 1000).await.unwrap();
        assert_eq!(r[999], int(1000));
        let big = vec![b'x'; 4 << 20];
        let r = exchange(&mut c, &encode(&[&b"SET"[..], b"big", &big]), 1)
            .await
            .unwrap();
        assert_eq!(r, [ok()]);
        let r = exchange(&mut c, &encode(&["GET", "big"]), 1).await.unwrap();
        assert_eq!(r, [bulk(&big)]);
        // The same data over the plain port.
        assert_eq!(s.raw().cmd(&["STRLEN", "big"]), int(4 << 20));
        // CLIENT LIST sees the TLS client like any other.
        let r = exchange(&mut c, &encode(&["CLIENT", "LIST"]), 1)
            .await
            .unwrap();
        assert!(text(&r[0]).contains(" cmd=client|list "), "{}", text(&r[0]));
    });
}

#[test]
fn plain_text_on_the_tls_port_is_closed() {
    let t = Tls::new();
    let (s, port) = t.server(&[]);
    let mut c = RawClient::connect(port);
    c.send_cmd(&["PING"]);
    c.expect_closed();
    wait_log(&s, "Error accepting a client connection: ");
    if !is_real_redis() {
        wait_log(&s, "wrong version number (not a TLS handshake)");
    }
    assert_eq!(s.raw().cmd(&["PING"]), simple("PONG"));
}

#[test]
fn hostile_handshakes_leave_others_served() {
    let t = Tls::new();
    let (s, port) = t.server(&[]);
    // Slow: a record header and then nothing; garbage after a handshake
    // record type; a ClientHello cut short.
    let mut slow = TcpStream::connect(("127.0.0.1", port)).unwrap();
    slow.write_all(&[0x16, 0x03]).unwrap();
    let mut garbage = TcpStream::connect(("127.0.0.1", port)).unwrap();
    garbage.write_all(&[0x16; 1]).unwrap();
    garbage.write_all(&[0xff; 4096]).unwrap();
    let mut truncated = TcpStream::connect(("127.0.0.1", port)).unwrap();
    truncated
        .write_all(&[
            0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xfc, 0x03, 0x03,
        ])
        .unwrap();
    drop(truncated);
    let rt = rt();
    rt.block_on(async {
        let cfg = t.client_config("ca", Some("ca-client"));
        let mut c = connect(cfg.clone(), port).await.unwrap();
        let start = Instant::now();
        for i in 0..200 {
            let r = exchange(&mut c, &encode(&["INCR", "served"]), 1)
                .await
                .unwrap();
            assert_eq!(r, [int(i + 1)]);
        }
        assert!(start.elapsed() < Duration::from_secs(10));
        // New connections too, while the slow one still waits.
        for _ in 0..10 {
            assert!(pings(cfg.clone(), port).await);
        }
    });
    // The garbage got an alert or a close, never a reply.
    garbage
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let mut buf = [0u8; 64];
    match garbage.read(&mut buf) {
        Ok(0) | Err(_) => {}
        Ok(n) => assert_eq!(buf[0], 0x15, "{:?}", &buf[..n]),
    }
    assert_eq!(s.raw().cmd(&["GET", "served"]), bulk("200"));
    drop(slow);
}

#[test]
fn config_set_reloads_the_context() {
    let t = Tls::new();
    let (s, port) = t.server(&[("tls-auth-clients", "no")]);
    let mut admin = s.raw();
    let rt = rt();
    assert!(rt.block_on(pings(t.client_config("ca", None), port)));
    // A bad file is refused, and the old context stays.
    assert_eq!(
        admin.cmd(&["CONFIG", "SET", "tls-cert-file", "/nonexistent"]),
        err("ERR CONFIG SET failed (possibly related to argument 'tls-cert-file') - Unable to update TLS configuration. Check server logs.")
    );
    // Redis's OpenSSL puts its error code between the two.
    let log = s.log();
    assert!(
        log.contains("Failed to load certificate: /nonexistent: ")
            && log.contains("No such file or directory"),
        "{log}"
    );
    assert_eq!(
        admin.cmd(&["CONFIG", "SET", "tls-key-file", &t.file("other-server.key")]),
        err("ERR CONFIG SET failed (possibly related to argument 'tls-key-file') - Unable to update TLS configuration. Check server logs.")
    );
    assert_eq!(
        admin.cmd(&["CONFIG", "GET", "tls-cert-file"]),
        Frame::Array(vec![bulk("tls-cert-file"), bulk(t.file("ca-server.crt"))])
    );
    assert!(rt.block_on(pings(t.client_config("ca", None), port)));
    // A certificate and its key in one CONFIG SET: new connections see it.
    assert_eq!(
        admin.cmd(&[
            "CONFIG",
            "SET",
            "tls-cert-file",
            &t.file("other-server.crt"),
            "tls-key-file",
            &t.file("other-server.key"),
        ]),
        ok()
    );
    assert!(rt.block_on(pings(t.client_config("other", None), port)));
    assert!(!rt.block_on(pings(t.client_config("ca", None), port)));
    // Refused values, as Redis refuses them.
    for (name, value) in [
        ("tls-protocols", "TLSv1.4"),
        ("tls-ciphers", "garbage"),
        ("tls-ciphersuites", "garbage"),
        ("tls-dh-params-file", "/nonexistent"),
    ] {
        assert_eq!(
            admin.cmd(&["CONFIG", "SET", name, value]),
            err(&format!("ERR CONFIG SET failed (possibly related to argument '{name}') - Unable to update TLS configuration. Check server logs."))
        );
    }
    // TLS 1.2 only, and a cipher list.
    assert_eq!(
        admin.cmd(&[
            "CONFIG",
            "SET",
            "tls-protocols",
            "TLSv1.2",
            "tls-ciphers",
            "ECDHE-RSA-AES256-GCM-SHA384"
        ]),
        ok()
    );
    assert!(rt.block_on(pings(t.client_config("other", None), port)));
    // An encrypted key needs its password.
    let enc = t.file("other-server.enc.key");
    openssl(
        t.dir.path(),
        &[
            "rsa",
            "-in",
            &t.file("other-server.key"),
            "-out",
            &enc,
            "-aes256",
            "-passout",
            "pass:1234",
        ],
    );
    assert_eq!(
        admin.cmd(&["CONFIG", "SET", "tls-key-file", &enc]),
        err("ERR CONFIG SET failed (possibly related to argument 'tls-key-file') - Unable to update TLS configuration. Check server logs.")
    );
    assert_eq!(
        admin.cmd(&[
            "CONFIG",
            "SET",
            "tls-key-file-pass",
            "1234",
            "tls-key-file",
            &enc
        ]),
        ok()
    );
    assert!(rt.block_on(pings(t.client_config("other", None), port)));
    // tls-port moves, and 0 closes it.
    let p2 = free_port();
    assert_eq!(
        admin.cmd(&["CONFIG", "SET", "tls-port", &p2.to_string()]),
        ok()
    );
    assert!(rt.block_on(pings(t.client_config("other", None), p2)));
    assert_eq!(admin.cmd(&["CONFIG", "SET", "tls-port", "0"]), ok());
    assert!(TcpStream::connect(("127.0.0.1", p2)).is_err());
    // With TLS off, the files are only stored; turning it on again keeps
    // the context built before, as Redis does.
    assert_eq!(
        admin.cmd(&["CONFIG", "SET", "tls-cert-file", "/nonexistent"]),
        ok()
    );
    assert_eq!(
        admin.cmd(&["CONFIG", "SET", "tls-port", &p2.to_string()]),
        ok()
    );
    assert!(rt.block_on(pings(t.client_config("other", None), p2)));
    // A server that never had TLS checks them when it is turned on.
    let plain = Server::start(&[("tls-cert-file", "/nonexistent")]);
    assert_eq!(
        plain.raw().cmd(&["CONFIG", "SET", "tls-port", &free_port().to_string()]),
        err("ERR CONFIG SET failed (possibly related to argument 'tls-port') - Unable to update TLS configuration. Check server logs.")
    );
}

#[test]
fn tls_options_as_redis_shows_them() {
    // Recorded from Redis 7.0.15 (Debian's build, with TLS) started with
    // only tls-port, tls-cert-file, tls-key-file and tls-ca-cert-file.
    let t = Tls::new();
    let (s, port) = t.server(&[]);
    let mut c = s.raw();
    let Frame::Array(items) = c.cmd(&["CONFIG", "GET", "tls-*"]) else {
        panic!("CONFIG GET");
    };
    let mut got: Vec<(String, String)> = items
        .chunks(2)
        .map(|p| (text(&p[0]), text(&p[1])))
        .collect();
    got.sort();
    let (p, cert, key, ca) = (
        port.to_string(),
        t.file("ca-server.crt"),
        t.file("ca-server.key"),
        t.file("ca.crt"),
    );
    let mut want: Vec<(&str, &str)> = vec![
        ("tls-auth-clients", "yes"),
        ("tls-ca-cert-dir", ""),
        ("tls-ca-cert-file", &ca),
        ("tls-cert-file", &cert),
        ("tls-ciphers", ""),
        ("tls-ciphersuites", ""),
        ("tls-client-cert-file", ""),
        ("tls-client-key-file", ""),
        ("tls-client-key-file-pass", ""),
        ("tls-cluster", "no"),
        ("tls-dh-params-file", ""),
        ("tls-key-file", &key),
        ("tls-key-file-pass", ""),
        ("tls-port", &p),
        ("tls-prefer-server-ciphers", "no"),
        ("tls-protocols", ""),
        ("tls-replication", "no"),
        ("tls-session-cache-size", "20480"),
        ("tls-session-cache-timeout", "300"),
        ("tls-session-caching", "yes"),
    ];
    want.sort();
    let want: Vec<(String, String)> = want
        .into_iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect();
    assert_eq!(got, want);
    assert_eq!(
        c.cmd(&["CONFIG", "SET", "tls-auth-clients", "maybe"]),
        err("ERR CONFIG SET failed (possibly related to argument 'tls-auth-clients') - argument(s) must be one of the following: no, yes, optional")
    );
}

#[test]
fn startup_refuses_a_bad_tls_configuration() {
    if is_real_redis() {
        return;
    }
    let t = Tls::new();
    for (extra, line) in [
        (vec![], "No tls-cert-file configured!"),
        (vec!["--tls-cert-file", "ca-server.crt"], "No tls-key-file configured!"),
        (
            vec!["--tls-cert-file", "ca-server.crt", "--tls-key-file", "ca-server.key"],
            "Either tls-ca-cert-file or tls-ca-cert-dir must be specified when tls-cluster, tls-replication or tls-auth-clients are enabled!",
        ),
    ] {
        let out = Command::new(server_bin())
            .args(["--port", "0", "--tls-port", &free_port().to_string(), "--save", ""])
            .args(extra)
            .current_dir(t.dir.path())
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1));
        let text = String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
        assert!(text.contains(line), "{text}");
        assert!(text.contains("Failed to configure TLS. Check logs for more info."), "{text}");
    }
}

/// Waits until `s` has `key` = `value`.
fn wait_key(s: &Server, key: &str, value: &str) {
    let deadline = Instant::now() + Duration::from_secs(15);
    let mut c = s.raw();
    while c.cmd(&["GET", key]) != bulk(value) {
        assert!(
            Instant::now() < deadline,
            "{key} never arrived:\n{}",
            s.log()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn replication_over_tls_both_ways_with_redis() {
    let t = Tls::new();
    let redis = tool("redis-server");
    // cinnabar's master, a cinnabar replica and (if installed) a real Redis
    // replica; then a cinnabar replica of a real Redis master. Each replica
    // shows tls-cert-file to its master as its client certificate.
    let (m, mport) = t.server(&[]);
    m.raw().cmd(&["SET", "before", "1"]);
    let mut replicas = vec![t.server(&[("tls-replication", "yes")]).0];
    if let Some(bin) = &redis {
        replicas.push(t.server_bin(bin, &[("tls-replication", "yes")]).0);
    }
    for r in &replicas {
        assert_eq!(
            r.raw().cmd(&["REPLICAOF", "127.0.0.1", &mport.to_string()]),
            ok()
        );
        wait_key(r, "before", "1");
    }
    m.raw().cmd(&["SET", "after", "2"]);
    for r in &replicas {
        wait_key(r, "after", "2");
        assert!(text(&r.raw().cmd(&["INFO", "replication"])).contains("master_link_status:up"));
    }
    let Some(bin) = &redis else { return };
    let (rm, rmport) = t.server_bin(bin, &[]);
    rm.raw().cmd(&["SET", "from-redis", "3"]);
    let (r, _) = t.server(&[("tls-replication", "yes")]);
    assert_eq!(
        r.raw()
            .cmd(&["REPLICAOF", "127.0.0.1", &rmport.to_string()]),
        ok()
    );
    wait_key(&r, "from-redis", "3");
    rm.raw().cmd(&["SET", "streamed", "4"]);
    wait_key(&r, "streamed", "4");
}

/// How the handshake of a new connection with `cfg` went, after a PING
/// (which also takes in the server's session tickets).
async fn handshake_kind(cfg: Arc<rustls::ClientConfig>, port: u16) -> rustls::HandshakeKind {
    let mut c = connect(cfg, port).await.unwrap();
    let r = exchange(&mut c, &encode(&["PING"]), 1).await.unwrap();
    assert_eq!(r, [simple("PONG")]);
    c.get_ref().1.handshake_kind().unwrap()
}

#[test]
fn sessions_resume_as_the_cache_options_say() {
    use rustls::HandshakeKind::{Full, Resumed};
    let t = Tls::new();
    let (s, port) = t.server(&[("tls-session-cache-timeout", "1")]);
    let rt = rt();
    let cfg = t.client_config("ca", Some("ca-client"));
    rt.block_on(async {
        assert_eq!(handshake_kind(cfg.clone(), port).await, Full);
        assert_eq!(handshake_kind(cfg.clone(), port).await, Resumed);
        // Past tls-session-cache-timeout the session is gone.
        tokio::time::sleep(Duration::from_millis(2500)).await;
        assert_eq!(handshake_kind(cfg.clone(), port).await, Full);
    });
    // Redis's OpenSSL still hands out tickets with caching off, and answers
    // one offered back with an internal_error alert.
    if is_real_redis() {
        return;
    }
    assert_eq!(
        s.raw().cmd(&["CONFIG", "SET", "tls-session-caching", "no"]),
        ok()
    );
    let cfg = t.client_config("ca", Some("ca-client"));
    rt.block_on(async {
        assert_eq!(handshake_kind(cfg.clone(), port).await, Full);
        assert_eq!(handshake_kind(cfg.clone(), port).await, Full);
    });
}

/// The suite a client with `cfg` negotiates (and gets PONG with), or None
/// when the server refuses the handshake.
async fn negotiated(cfg: Arc<rustls::ClientConfig>, port: u16) -> Option<rustls::CipherSuite> {
    let mut c = connect(cfg, port).await.ok()?;
    let r = exchange(&mut c, &encode(&["PING"]), 1).await.ok()?;
    assert_eq!(r, [simple("PONG")]);
    Some(c.get_ref().1.negotiated_cipher_suite()?.suite())
}

#[test]
fn protocols_and_ciphers_decide_what_a_client_negotiates() {
    use rustls::crypto::ring::cipher_suite as cs;
    use rustls::version::{TLS12, TLS13};
    let t = Tls::new();
    let (s, port) = t.server(&[
        ("tls-auth-clients", "no"),
        ("tls-protocols", "TLSv1.2"),
        (
            "tls-ciphers",
            "ECDHE-RSA-AES256-GCM-SHA384:ECDHE-RSA-AES128-GCM-SHA256",
        ),
    ]);
    let mut admin = s.raw();
    let (aes256, aes128) = (
        cs::TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
        cs::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
    );
    let (aes256_13, aes128_13, chacha_13) = (
        cs::TLS13_AES_256_GCM_SHA384,
        cs::TLS13_AES_128_GCM_SHA256,
        cs::TLS13_CHACHA20_POLY1305_SHA256,
    );
    let offer = |v: &'static rustls::SupportedProtocolVersion, suites: &[_]| {
        t.client_with("ca", None, &[v], suites)
    };
    let rt = rt();
    rt.block_on(async {
        // tls-protocols: no TLS 1.3; tls-ciphers: only the two listed.
        assert_eq!(negotiated(offer(&TLS13, &[aes256_13]), port).await, None);
        let chacha = cs::TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256;
        assert_eq!(negotiated(offer(&TLS12, &[chacha]), port).await, None);
        // The client's order wins, unless the server prefers its own.
        let both = offer(&TLS12, &[aes128, aes256]);
        assert_eq!(negotiated(both.clone(), port).await, Some(aes128.suite()));
        assert_eq!(
            admin.cmd(&["CONFIG", "SET", "tls-prefer-server-ciphers", "yes"]),
            ok()
        );
        assert_eq!(negotiated(both, port).await, Some(aes256.suite()));
        // TLS 1.3 only, and tls-ciphersuites choose its suites.
        assert_eq!(
            admin.cmd(&[
                "CONFIG",
                "SET",
                "tls-protocols",
                "TLSv1.3",
                "tls-ciphersuites",
                "TLS_AES_128_GCM_SHA256:TLS_CHACHA20_POLY1305_SHA256"
            ]),
            ok()
        );
        assert_eq!(negotiated(offer(&TLS12, &[aes256]), port).await, None);
        assert_eq!(negotiated(offer(&TLS13, &[aes256_13]), port).await, None);
        let both = offer(&TLS13, &[chacha_13, aes128_13]);
        assert_eq!(
            negotiated(both.clone(), port).await,
            Some(aes128_13.suite())
        );
        assert_eq!(
            admin.cmd(&["CONFIG", "SET", "tls-prefer-server-ciphers", "no"]),
            ok()
        );
        assert_eq!(negotiated(both, port).await, Some(chacha_13.suite()));
    });
}

#[test]
fn a_hashed_ca_directory_is_read_at_each_handshake() {
    let t = Tls::new();
    let dir = t.dir.path().join("cas");
    std::fs::create_dir(&dir).unwrap();
    let dir = dir.to_string_lossy().into_owned();
    let (s, port) = t.server(&[]);
    // An empty directory is a valid one: it trusts nobody yet.
    assert_eq!(
        s.raw().cmd(&[
            "CONFIG",
            "SET",
            "tls-ca-cert-file",
            "",
            "tls-ca-cert-dir",
            &dir
        ]),
        ok()
    );
    let rt = rt();
    let ca_client = t.client_config("ca", Some("ca-client"));
    assert!(!rt.block_on(pings(ca_client.clone(), port)));
    // OpenSSL looks CAs up by their subject's hash: a file under another
    // name is not read, and one linked in later is, with no reload.
    std::fs::copy(t.file("ca.crt"), format!("{dir}/ca.crt")).unwrap();
    assert!(!rt.block_on(pings(ca_client.clone(), port)));
    openssl(t.dir.path(), &["rehash", &dir]);
    assert!(rt.block_on(pings(ca_client, port)));
    assert!(!rt.block_on(pings(t.client_config("ca", Some("other-client")), port)));
    assert!(!rt.block_on(pings(t.client_config("ca", None), port)));
}

#[test]
fn an_encrypted_client_key_opens_with_its_pass() {
    // The replica's outgoing link shows `tls-client-cert-file`, whose key
    // is encrypted; the master asks for a certificate.
    let t = Tls::new();
    let enc = t.file("ca-client.enc.key");
    openssl(
        t.dir.path(),
        &[
            "rsa",
            "-in",
            &t.file("ca-client.key"),
            "-out",
            &enc,
            "-aes256",
            "-passout",
            "pass:secret",
        ],
    );
    let (m, mport) = t.server(&[]);
    m.raw().cmd(&["SET", "k", "1"]);
    let cert = t.file("ca-client.crt");
    let (r, _) = t.server(&[
        ("tls-replication", "yes"),
        ("tls-client-cert-file", &cert),
        ("tls-client-key-file", &enc),
        ("tls-client-key-file-pass", "secret"),
    ]);
    let mut c = r.raw();
    assert_eq!(c.cmd(&["REPLICAOF", "127.0.0.1", &mport.to_string()]), ok());
    wait_key(&r, "k", "1");
    // A wrong pass cannot open the key, and the context stays.
    assert_eq!(
        c.cmd(&["CONFIG", "SET", "tls-client-key-file-pass", "wrong"]),
        err("ERR CONFIG SET failed (possibly related to argument 'tls-client-key-file-pass') - Unable to update TLS configuration. Check server logs.")
    );
    wait_log(&r, &format!("Failed to load private key: {enc}: "));
    m.raw().cmd(&["SET", "k", "2"]);
    wait_key(&r, "k", "2");
}

#[test]
fn a_session_cache_of_one_still_resumes_every_ticket() {
    use rustls::client::{Resumption, Tls12Resumption};
    use rustls::HandshakeKind::{Full, Resumed};
    let t = Tls::new();
    let (_s, port) = t.server(&[("tls-session-cache-size", "1")]);
    let rt = rt();
    let ring = rustls::crypto::ring::default_provider();
    let client = |v: &'static rustls::SupportedProtocolVersion| {
        t.client_with("ca", Some("ca-client"), &[v], &ring.cipher_suites)
    };
    rt.block_on(async {
        // Redis's OpenSSL keeps the session in the ticket, not in its
        // cache: three clients in turn all resume, in TLS 1.3 and 1.2.
        for v in [&rustls::version::TLS13, &rustls::version::TLS12] {
            let clients = [client(v), client(v), client(v)];
            for c in &clients {
                assert_eq!(handshake_kind(c.clone(), port).await, Full);
            }
            for c in &clients {
                assert_eq!(handshake_kind(c.clone(), port).await, Resumed);
            }
        }
        // A TLS 1.2 client offering a session id alone never resumes.
        let mut cfg = (*client(&rustls::version::TLS12)).clone();
        cfg.resumption =
            Resumption::in_memory_sessions(8).tls12_resumption(Tls12Resumption::SessionIdOnly);
        let cfg = Arc::new(cfg);
        assert_eq!(handshake_kind(cfg.clone(), port).await, Full);
        assert_eq!(handshake_kind(cfg, port).await, Full);
    });
}

#[test]
fn dh_params_files_are_checked_as_redis_checks_them() {
    let t = Tls::new();
    let dir = t.dir.path();
    let (dh3072, dh1024) = (t.file("dh3072.pem"), t.file("dh1024.pem"));
    let named = ["genpkey", "-genparam", "-algorithm", "DH", "-pkeyopt"];
    openssl(
        dir,
        &[&named[..], &["dh_param:ffdhe3072", "-out", &dh3072]].concat(),
    );
    openssl(dir, &["dhparam", "-out", &dh1024, "1024"]);
    let (s, port) = t.server(&[("tls-auth-clients", "no")]);
    let mut admin = s.raw();
    // Refused: under OpenSSL's 2048 bits, and a file of no DH parameters.
    for (file, line) in [
        (
            dh1024.clone(),
            format!("Failed to load DH params file: {dh1024}: "),
        ),
        (
            t.file("ca.crt"),
            format!("{}: failed to read DH params.", t.file("ca.crt")),
        ),
    ] {
        assert_eq!(
            admin.cmd(&["CONFIG", "SET", "tls-dh-params-file", &file]),
            err("ERR CONFIG SET failed (possibly related to argument 'tls-dh-params-file') - Unable to update TLS configuration. Check server logs.")
        );
        wait_log(&s, &line);
    }
    wait_log(&s, "dh key too small");
    assert_eq!(
        admin.cmd(&["CONFIG", "SET", "tls-dh-params-file", &dh3072]),
        ok()
    );
    // A client offering only a DHE suite: Redis's OpenSSL uses the file's
    // group; rustls has no DHE suites, so cinnabar refuses the handshake.
    let out = Command::new("openssl")
        .args(["s_client", "-connect", &format!("127.0.0.1:{port}")])
        .args(["-CAfile", &t.file("ca.crt"), "-tls1_2"])
        .args(["-cipher", "DHE-RSA-AES256-GCM-SHA384"])
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let out =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    let want = match is_real_redis() {
        true => "Server Temp Key: DH, 3072 bits",
        false => "alert handshake failure",
    };
    assert!(out.contains(want), "{out}");
}
