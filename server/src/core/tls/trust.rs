//! Whom a TLS context trusts, and the tickets its sessions resume from:
//! the parts of OpenSSL's behaviour rustls does not have as Redis sets
//! OpenSSL up.

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::server::ProducesTickets;
use rustls::{CertificateError, DigitallySignedStruct, DistinguishedName, Error, RootCertStore};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

/// `tls-ca-cert-file`'s CAs, read once, and `tls-ca-cert-dir`, read at
/// each verification as OpenSSL's hashed-directory lookup reads it: only
/// files named `<hash>.<n>` (`openssl rehash`), and a CA linked in later
/// is trusted without a reload.
#[derive(Debug)]
pub struct Trust {
    file: Vec<CertificateDer<'static>>,
    dir: String,
    provider: Arc<CryptoProvider>,
    /// Whether a client must show a certificate (`tls-auth-clients yes`).
    pub mandatory: bool,
}

impl Trust {
    pub fn new(
        file: Vec<CertificateDer<'static>>,
        dir: &str,
        provider: Arc<CryptoProvider>,
    ) -> Trust {
        Trust {
            file,
            dir: dir.to_string(),
            provider,
            mandatory: true,
        }
    }

    fn roots(&self) -> Result<Arc<RootCertStore>, Error> {
        let mut roots = RootCertStore::empty();
        roots.add_parsable_certificates(self.file.iter().cloned());
        if !self.dir.is_empty() {
            // A directory that does not exist adds none, as OpenSSL's
            // lookup finds none there.
            for entry in std::fs::read_dir(&self.dir).into_iter().flatten().flatten() {
                if hashed_name(&entry.file_name().to_string_lossy()) {
                    if let Ok(certs) = load_certs(&entry.path().to_string_lossy()) {
                        roots.add_parsable_certificates(certs);
                    }
                }
            }
        }
        if roots.is_empty() {
            return Err(Error::InvalidCertificate(CertificateError::UnknownIssuer));
        }
        Ok(Arc::new(roots))
    }

    fn schemes(&self) -> &rustls::crypto::WebPkiSupportedAlgorithms {
        &self.provider.signature_verification_algorithms
    }
}

/// `XXXXXXXX.N`: eight hex digits of the subject's hash and a number.
fn hashed_name(name: &str) -> bool {
    match name.split_once('.') {
        Some((hash, n)) => {
            hash.len() == 8
                && hash.bytes().all(|b| b.is_ascii_hexdigit())
                && !n.is_empty()
                && n.bytes().all(|b| b.is_ascii_digit())
        }
        None => false,
    }
}

fn general(e: impl std::fmt::Display) -> Error {
    Error::General(e.to_string())
}

impl ClientCertVerifier for Trust {
    /// Redis names no CAs in its certificate request.
    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        &[]
    }

    fn client_auth_mandatory(&self) -> bool {
        self.mandatory
    }

    fn verify_client_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        now: UnixTime,
    ) -> Result<ClientCertVerified, Error> {
        rustls::server::WebPkiClientVerifier::builder_with_provider(
            self.roots()?,
            self.provider.clone(),
        )
        .build()
        .map_err(general)?
        .verify_client_cert(end_entity, intermediates, now)
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, self.schemes())
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, self.schemes())
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.schemes().supported_schemes()
    }
}

/// A master's or a peer node's certificate chain is verified, not its name
/// (OpenSSL as Redis sets it up checks no host name).
impl ServerCertVerifier for Trust {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, Error> {
        use CertificateError::{NotValidForName, NotValidForNameContext};
        let v = rustls::client::WebPkiServerVerifier::builder_with_provider(
            self.roots()?,
            self.provider.clone(),
        )
        .build()
        .map_err(general)?;
        match v.verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now) {
            Err(Error::InvalidCertificate(NotValidForName | NotValidForNameContext { .. })) => {
                Ok(ServerCertVerified::assertion())
            }
            r => r,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, self.schemes())
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, self.schemes())
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.schemes().supported_schemes()
    }
}

/// Stateless session tickets, as Redis's OpenSSL resumes sessions: the
/// session travels in the ticket, so no server-side cache bounds how many
/// resume (`tls-session-cache-size` changes nothing a client sees), and a
/// ticket older than `tls-session-cache-timeout` starts a full handshake.
#[derive(Debug)]
pub struct Tickets {
    inner: Arc<dyn ProducesTickets>,
    timeout: Duration,
}

impl Tickets {
    pub fn new(timeout: Duration) -> Result<Tickets, String> {
        Ok(Tickets {
            inner: rustls::crypto::ring::Ticketer::new().map_err(|e| e.to_string())?,
            timeout,
        })
    }
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

impl ProducesTickets for Tickets {
    fn enabled(&self) -> bool {
        true
    }

    /// The hint OpenSSL gives: the session timeout.
    fn lifetime(&self) -> u32 {
        self.timeout.as_secs().min(u32::MAX as u64) as u32
    }

    fn encrypt(&self, plain: &[u8]) -> Option<Vec<u8>> {
        let mut stamped = now_ms().to_be_bytes().to_vec();
        stamped.extend_from_slice(plain);
        self.inner.encrypt(&stamped)
    }

    fn decrypt(&self, cipher: &[u8]) -> Option<Vec<u8>> {
        let mut plain = self.inner.decrypt(cipher)?;
        let made = u64::from_be_bytes(plain.get(..8)?.try_into().ok()?);
        let age = Duration::from_millis(now_ms().saturating_sub(made));
        (age < self.timeout).then(|| plain.split_off(8))
    }
}

fn pem_err(e: rustls::pki_types::pem::Error) -> String {
    match e {
        rustls::pki_types::pem::Error::Io(e) => crate::core::os::strerror(&e),
        e => format!("{e:?}"),
    }
}

pub fn load_certs(path: &str) -> Result<Vec<CertificateDer<'static>>, String> {
    let certs = CertificateDer::pem_file_iter(path)
        .map_err(pem_err)?
        .collect::<Result<Vec<_>, _>>()
        .map_err(pem_err)?;
    if certs.is_empty() {
        return Err("no certificate found".into());
    }
    Ok(certs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hashed_names() {
        assert!(hashed_name("72c434d2.0"));
        assert!(hashed_name("72C434D2.12"));
        assert!(!hashed_name("ca.crt"));
        assert!(!hashed_name("72c434d2.r0"));
        assert!(!hashed_name("72c434d2"));
    }

    #[test]
    fn tickets_expire() {
        let t = Tickets::new(Duration::from_secs(300)).unwrap();
        let c = t.encrypt(b"session").unwrap();
        assert_eq!(t.decrypt(&c).unwrap(), b"session");
        let t0 = Tickets {
            inner: t.inner.clone(),
            timeout: Duration::ZERO,
        };
        assert_eq!(t0.decrypt(&c), None);
    }
}
