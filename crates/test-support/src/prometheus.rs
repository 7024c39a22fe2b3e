//! A real Prometheus server (Debian's `prometheus`, installed by `cargo xtask
//! prepare`) scraping a test's metrics on loopback, and its HTTP API's answers:
//! [`Prometheus::scraping`], [`Prometheus::query`], [`Prometheus::wait_for`]; and
//! [`serve_metrics`], a `/metrics` endpoint over a test's own registry.
//!
//! Without `prometheus` on the PATH, [`Prometheus::scraping`] returns `None` with a
//! message (the test skips), except under CI (`CI=true`), where it panics.
// Test support: a set-up failure is a broken environment.
#![allow(clippy::expect_used)]

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// One sample of an instant query's answer: its labels (the metric name under
/// `__name__`) and its value.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// The series' labels.
    pub labels: BTreeMap<String, String>,
    /// The value.
    pub value: f64,
}

/// A Prometheus server scraping one target every second; killed (by its own process
/// id) when dropped.
#[derive(Debug)]
pub struct Prometheus {
    child: Child,
    url: String,
    http: reqwest::Client,
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Whether `program` runs; `false` (the caller skips) outside CI only.
pub fn installed(program: &str) -> bool {
    let present = Command::new(program)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !present {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "{program} is not installed (CI installs it with `cargo xtask prepare`: apt package prometheus)"
        );
        eprintln!(
            "SKIPPED: {program} is not installed (apt-get install prometheus, or `cargo xtask prepare` as root)"
        );
    }
    present
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free loopback port")
}

impl Prometheus {
    /// Starts Prometheus with its data in `dir`, scraping `127.0.0.1:{target_port}`
    /// (`/metrics`) every second; `None` when `prometheus` is not installed.
    pub fn scraping(dir: &Path, target_port: u16) -> Option<Prometheus> {
        if !installed("prometheus") {
            return None;
        }
        let port = free_port();
        let config = dir.join("prometheus.yml");
        std::fs::write(
            &config,
            format!(
                "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nscrape_configs:\n- job_name: test\n  static_configs:\n  - targets: ['127.0.0.1:{target_port}']\n"
            ),
        )
        .expect("write prometheus.yml");
        let child = Command::new("prometheus")
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.join("tsdb").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start prometheus");
        Some(Prometheus {
            child,
            url: format!("http://127.0.0.1:{port}"),
            http: reqwest::Client::new(),
        })
    }

    /// Prometheus's answer to an instant query (empty while it is not up yet).
    pub async fn query(&self, promql: &str) -> Vec<Sample> {
        let Ok(mut url) = reqwest::Url::parse(&format!("{}/api/v1/query", self.url)) else {
            return Vec::new();
        };
        url.query_pairs_mut().append_pair("query", promql);
        let Ok(response) = self.http.get(url).send().await else {
            return Vec::new();
        };
        let Ok(body) = response.json::<serde_json::Value>().await else {
            return Vec::new();
        };
        body["data"]["result"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|sample| {
                let labels = sample["metric"]
                    .as_object()?
                    .iter()
                    .map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned())))
                    .collect::<Option<_>>()?;
                let value = sample["value"][1].as_str()?.parse().ok()?;
                Some(Sample { labels, value })
            })
            .collect()
    }

    /// Polls `promql` until `check` accepts its answer (60 s at most), and returns
    /// that answer. Panics naming `what` with the last answer.
    pub async fn wait_for(
        &self,
        promql: &str,
        what: &str,
        check: impl Fn(&[Sample]) -> bool,
    ) -> Vec<Sample> {
        let deadline = Instant::now() + Duration::from_secs(60);
        let mut last = Vec::new();
        while Instant::now() < deadline {
            last = self.query(promql).await;
            if check(&last) {
                return last;
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        panic!("timed out waiting for {what}: `{promql}` last answered {last:?}");
    }
}

/// Serves `render()` as an OpenMetrics `/metrics` answer on a free loopback port (on
/// the current Tokio runtime, for the life of the runtime) and returns the port.
pub async fn serve_metrics(render: impl Fn() -> String + Send + Sync + 'static) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind a metrics port");
    let port = listener.local_addr().expect("its address").port();
    let render = std::sync::Arc::new(render);
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let render = render.clone();
            tokio::spawn(async move {
                // One request per connection: read its head, answer, close.
                let mut head = Vec::new();
                let mut buf = [0u8; 1024];
                while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                    match stream.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => head.extend_from_slice(&buf[..n]),
                    }
                }
                let body = render();
                let answer = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: application/openmetrics-text; version=1.0.0; charset=utf-8\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = stream.write_all(answer.as_bytes()).await;
                let _ = stream.shutdown().await;
            });
        }
    });
    port
}
