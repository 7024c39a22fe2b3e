//! A CA Secret read once ([`svc_tls::client::trust_from_secret`]) from an API server
//! that refuses it with a hostile `Status.message`: the error's message shows an
//! escaped excerpt of the server's text, and its source is still kube's error.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use kube_testbed::Testbed;
use svc_tls::SecretRef;
use svc_tls::client::{PeerClientError, trust_from_secret};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_ca_secret_read_shows_an_escaped_excerpt() {
    let tb = Testbed::start().await;
    tb.fail_next_with(1, 403, test_support::hostile::status_message());

    let secret = SecretRef::new("unikorn", "identity-ca");
    let err = trust_from_secret(&tb.client(), &secret).await.unwrap_err();

    let text = err.to_string();
    test_support::hostile::assert_escaped_excerpt(
        &text,
        "reading CA Secret unikorn/identity-ca failed: ",
    );
    // The source is still kube's error, with the status code.
    let PeerClientError::CaSecretRead {
        source: kube::Error::Api(status),
        ..
    } = &err
    else {
        panic!("expected CaSecretRead with kube::Error::Api, got {text:.200}");
    };
    assert_eq!(status.code, 403);
    let source = std::error::Error::source(&err).unwrap();
    assert!(
        matches!(
            source.downcast_ref::<kube::Error>(),
            Some(kube::Error::Api(status)) if status.code == 403
        ),
        "{:.200}",
        source.to_string()
    );
}
