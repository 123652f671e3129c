//! The OS sandbox of the subprocess runtimes: Landlock for the filesystem, TCP and scopes, a
//! seccomp filter against new processes and sockets, no capabilities and `no_new_privs`.
//!
//! Everything that allocates (the Landlock ruleset with its path rules, the BPF program) is
//! built in the host before the fork; the child only makes plain syscalls on what it inherited
//! ([`Confinement::apply`]), which is all that is safe between `fork` and `exec`.
//!
//! Landlock and seccomp are Linux facilities. Elsewhere the sandbox is unavailable:
//! [`Sandbox::Enforce`] fails with [`CodeRuntimeError::SandboxUnavailable`] and
//! [`Sandbox::Auto`] runs the child unconfined and says so in [`SandboxStatus::missing`].

use std::io;
use std::path::{Path, PathBuf};
#[cfg(target_os = "linux")]
use std::{collections::BTreeMap, sync::Arc};

#[cfg(target_os = "linux")]
use landlock::{
    ABI, Access, AccessFs, AccessNet, BitFlags, CompatLevel, Compatible, PathBeneath, PathFd,
    Ruleset, RulesetAttr, RulesetCreated, RulesetCreatedAttr, Scope,
};
#[cfg(target_os = "linux")]
use seccompiler::BpfProgram;
use serde::{Deserialize, Serialize};

use super::CodeRuntimeError;

#[cfg(target_os = "linux")]
mod elf_interpreter;
#[cfg(target_os = "linux")]
mod seccomp_filter;

#[cfg(target_os = "linux")]
use elf_interpreter::elf_loader;
#[cfg(target_os = "linux")]
use seccomp_filter::{build_filter, seccomp_available};

/// How much of the OS sandbox a subprocess runtime applies to each child (Linux).
///
/// Sandboxed children can read only the interpreter, its libraries and the bootstrap, read and
/// write only their own scratch directory, open no socket (TCP is also denied by Landlock), send
/// no signal and reach no abstract unix socket outside the run, start no process (the
/// interpreter is the only file they may execute, replacing themselves), hold no capability and
/// run with `no_new_privs`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum Sandbox {
    /// All of it, or the runtime does not start: [`CodeRuntimeError::SandboxUnavailable`]
    /// names what the kernel lacks.
    Enforce,
    /// What the kernel offers; [`SandboxStatus::missing`] says what it does not.
    #[default]
    Auto,
    /// None of it: the containment of DSH (own process group, empty environment, budgets), for
    /// trusted programs that need subprocesses or the network. Budgets then cover the whole
    /// process tree.
    Off,
}

impl Sandbox {
    /// The wire name: `enforce`, `auto` or `off`.
    pub fn as_str(self) -> &'static str {
        match self {
            Sandbox::Enforce => "enforce",
            Sandbox::Auto => "auto",
            Sandbox::Off => "off",
        }
    }
}

/// What the sandbox of a runtime gives each child, as found on this kernel.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct SandboxStatus {
    /// The mode the runtime was configured with.
    pub mode: Sandbox,
    /// The kernel's Landlock ABI version (0: none).
    pub landlock_abi: u32,
    /// Filesystem confined to the interpreter, its libraries, the bootstrap and the scratch
    /// directory (Landlock ABI 1+; ABI 3+ also covers truncation).
    pub filesystem: bool,
    /// No network: sockets refused by seccomp, TCP bind/connect also denied by Landlock (ABI 4+).
    pub network: bool,
    /// Signals and abstract unix sockets scoped to the run (Landlock ABI 6+).
    pub scopes: bool,
    /// No new processes (seccomp) and the interpreter as the only executable file (Landlock).
    pub processes: bool,
    /// `no_new_privs` set and every capability dropped.
    pub no_new_privs: bool,
    /// What the configured mode wanted and this kernel cannot give, in words; empty when
    /// nothing is missing (always empty for [`Sandbox::Off`]).
    pub missing: Vec<String>,
}

impl SandboxStatus {
    /// Whether any confinement is applied.
    pub fn is_active(&self) -> bool {
        self.filesystem || self.network || self.scopes || self.processes || self.no_new_privs
    }
}

/// Landlock ABI version of the running kernel, from `landlock_create_ruleset(2)`'s version query.
#[cfg(target_os = "linux")]
fn kernel_landlock_abi() -> u32 {
    const LANDLOCK_CREATE_RULESET_VERSION: libc::c_uint = 1;
    // Raw syscall: the landlock crate reports the kernel's ABI only after `restrict_self`, and
    // rustix has no Landlock calls. SAFETY: the version query takes no attribute pointer and
    // creates no descriptor.
    #[allow(unsafe_code)]
    let v = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    u32::try_from(v).unwrap_or(0)
}

/// What the sandbox names as missing where the OS has neither Landlock nor seccomp.
#[cfg(any(not(target_os = "linux"), test))]
const UNAVAILABLE_ON_THIS_OS: &str =
    "Landlock and seccomp (sandbox unavailable on this OS: they are Linux-only)";

/// What `mode` gives on an OS without Landlock and seccomp: nothing.
///
/// # Errors
///
/// [`CodeRuntimeError::SandboxUnavailable`] under [`Sandbox::Enforce`].
#[cfg(any(not(target_os = "linux"), test))]
fn without_os_sandbox(mode: Sandbox) -> Result<SandboxStatus, CodeRuntimeError> {
    if mode == Sandbox::Enforce {
        return Err(CodeRuntimeError::SandboxUnavailable(
            UNAVAILABLE_ON_THIS_OS.to_owned(),
        ));
    }
    let mut status = decide(Sandbox::Off, 0, false)?;
    status.mode = mode;
    if mode == Sandbox::Auto {
        status.missing.push(UNAVAILABLE_ON_THIS_OS.to_owned());
    }
    Ok(status)
}

/// What `mode` gives on a kernel with Landlock ABI `abi` and (or without) seccomp.
///
/// # Errors
///
/// [`CodeRuntimeError::SandboxUnavailable`] under [`Sandbox::Enforce`] when anything is missing.
fn decide(mode: Sandbox, abi: u32, seccomp: bool) -> Result<SandboxStatus, CodeRuntimeError> {
    let on = mode != Sandbox::Off;
    let mut status = SandboxStatus {
        mode,
        landlock_abi: abi,
        filesystem: on && abi >= 3,
        network: on && seccomp && abi >= 4,
        scopes: on && abi >= 6,
        processes: on && seccomp && abi >= 1,
        no_new_privs: on,
        missing: Vec::new(),
    };
    if on {
        for (ok, what) in [
            (
                abi >= 3,
                "filesystem confinement (Landlock ABI 3, Linux 6.2)",
            ),
            (abi >= 4, "TCP denial (Landlock ABI 4, Linux 6.7)"),
            (
                abi >= 6,
                "signal and abstract-socket scoping (Landlock ABI 6, Linux 6.12)",
            ),
            (seccomp, "process and socket denial (seccomp)"),
        ] {
            if !ok {
                status.missing.push(what.to_owned());
            }
        }
    }
    if mode == Sandbox::Enforce && !status.missing.is_empty() {
        return Err(CodeRuntimeError::SandboxUnavailable(
            status.missing.join(", "),
        ));
    }
    Ok(status)
}

/// The sandbox plan of one runtime: what to allow, decided once.
#[derive(Debug)]
pub struct Plan {
    status: SandboxStatus,
    /// Files and directories the child may read (beneath).
    #[cfg(target_os = "linux")]
    read: Vec<PathBuf>,
    /// The only files the child may execute: the interpreter and the ELF loader the kernel
    /// starts it with.
    #[cfg(target_os = "linux")]
    executables: Vec<PathBuf>,
    #[cfg(target_os = "linux")]
    filter: Option<Arc<Vec<BpfProgram>>>,
}

#[cfg(not(target_os = "linux"))]
impl Plan {
    /// No OS sandbox here: [`Sandbox::Enforce`] is refused, anything else runs unconfined.
    pub fn new(
        mode: Sandbox,
        _interpreter: &Path,
        _libraries: &[PathBuf],
    ) -> Result<Plan, CodeRuntimeError> {
        Ok(Plan {
            status: without_os_sandbox(mode)?,
        })
    }

    /// What the plan's child gets, as reported on a run's outcome.
    pub fn status(&self) -> &SandboxStatus {
        &self.status
    }

    /// Nothing to prepare: the child is not confined.
    pub(crate) fn prepare(&self, _scratch: &Path) -> io::Result<Confinement> {
        Ok(Confinement)
    }
}

/// What one child applies to itself between `fork` and `exec`: nothing on this OS.
#[cfg(not(target_os = "linux"))]
pub(crate) struct Confinement;

#[cfg(not(target_os = "linux"))]
impl Confinement {
    pub(crate) fn apply(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[cfg(target_os = "linux")]
impl Plan {
    /// Decides the plan for `interpreter` whose libraries live under `libraries`.
    pub fn new(
        mode: Sandbox,
        interpreter: &Path,
        libraries: &[PathBuf],
    ) -> Result<Plan, CodeRuntimeError> {
        let abi = if mode == Sandbox::Off {
            0
        } else {
            kernel_landlock_abi()
        };
        let filter = if mode != Sandbox::Off && seccomp_available() {
            Some(Arc::new(build_filter().map_err(|e| {
                CodeRuntimeError::SandboxUnavailable(format!("seccomp filter: {e}"))
            })?))
        } else {
            None
        };
        let status = decide(mode, abi, filter.is_some())?;
        let mut read: Vec<PathBuf> = [
            "/lib",
            "/lib64",
            "/usr/lib",
            "/usr/lib64",
            "/usr/local/lib",
            "/etc/ld.so.cache",
        ]
        .into_iter()
        .map(PathBuf::from)
        .chain(libraries.iter().cloned())
        .filter(|p| p.exists())
        .collect();
        read.sort();
        read.dedup();
        // Only the Landlock rules need the loader: an unconfined child is not read for it.
        let loader = if status.landlock_abi >= 1 {
            elf_loader(interpreter).map_err(|reason| {
                CodeRuntimeError::InvalidConfig(format!(
                    "the interpreter `{}` {reason}",
                    interpreter.display()
                ))
            })?
        } else {
            None
        };
        Ok(Plan {
            status,
            read,
            executables: std::iter::once(interpreter.to_path_buf())
                .chain(loader)
                .collect(),
            filter,
        })
    }

    /// What the plan's child gets, as reported on a run's outcome.
    pub fn status(&self) -> &SandboxStatus {
        &self.status
    }

    /// Builds the confinement of one child whose scratch directory is `scratch`. Runs in the
    /// host: it opens the rule paths and creates the Landlock ruleset.
    pub(crate) fn prepare(&self, scratch: &Path) -> io::Result<Confinement> {
        if self.status.mode == Sandbox::Off {
            return Ok(Confinement::default());
        }
        let ruleset = if self.status.landlock_abi >= 1 {
            Some(self.ruleset(scratch).map_err(io::Error::other)?)
        } else {
            None
        };
        Ok(Confinement {
            ruleset,
            filter: self.filter.clone(),
            active: true,
        })
    }

    fn ruleset(
        &self,
        scratch: &Path,
    ) -> Result<RulesetCreated, Box<dyn std::error::Error + Send + Sync>> {
        let abi = ABI::V7;
        let read = AccessFs::ReadFile | AccessFs::ReadDir;
        let mut ruleset = Ruleset::default()
            .set_compatibility(CompatLevel::BestEffort)
            .handle_access(AccessFs::from_all(abi))?;
        if self.status.landlock_abi >= 4 {
            ruleset = ruleset.handle_access(AccessNet::BindTcp | AccessNet::ConnectTcp)?;
        }
        if self.status.landlock_abi >= 6 {
            ruleset = ruleset.scope(Scope::AbstractUnixSocket | Scope::Signal)?;
        }
        let mut created = ruleset.create()?;
        for path in &self.read {
            if let Ok(fd) = PathFd::new(path) {
                let access = if path.is_dir() {
                    read
                } else {
                    AccessFs::ReadFile.into()
                };
                created = created.add_rule(PathBeneath::new(fd, access))?;
            }
        }
        let rules: BTreeMap<&str, BitFlags<AccessFs>> = [
            ("/dev/null", AccessFs::ReadFile | AccessFs::WriteFile),
            ("/dev/urandom", AccessFs::ReadFile.into()),
            ("/dev/random", AccessFs::ReadFile.into()),
        ]
        .into_iter()
        .collect();
        for (path, access) in rules {
            if let Ok(fd) = PathFd::new(path) {
                created = created.add_rule(PathBeneath::new(fd, access))?;
            }
        }
        for executable in &self.executables {
            created = created.add_rule(PathBeneath::new(
                PathFd::new(executable)?,
                AccessFs::Execute | AccessFs::ReadFile,
            ))?;
        }
        created = created.add_rule(PathBeneath::new(
            PathFd::new(scratch)?,
            AccessFs::from_all(abi) & !AccessFs::Execute,
        ))?;
        Ok(created.no_new_privs(true))
    }
}

/// What one child applies to itself between `fork` and `exec`.
#[cfg(target_os = "linux")]
#[derive(Default)]
pub(crate) struct Confinement {
    ruleset: Option<RulesetCreated>,
    filter: Option<Arc<Vec<BpfProgram>>>,
    active: bool,
}

#[cfg(target_os = "linux")]
impl Confinement {
    /// Confines the calling (forked, single-threaded) process: drops every capability, sets
    /// `no_new_privs`, restricts itself with the Landlock ruleset and installs the seccomp
    /// filter, in that order (the filter last, so nothing it denies is needed afterwards).
    ///
    /// Only plain syscalls on memory prepared before the fork: async-signal-safe.
    pub(crate) fn apply(&mut self) -> io::Result<()> {
        if !self.active {
            return Ok(());
        }
        drop_capabilities()?;
        rustix::thread::set_no_new_privs(true)?;
        if let Some(ruleset) = self.ruleset.take() {
            ruleset
                .restrict_self()
                .map_err(|_| io::Error::other("landlock_restrict_self failed"))?;
        }
        for filter in self.filter.iter().flat_map(|f| f.iter()) {
            seccompiler::apply_filter(filter).map_err(|_| io::Error::last_os_error())?;
        }
        Ok(())
    }
}

/// Empties the bounding, ambient, inheritable, permitted and effective capability sets, so a
/// child of a root host holds no privilege over the machine even before exec.
///
/// rustix makes these calls directly (no allocation, no lock): safe between `fork` and `exec`.
#[cfg(target_os = "linux")]
fn drop_capabilities() -> io::Result<()> {
    use rustix::thread::{CapabilitySet, CapabilitySets};
    for cap in 0..64 {
        // EINVAL past the last capability, EPERM without CAP_SETPCAP (then there is nothing to
        // drop from the bounding set anyway).
        let _ = rustix::thread::remove_capability_from_bounding_set(
            CapabilitySet::from_bits_retain(1 << cap),
        );
    }
    let _ = rustix::thread::clear_ambient_capability_set();
    rustix::thread::set_capabilities(
        None,
        CapabilitySets {
            effective: CapabilitySet::empty(),
            permitted: CapabilitySet::empty(),
            inheritable: CapabilitySet::empty(),
        },
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn enforce_names_what_an_older_kernel_lacks() {
        let err = decide(Sandbox::Enforce, 5, true).unwrap_err();
        assert_eq!(
            err.to_string(),
            "dsh-code-runtime: the sandbox cannot be enforced on this kernel: signal and \
             abstract-socket scoping (Landlock ABI 6, Linux 6.12) missing"
        );
        assert!(decide(Sandbox::Enforce, 0, false).is_err());
        assert!(
            decide(Sandbox::Enforce, 7, true)
                .unwrap()
                .missing
                .is_empty()
        );
    }

    #[test]
    fn auto_applies_what_there_is_and_says_what_is_missing() {
        let status = decide(Sandbox::Auto, 3, true).unwrap();
        assert!(status.filesystem && status.processes && !status.network && !status.scopes);
        assert_eq!(status.missing.len(), 2, "{status:?}");
        let none = decide(Sandbox::Auto, 0, false).unwrap();
        assert!(!none.filesystem && !none.processes && none.missing.len() == 4);
        let off = decide(Sandbox::Off, 7, true).unwrap();
        assert!(!off.is_active() && off.missing.is_empty());
    }

    #[test]
    fn without_an_os_sandbox_enforce_fails_and_auto_says_so() {
        let err = without_os_sandbox(Sandbox::Enforce).unwrap_err();
        assert!(
            err.to_string()
                .contains("sandbox unavailable on this OS: they are Linux-only"),
            "{err}"
        );
        let auto = without_os_sandbox(Sandbox::Auto).unwrap();
        assert_eq!(auto.mode, Sandbox::Auto);
        assert!(!auto.is_active());
        assert_eq!(auto.missing, [UNAVAILABLE_ON_THIS_OS]);
        let off = without_os_sandbox(Sandbox::Off).unwrap();
        assert!(!off.is_active() && off.missing.is_empty());
    }
}
