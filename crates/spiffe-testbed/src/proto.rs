//! The Workload API messages the emulator speaks, written by hand from the SPIFFE
//! `workload.proto` (field numbers and types exactly as there), so that no `protoc`
//! or build script is needed. Only the X.509 profile is modelled; the JWT RPCs answer
//! `Unimplemented`.

use std::collections::HashMap;

/// `X509SVIDRequest`: empty.
#[derive(Clone, PartialEq, prost::Message)]
pub struct X509SvidRequest {}

/// `X509SVIDResponse`: the SVIDs of the workload, CRLs, and federated bundles.
#[derive(Clone, PartialEq, prost::Message)]
pub struct X509SvidResponse {
    /// `repeated X509SVID svids = 1`.
    #[prost(message, repeated, tag = "1")]
    pub svids: Vec<X509Svid>,
    /// `repeated bytes crl = 2`.
    #[prost(bytes = "vec", repeated, tag = "2")]
    pub crl: Vec<Vec<u8>>,
    /// `map<string, bytes> federated_bundles = 3`, keyed by trust domain SPIFFE ID.
    #[prost(map = "string, bytes", tag = "3")]
    pub federated_bundles: HashMap<String, Vec<u8>>,
}

/// `X509SVID`: one identity.
#[derive(Clone, PartialEq, prost::Message)]
pub struct X509Svid {
    /// `string spiffe_id = 1`.
    #[prost(string, tag = "1")]
    pub spiffe_id: String,
    /// `bytes x509_svid = 2`: DER certificates concatenated, leaf first.
    #[prost(bytes = "vec", tag = "2")]
    pub x509_svid: Vec<u8>,
    /// `bytes x509_svid_key = 3`: PKCS#8 DER.
    #[prost(bytes = "vec", tag = "3")]
    pub x509_svid_key: Vec<u8>,
    /// `bytes bundle = 4`: DER CA certificates of the trust domain, concatenated.
    #[prost(bytes = "vec", tag = "4")]
    pub bundle: Vec<u8>,
    /// `string hint = 5`.
    #[prost(string, tag = "5")]
    pub hint: String,
}

/// `X509BundlesRequest`: empty.
#[derive(Clone, PartialEq, prost::Message)]
pub struct X509BundlesRequest {}

/// `X509BundlesResponse`: CRLs and the bundles of every trusted trust domain.
#[derive(Clone, PartialEq, prost::Message)]
pub struct X509BundlesResponse {
    /// `repeated bytes crl = 1`.
    #[prost(bytes = "vec", repeated, tag = "1")]
    pub crl: Vec<Vec<u8>>,
    /// `map<string, bytes> bundles = 2`, keyed by trust domain SPIFFE ID.
    #[prost(map = "string, bytes", tag = "2")]
    pub bundles: HashMap<String, Vec<u8>>,
}
