//! Header-only ingress trust is an explicit opt-in that says so once in the log:
//! `IngressVerifier::unverified_headers_only` logs one WARN per process, however
//! often it is called and whatever is done with the verifier. Its own test binary:
//! the warning is once per process, and this test reads the process's log.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use svc_tls::receiving::{IngressVerifier, UNVERIFIED_WARNING_TEXT};
use test_support::logs::CapturedLogs;

#[test]
fn header_only_trust_warns_once_at_start_up() {
    let logs = CapturedLogs::global();
    assert!(!logs.text().contains(UNVERIFIED_WARNING_TEXT));
    let verifier = IngressVerifier::unverified_headers_only();
    assert!(verifier.is_unverified());
    let _ = IngressVerifier::unverified_headers_only();
    // What the removed old names did (issue 31): the same opt-in, with a policy, or
    // reading the headers at once.
    assert!(
        IngressVerifier::unverified_headers_only()
            .with_policy(Default::default())
            .is_unverified()
    );
    let _ = IngressVerifier::unverified_headers_only().peer_certificate(&Default::default());
    let text = logs.text();
    assert_eq!(
        text.matches(UNVERIFIED_WARNING_TEXT).count(),
        1,
        "one warning: {text}"
    );
    assert!(text.contains("WARN"), "{text}");
    assert!(text.contains("docs/operations.md"), "{text}");
}
