//! What every generated client shares: the inner value it runs on ([`PeerApi`]), the
//! hooks that value gives it ([`generated_client!`](crate::generated_client)), how it
//! is built ([`PeerApi::connect`]) and what its errors become ([`ApiError`]).

use std::fmt;
use std::sync::Arc;

use progenitor_client::Error;

use crate::client::{PeerClient, PeerClientError, PeerTls, ResponseBodyTooLarge};
use crate::identity::IdentityResolver;
use crate::options::HostError;
use crate::principal::{PRINCIPAL_HEADER, Principal, PrincipalSigner};

/// A generated client's inner value (progenitor's `with_inner_type`): the pooled peer
/// client every request runs on, and the signer of the principals attached to them.
#[derive(Clone)]
pub struct PeerApi {
    peer: PeerClient,
    signer: Option<PrincipalSigner<IdentityResolver>>,
    principal: Arc<dyn Fn() -> Principal + Send + Sync>,
}

impl fmt::Debug for PeerApi {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PeerApi")
            .field("peer", &self.peer)
            .field("signs", &self.signer.is_some())
            .finish_non_exhaustive()
    }
}

/// What a generated client's `new_with_client` takes: the base URL (without a
/// trailing `/`: the generated code appends paths that start with one), the peer
/// client's current `reqwest::Client`, and the [`PeerApi`].
#[derive(Debug)]
pub struct Parts {
    /// The peer's base URL, without a trailing `/`.
    pub base: String,
    /// The peer client's current generation, as the generated code's own client.
    pub client: reqwest::Client,
    /// The inner value.
    pub api: PeerApi,
}

impl PeerApi {
    /// The parts of a generated client over `tls`'s pooled peer client, built once at
    /// start-up. `principal` says on whose behalf each request is made; it is signed
    /// for the request's URL and attached as `X-Principal` when `tls` has a client
    /// identity (as Go's `principal.Injector`). The client's `connect` (written by
    /// [`generated_client!`](crate::generated_client)) calls this.
    ///
    /// # Errors
    /// [`ConnectError::Host`] when the peer's `--S-host` is unusable,
    /// [`ConnectError::Client`] when its client cannot be built.
    pub fn connect(
        tls: &PeerTls,
        principal: impl Fn() -> Principal + Send + Sync + 'static,
    ) -> Result<Parts, ConnectError> {
        let base = tls.host().map_err(ConnectError::Host)?;
        let peer = tls.client().map_err(ConnectError::Client)?;
        let base = base.as_str().trim_end_matches('/').to_owned();
        let client = peer.current().map_err(ConnectError::Client)?;
        Ok(Parts {
            base,
            client,
            api: PeerApi {
                peer,
                signer: tls.principal_signer(),
                principal: Arc::new(principal),
            },
        })
    }

    /// The pooled peer client requests run on.
    pub fn peer(&self) -> &PeerClient {
        &self.peer
    }

    /// Before each request (progenitor's `pre` hook): the peer client's current
    /// generation, so that a client that cannot be built fails here, before anything
    /// is sent; then, when the peer has a client identity, the principal signed for
    /// the request's URL attached as `X-Principal`.
    ///
    /// # Errors
    /// What failed (the client, the signature, the header), never the token; the
    /// hook returns it as progenitor's `Error::Custom`.
    pub fn before(&self, request: &mut reqwest::Request) -> Result<(), String> {
        self.peer
            .current()
            .map_err(|e| crate::excerpt::chain(&e).to_string())?;
        if let Some(signer) = &self.signer {
            let token = signer
                .sign(request.url(), &(self.principal)())
                .map_err(|e| format!("signing the X-Principal: {e}"))?;
            let value = reqwest::header::HeaderValue::from_str(token.as_str())
                .map_err(|e| format!("the X-Principal header: {e}"))?;
            request.headers_mut().insert(PRINCIPAL_HEADER, value);
        }
        Ok(())
    }

    /// Each request (progenitor's `exec` hook), on the peer client's current
    /// generation, with its request timeout and the response body capped
    /// ([`PeerClient::execute`]; progenitor reads bodies whole): a new generation
    /// that cannot be built now fails the request without touching the network or an
    /// old pool.
    ///
    /// # Errors
    /// reqwest's error, a [`ResponseBodyTooLarge`] among its sources when the body is
    /// over the cap.
    pub async fn execute(&self, request: reqwest::Request) -> reqwest::Result<reqwest::Response> {
        self.peer.execute(request).await
    }
}

/// Why a generated client could not be built.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConnectError {
    /// `--S-host` is not configured or not usable.
    #[error("the peer's host")]
    Host(#[source] HostError),
    /// The peer client could not be built.
    #[error("the peer's client")]
    Client(#[source] PeerClientError),
}

/// How many characters of a response body an [`ApiError`] quotes.
pub const BODY_EXCERPT_CHARS: usize = 128;

/// What an [`ApiError`] names when the error does not say which peer it came from.
const UNNAMED_PEER: &str = "the peer";

/// Why a call of a generated client failed: progenitor's `Error` without the whole
/// headers and bodies it prints (`Unexpected Response: Response { headers: … }`,
/// `Invalid Response Payload (b"…")`), each variant naming the peer where known and
/// quoting at most a short escaped excerpt of what the peer sent
/// ([`BODY_EXCERPT_CHARS`]). Convert with `.map_err(ApiError::from)` before logging or
/// returning it.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ApiError {
    /// The response body was longer than the peer's cap
    /// ([`PeerTls::with_max_response_body`]): not read further.
    #[error(transparent)]
    BodyTooLarge(ResponseBodyTooLarge),
    /// No complete answer within the peer's request timeout
    /// ([`PeerTls::with_request_timeout`], 30 s by default).
    #[error("no answer from {host} within the request timeout")]
    Timeout {
        /// The peer (host and port), or `the peer` when the error did not say.
        host: String,
        /// reqwest's error.
        #[source]
        source: reqwest::Error,
    },
    /// The service answered with an error status (its body is not read, nor its
    /// headers shown).
    #[error("{host} answered {status}")]
    Status {
        /// The peer (host and port), or `the peer` when the error did not say.
        host: String,
        /// The status.
        status: reqwest::StatusCode,
    },
    /// The answer is not the JSON described by the document.
    #[error("the peer's answer is not the JSON expected; it starts {excerpt}")]
    InvalidPayload {
        /// The body's start, escaped and cut to [`BODY_EXCERPT_CHARS`].
        excerpt: String,
        /// Where the JSON failed (line and column).
        #[source]
        source: serde_json::Error,
    },
    /// The request failed in transport (connection, TLS, redirect refused, a body
    /// cut short).
    #[error("the request to {host} failed")]
    Transport {
        /// The peer (host and port), or `the peer` when the error did not say.
        host: String,
        /// reqwest's error.
        #[source]
        source: reqwest::Error,
    },
    /// The request could not be made (a parameter, the client, the principal).
    #[error("the request could not be made: {message}")]
    Request {
        /// What went wrong, escaped and cut.
        message: String,
    },
}

impl<E> From<Error<E>> for ApiError {
    fn from(error: Error<E>) -> Self {
        match error {
            Error::CommunicationError(source) | Error::ResponseBodyError(source) => {
                Self::from_reqwest(source)
            }
            Error::InvalidUpgrade(source) => Self::Transport {
                host: host_of(source.url()),
                source,
            },
            Error::ErrorResponse(response) => Self::Status {
                // progenitor keeps neither the URL nor the host of an error answer.
                host: UNNAMED_PEER.to_owned(),
                status: response.status(),
            },
            Error::UnexpectedResponse(response) => Self::Status {
                host: host_of(Some(response.url())),
                status: response.status(),
            },
            Error::InvalidResponsePayload(body, source) => Self::InvalidPayload {
                excerpt: crate::excerpt::escaped(
                    &String::from_utf8_lossy(&body[..body.len().min(4 * BODY_EXCERPT_CHARS)]),
                    BODY_EXCERPT_CHARS,
                ),
                source,
            },
            Error::InvalidRequest(message) | Error::Custom(message) => Self::Request {
                message: crate::excerpt::escaped(&message, 2 * BODY_EXCERPT_CHARS),
            },
        }
    }
}

impl ApiError {
    fn from_reqwest(source: reqwest::Error) -> Self {
        if let Some(too_large) = ResponseBodyTooLarge::find(&source) {
            return Self::BodyTooLarge(too_large.clone());
        }
        let host = host_of(source.url());
        if source.is_timeout() {
            Self::Timeout { host, source }
        } else {
            Self::Transport { host, source }
        }
    }
}

/// `host:port` of `url`, or `the peer` without one.
fn host_of(url: Option<&reqwest::Url>) -> String {
    match url.and_then(|url| Some((url.host_str()?, url.port_or_known_default()))) {
        Some((host, Some(port))) => format!("{host}:{port}"),
        Some((host, None)) => host.to_owned(),
        None => UNNAMED_PEER.to_owned(),
    }
}

/// Makes a progenitor-generated client (generated with
/// `with_inner_type(quote!(svc_tls::generated::PeerApi))`, or a path re-exporting
/// it) run over [`PeerClient`]: implements its `ClientHooks` with
/// [`PeerApi::before`] and [`PeerApi::execute`], and gives it
/// `connect(&PeerTls, principal) -> Result<Self, ConnectError>`. One line per
/// generated client, in the crate that holds its generated code:
///
/// ```ignore
/// svc_tls::generated_client!(Client);
/// ```
///
/// The crate depends on `progenitor-client` itself (the generated code names it), of
/// the version svc-tls uses.
#[macro_export]
macro_rules! generated_client {
    ($client:ty) => {
        impl $crate::generated::__private::ClientHooks<$crate::generated::PeerApi> for $client {
            async fn pre<E>(
                &self,
                request: &mut $crate::generated::__private::reqwest::Request,
                _info: &$crate::generated::__private::OperationInfo,
            ) -> ::std::result::Result<(), $crate::generated::__private::Error<E>> {
                $crate::generated::__private::ClientInfo::inner(self)
                    .before(request)
                    .map_err($crate::generated::__private::Error::Custom)
            }

            async fn exec(
                &self,
                request: $crate::generated::__private::reqwest::Request,
                _info: &$crate::generated::__private::OperationInfo,
            ) -> $crate::generated::__private::reqwest::Result<
                $crate::generated::__private::reqwest::Response,
            > {
                $crate::generated::__private::ClientInfo::inner(self)
                    .execute(request)
                    .await
            }
        }

        impl $client {
            /// This generated client over `tls`'s pooled peer client, built once at
            /// start-up (`svc_tls::generated::PeerApi::connect`): every request runs
            /// on the peer client's current generation, within its timeout and body
            /// cap, with `principal` signed for its URL and attached as
            /// `X-Principal` when `tls` has a client identity.
            ///
            /// # Errors
            /// `ConnectError::Host` when the peer's `--S-host` is unusable,
            /// `ConnectError::Client` when its client cannot be built.
            pub fn connect(
                tls: &$crate::client::PeerTls,
                principal: impl Fn() -> $crate::principal::Principal + Send + Sync + 'static,
            ) -> ::std::result::Result<Self, $crate::generated::ConnectError> {
                let parts = $crate::generated::PeerApi::connect(tls, principal)?;
                Ok(Self::new_with_client(&parts.base, parts.client, parts.api))
            }
        }
    };
}
