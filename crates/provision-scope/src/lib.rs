//! # provision-scope
//!
//! Which cluster a provisioning step acts on: the provisioner (local) client, the
//! current cluster and the namespace, carried through the call graph in task-local
//! scope.
//!
//! It deliberately does not own: building clients from flags or the in-cluster
//! environment (`kube-construct`). It is legacy machinery kept for the provisioners:
//! constrained and documented, not a pattern to spread.
#![deny(missing_docs)]
