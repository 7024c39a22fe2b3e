//! Header-only ingress trust is an explicit opt-in that says so once in the log:
//! `IngressVerifier::unverified_headers_only` (and the deprecated names that meant
//! it) log one WARN per process, however often they are called. Its own test binary:
//! the warning is once per process, and this test reads the process's log.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use svc_tls::principal::{IngressVerifier, UNVERIFIED_WARNING_TEXT};
use test_support::logs::CapturedLogs;

#[test]
#[allow(deprecated)]
fn header_only_trust_warns_once_at_start_up() {
    let logs = CapturedLogs::global();
    assert!(!logs.text().contains(UNVERIFIED_WARNING_TEXT));
    let verifier = IngressVerifier::unverified_headers_only();
    assert!(verifier.is_unverified());
    let _ = IngressVerifier::unverified_headers_only();
    // The old names still compile (deprecated) and mean the same opt-in.
    assert!(IngressVerifier::default().is_unverified());
    assert!(IngressVerifier::new(Default::default()).is_unverified());
    let _ = svc_tls::principal::peer_certificate_from_ingress(&Default::default());
    let text = logs.text();
    assert_eq!(
        text.matches(UNVERIFIED_WARNING_TEXT).count(),
        1,
        "one warning: {text}"
    );
    assert!(text.contains("WARN"), "{text}");
    assert!(text.contains("docs/operations.md"), "{text}");
}
