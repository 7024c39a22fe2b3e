//! Helpers shared by this crate's integration tests (the crate's own shared helpers,
//! such as `poll_until`, are exported by the library).

/// The API server's `Status` in an error; panics on any other error.
pub fn api_status(e: kube::Error) -> kube::core::Status {
    match e {
        kube::Error::Api(s) => *s,
        other => panic!("expected an API Status error, got {other:?}"),
    }
}
