//! A kube client whose exec credential plugin fails with a token in its output:
//! what the watch logs and keeps as its last error names the kind of failure and
//! holds none of the plugin's command or output.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use k8s_openapi::api::core::v1::Secret;
use kube::config::ExecConfig;
use kube::{Api, Client};
use kube_runtime::watcher;
use kube_testbed::Testbed;
use test_support::logs::CapturedLogs;
use watch_ready::{Health, Watched, excerpt, observe};

/// What the plugin prints (stdout and stderr) and has in its command line once it
/// starts failing: the text that must never reach a log.
const SECRET: &str = "SECRET-TOKEN-5f2c9a";

/// An exec-plugin config: the first run (at client construction) hands out the
/// testbed's admin token, already expired, so the first request runs the plugin
/// again; every later run prints a credential holding `SECRET` and exits 1.
fn failing_exec_config(tb: &Testbed, state: &std::path::Path) -> kube::Config {
    let mut config = tb.kube_config();
    config.auth_info.token = None;
    let script = format!(
        r#"n=$(cat '{state}' 2>/dev/null || echo 0); echo $((n+1)) > '{state}'
if [ "$n" = 0 ]; then
  printf '{{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{{"token":"%s","expirationTimestamp":"2000-01-01T00:00:00Z"}}}}' '{admin}'
  exit 0
fi
echo '{{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{{"token":"{SECRET}"}}}}'
echo 'plugin stderr {SECRET}' >&2
exit 1"#,
        state = state.display(),
        admin = tb.token(),
    );
    config.auth_info.exec = Some(ExecConfig {
        api_version: Some("client.authentication.k8s.io/v1".into()),
        command: Some("sh".into()),
        args: Some(vec!["-c".into(), script]),
        ..ExecConfig::default()
    });
    config
}

fn state_file(name: &str) -> std::path::PathBuf {
    let path = std::env::temp_dir().join(format!(
        "watch-ready-exec-{name}-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    ));
    let _ = std::fs::remove_file(&path);
    path
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_exec_plugin_is_logged_as_a_fixed_text_without_its_token() {
    let logs = CapturedLogs::global();
    let tb = Testbed::start().await;
    let state = state_file("watch");
    let client = Client::try_from(failing_exec_config(&tb, &state)).unwrap();

    let health = Health::new("Secret ns/s");
    let api: Api<Secret> = Api::namespaced(observe(&client, &health), "ns");
    let watched = Watched::spawn(api, watcher::Config::default(), (), health);
    test_support::poll_until("the watch saw an error", || {
        watched.health().status().errors > 0
    })
    .await;

    // The plugin did fail with the secret in its output: the error the watch saw
    // says so in its own words (this is what was logged before the fix).
    let raw = {
        let config = failing_exec_config(&tb, &state);
        match Client::try_from(config) {
            Err(e) => e,
            Ok(_) => panic!("the plugin no longer fails"),
        }
    };
    assert!(raw.to_string().contains(SECRET), "{raw}");

    let status = watched.health().status();
    let kept = status.last_error.unwrap();
    assert!(!kept.contains(SECRET), "kept: {kept}");
    assert!(
        kept.contains("exec credential plugin exited with an error"),
        "{kept}"
    );

    let text = logs.text();
    assert!(
        text.contains("exec credential plugin exited with an error"),
        "logs: {text}"
    );
    assert!(!text.contains(SECRET), "logs: {text}");
    assert!(!text.contains("plugin stderr"), "logs: {text}");
    drop(watched);
    let _ = std::fs::remove_file(&state);
}

/// The same plugin failing at client construction (`kube::Error::Auth`): the
/// excerpt any service logs for the error is the fixed text, not the output.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_exec_plugin_error_from_client_construction_excerpts_to_a_fixed_text() {
    let tb = Testbed::start().await;
    let state = state_file("construct");
    std::fs::write(&state, "1\n").unwrap(); // skip the good first run
    let Err(error) = Client::try_from(failing_exec_config(&tb, &state)) else {
        panic!("the plugin did not fail");
    };
    assert!(matches!(error, kube::Error::Auth(_)), "{error:?}");
    assert!(error.to_string().contains(SECRET));
    let shown = excerpt::chain(&error);
    assert_eq!(
        shown,
        "kube client credentials: the exec credential plugin exited with an error (command and output not logged)"
    );
    let _ = std::fs::remove_file(&state);
}
