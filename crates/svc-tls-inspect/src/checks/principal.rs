//! A principal (`X-Principal` JWS) signed with an identity by svc-tls's signer and
//! verified against that identity's certificate by svc-tls's verifier, with the
//! audience checked. The token is a bearer credential: it is never printed.

use svc_tls::Principal;
use svc_tls::material::Identity;
use svc_tls::principal::{AlgorithmPolicy, PeerCertificate, Url, VerifyOptions, sign_with};

use super::problem;
use crate::report::PrincipalReport;

/// The audience used when no peer host is configured (the token is verified here
/// and sent nowhere).
pub const PLACEHOLDER_AUDIENCE: &str = "https://svc-tls-inspect.invalid/";

/// Signs a principal for `audience` with `identity` and verifies it against the
/// identity's leaf under `policy`.
pub fn check(
    label: &str,
    identity: &Identity,
    audience: &Url,
    policy: AlgorithmPolicy,
) -> PrincipalReport {
    let mut report = PrincipalReport {
        identity: label.to_owned(),
        audience: audience.origin().ascii_serialization(),
        ..PrincipalReport::default()
    };
    let who = Principal {
        actor: Some("svc-tls-inspect".to_owned()),
        ..Principal::default()
    };
    let token = match sign_with(identity, audience, &who, policy) {
        Ok(token) => token,
        Err(error) => {
            report.error = Some(problem(&error, &error));
            return report;
        }
    };
    report.signed = true;
    report.algorithm = Some(token.algorithm().name().to_owned());
    let certificate = match PeerCertificate::from_der(identity.leaf_der().clone()) {
        Ok(certificate) => certificate,
        Err(error) => {
            report.error = Some(problem(&error, &error));
            return report;
        }
    };
    let options = VerifyOptions::new(policy).with_audiences([audience.clone()]);
    match certificate.verify_with_options::<Principal>(token.as_str(), &options) {
        Ok(back) if back == who => report.verified = true,
        Ok(_) => {
            report.error = Some(crate::report::Problem {
                kind: "PayloadChanged".to_owned(),
                message: "the verified principal differs from the one signed".to_owned(),
            });
        }
        Err(error) => report.error = Some(problem(&error, &error)),
    }
    report
}
