//! Gateways that are not ours in front of the server, each terminating its caller's
//! mTLS, forwarding the caller's certificate in its own header format, and calling
//! the service over mTLS with a certificate of its own: Debian's nginx
//! (`proxy_ssl_certificate`, `$ssl_client_escaped_cert`) and Debian's HAProxy
//! (`server ... ssl crt`, `%[ssl_c_der,base64]`). The forwarded certificate is read
//! only on an allowed gateway's connection; a forged one is refused directly and
//! through each gateway.

use std::path::Path;
use std::process::{Child, Command, Stdio};

use super::*;
use svc_tls::receiving::AllowedPeer;
use svc_tls::serving::{ForwardedFormat, Gateways};
use test_support::poll_until;

/// A gateway process on a loopback port, killed on drop.
struct Gateway {
    child: Child,
    port: u16,
    _dir: tempfile::TempDir,
    _nginx: Option<test_support::nginx::Nginx>,
    /// The gateway's log file, when it is not nginx.
    log: Option<std::path::PathBuf>,
}

impl Gateway {
    /// The gateway's own log, for failure messages.
    fn log(&self) -> String {
        match (&self._nginx, &self.log) {
            (Some(nginx), _) => nginx.error_log(),
            (None, Some(path)) => std::fs::read_to_string(path).unwrap_or_default(),
            (None, None) => String::new(),
        }
    }
}

impl Drop for Gateway {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A directory gateways running as another user can read.
fn readable_dir() -> tempfile::TempDir {
    use std::os::unix::fs::PermissionsExt as _;
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    dir
}

fn write(dir: &Path, name: &str, text: &str) -> String {
    use std::os::unix::fs::PermissionsExt as _;
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
    path.display().to_string()
}

/// nginx terminating the caller's mTLS (client CA `client_ca`), forwarding its
/// certificate as ingress-nginx does and calling `upstream` with `identity`.
fn nginx(s: &Served, identity: &Leaf) -> Gateway {
    let dir = readable_dir();
    let d = dir.path();
    let (crt, key, upstream_ca) = (
        write(d, "gw.crt", &identity.cert_pem),
        write(d, "gw.key", &identity.key_pem),
        write(d, "upstream-ca.crt", &s.server_ca.pem()),
    );
    let location = format!(
        "proxy_pass https://127.0.0.1:{port};
            proxy_ssl_certificate {crt};
            proxy_ssl_certificate_key {key};
            proxy_ssl_trusted_certificate {upstream_ca};
            proxy_ssl_verify on;
            proxy_ssl_name localhost;
            proxy_set_header ssl-client-cert $ssl_client_escaped_cert;",
        port = s.port
    );
    let front = server_leaf(&s.server_ca, 0x60);
    let nginx =
        test_support::nginx::Nginx::start(&front, &s.client_ca.pem(), "optional", &location);
    let port: u16 = nginx.url("").rsplit(':').next().unwrap().parse().unwrap();
    // The Nginx helper owns the process; a sleeper stands for the child handle.
    let child = Command::new("sleep").arg("3600").spawn().unwrap();
    Gateway {
        child,
        port,
        _dir: dir,
        _nginx: Some(nginx),
        log: None,
    }
}

/// HAProxy terminating the caller's mTLS, forwarding its certificate as base64 DER in
/// `X-SSL-Client-Cert`, and calling `upstream` with `identity`.
async fn haproxy(s: &Served, identity: &Leaf) -> Gateway {
    let dir = readable_dir();
    let d = dir.path();
    let front = server_leaf(&s.server_ca, 0x61);
    let (front_pem, client_pem, client_ca, upstream_ca) = (
        write(
            d,
            "front.pem",
            &format!("{}{}", front.cert_pem, front.key_pem),
        ),
        write(
            d,
            "gw.pem",
            &format!("{}{}", identity.cert_pem, identity.key_pem),
        ),
        write(d, "client-ca.crt", &s.client_ca.pem()),
        write(d, "upstream-ca.crt", &s.server_ca.pem()),
    );
    let port = free_port();
    let config = format!(
        "defaults
    mode http
    timeout connect 5s
    timeout client 30s
    timeout server 30s
frontend fe
    bind 127.0.0.1:{port} ssl crt {front_pem} ca-file {client_ca} verify optional
    http-request del-header X-SSL-Client-Cert
    http-request set-header X-SSL-Client-Cert %[ssl_c_der,base64] if {{ ssl_c_used }}
    default_backend be
backend be
    server app 127.0.0.1:{upstream} ssl crt {client_pem} ca-file {upstream_ca} verify required
",
        upstream = s.port
    );
    let config_path = write(d, "haproxy.cfg", &config);
    let binary = ["/usr/sbin/haproxy", "/usr/bin/haproxy"]
        .into_iter()
        .find(|p| Path::new(p).exists())
        .expect("HAProxy is installed (Debian's haproxy; cargo xtask test installs it)");
    let log = std::fs::File::create(d.join("gateway.log")).unwrap();
    let child = Command::new(binary)
        .args(["-db", "-f", &config_path])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .unwrap();
    poll_until("HAProxy listens", || {
        std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
    })
    .await;
    Gateway {
        child,
        port,
        log: Some(dir.path().join("gateway.log")),
        _dir: dir,
        _nginx: None,
    }
}

/// The gateway's own client certificate: CN `gateway`, issued by the client CA.
fn gateway_identity(s: &Served, cn: &str) -> Leaf {
    s.client_ca.client_leaf(cn, 0x70)
}

fn allowing(cn: &str, format: ForwardedFormat) -> Option<Gateways> {
    Some(Gateways::new([AllowedPeer::common_name(cn)], format))
}

/// Through `gateway`, a caller with its own certificate is served as itself (via the
/// gateway) and its signed principal is accepted; a forged forwarded header from that
/// caller is replaced by the gateway; a caller without a certificate has no caller.
async fn through(s: &Served, gateway: &Gateway) {
    let leaf = s.client_ca.client_leaf("region", 7);
    let victim = s.client_ca.client_leaf("admin-service", 8);
    let signed = signed_principal(&leaf, "alice");
    let answer = request(
        gateway.port,
        client_config(&s.server_ca, Some(&leaf)),
        &[("X-Principal", signed.as_str())],
    )
    .await
    .unwrap();
    assert!(
        answer.body.starts_with("serial=07 via=70 ") && answer.body.contains("principal=ok:alice"),
        "{} (forwarded certificates: {} accepted, {} refused, {} removed)\n{}",
        answer.body,
        s.tls.accepted_forwarded_certificates(),
        s.tls.refused_forwarded_certificates(),
        s.tls.removed_forwarded_headers(),
        gateway.log()
    );
    assert!(answer.body.ends_with("forwarded=false"), "{}", answer.body);

    let forged = forged_headers(&victim);
    let headers: Vec<(&str, &str)> = forged.iter().map(|(n, v)| (*n, v.as_str())).collect();
    let answer = request(
        gateway.port,
        client_config(&s.server_ca, Some(&leaf)),
        &headers,
    )
    .await
    .unwrap();
    assert!(
        answer.body.starts_with("serial=07 via=70 ")
            && answer.body.contains("principal=refused:Verify"),
        "a forged header through the gateway: {}",
        answer.body
    );
    let answer = request(gateway.port, client_config(&s.server_ca, None), &headers)
        .await
        .unwrap();
    assert!(
        answer.body.starts_with("serial=none ")
            && answer.body.contains("principal=refused:NoCaller"),
        "a caller without a certificate, forging one, through the gateway: {}",
        answer.body
    );
    assert!(s.tls.accepted_forwarded_certificates() >= 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn behind_nginx_the_caller_is_the_certificate_nginx_verified_and_forwarded() {
    let s = serve_with(
        ClientAuth::Required,
        allowing("gateway", ForwardedFormat::NginxEscapedPem),
    )
    .await;
    let gateway = nginx(&s, &gateway_identity(&s, "gateway"));
    through(&s, &gateway).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn behind_haproxy_the_caller_is_the_certificate_haproxy_verified_and_forwarded() {
    let s = serve_with(
        ClientAuth::Required,
        allowing(
            "gateway",
            ForwardedFormat::Base64Der {
                header: "x-ssl-client-cert".into(),
            },
        ),
    )
    .await;
    let gateway = haproxy(&s, &gateway_identity(&s, "gateway")).await;
    through(&s, &gateway).await;
}

/// A gateway whose certificate is not on the allow-list forwards nothing: its
/// header is removed and counted, and the request's caller is the gateway itself,
/// so a principal the original caller signed is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gateway_not_on_the_allow_list_forwards_no_caller() {
    let s = serve_with(
        ClientAuth::Required,
        allowing("gateway", ForwardedFormat::NginxEscapedPem),
    )
    .await;
    let gateway = nginx(&s, &gateway_identity(&s, "stranger-gateway"));
    let leaf = s.client_ca.client_leaf("region", 7);
    let signed = signed_principal(&leaf, "alice");
    let answer = request(
        gateway.port,
        client_config(&s.server_ca, Some(&leaf)),
        &[("X-Principal", signed.as_str())],
    )
    .await
    .unwrap();
    assert!(
        answer.body.starts_with("serial=70 via=none ")
            && answer.body.contains("principal=refused:Verify"),
        "{}",
        answer.body
    );
    assert_eq!(s.tls.removed_forwarded_headers(), 1);
    assert_eq!(s.tls.accepted_forwarded_certificates(), 0);
}

/// An allowed gateway that forwards a certificate the client CA does not verify (a
/// self-made one, as a compromised gateway or a forger behind one would): refused and
/// counted, the request has no caller.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_allowed_gateways_forwarded_certificate_must_verify_against_the_client_ca() {
    let s = serve_with(
        ClientAuth::Required,
        allowing(
            "gateway",
            ForwardedFormat::Base64Der {
                header: "x-ssl-client-cert".into(),
            },
        ),
    )
    .await;
    // The gateway's own connection, sending the header itself.
    let gateway = gateway_identity(&s, "gateway");
    let forged = TestCa::new("self-made").client_leaf("admin-service", 8);
    let der = base64::Engine::encode(&base64::engine::general_purpose::STANDARD, &forged.der);
    let answer = request(
        s.port,
        client_config(&s.server_ca, Some(&gateway)),
        &[("x-ssl-client-cert", der.as_str())],
    )
    .await
    .unwrap();
    assert!(answer.body.starts_with("serial=none "), "{}", answer.body);
    assert_eq!(s.tls.refused_forwarded_certificates(), 1);
}

/// Envoy's `x-forwarded-client-cert` (Envoy Gateway, Istio), in the shape Envoy's
/// documentation gives (`By`, `Hash`, `Cert` URL-escaped, a quoted `Subject` with
/// commas, `URI`), with an earlier hop's element before the nearest hop's: the
/// caller is the nearest hop's `Cert`. No Envoy binary is served here, so the
/// gateway's connection is ours, presenting the allowed gateway identity.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn behind_envoy_the_caller_is_the_nearest_hops_xfcc_certificate() {
    let s = serve_with(
        ClientAuth::Required,
        allowing("gateway", ForwardedFormat::EnvoyXfcc),
    )
    .await;
    let gateway = gateway_identity(&s, "gateway");
    let earlier = s.client_ca.client_leaf("earlier-hop", 0x11);
    let caller = s.client_ca.client_leaf("region", 7);
    let escape = |leaf: &Leaf| {
        percent_encoding::utf8_percent_encode(&leaf.cert_pem, percent_encoding::NON_ALPHANUMERIC)
            .to_string()
    };
    let xfcc = format!(
        "By=spiffe://cluster.local/ns/edge/sa/gw;Hash=468ed33be74eee6556d90c0149c1309e9ba61d6425303443c0748a02dd8de688;\
         Cert=\"{}\";Subject=\"/C=US/ST=CA/L=San Francisco/OU=Lyft/CN=earlier, hop\";URI=spiffe://lyft.com/earlier,\
         By=spiffe://cluster.local/ns/unikorn/sa/identity;Hash=00;Cert=\"{}\";Subject=\"CN=region\";URI=",
        escape(&earlier),
        escape(&caller)
    );
    let signed = signed_principal(&caller, "alice");
    let answer = request(
        s.port,
        client_config(&s.server_ca, Some(&gateway)),
        &[
            ("x-forwarded-client-cert", xfcc.as_str()),
            ("X-Principal", signed.as_str()),
        ],
    )
    .await
    .unwrap();
    assert!(
        answer.body.starts_with("serial=07 via=70 ") && answer.body.contains("principal=ok:alice"),
        "{}",
        answer.body
    );
    // An element without a Cert field: refused and counted, no caller.
    let answer = request(
        s.port,
        client_config(&s.server_ca, Some(&gateway)),
        &[(
            "x-forwarded-client-cert",
            "By=spiffe://x;Hash=00;Subject=\"CN=admin\"",
        )],
    )
    .await
    .unwrap();
    assert!(answer.body.starts_with("serial=none "), "{}", answer.body);
    assert_eq!(s.tls.refused_forwarded_certificates(), 1);
}

/// The Caddy `cargo xtask real-peers` built (Caddy v2 with its standard modules).
fn caddy_binary() -> std::path::PathBuf {
    const GO_MOD: &str = include_str!("../../../../xtask/real-peers/caddy/go.mod");
    let version = GO_MOD
        .lines()
        .find_map(|line| {
            let mut words = line.trim().trim_start_matches("require").split_whitespace();
            (words.next()? == "github.com/caddyserver/caddy/v2").then(|| words.next())?
        })
        .expect("xtask/real-peers/caddy/go.mod requires Caddy");
    let root = std::env::var_os("PLATFORM_CLIENT_REAL_PEERS").map_or_else(
        || {
            std::path::PathBuf::from(std::env::var_os("HOME").unwrap_or_default())
                .join(".cache/platform-client/real-peers")
        },
        std::path::PathBuf::from,
    );
    let path = root.join(format!("caddy-{version}/bin/caddy"));
    assert!(
        path.is_file(),
        "Caddy {version} is not built on this machine (no {}): run `cargo xtask real-peers` \
         (cargo xtask test does)",
        path.display()
    );
    path
}

/// Caddy terminating the caller's mTLS, forwarding its certificate as base64 DER in
/// `X-SSL-Client-Cert`, and calling the service over mTLS with `identity`. (The test
/// callers connect to an IP address, which TLS sends no SNI for: `default_sni` makes
/// Caddy apply the site's connection policy, client authentication included, to
/// them, and strict SNI-Host checking is off.)
async fn caddy(s: &Served, identity: &Leaf) -> Gateway {
    let dir = readable_dir();
    let d = dir.path();
    let front = server_leaf(&s.server_ca, 0x62);
    let (front_crt, front_key, gw_crt, gw_key, client_ca, upstream_ca) = (
        write(d, "front.crt", &front.cert_pem),
        write(d, "front.key", &front.key_pem),
        write(d, "gw.crt", &identity.cert_pem),
        write(d, "gw.key", &identity.key_pem),
        write(d, "client-ca.crt", &s.client_ca.pem()),
        write(d, "upstream-ca.crt", &s.server_ca.pem()),
    );
    let port = free_port();
    let caddyfile = format!(
        "{{
    admin off
    auto_https off
    storage file_system {data}
    default_sni 127.0.0.1
    servers {{
        strict_sni_host insecure_off
    }}
}}
https://127.0.0.1:{port} {{
    tls {front_crt} {front_key} {{
        client_auth {{
            mode verify_if_given
            trust_pool file {client_ca}
        }}
    }}
    reverse_proxy https://127.0.0.1:{upstream} {{
        header_up X-SSL-Client-Cert {{http.request.tls.client.certificate_der_base64}}
        transport http {{
            tls_client_auth {gw_crt} {gw_key}
            tls_trust_pool file {upstream_ca}
            tls_server_name localhost
        }}
    }}
}}
",
        data = d.join("data").display(),
        upstream = s.port
    );
    let config = write(d, "Caddyfile", &caddyfile);
    let log = std::fs::File::create(d.join("gateway.log")).unwrap();
    let child = Command::new(caddy_binary())
        .args(["run", "--adapter", "caddyfile", "--config", &config])
        .env("HOME", d)
        .env("XDG_DATA_HOME", d.join("data"))
        .env("XDG_CONFIG_HOME", d.join("config"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .unwrap();
    poll_until("Caddy listens", || {
        std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
    })
    .await;
    Gateway {
        child,
        port,
        log: Some(dir.path().join("gateway.log")),
        _dir: dir,
        _nginx: None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn behind_caddy_the_caller_is_the_certificate_caddy_verified_and_forwarded() {
    let s = serve_with(
        ClientAuth::Required,
        allowing(
            "gateway",
            ForwardedFormat::Base64Der {
                header: "x-ssl-client-cert".into(),
            },
        ),
    )
    .await;
    let gateway = caddy(&s, &gateway_identity(&s, "gateway")).await;
    through(&s, &gateway).await;
}
