//! A real tuttid for the integration tests, and ranks as threads of this process (the C ABI
//! allows several runtimes in one process; each joins the job as its own rank).
use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use tutti::{InitOptions, Runtime};

/// tuttid of the build the crate linked (`TUTTI_TUTTID` overrides it); killed and reaped on drop.
pub struct Tuttid {
    child: Child,
    pub endpoint: String,
}

impl Tuttid {
    pub fn start() -> Tuttid {
        let path = std::env::var_os("TUTTI_TUTTID")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(env!("TUTTI_SYS_LIB_DIR")).join("tuttid"));
        let mut command = Command::new(&path);
        // Killed with the test thread that started it, even if this process dies without
        // unwinding (an abort, a signal): PR_SET_PDEATHSIG, through glibc's variadic prctl.
        unsafe {
            command.pre_exec(|| {
                extern "C" {
                    fn prctl(option: i32, ...) -> i32;
                }
                const PR_SET_PDEATHSIG: i32 = 1;
                const SIGKILL: u64 = 9;
                prctl(PR_SET_PDEATHSIG, SIGKILL);
                Ok(())
            });
        }
        let mut child = command
            .args(["--bind", "tcp://127.0.0.1:*"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {}", path.display(), e));
        // The first line names the port the OS picked; nothing else is read, so nothing blocks.
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
        let endpoint = match line.trim().strip_prefix("tuttid listening on ") {
            Some(endpoint) => endpoint.to_string(),
            None => {
                let _ = child.kill();
                let _ = child.wait();
                panic!("tuttid printed {:?}", line)
            }
        };
        Tuttid { child, endpoint }
    }

    /// Joins `size` ranks of job `job`, one thread each, and runs `body` on each; returns their
    /// results in rank order. A panicking rank fails the test (after the others are joined).
    pub fn job<R: Send>(&self, job: &str, size: i32, body: impl Fn(Runtime, i32) -> R + Sync) -> Vec<R> {
        std::thread::scope(|threads| {
            let handles: Vec<_> = (0..size)
                .map(|rank| {
                    let body = &body;
                    let options = InitOptions::new()
                        .coordinator(&self.endpoint)
                        .job(&format!("{}-{}", job, std::process::id()))
                        .token("rust-tests")
                        .rank(rank)
                        .size(size)
                        .timeout(Duration::from_secs(60));
                    threads.spawn(move || {
                        let rt = Runtime::init_with(&options).expect("init");
                        body(rt, rank)
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().expect("a rank panicked")).collect()
        })
    }
}

impl Drop for Tuttid {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
