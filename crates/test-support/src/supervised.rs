//! A peer process that never outlives its test: started in a process group of its own
//! under a small `sh` guard whose standard input is a pipe held by this process (the
//! lifeline). When the test process ends in any way (return, panic, abort, SIGKILL),
//! the kernel closes the pipe, the guard reads end-of-file and stops the peer (TERM,
//! then KILL). Dropping a [`Supervised`] kills the whole group at once.
//!
//! The real peers' test support (`real-apiserver`: etcd and kube-apiserver;
//! `real-spire`: spire-server and spire-agent) runs every peer this way.

use std::fs::File;
use std::io::Read as _;
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::{Duration, Instant};

/// The guard: `$1` is a directory to remove once the peer is gone (or empty), the rest
/// the peer's command line. It waits for the peer, so the peer's exit is the guard's.
/// (An asynchronous list's standard input is /dev/null in a shell without job
/// control, so the lifeline is read through descriptor 3.)
const GUARD: &str = r#"cleanup=$1; shift
exec 3<&0
"$@" </dev/null 3<&- &
peer=$!
( cat <&3 >/dev/null; kill -TERM "$peer" 2>/dev/null; sleep 5; kill -KILL "$peer" 2>/dev/null ) &
wait "$peer"
status=$?
if [ -n "$cleanup" ]; then rm -rf "$cleanup"; fi
exit $status"#;

/// One running peer and its log.
pub struct Supervised {
    name: String,
    child: Child,
    /// Held open for the life of the peer; closed (by drop or by the process ending)
    /// it stops the peer.
    lifeline: Option<ChildStdin>,
    log: PathBuf,
}

impl Supervised {
    /// Starts `program args` with its output in `log`; `cleanup` (if any) is removed
    /// when the peer has stopped because this process ended.
    pub fn start(
        name: &str,
        program: &Path,
        args: &[String],
        log: &Path,
        cleanup: Option<&Path>,
    ) -> std::io::Result<Self> {
        let out = File::options().create(true).append(true).open(log)?;
        let mut child = Command::new("sh")
            .arg("-c")
            .arg(GUARD)
            .arg("real-peer-guard")
            .arg(cleanup.map(Path::as_os_str).unwrap_or_default())
            .arg(program)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(out.try_clone()?)
            .stderr(out)
            .process_group(0)
            .spawn()?;
        let lifeline = child.stdin.take();
        Ok(Self {
            name: name.to_owned(),
            child,
            lifeline,
            log: log.to_owned(),
        })
    }

    /// The peer's exit, if it has exited.
    pub fn exited(&mut self) -> Option<String> {
        match self.child.try_wait() {
            Ok(Some(status)) => Some(status.to_string()),
            Ok(None) => None,
            Err(error) => Some(error.to_string()),
        }
    }

    /// The last `lines` lines of the peer's log.
    pub fn log_tail(&self, lines: usize) -> String {
        let mut text = String::new();
        if let Ok(mut file) = File::open(&self.log) {
            let _ = file.read_to_string(&mut text);
        }
        let all: Vec<&str> = text.lines().collect();
        let from = all.len().saturating_sub(lines);
        format!(
            "last lines of {} ({}):\n{}",
            self.name,
            self.log.display(),
            all[from..].join("\n")
        )
    }

    /// Stops the peer as its supervisor would (TERM, up to `grace`, then KILL) and
    /// waits for it: its port is free again when this returns.
    pub fn stop(mut self, grace: Duration) {
        self.signal("TERM");
        let deadline = Instant::now() + grace;
        while Instant::now() < deadline {
            if self.exited().is_some() {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        // Drop kills what is left of the group and reaps the guard.
    }

    fn signal(&self, signal: &str) {
        // The guard leads the group: the peer, the guard and its lifeline reader.
        let _ = Command::new("kill")
            .arg(format!("-{signal}"))
            .arg("--")
            .arg(format!("-{}", self.child.id()))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
}

impl Drop for Supervised {
    fn drop(&mut self) {
        self.lifeline.take();
        self.signal("KILL");
        let _ = self.child.wait();
    }
}
