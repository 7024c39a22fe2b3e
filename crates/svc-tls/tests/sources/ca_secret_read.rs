//! A CA Secret read once ([`svc_tls::client::trust_from_secret`]) from an API server
//! that refuses it with a hostile `Status.message`: the error says what failed, its
//! source shows an escaped excerpt of the server's text with the status code kept.
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

    assert_eq!(
        err.to_string(),
        "reading CA Secret unikorn/identity-ca failed"
    );
    test_support::error_rule::assert_follows_rule("CaSecretRead", &err);
    let PeerClientError::CaSecretRead { source, .. } = &err else {
        panic!("expected CaSecretRead, got {err:?}");
    };
    // The status code is kept for matching; the text is an escaped excerpt.
    assert_eq!(source.status_code(), Some(403));
    test_support::hostile::assert_escaped_excerpt(
        &svc_tls::excerpt::chain(&err),
        "reading CA Secret unikorn/identity-ca failed: ",
    );
}
