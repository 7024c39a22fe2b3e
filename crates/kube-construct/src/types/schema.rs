//! JSON schemas for k8s-openapi types used in CRD fields (the library does not
//! enable k8s-openapi's `schemars` feature).

use schemars::{Schema, SchemaGenerator, json_schema};

/// `metav1.Time`: an RFC 3339 timestamp string.
pub(crate) fn time(_: &mut SchemaGenerator) -> Schema {
    json_schema!({ "type": "string", "format": "date-time" })
}

/// `resource.Quantity`: an integer or a quantity string.
pub(crate) fn quantity(_: &mut SchemaGenerator) -> Schema {
    json_schema!({ "x-kubernetes-int-or-string": true })
}

/// `[]byte`: a base64 string.
pub(crate) fn bytes(_: &mut SchemaGenerator) -> Schema {
    json_schema!({ "type": "string", "format": "byte" })
}
