//! The configuration files of the server and the agent (HCL), all paths in the
//! instance's temporary directory and every port on loopback.
//!
//! - Server: the trust domain, its own self-signed CA (no upstream authority) with a
//!   P-256 key in memory, the SQLite datastore (the reason SPIRE is built with cgo),
//!   the `join_token` node attestor, `default_x509_svid_ttl` from the options, and
//!   `cache_reload_interval` at 1 s so that entry and bundle changes reach the agent
//!   within a second or two instead of five.
//! - Agent: bootstrapped with the server's bundle (never insecurely), the
//!   `join_token` node attestor, its keys on disk (so a restarted agent resumes with
//!   its SVID instead of attesting again, which a used join token could not), the
//!   `unix` workload attestor, and `sync_interval` at 1 s (the default is 5 s).

use std::path::PathBuf;
use std::time::Duration;

/// The files and ports of one instance.
pub(crate) struct Layout {
    pub(crate) dir: PathBuf,
    pub(crate) trust_domain: String,
    pub(crate) server_port: u16,
    pub(crate) svid_ttl: Duration,
}

impl Layout {
    pub(crate) fn server_socket(&self) -> PathBuf {
        self.dir.join("server/api.sock")
    }

    pub(crate) fn agent_socket(&self) -> PathBuf {
        self.dir.join("agent/public/api.sock")
    }

    pub(crate) fn agent_admin_socket(&self) -> PathBuf {
        self.dir.join("agent/admin/api.sock")
    }

    pub(crate) fn bootstrap_bundle(&self) -> PathBuf {
        self.dir.join("agent/bootstrap.pem")
    }

    pub(crate) fn server_conf(&self) -> String {
        let dir = self.dir.display();
        format!(
            r#"server {{
    bind_address = "127.0.0.1"
    bind_port = "{port}"
    socket_path = "{socket}"
    trust_domain = "{td}"
    data_dir = "{dir}/server/data"
    log_level = "DEBUG"
    ca_key_type = "ec-p256"
    ca_ttl = "24h"
    default_x509_svid_ttl = "{ttl}s"
    experimental {{
        cache_reload_interval = "1s"
    }}
}}

plugins {{
    DataStore "sql" {{
        plugin_data {{
            database_type = "sqlite3"
            connection_string = "{dir}/server/data/datastore.sqlite3"
        }}
    }}
    KeyManager "memory" {{
        plugin_data {{}}
    }}
    NodeAttestor "join_token" {{
        plugin_data {{}}
    }}
}}
"#,
            port = self.server_port,
            socket = self.server_socket().display(),
            td = self.trust_domain,
            ttl = self.svid_ttl.as_secs().max(1),
        )
    }

    pub(crate) fn agent_conf(&self) -> String {
        let dir = self.dir.display();
        format!(
            r#"agent {{
    data_dir = "{dir}/agent/data"
    log_level = "DEBUG"
    server_address = "127.0.0.1"
    server_port = "{port}"
    socket_path = "{socket}"
    admin_socket_path = "{admin}"
    trust_bundle_path = "{bundle}"
    trust_domain = "{td}"
    experimental {{
        sync_interval = "1s"
    }}
}}

plugins {{
    NodeAttestor "join_token" {{
        plugin_data {{}}
    }}
    KeyManager "disk" {{
        plugin_data {{
            directory = "{dir}/agent/data"
        }}
    }}
    WorkloadAttestor "unix" {{
        plugin_data {{}}
    }}
}}
"#,
            port = self.server_port,
            socket = self.agent_socket().display(),
            admin = self.agent_admin_socket().display(),
            bundle = self.bootstrap_bundle().display(),
            td = self.trust_domain,
        )
    }
}
