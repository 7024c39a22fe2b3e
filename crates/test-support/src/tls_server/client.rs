//! The client side of the test server: one raw HTTP/1.1 request on a new TLS
//! connection, and what the server answered.

use std::net::SocketAddr;
use std::sync::Arc;

use rustls::ClientConfig;
use rustls_pki_types::ServerName;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::Reply;

/// One raw HTTP/1.1 request on a new TLS connection to `addr` (server name
/// `127.0.0.1`): the status code and body, or why it failed (`handshake: ...` when
/// the handshake failed, `read: ...` when the server refused after it, e.g. a client
/// certificate it does not trust).
pub async fn request(config: Arc<ClientConfig>, addr: SocketAddr) -> Result<Reply, String> {
    request_as(config, addr, "127.0.0.1").await
}

/// [`request`] with another server name (SNI and the name the client verifies).
pub async fn request_as(
    config: Arc<ClientConfig>,
    addr: SocketAddr,
    server_name: &str,
) -> Result<Reply, String> {
    let tcp = TcpStream::connect(addr)
        .await
        .map_err(|e| format!("connect: {e}"))?;
    let _ = tcp.set_nodelay(true);
    let name = ServerName::try_from(server_name.to_owned()).map_err(|e| e.to_string())?;
    let mut tls = tokio_rustls::TlsConnector::from(config)
        .connect(name, tcp)
        .await
        .map_err(|e| format!("handshake: {e}"))?;
    let head = format!("GET / HTTP/1.1\r\nhost: {server_name}\r\nconnection: close\r\n\r\n");
    tls.write_all(head.as_bytes())
        .await
        .map_err(|e| format!("write: {e}"))?;
    let mut response = Vec::new();
    tls.read_to_end(&mut response)
        .await
        .map_err(|e| format!("read: {e}"))?;
    let response = String::from_utf8_lossy(&response);
    let (head, body) = response
        .split_once("\r\n\r\n")
        .ok_or_else(|| format!("no body in {response:?}"))?;
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| format!("no status in {head:?}"))?;
    Ok(Reply {
        status,
        body: body.to_owned(),
    })
}

/// One request on a new connection: the serial of the client leaf the server saw.
pub async fn request_serial(config: Arc<ClientConfig>, addr: SocketAddr) -> Result<u64, String> {
    let reply = request(config, addr).await?;
    if reply.status != 200 {
        return Err(format!("status {}: {}", reply.status, reply.body));
    }
    reply
        .body
        .trim()
        .parse()
        .map_err(|e| format!("serial {:?}: {e}", reply.body))
}
