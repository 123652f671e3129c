//! Child processes: spawning one contained interpreter, measuring the CPU time and memory of
//! its process tree, killing the tree.
//!
//! Measuring a tree reads `/proc` (Linux); elsewhere the readings are absent.

use std::ffi::OsString;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd};
use std::path::PathBuf;
use std::process::Stdio;

use std::sync::Arc;

use rustix::process::{Pid, Resource, Rlimit, Signal};
use tokio::net::unix::pipe;

use super::sandbox::Plan;
use tokio::process::{Child, ChildStderr, ChildStdout, Command};

/// The child's protocol fds: it writes frames on 3 and reads frames on 4 (a pooled worker rings
/// its doorbells there and finds its frame rings at fd 5, see the engines crate's `ring.rs`).
const CHILD_WRITE_FD: i32 = 3;
const CHILD_READ_FD: i32 = 4;

/// How to start one kind of child.
#[derive(Debug, Clone)]
pub struct Launch {
    /// Absolute path of the interpreter.
    pub interpreter: PathBuf,
    /// Arguments before the bootstrap file name.
    pub args: Vec<OsString>,
    /// File name of the bootstrap inside the child's working directory.
    pub bootstrap_name: &'static str,
    /// The bootstrap's text.
    pub bootstrap: &'static str,
    /// `RLIMIT_CPU` in seconds: a backstop behind the host's own CPU polling.
    pub cpu_seconds: u64,
    /// The memory rlimit and its size in bytes.
    pub memory: (MemoryLimit, u64),
    /// The sandbox to apply before the interpreter starts.
    pub sandbox: Arc<Plan>,
}

/// Which rlimit bounds the child's memory.
#[derive(Debug, Clone, Copy)]
pub enum MemoryLimit {
    /// `RLIMIT_AS`: the whole address space (CPython).
    AddressSpace,
    /// `RLIMIT_DATA`: writable private memory; V8 reserves far more address space than it uses,
    /// so Node.js cannot start under `RLIMIT_AS`.
    Data,
}

/// A live child: its process, its group, its pipes and its working directory.
#[derive(Debug)]
pub struct Worker {
    /// The child process.
    pub child: Child,
    /// The child's pid, which is also its process group id.
    pub pid: i32,
    /// The pipes, until a run takes them over.
    pub io: Option<WorkerIo>,
    /// Removed when the worker is dropped, after the group is dead.
    _dir: tempfile::TempDir,
}

/// The host ends of a child's pipes.
#[derive(Debug)]
pub struct WorkerIo {
    /// Frames from the child (its fd 3).
    pub frames_in: pipe::Receiver,
    /// Frames to the child (its fd 4).
    pub frames_out: pipe::Sender,
    /// The program's stdout.
    pub stdout: ChildStdout,
    /// The program's stderr.
    pub stderr: ChildStderr,
}

impl Worker {
    /// Spawns one child in a fresh temporary directory, in its own process group, with an
    /// empty environment and the limits of `launch`.
    pub fn spawn(launch: &Launch) -> io::Result<Worker> {
        Worker::spawn_with(launch, None)
    }

    /// As [`Worker::spawn`], with `extra` placed at fd `extra.1` in the child as well.
    pub fn spawn_with(launch: &Launch, extra: Option<(BorrowedFd<'_>, i32)>) -> io::Result<Worker> {
        use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
        let dir = tempfile::Builder::new()
            .prefix("dsh-code-")
            .permissions(std::fs::Permissions::from_mode(0o700))
            .tempdir()?;
        // Owner-only whatever the umask: no other user reads the bootstrap or the run's files.
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700))?;
        {
            use std::io::Write;
            let mut file = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(dir.path().join(launch.bootstrap_name))?;
            file.write_all(launch.bootstrap.as_bytes())?;
        }
        let mut confinement = launch.sandbox.prepare(dir.path())?;
        let (host_read, child_write) = io::pipe()?;
        let (child_read, host_write) = io::pipe()?;
        let (child_write_raw, child_read_raw) = (child_write.as_raw_fd(), child_read.as_raw_fd());
        let extra_raw = extra.map(|(fd, target)| (fd.as_raw_fd(), target));
        let (cpu_seconds, (memory_kind, memory_bytes)) = (launch.cpu_seconds, launch.memory);

        let mut command = Command::new(&launch.interpreter);
        command
            .args(&launch.args)
            .arg(launch.bootstrap_name)
            .env_clear()
            .current_dir(dir.path())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .kill_on_drop(true);
        // SAFETY: the closure runs in the forked child before exec and only makes
        // async-signal-safe calls (fcntl, dup2, setrlimit, prctl and the sandbox's syscalls) on
        // values prepared before the fork; the two raw descriptors stay open in the parent
        // until after the spawn.
        #[allow(unsafe_code)]
        unsafe {
            command.pre_exec(move || {
                // First, while the ruleset's descriptor cannot have been replaced by the
                // protocol descriptors placed below.
                confinement.apply()?;
                // Move both ends above the target numbers first, so that placing one cannot
                // close the other.
                let w =
                    rustix::io::fcntl_dupfd_cloexec(BorrowedFd::borrow_raw(child_write_raw), 10)?;
                let r =
                    rustix::io::fcntl_dupfd_cloexec(BorrowedFd::borrow_raw(child_read_raw), 10)?;
                let x = match extra_raw {
                    Some((fd, target)) => Some((
                        rustix::io::fcntl_dupfd_cloexec(BorrowedFd::borrow_raw(fd), 10)?,
                        target,
                    )),
                    None => None,
                };
                // Raw dup2: rustix's wants the target as an `OwnedFd`, and fds 3 and 4 are not
                // owned by anything in the child.
                cvt(libc::dup2(w.as_raw_fd(), CHILD_WRITE_FD))?;
                cvt(libc::dup2(r.as_raw_fd(), CHILD_READ_FD))?;
                if let Some((x, target)) = &x {
                    cvt(libc::dup2(x.as_raw_fd(), *target))?;
                }
                set_limit(Resource::Core, 0)?;
                set_limit(Resource::Cpu, cpu_seconds)?;
                let resource = match memory_kind {
                    MemoryLimit::AddressSpace => Resource::As,
                    MemoryLimit::Data => Resource::Data,
                };
                set_limit(resource, memory_bytes)?;
                // Orphaned descendants are re-parented to the interpreter instead of init, so
                // the tree stays whole for accounting and for the kill at settle.
                #[cfg(target_os = "linux")]
                rustix::process::set_child_subreaper(Pid::from_raw(1))?;
                Ok(())
            });
        }
        let mut child = command.spawn()?;
        drop((child_write, child_read));
        let pid = child
            .id()
            .and_then(|id| i32::try_from(id).ok())
            .ok_or_else(|| io::Error::other("the child exited before it could be tracked"))?;
        let (Some(stdout), Some(stderr)) = (child.stdout.take(), child.stderr.take()) else {
            kill_group(pid);
            return Err(io::Error::other("the child's output pipes are missing"));
        };
        let frames_in = pipe::Receiver::from_owned_fd(OwnedFd::from(host_read));
        let frames_out = pipe::Sender::from_owned_fd(OwnedFd::from(host_write));
        let (frames_in, frames_out) = match (frames_in, frames_out) {
            (Ok(i), Ok(o)) => (i, o),
            (Err(e), _) | (_, Err(e)) => {
                kill_group(pid);
                return Err(e);
            }
        };
        Ok(Worker {
            child,
            pid,
            io: Some(WorkerIo {
                frames_in,
                frames_out,
                stdout,
                stderr,
            }),
            _dir: dir,
        })
    }

    /// Whether the child is still running (not yet exited).
    pub fn is_alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }
}

impl Worker {
    /// Kills the tree while the interpreter is still unreaped (its pid cannot have been reused
    /// then), and the process group in any case.
    pub fn kill(&mut self) {
        if self.child.id().is_some() {
            kill_tree(self.pid);
        }
        kill_group(self.pid);
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        // Whatever path drops a worker (settled run, dropped run future, disposal), the whole
        // tree dies with it: descendants included, whatever group or session they moved to.
        self.kill();
    }
}

fn cvt(ret: libc::c_int) -> io::Result<libc::c_int> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

fn set_limit(resource: Resource, value: u64) -> io::Result<()> {
    let limit = Rlimit {
        current: Some(value),
        maximum: Some(value),
    };
    Ok(rustix::process::setrlimit(resource, limit)?)
}

/// Sends `signal` to process `pid`; an already gone process is no error worth reporting.
fn signal(pid: i32, signal: Signal) {
    if let Some(pid) = Pid::from_raw(pid) {
        let _ = rustix::process::kill_process(pid, signal);
    }
}

/// Sends `SIGKILL` to every process of group `pgid`. Harmless if the group is already gone.
pub(crate) fn kill_group(pgid: i32) {
    if pgid > 1
        && let Some(pgid) = Pid::from_raw(pgid)
    {
        let _ = rustix::process::kill_process_group(pgid, Signal::KILL);
    }
}

/// Most processes one tree may hold before the rest are ignored for accounting (they are still
/// killed: the group and the interpreter's death take them).
const MAX_TREE: usize = 4_096;

/// `root` and every live or zombie descendant, parents before children, from the
/// `/proc/<pid>/task/<tid>/children` lists. The interpreter is a child subreaper, so orphans
/// stay in its tree.
pub(crate) fn tree(root: i32) -> Vec<i32> {
    let mut all = vec![root];
    let mut next = 0;
    while next < all.len() && all.len() < MAX_TREE {
        let pid = all[next];
        next += 1;
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
            continue;
        };
        for task in tasks.flatten() {
            let path = task.path().join("children");
            let Ok(text) = std::fs::read_to_string(path) else {
                continue;
            };
            all.extend(
                text.split_whitespace()
                    .filter_map(|p| p.parse::<i32>().ok()),
            );
        }
    }
    all.truncate(MAX_TREE);
    all
}

/// The start time of `pid` (proc(5) field 22).
pub(crate) fn start_time(pid: i32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat[stat.rfind(')')? + 1..]
        .split_whitespace()
        .nth(19)?
        .parse()
        .ok()
}

/// Kills, with their trees, the processes of `seen` (pid → start time) that are still the same
/// processes: those a run's tree held at a sample, in case its interpreter ended first and they
/// were re-parented away from it.
pub(crate) fn kill_seen(seen: &std::collections::HashMap<i32, u64>) {
    for (&pid, &started) in seen {
        if start_time(pid) == Some(started) {
            kill_tree(pid);
        }
    }
}

/// What a process tree uses: CPU (user + system, ms, including reaped children) and resident
/// memory (bytes, shared pages counted in every process that maps them).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Usage {
    pub cpu_ms: u64,
    pub rss_bytes: u64,
    /// Sum of the processes' resident high-water marks (`VmHWM`), bytes.
    pub peak_rss_bytes: u64,
}

/// The usage of `pids` summed; `None` when the first (the root) is gone.
pub(crate) fn usage(pids: &[i32]) -> Option<Usage> {
    let mut total = Usage::default();
    for (i, &pid) in pids.iter().enumerate() {
        match (cpu_time_ms(pid), memory_of(pid)) {
            (Some(cpu), memory) => {
                total.cpu_ms += cpu;
                let (rss, peak) = memory.unwrap_or((0, 0));
                total.rss_bytes += rss;
                total.peak_rss_bytes += peak;
            }
            (None, _) if i == 0 => return None,
            (None, _) => {}
        }
    }
    Some(total)
}

/// CPU time (user + system, in ms) used by process `pid` and its reaped children, read from
/// `/proc/<pid>/stat` (proc(5) fields 14–17). `None` once the process is gone.
pub fn cpu_time_ms(pid: i32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may hold spaces and parentheses: fields restart after the
    // last `)`, at field 3.
    let rest = &stat[stat.rfind(')')? + 1..];
    let ticks: u64 = rest
        .split_whitespace()
        .skip(11)
        .take(4)
        .map(|f| f.parse::<u64>().ok())
        .sum::<Option<u64>>()?;
    Some(ticks * 1000 / clock_ticks_per_second())
}

/// Resident size and its high-water mark of `pid`, bytes, from `/proc/<pid>/status` (`VmRSS`
/// counts anonymous, file and shared memory: V8's heap and off-heap buffers alike).
fn memory_of(pid: i32) -> Option<(u64, u64)> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let field = |name: &str| -> Option<u64> {
        let line = status.lines().find(|l| l.starts_with(name))?;
        let kb: u64 = line[name.len()..]
            .trim()
            .trim_end_matches("kB")
            .trim()
            .parse()
            .ok()?;
        Some(kb * 1024)
    };
    Some((field("VmRSS:")?, field("VmHWM:").unwrap_or(0)))
}

/// Kills `root`'s whole tree with `SIGKILL`: first every process is stopped (a stopped process
/// cannot fork), until a pass finds nothing new, then all are killed, the root last so that
/// nothing is orphaned to init while the others die. Its process group is killed too.
pub(crate) fn kill_tree(root: i32) {
    if root <= 1 {
        return;
    }
    let mut seen: Vec<i32> = Vec::new();
    for _ in 0..64 {
        let now = tree(root);
        let fresh: Vec<i32> = now.iter().copied().filter(|p| !seen.contains(p)).collect();
        if fresh.is_empty() {
            break;
        }
        for &pid in &fresh {
            signal(pid, Signal::STOP);
        }
        seen.extend(fresh);
    }
    for &pid in seen.iter().rev() {
        signal(pid, Signal::KILL);
    }
    kill_group(root);
}

fn clock_ticks_per_second() -> u64 {
    Some(rustix::param::clock_ticks_per_second())
        .filter(|&ticks| ticks > 0)
        .unwrap_or(100)
}

/// Describes how a child ended, e.g. `exited with code 1` or `was killed by signal 6 (SIGABRT)`.
pub(crate) fn describe_exit(status: std::process::ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    if let Some(code) = status.code() {
        format!("exited with code {code}")
    } else if let Some(signal) = status.signal() {
        let name = [
            (Signal::ABORT, " (SIGABRT)"),
            (Signal::KILL, " (SIGKILL)"),
            (Signal::SEGV, " (SIGSEGV)"),
            (Signal::XCPU, " (SIGXCPU)"),
            (Signal::TRAP, " (SIGTRAP)"),
            (Signal::BUS, " (SIGBUS)"),
        ]
        .iter()
        .find(|(known, _)| known.as_raw() == signal)
        .map_or("", |(_, name)| name);
        format!("was killed by signal {signal}{name}")
    } else {
        "ended".to_owned()
    }
}
