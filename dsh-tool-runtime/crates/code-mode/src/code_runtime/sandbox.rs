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
use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch,
};
use serde::{Deserialize, Serialize};

use super::CodeRuntimeError;

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

/// Whether the kernel has seccomp: `PR_GET_SECCOMP` fails with `EINVAL` without it.
#[cfg(target_os = "linux")]
fn seccomp_available() -> bool {
    rustix::thread::secure_computing_mode().is_ok()
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

/// Bytes read from the head of an executable to find its program interpreter. Linkers put the
/// ELF header, the program headers and `PT_INTERP` in the first page (`PT_PHDR` must lie in the
/// first loaded segment); an executable whose headers lie past this is refused, so the host never
/// reads more of it (Node.js is some 100 MiB).
#[cfg(target_os = "linux")]
const ELF_HEAD_BYTES: u64 = 64 << 10;

/// The longest program interpreter path accepted, `PATH_MAX` with its NUL.
#[cfg(target_os = "linux")]
const MAX_INTERP_BYTES: u64 = 4096;

/// The program interpreter (`PT_INTERP`, e.g. `/lib64/ld-linux-x86-64.so.2`) of an ELF
/// executable (32 or 64 bits, either byte order), canonicalized: the sandbox must let the child
/// execute it too. `Ok(None)` for a file that is not ELF or has no interpreter (static). Reads at
/// most [`ELF_HEAD_BYTES`] of the file.
///
/// # Errors
/// The reason, for a file that cannot be read, an ELF file whose headers are malformed or lie
/// past [`ELF_HEAD_BYTES`], or an interpreter path that is too long, not UTF-8 or names no file.
#[cfg(target_os = "linux")]
fn elf_loader(executable: &Path) -> Result<Option<PathBuf>, String> {
    use std::io::Read;
    let mut head = Vec::new();
    std::fs::File::open(executable)
        .and_then(|file| file.take(ELF_HEAD_BYTES).read_to_end(&mut head))
        .map_err(|err| format!("cannot be read: {err}"))?;
    if !head.starts_with(&object::elf::ELFMAG) {
        return Ok(None);
    }
    // `e_ident[EI_CLASS]`, the byte after the magic: 32 or 64 bits.
    match head.get(4).copied() {
        Some(object::elf::ELFCLASS64) => {
            program_interpreter::<object::elf::FileHeader64<object::Endianness>>(&head)
        }
        Some(object::elf::ELFCLASS32) => {
            program_interpreter::<object::elf::FileHeader32<object::Endianness>>(&head)
        }
        _ => Err("is an ELF file of no known class".to_owned()),
    }
}

/// [`elf_loader`] for the ELF header type `Elf`, on the file's first bytes `head`.
#[cfg(target_os = "linux")]
fn program_interpreter<Elf>(head: &[u8]) -> Result<Option<PathBuf>, String>
where
    Elf: object::read::elf::FileHeader<Endian = object::Endianness>,
{
    use object::read::elf::ProgramHeader;
    let malformed = |err: object::read::Error| {
        format!(
            "has ELF headers that are malformed or past its first {ELF_HEAD_BYTES} bytes: {err}"
        )
    };
    let header = Elf::parse(head).map_err(malformed)?;
    let endian = header.endian().map_err(malformed)?;
    for segment in header.program_headers(endian, head).map_err(malformed)? {
        if segment.p_type(endian) != object::elf::PT_INTERP {
            continue;
        }
        if Into::<u64>::into(segment.p_filesz(endian)) > MAX_INTERP_BYTES {
            return Err(format!(
                "names a program interpreter longer than {MAX_INTERP_BYTES} bytes"
            ));
        }
        let raw = segment
            .interpreter(endian, head)
            .map_err(malformed)?
            .unwrap_or_default();
        let path = std::str::from_utf8(raw)
            .map_err(|_| "names a program interpreter that is not UTF-8".to_owned())?;
        return std::fs::canonicalize(path).map(Some).map_err(|err| {
            format!("names the program interpreter `{path}`, which cannot be resolved: {err}")
        });
    }
    Ok(None)
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

/// The seccomp filter: default allow; no new processes (`fork`, `vfork`, `clone` without
/// `CLONE_THREAD` ⇒ `EPERM`; `clone3` ⇒ `ENOSYS`, so libc falls back to `clone`), no sockets
/// (`socket` ⇒ `EACCES`; `socketpair` stays for event loops' self-pipes), no `io_uring` (it
/// would bypass the filter; libuv falls back on `ENOSYS`), and none of the calls that change
/// namespaces, mounts, kernel state or trace other processes.
///
/// Syscall numbers come from `libc`'s tables: neither rustix nor seccompiler exports them.
#[cfg(target_os = "linux")]
fn build_filter() -> Result<Vec<BpfProgram>, seccompiler::BackendError> {
    let arch = TargetArch::try_from(std::env::consts::ARCH)?;
    let errno = |e: rustix::io::Errno| e.raw_os_error() as u32;
    let eperm = errno(rustix::io::Errno::PERM);
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    let clone_without_thread = SeccompRule::new(vec![SeccompCondition::new(
        0,
        SeccompCmpArgLen::Qword,
        SeccompCmpOp::MaskedEq(libc::CLONE_THREAD as u64),
        0,
    )?])?;
    rules.insert(libc::SYS_clone, vec![clone_without_thread]);
    let denied: &[i64] = &[
        #[cfg(target_arch = "x86_64")]
        libc::SYS_fork,
        #[cfg(target_arch = "x86_64")]
        libc::SYS_vfork,
        libc::SYS_execveat,
        libc::SYS_ptrace,
        libc::SYS_process_vm_readv,
        libc::SYS_process_vm_writev,
        libc::SYS_unshare,
        libc::SYS_setns,
        libc::SYS_mount,
        libc::SYS_umount2,
        libc::SYS_pivot_root,
        libc::SYS_chroot,
        libc::SYS_bpf,
        libc::SYS_perf_event_open,
        libc::SYS_userfaultfd,
        libc::SYS_keyctl,
        libc::SYS_add_key,
        libc::SYS_request_key,
        libc::SYS_kexec_load,
        libc::SYS_init_module,
        libc::SYS_finit_module,
        libc::SYS_delete_module,
        libc::SYS_reboot,
    ];
    for &nr in denied {
        rules.insert(nr, Vec::new());
    }
    let mut errno_rules: BTreeMap<i64, (u32, Vec<SeccompRule>)> =
        rules.into_iter().map(|(nr, r)| (nr, (eperm, r))).collect();
    let enosys = errno(rustix::io::Errno::NOSYS);
    errno_rules.insert(libc::SYS_clone3, (enosys, Vec::new()));
    errno_rules.insert(libc::SYS_io_uring_setup, (enosys, Vec::new()));
    errno_rules.insert(
        libc::SYS_socket,
        (errno(rustix::io::Errno::ACCESS), Vec::new()),
    );
    // One seccompiler filter has one match action: one filter per errno. The kernel runs every
    // installed filter and takes the most restrictive answer.
    let mut by_errno: BTreeMap<u32, BTreeMap<i64, Vec<SeccompRule>>> = BTreeMap::new();
    for (nr, (errno, r)) in errno_rules {
        by_errno.entry(errno).or_default().insert(nr, r);
    }
    by_errno
        .into_iter()
        .map(|(errno, rules)| {
            let filter = SeccompFilter::new(
                rules,
                SeccompAction::Allow,
                SeccompAction::Errno(errno),
                arch,
            )?;
            filter.try_into()
        })
        .collect()
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

    #[cfg(target_os = "linux")]
    #[test]
    fn the_filter_compiles_for_this_machine() {
        let filters = build_filter().unwrap();
        assert_eq!(
            filters.len(),
            3,
            "one filter per errno: EPERM, EACCES, ENOSYS"
        );
        assert!(filters.iter().all(|f| !f.is_empty()));
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn the_elf_loader_is_found() {
        let loader = elf_loader(Path::new("/proc/self/exe")).unwrap();
        assert!(loader.is_some_and(|p| p.exists()));
    }

    /// A little-endian ELF64 executable head: the 64-byte header, then `phnum` program headers
    /// of 56 bytes at offset 64, each `(p_type, p_offset, p_filesz)`.
    #[cfg(target_os = "linux")]
    fn elf64(segments: &[(u32, u64, u64)], phoff: u64, phnum: u16) -> Vec<u8> {
        let mut bytes = vec![0u8; 64];
        bytes[..8].copy_from_slice(b"\x7fELF\x02\x01\x01\x00");
        bytes[16..18].copy_from_slice(&2u16.to_le_bytes()); // ET_EXEC
        bytes[18..20].copy_from_slice(&62u16.to_le_bytes()); // EM_X86_64
        bytes[20..24].copy_from_slice(&1u32.to_le_bytes());
        bytes[32..40].copy_from_slice(&phoff.to_le_bytes());
        bytes[52..54].copy_from_slice(&64u16.to_le_bytes());
        bytes[54..56].copy_from_slice(&56u16.to_le_bytes());
        bytes[56..58].copy_from_slice(&phnum.to_le_bytes());
        for &(p_type, offset, size) in segments {
            let mut header = vec![0u8; 56];
            header[..4].copy_from_slice(&p_type.to_le_bytes());
            header[8..16].copy_from_slice(&offset.to_le_bytes());
            header[32..40].copy_from_slice(&size.to_le_bytes());
            bytes.extend(header);
        }
        bytes
    }

    #[cfg(target_os = "linux")]
    fn loader_of(bytes: &[u8]) -> Result<Option<PathBuf>, String> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("exe");
        std::fs::write(&path, bytes).unwrap();
        elf_loader(&path)
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn the_elf_loader_is_read_from_the_head_of_the_file() {
        let mut exe = elf64(&[(3, 120, 10)], 64, 1);
        exe.extend(b"/dev/null\0");
        assert_eq!(loader_of(&exe), Ok(Some(PathBuf::from("/dev/null"))));
        // Static, or not ELF at all: no loader.
        assert_eq!(loader_of(&elf64(&[(1, 0, 0)], 64, 1)), Ok(None));
        assert_eq!(loader_of(b"#!/bin/sh\n"), Ok(None));
        assert_eq!(loader_of(b""), Ok(None));
        // An interpreter past the head is refused, whatever the file's size: it is never read.
        let mut far = elf64(&[(3, ELF_HEAD_BYTES + 8, 10)], 64, 1);
        far.resize(usize::try_from(ELF_HEAD_BYTES).unwrap() + 8, 0);
        far.extend(b"/dev/null\0");
        assert!(loader_of(&far).is_err());
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn hostile_elf_headers_are_errors_not_panics() {
        let cases: Vec<Vec<u8>> = vec![
            // Truncated header, unknown class.
            b"\x7fELF\x02\x01".to_vec(),
            b"\x7fELF\x07\x01\x01\x00".to_vec(),
            // Program headers at an offset that overflows, or past the file.
            elf64(&[], u64::MAX - 8, 2),
            elf64(&[], 64, u16::MAX - 1),
            // An interpreter whose offset plus size overflows, past the file, too long, without
            // its NUL, not UTF-8, naming no file.
            elf64(&[(3, u64::MAX - 1, 16)], 64, 1),
            elf64(&[(3, 120, 1 << 40)], 64, 1),
            elf64(&[(3, 120, MAX_INTERP_BYTES + 1)], 64, 1),
            [elf64(&[(3, 120, 3)], 64, 1), b"/a/".to_vec()].concat(),
            [elf64(&[(3, 120, 3)], 64, 1), b"\xff\xfe\0".to_vec()].concat(),
            [elf64(&[(3, 120, 9)], 64, 1), b"/nowhere\0".to_vec()].concat(),
        ];
        for (i, case) in cases.iter().enumerate() {
            assert!(loader_of(case).is_err(), "case {i}: {:?}", loader_of(case));
        }
    }
}
