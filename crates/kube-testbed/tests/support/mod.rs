//! Helpers shared by this crate's integration tests (the workspace's shared test
//! utilities, such as `poll_until`, are in test-support).

/// The API server's `Status` in an error; panics on any other error.
pub(crate) fn api_status(e: kube::Error) -> kube::core::Status {
    match e {
        kube::Error::Api(s) => *s,
        other => panic!("expected an API Status error, got {other:?}"),
    }
}
