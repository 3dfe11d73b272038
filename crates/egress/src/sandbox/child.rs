//! The sandbox child's side: it confines itself, then answers jobs.
//!
//! A tenant's JavaScript runs here, in QuickJS. The language has no I/O, but
//! QuickJS is C: a memory bug in it would give the tenant's code the process.
//! So before it reads its first job, the child gives up all it could reach:
//!
//! - every descriptor but its two pipes (stdin for jobs, stdout for answers):
//!   whatever the parent held open when it forked, another tenant's socket
//!   included, is closed;
//! - new descriptors, files, processes, locked memory and core dumps, by
//!   resource limits (`RLIMIT_NOFILE` 2, `RLIMIT_FSIZE`, `RLIMIT_NPROC`,
//!   `RLIMIT_MEMLOCK`, `RLIMIT_CORE` all 0), its address space (512 MiB) and
//!   its CPU over its life ([`CPU_SECS`]; the parent retires a child after
//!   [`super::MOST_JOBS`] jobs, well before it);
//! - the network and the host's users, in a user and network namespace of its
//!   own where the kernel allows one (else a network namespace alone, where it
//!   is root; else none, and the filter below still holds);
//! - capabilities (all dropped, where it is root without a user namespace)
//!   and privileges, for good (`no_new_privs`);
//! - every system call but the few a run needs (read its stdin, write its
//!   stdout, memory without `PROT_EXEC`, clocks, its alarm, randomness, exit),
//!   by a seccomp filter: anything else, `open` and `socket` and `execve`
//!   among them, fails with `EPERM`.
//!
//! It has no environment either (started with none): no master key, no
//! database URL. The parent is made undumpable ([`protect_parent`]), so even a
//! process of the same user cannot read its memory or `/proc/<pid>/environ`.

use std::collections::BTreeMap;
use std::io::{BufRead, Write};

use seccompiler::{SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter, SeccompRule};
use serde_json::{json, Value};

use super::{Answer, Job, ADDRESS_SPACE, ALARM_SECS, READY};
use crate::transform;

/// CPU a child may use over its whole life: a child whose parent is gone, and
/// that no longer reads its stdin, ends by this at the latest.
pub const CPU_SECS: u64 = 600;

/// What the child could give up: namespaces are where the kernel allows them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Namespaces {
    /// A user namespace (no capability on the host) with its own network and IPC.
    UserNetIpc,
    /// A network and IPC namespace, made as root where user namespaces are off.
    NetIpc,
    /// None: the kernel refused both (the seccomp filter still refuses sockets).
    None,
}

impl Namespaces {
    pub fn as_str(self) -> &'static str {
        match self {
            Namespaces::UserNetIpc => "user, network, ipc",
            Namespaces::NetIpc => "network, ipc",
            Namespaces::None => "none",
        }
    }
}

/// Gives up what the child does not need, as the module says. An error means
/// the child is not confined and must not run code.
pub fn confine() -> std::io::Result<Namespaces> {
    close_from(2);
    let limits = [
        (libc::RLIMIT_NOFILE, 2),
        (libc::RLIMIT_FSIZE, 0),
        (libc::RLIMIT_NPROC, 0),
        (libc::RLIMIT_MEMLOCK, 0),
        (libc::RLIMIT_CORE, 0),
        (libc::RLIMIT_MSGQUEUE, 0),
        (libc::RLIMIT_AS, ADDRESS_SPACE),
        (libc::RLIMIT_CPU, CPU_SECS),
    ];
    for (resource, most) in limits {
        lower(resource, most)?;
    }
    let namespaces = unshare();
    drop_capabilities()?;
    // SAFETY: prctl with PR_SET_NO_NEW_PRIVS takes integers only.
    if unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    let filter = filter().map_err(std::io::Error::other)?;
    seccompiler::apply_filter_all_threads(&filter).map_err(std::io::Error::other)?;
    Ok(namespaces)
}

/// Closes every descriptor from `first` on (stderr too: the child has nothing
/// to say there, and Rust's stderr ignores a closed descriptor).
fn close_from(first: u32) {
    // SAFETY: close_range takes integers; closing descriptors this process owns.
    let closed = unsafe { libc::syscall(libc::SYS_close_range, first, u32::MAX, 0) };
    if closed != 0 {
        // Kernels before 5.9: one by one, up to the descriptor limit.
        let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
        // SAFETY: getrlimit writes the struct it is given.
        unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) };
        for fd in first as u64..limit.rlim_cur.min(1 << 20) {
            // SAFETY: as above; a descriptor not open answers EBADF.
            unsafe { libc::close(fd as i32) };
        }
    }
}

/// Lowers a resource limit, soft and hard, to at most `most` (a hard limit only
/// goes down, so the child cannot raise it again).
fn lower(resource: libc::__rlimit_resource_t, most: u64) -> std::io::Result<()> {
    let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit and setrlimit read or write the struct they are given.
    unsafe {
        if libc::getrlimit(resource, &mut limit) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        let most = most.min(limit.rlim_max);
        if libc::setrlimit(resource, &libc::rlimit { rlim_cur: most, rlim_max: most }) != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Namespaces of the child's own, as many as the kernel gives. The child is
/// one thread here (a user namespace needs that).
fn unshare() -> Namespaces {
    // SAFETY: unshare takes flags; it changes only this process's namespaces.
    if unsafe { libc::unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWNET | libc::CLONE_NEWIPC) } == 0 {
        return Namespaces::UserNetIpc;
    }
    // SAFETY: as above.
    if unsafe { libc::unshare(libc::CLONE_NEWNET | libc::CLONE_NEWIPC) } == 0 {
        return Namespaces::NetIpc;
    }
    Namespaces::None
}

/// Drops every capability (effective, permitted, inheritable): a child of a
/// Hookgate run as root, where no user namespace took them already.
fn drop_capabilities() -> std::io::Result<()> {
    #[repr(C)]
    struct Header {
        version: u32,
        pid: i32,
    }
    #[repr(C)]
    #[derive(Clone, Copy)]
    struct Data {
        effective: u32,
        permitted: u32,
        inheritable: u32,
    }
    const VERSION_3: u32 = 0x2008_0522;
    let header = Header { version: VERSION_3, pid: 0 };
    let none = [Data { effective: 0, permitted: 0, inheritable: 0 }; 2];
    // SAFETY: capset reads the header and the two data structs it is given.
    if unsafe { libc::syscall(libc::SYS_capset, &header, none.as_ptr()) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// The system calls a run makes once the child is started (read off `strace`
/// of runs that throw, overflow their stack, run out of memory and time):
/// anything else fails with `EPERM`.
fn filter() -> Result<seccompiler::BpfProgram, seccompiler::BackendError> {
    let arch = std::env::consts::ARCH.try_into()?;
    let on = |arg: u8, value: u64| SeccompCondition::new(arg, SeccompCmpArgLen::Qword, SeccompCmpOp::Eq, value);
    let no_exec =
        || SeccompCondition::new(2, SeccompCmpArgLen::Dword, SeccompCmpOp::MaskedEq(libc::PROT_EXEC as u64), 0);
    // SAFETY: getpid takes nothing and cannot fail.
    let me = unsafe { libc::getpid() } as u64;
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    // Jobs in, answers out: its own two pipes only.
    rules.insert(libc::SYS_read, vec![SeccompRule::new(vec![on(0, 0)?])?]);
    rules.insert(libc::SYS_write, vec![SeccompRule::new(vec![on(0, 1)?])?]);
    // Memory, never executable: no code of the tenant's making can be run as code.
    rules.insert(libc::SYS_mmap, vec![SeccompRule::new(vec![no_exec()?])?]);
    rules.insert(libc::SYS_mprotect, vec![SeccompRule::new(vec![no_exec()?])?]);
    // An abort (QuickJS's assertions) signals this process only.
    rules.insert(libc::SYS_tgkill, vec![SeccompRule::new(vec![on(0, me)?])?]);
    // Giving memory back, the ways glibc does; not `MADV_HWPOISON` and the like.
    let advice = [
        libc::MADV_NORMAL,
        libc::MADV_RANDOM,
        libc::MADV_SEQUENTIAL,
        libc::MADV_WILLNEED,
        libc::MADV_DONTNEED,
        libc::MADV_FREE,
    ];
    let advice = advice.iter().map(|a| SeccompRule::new(vec![on(2, *a as u64)?])).collect::<Result<_, _>>()?;
    rules.insert(libc::SYS_madvise, advice);
    let any = [
        libc::SYS_munmap,
        libc::SYS_mremap,
        libc::SYS_brk,
        libc::SYS_futex,
        libc::SYS_sched_yield,
        libc::SYS_clock_gettime,
        libc::SYS_clock_getres,
        libc::SYS_gettimeofday,
        libc::SYS_getrandom,
        libc::SYS_rt_sigreturn,
        libc::SYS_rt_sigprocmask,
        libc::SYS_sigaltstack,
        libc::SYS_restart_syscall,
        libc::SYS_getpid,
        libc::SYS_gettid,
        libc::SYS_close,
        libc::SYS_exit,
        libc::SYS_exit_group,
        // The alarm that ends a run its parent gave up on (glibc's `alarm` is
        // `setitimer` where the kernel has no `alarm`).
        #[cfg(not(target_arch = "x86_64"))]
        libc::SYS_setitimer,
        #[cfg(target_arch = "x86_64")]
        libc::SYS_alarm,
        #[cfg(target_arch = "x86_64")]
        libc::SYS_time,
    ];
    for call in any {
        rules.insert(call, Vec::new());
    }
    let deny = SeccompAction::Errno(libc::EPERM as u32);
    SeccompFilter::new(rules, deny, SeccompAction::Allow, arch)?.try_into()
}

/// Makes this process undumpable: no core file of it (it holds the master
/// key), and no process of the same user may read its memory or
/// `/proc/<pid>/environ` (only a process with `CAP_SYS_PTRACE`). What a
/// sandbox child would reach first if it ever got out.
pub fn protect_parent() {
    // SAFETY: prctl with PR_SET_DUMPABLE takes integers only.
    unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0) };
}

/// Confines itself, then answers jobs until stdin ends (its parent gone, the
/// pipe closes), each under an alarm that ends a run the parent has given up on
/// or can no longer stop. (Not `PR_SET_PDEATHSIG`: it follows the thread that
/// started the child, and the blocking pool's threads come and go while their
/// children are pooled.)
pub fn serve() -> std::io::Result<()> {
    confine()?;
    let stdin = std::io::stdin();
    let mut stdout = std::io::stdout().lock();
    stdout.write_all(READY.as_bytes())?;
    stdout.flush()?;
    for line in stdin.lock().lines() {
        let line = line?;
        // SAFETY: alarm takes a number of seconds; SIGALRM's default ends the process.
        unsafe { libc::alarm(ALARM_SECS) };
        let answer: Answer = match serde_json::from_str::<Job>(&line) {
            Err(e) => Err(transform::TransformError::Engine(format!("a job the sandbox cannot read: {e}"))),
            Ok(Job { code, webhook: None, .. }) => transform::check(&code).map(|()| None),
            Ok(Job { code, variables, webhook: Some(w), max_body }) => {
                transform::run_now(&code, &variables, w, max_body).map(Some)
            }
        };
        // SAFETY: as above; 0 cancels the alarm.
        unsafe { libc::alarm(0) };
        let mut out = serde_json::to_vec(&answer).unwrap_or_else(|_| b"{\"Err\":{\"Engine\":\"unwritable\"}}".to_vec());
        out.push(b'\n');
        stdout.write_all(&out)?;
        stdout.flush()?;
    }
    Ok(())
}

/// `hookgate transform-sandbox --probe`: what a child can do before and after
/// it confines itself, as one line of JSON; what the tests hold the confinement
/// to. Each attempt reads `"ok"` or the error it got.
pub fn probe() -> std::io::Result<()> {
    let before = json!({
        "parentEnviron": open_parent_environ(),
        "inetSocket": socket(libc::AF_INET),
        "unixSocket": socket(libc::AF_UNIX),
    });
    let namespaces = confine()?;
    let after = json!({
        "parentEnviron": open_parent_environ(),
        "inetSocket": socket(libc::AF_INET),
        "unixSocket": socket(libc::AF_UNIX),
        "fork": fork(),
        "exec": exec(),
        "executableMemory": executable_memory(),
        "ptraceParent": ptrace_parent(),
        "raiseFileLimit": raise_file_limit(),
        "ignoreAlarm": ignore_alarm(),
    });
    let line = json!({ "before": before, "after": after, "namespaces": namespaces.as_str() });
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "{line}")?;
    stdout.flush()
}

fn said(ret: i64) -> Value {
    match ret {
        r if r >= 0 => json!("ok"),
        _ => json!(std::io::Error::last_os_error().to_string()),
    }
}

fn open_parent_environ() -> Value {
    // SAFETY: getppid takes nothing; open gets a NUL-terminated path.
    let path = format!("/proc/{}/environ\0", unsafe { libc::getppid() });
    let fd = unsafe { libc::open(path.as_ptr().cast(), libc::O_RDONLY | libc::O_CLOEXEC) };
    let out = said(fd as i64);
    if fd >= 0 {
        // SAFETY: the descriptor just opened.
        unsafe { libc::close(fd) };
    }
    out
}

fn socket(domain: i32) -> Value {
    // SAFETY: socket takes integers.
    let fd = unsafe { libc::socket(domain, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0) };
    let out = said(fd as i64);
    if fd >= 0 {
        // SAFETY: the descriptor just made.
        unsafe { libc::close(fd) };
    }
    out
}

fn fork() -> Value {
    // SAFETY: fork; a child made ends at once without running anything.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        unsafe { libc::_exit(0) };
    }
    said(pid as i64)
}

fn exec() -> Value {
    let path = b"/bin/true\0";
    let argv = [path.as_ptr().cast::<libc::c_char>(), std::ptr::null()];
    let envp = [std::ptr::null::<libc::c_char>()];
    // SAFETY: NUL-terminated path and null-terminated arrays; on success the
    // probe is replaced and says nothing, which the test reads as a failure.
    said(unsafe { libc::execve(path.as_ptr().cast(), argv.as_ptr(), envp.as_ptr()) } as i64)
}

fn executable_memory() -> Value {
    let prot = libc::PROT_READ | libc::PROT_WRITE | libc::PROT_EXEC;
    let flags = libc::MAP_PRIVATE | libc::MAP_ANONYMOUS;
    // SAFETY: an anonymous mapping the probe unmaps.
    let at = unsafe { libc::mmap(std::ptr::null_mut(), 4096, prot, flags, -1, 0) };
    if at == libc::MAP_FAILED {
        return said(-1);
    }
    // SAFETY: the mapping just made.
    unsafe { libc::munmap(at, 4096) };
    json!("ok")
}

fn ptrace_parent() -> Value {
    // SAFETY: ptrace with integers; on success the parent is detached at once.
    let parent = unsafe { libc::getppid() };
    let r = unsafe { libc::ptrace(libc::PTRACE_ATTACH, parent, 0, 0) };
    if r == 0 {
        unsafe { libc::ptrace(libc::PTRACE_DETACH, parent, 0, 0) };
    }
    said(r)
}

fn ignore_alarm() -> Value {
    // SAFETY: sigaction with a zeroed struct asking to ignore SIGALRM; on
    // success the probe only exits after.
    let mut action: libc::sigaction = unsafe { std::mem::zeroed() };
    action.sa_sigaction = libc::SIG_IGN;
    said(unsafe { libc::sigaction(libc::SIGALRM, &action, std::ptr::null_mut()) } as i64)
}

fn raise_file_limit() -> Value {
    let limit = libc::rlimit { rlim_cur: 1024, rlim_max: 1024 };
    // SAFETY: setrlimit reads the struct it is given.
    said(unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &limit) } as i64)
}
