//! The parts of a [`Report`](super::Report): one type per check's result.

use serde::Serialize;

use super::Problem;

/// One X.509 certificate, described.
#[derive(Debug, Clone, Default, Serialize)]
pub struct CertificateInfo {
    /// The subject distinguished name.
    pub subject: String,
    /// The issuer distinguished name.
    pub issuer: String,
    /// The serial number, lowercase hex.
    pub serial: String,
    /// Subject alternative names, each as `DNS:…`, `IP:…`, `URI:…` or `email:…`.
    pub sans: Vec<String>,
    /// The SPIFFE ID (a `spiffe://` URI SAN), if any.
    pub spiffe_id: Option<String>,
    /// `notBefore`, as the certificate writes it (UTC).
    pub not_before: String,
    /// `notBefore`, in Unix seconds.
    pub not_before_unix: i64,
    /// `notAfter`, as the certificate writes it (UTC).
    pub not_after: String,
    /// `notAfter`, in Unix seconds.
    pub not_after_unix: i64,
    /// `valid`, `expired` or `not yet valid`, now.
    pub validity: String,
    /// The public key's type, e.g. `ECDSA P-256`, `RSA`.
    pub key_type: String,
    /// The public key's size in bits.
    pub key_bits: usize,
    /// Whether it is a CA certificate.
    pub is_ca: bool,
}

/// One Secret named by the flags.
#[derive(Debug, Clone, Default, Serialize)]
pub struct SecretReport {
    /// What the service uses it for: `identity`, `peer-ca` or `chain-ca`.
    pub role: String,
    /// The flags that name it, e.g. `--client-certificate-name`.
    pub named_by: String,
    /// Its namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
    /// Whether it was found.
    pub found: bool,
    /// Its `type`.
    pub secret_type: Option<String>,
    /// Its data keys and their sizes in bytes (never their values).
    pub data: Vec<DataKey>,
    /// The certificates of `tls.crt` (leaf first), as far as they parse.
    pub certificates: Vec<CertificateInfo>,
    /// The certificates of `ca.crt`, as far as they parse.
    pub ca_certificates: Vec<CertificateInfo>,
    /// The key type the service's loader found (`RSA-2048`, `ECDSA P-256`, ...), for
    /// an identity it loaded.
    pub loaded_key_type: Option<String>,
    /// Whether `tls.key` belongs to the leaf: known when the loader got that far.
    pub key_matches_certificate: Option<bool>,
    /// How many trust roots the loader took, for a CA Secret it loaded.
    pub roots: Option<usize>,
    /// What the service's loader says: `None` when it loads.
    pub loader_error: Option<Problem>,
    /// The entries holding private key material that the Secret's role does not
    /// need, e.g. `data[tls.key]` or `data[ca.key]` of a CA Secret, or
    /// `annotation kubectl.kubernetes.io/last-applied-configuration: data[tls.key]`
    /// (the copy `kubectl apply` keeps). Empty when none: a CA Secret needs its
    /// certificates only, an identity Secret its `tls.key` only.
    pub private_key_entries: Vec<String>,
}

/// A peer's CA ConfigMap (`--S-ca-configmap-namespace`, `-name`, `-key`), read
/// with svc-tls's own loader (`load_configmap_trust`).
#[derive(Debug, Clone, Default, Serialize)]
pub struct ConfigMapReport {
    /// What the service uses it for: `peer-ca`.
    pub role: String,
    /// The flags that name it, e.g. `--identity-ca-configmap-namespace/-name/-key`.
    pub named_by: String,
    /// Its namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
    /// The data key of the PEM bundle.
    pub key: String,
    /// Whether it was found.
    pub found: bool,
    /// Its keys (`data` and `binaryData`) and their sizes in bytes.
    pub data: Vec<DataKey>,
    /// The certificates of the bundle under `key`, as far as they parse.
    pub certificates: Vec<CertificateInfo>,
    /// How many trust roots the loader took, when it loaded.
    pub roots: Option<usize>,
    /// How many certificates of the bundle are not usable as roots, when it loaded.
    pub ignored_certificates: Option<usize>,
    /// What the service's loader says: `None` when it loads (`kind`: `NotFound`,
    /// `MissingKey`, `EmptyKey`, `TooLarge`, `NotPem`, `NoCertificate`,
    /// `NoUsableRoot`, or `ReadFailed`).
    pub loader_error: Option<Problem>,
    /// The keys holding private key material (a ConfigMap is readable far more
    /// widely than a Secret: none should).
    pub private_key_entries: Vec<String>,
}

/// A data key and the size of its value.
#[derive(Debug, Clone, Serialize)]
pub struct DataKey {
    /// The key, e.g. `tls.crt`.
    pub key: String,
    /// The value's size in bytes.
    pub bytes: usize,
}

/// Whether one identity chains to the chain CA.
#[derive(Debug, Clone, Serialize)]
pub struct ChainReport {
    /// The identity checked (`client-certificate`, or a prefix's flags).
    pub identity: String,
    /// The CA: `secret NAMESPACE/NAME` or `file PATH`.
    pub ca: String,
    /// The subjects of the CA's roots.
    pub roots: Vec<String>,
    /// Whether the chain verified as a client certificate.
    pub ok: bool,
    /// Why not.
    pub error: Option<Problem>,
}

/// One peer's handshake.
#[derive(Debug, Clone, Default, Serialize)]
pub struct PeerReport {
    /// The peer's service name (`--SERVICE-host`).
    pub service: String,
    /// The host URL, with any userinfo (`user:password@`) replaced by `REDACTED@`.
    pub host: String,
    /// The identity presented (`client-certificate`, or a prefix's flags).
    pub identity: String,
    /// What the server is verified against: `ca-secret NAMESPACE/NAME`,
    /// `ca-configmap NAMESPACE/NAME key KEY`, `platform` (the platform's trust
    /// store: no CA flag) or `spiffe SERVER-ID`.
    pub trust: String,
    /// Whether the handshake completed and the peer answered.
    pub ok: bool,
    /// `TLSv1_3`, ...
    pub tls_version: Option<String>,
    /// The key exchange group, e.g. `X25519MLKEM768`.
    pub key_exchange_group: Option<String>,
    /// The negotiated ALPN protocol.
    pub alpn: Option<String>,
    /// The server's chain, leaf first.
    pub server_chain: Vec<CertificateInfo>,
    /// Whether the peer accepted the client certificate (`None` when the handshake
    /// did not get that far).
    pub client_certificate_accepted: Option<bool>,
    /// The HTTP status of the probe request (`GET /`), when the peer answered.
    pub http_status: Option<u16>,
    /// Why it failed, or why it was skipped.
    pub error: Option<Problem>,
    /// True when the peer was not tried (the identity is unusable, or `http://`).
    pub skipped: bool,
}

/// A principal signed and verified.
#[derive(Debug, Clone, Default, Serialize)]
pub struct PrincipalReport {
    /// The identity that signed.
    pub identity: String,
    /// The audience (the first peer's origin, or a placeholder).
    pub audience: String,
    /// `PS512`, `ES256` or `ES384`.
    pub algorithm: Option<String>,
    /// Whether it signed.
    pub signed: bool,
    /// Whether the verifier accepted it against the identity's certificate.
    pub verified: bool,
    /// Why not.
    pub error: Option<Problem>,
}

/// The SPIFFE Workload API, as the agent answers.
#[derive(Debug, Clone, Default, Serialize)]
pub struct SpiffeReport {
    /// The endpoint (`SPIFFE_ENDPOINT_SOCKET`).
    pub endpoint: String,
    /// Which identity's flags asked for it.
    pub identity: String,
    /// The server ID peers are authorized by (`--spiffe-server-id`).
    pub server_id: Option<String>,
    /// Every X509-SVID the agent hands out (the first is the default, the one
    /// presented).
    pub svids: Vec<SvidReport>,
    /// Every trust domain's bundle the agent hands out.
    pub bundles: Vec<BundleReport>,
    /// What the service's loader says about the default SVID: `None` when it loads.
    pub loader_error: Option<Problem>,
    /// Why the agent could not be asked.
    pub error: Option<Problem>,
}

/// One X509-SVID.
#[derive(Debug, Clone, Default, Serialize)]
pub struct SvidReport {
    /// Its SPIFFE ID.
    pub spiffe_id: String,
    /// Its chain, leaf first.
    pub certificates: Vec<CertificateInfo>,
}

/// One trust domain's X.509 bundle.
#[derive(Debug, Clone, Default, Serialize)]
pub struct BundleReport {
    /// The trust domain.
    pub trust_domain: String,
    /// Its authorities.
    pub authorities: Vec<CertificateInfo>,
}

/// An identity read from mounted files (`--[P-]client-certificate-source=file`,
/// `-dir`, `-layout`), read once as the service's file source reads it.
#[derive(Debug, Clone, Default, Serialize)]
pub struct FileSourceReport {
    /// What the service uses it for: `identity`.
    pub role: String,
    /// The flags that name it, e.g. `--client-certificate-dir/-layout`.
    pub named_by: String,
    /// The directory.
    pub dir: String,
    /// The layout's name (`kubernetes-tls`, `csi-driver`, `spiffe-helper`,
    /// `pod-certificate`, `custom`).
    pub layout: String,
    /// The version the kubelet's `..data` link names, when the directory has one.
    pub version: Option<String>,
    /// Each file the layout reads, once (key and chain may be one file).
    pub files: Vec<FileEntry>,
    /// The certificates of the certificate file (leaf first), as far as they parse.
    pub certificates: Vec<CertificateInfo>,
    /// Whether the key belongs to the leaf: known when the loader got that far.
    pub key_matches_certificate: Option<bool>,
    /// What the service's loader says: `None` when it loads.
    pub loader_error: Option<Problem>,
}

/// One file of a [`FileSourceReport`].
#[derive(Debug, Clone, Default, Serialize)]
pub struct FileEntry {
    /// What the layout reads it for: `certificate`, `key`, `certificate and key`
    /// or `ca`.
    pub role: String,
    /// Its path (through `..data` when the directory has one).
    pub path: String,
    /// Whether it was found.
    pub found: bool,
    /// Its size in bytes, when found.
    pub bytes: Option<u64>,
    /// Its PEM sections in order, by label (`CERTIFICATE`; a key said in words,
    /// `key (PKCS#8)`, `key (SEC1 EC)`, `key (PKCS#1 RSA)`; never their contents).
    pub pem_sections: Vec<String>,
}
