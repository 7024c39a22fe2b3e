//! [`PeerRequest`]: a request being built on a [`PeerClient`], whose `send` is the
//! client's, so a request built there cannot leave around the body cap, the per-peer
//! metrics, trace context or the trust-change error.

use std::fmt;
use std::time::Duration;

use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use serde::Serialize;

use super::{PeerClient, PeerRequestError};

/// A request being built on a [`PeerClient`] (from [`PeerClient::get`],
/// [`PeerClient::post`] or [`PeerClient::request`]).
///
/// Its [`send`](Self::send) is [`PeerClient::send`]: the response body capped, the
/// request counted in the peer's series and carried in a client span (when those
/// are configured), a refusal after a trust change reported as
/// [`PeerRequestError::TrustChanged`]. The common builder steps are here; any other
/// of `reqwest::RequestBuilder`'s goes through [`map`](Self::map) or
/// [`try_map`](Self::try_map), which keep the request on this client.
///
/// ```no_run
/// # async fn f(peer: svc_tls::PeerClient, url: url::Url) -> Result<(), Box<dyn std::error::Error>> {
/// let response = peer
///     .post(url)?
///     .header("x-request-id", "42")
///     .json(&serde_json::json!({"name": "region-a"}))
///     .send()
///     .await?;
/// # let _ = response; Ok(()) }
/// ```
#[must_use = "a request does nothing until it is sent"]
pub struct PeerRequest {
    client: PeerClient,
    builder: reqwest::RequestBuilder,
}

impl PeerRequest {
    pub(super) fn new(client: PeerClient, builder: reqwest::RequestBuilder) -> Self {
        Self { client, builder }
    }

    /// Adds a header (as `reqwest::RequestBuilder::header`; an invalid name or value
    /// fails the request when it is sent).
    pub fn header<K, V>(self, key: K, value: V) -> Self
    where
        HeaderName: TryFrom<K>,
        <HeaderName as TryFrom<K>>::Error: Into<http::Error>,
        HeaderValue: TryFrom<V>,
        <HeaderValue as TryFrom<V>>::Error: Into<http::Error>,
    {
        self.map(|b| b.header(key, value))
    }

    /// Merges `headers` into the request's.
    pub fn headers(self, headers: HeaderMap) -> Self {
        self.map(|b| b.headers(headers))
    }

    /// Sets `Authorization: Bearer <token>`, marked sensitive.
    pub fn bearer_auth<T: fmt::Display>(self, token: T) -> Self {
        self.map(|b| b.bearer_auth(token))
    }

    /// Sets the body.
    pub fn body<T: Into<reqwest::Body>>(self, body: T) -> Self {
        self.map(|b| b.body(body))
    }

    /// Sets a JSON body and `Content-Type: application/json` (a value that does not
    /// serialize fails the request when it is sent).
    pub fn json<T: Serialize + ?Sized>(self, json: &T) -> Self {
        self.map(|b| b.json(json))
    }

    /// Sets this request's total timeout, in place of the client's
    /// ([`PeerTls::with_request_timeout`](super::PeerTls::with_request_timeout)).
    pub fn timeout(self, timeout: Duration) -> Self {
        self.map(|b| b.timeout(timeout))
    }

    /// Applies any other `reqwest::RequestBuilder` step, keeping the request on this
    /// client.
    pub fn map(self, f: impl FnOnce(reqwest::RequestBuilder) -> reqwest::RequestBuilder) -> Self {
        Self {
            builder: f(self.builder),
            client: self.client,
        }
    }

    /// Applies a fallible step, such as
    /// [`PrincipalSigner::attach`](crate::principal::PrincipalSigner::attach) or
    /// [`attach_principal`](crate::principal::attach_principal).
    ///
    /// # Errors
    /// The step's error.
    pub fn try_map<E>(
        self,
        f: impl FnOnce(reqwest::RequestBuilder) -> Result<reqwest::RequestBuilder, E>,
    ) -> Result<Self, E> {
        Ok(Self {
            builder: f(self.builder)?,
            client: self.client,
        })
    }

    /// Sends the request through [`PeerClient::send`].
    ///
    /// # Errors
    /// As [`PeerClient::send`].
    pub async fn send(self) -> Result<reqwest::Response, PeerRequestError> {
        self.client.send(self.builder).await
    }

    /// The `reqwest::RequestBuilder` underneath. Sending that builder with its own
    /// `send` goes around this client's body cap, metrics, trace context and
    /// trust-change error; pass it to [`PeerClient::send`] instead.
    pub fn into_builder(self) -> reqwest::RequestBuilder {
        self.builder
    }
}

impl From<PeerRequest> for reqwest::RequestBuilder {
    fn from(request: PeerRequest) -> Self {
        request.builder
    }
}

impl fmt::Debug for PeerRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // reqwest's builder Debug prints headers (an Authorization or X-Principal
        // value among them); say only what the request is.
        let mut s = f.debug_struct("PeerRequest");
        match self.builder.try_clone().map(|b| b.build()) {
            // The origin, not the URL: a path or query may carry a secret.
            Some(Ok(request)) => s
                .field("method", request.method())
                .field("origin", &request.url().origin().ascii_serialization()),
            Some(Err(_)) => s.field("request", &"invalid"),
            None => s.field("request", &"streaming body"),
        };
        s.finish_non_exhaustive()
    }
}
