//! The machine a run happened on, and the relay process seen from outside.

use std::fs;

use serde::Serialize;

/// Facts about the load-generating host, recorded with every report.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct Host {
    /// Host name.
    pub hostname: String,
    /// CPU model name.
    pub cpu: String,
    /// Logical CPUs available to this process.
    pub cpus: usize,
    /// Total memory in MiB.
    pub memory_mib: u64,
    /// Kernel release.
    pub kernel: String,
    /// Operating system and architecture this binary was built for.
    pub target: String,
}

impl Host {
    /// Reads the host facts (Linux `/proc`; `unknown` elsewhere).
    pub fn detect() -> Host {
        let read = |p: &str| fs::read_to_string(p).map(|s| s.trim().to_string()).ok();
        let cpu = read("/proc/cpuinfo")
            .and_then(|s| {
                s.lines()
                    .find(|l| l.starts_with("model name"))
                    .and_then(|l| l.split_once(':'))
                    .map(|(_, v)| v.trim().to_string())
            })
            .unwrap_or_else(|| "unknown".into());
        let memory_mib = read("/proc/meminfo")
            .and_then(|s| {
                s.lines()
                    .find(|l| l.starts_with("MemTotal:"))
                    .and_then(|l| l.split_whitespace().nth(1))
                    .and_then(|v| v.parse::<u64>().ok())
            })
            .map_or(0, |kib| kib / 1024);
        Host {
            hostname: read("/proc/sys/kernel/hostname").unwrap_or_else(|| "unknown".into()),
            cpu,
            cpus: std::thread::available_parallelism().map_or(1, |n| n.get()),
            memory_mib,
            kernel: read("/proc/sys/kernel/osrelease").unwrap_or_else(|| "unknown".into()),
            target: format!("{}-{}", std::env::consts::OS, std::env::consts::ARCH),
        }
    }

    /// One line for tables: `host: name, cpu ×N, MiB, kernel`.
    pub fn line(&self) -> String {
        format!(
            "host {}: {} × {} CPUs, {} MiB, Linux {}",
            self.hostname, self.cpu, self.cpus, self.memory_mib, self.kernel
        )
    }
}

/// Socket inodes in LISTEN state on `port` (IPv4 and IPv6).
fn listening_inodes(port: u16) -> Vec<u64> {
    let mut out = Vec::new();
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let Ok(text) = fs::read_to_string(table) else {
            continue;
        };
        for line in text.lines().skip(1) {
            let f: Vec<&str> = line.split_whitespace().collect();
            if f.len() < 10 || f[3] != "0A" {
                continue;
            }
            let local_port = f[1]
                .rsplit_once(':')
                .and_then(|(_, p)| u16::from_str_radix(p, 16).ok());
            if local_port == Some(port) {
                if let Ok(inode) = f[9].parse() {
                    out.push(inode);
                }
            }
        }
    }
    out
}

/// The process (of this user) that listens on `port`, if any.
pub fn listening_pid(port: u16) -> Option<u32> {
    let inodes = listening_inodes(port);
    if inodes.is_empty() {
        return None;
    }
    let wanted: Vec<String> = inodes.iter().map(|i| format!("socket:[{i}]")).collect();
    for entry in fs::read_dir("/proc").ok()?.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(fds) = fs::read_dir(entry.path().join("fd")) else {
            continue;
        };
        for fd in fds.flatten() {
            if let Ok(target) = fs::read_link(fd.path()) {
                if wanted.iter().any(|w| target.as_os_str() == w.as_str()) {
                    return Some(pid);
                }
            }
        }
    }
    None
}

/// Resident memory of `pid` in KiB: anonymous pages and the pages of
/// mapped files (an LMDB relay's database pages count here).
pub fn rss_kib(pid: u32) -> Option<u64> {
    status_kib(pid, "VmRSS")
}

/// The anonymous part of `pid`'s resident memory in KiB: what the process
/// allocated itself, without the mapped files' pages the kernel may drop.
pub fn rss_anon_kib(pid: u32) -> Option<u64> {
    status_kib(pid, "RssAnon")
}

/// A `/proc/PID/status` field given in kB.
fn status_kib(pid: u32, field: &str) -> Option<u64> {
    let status = fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
}

/// CPU time (user + system) of `pid` in seconds, from `/proc/PID/stat`.
pub fn cpu_seconds(pid: u32) -> Option<f64> {
    let ticks = clock_ticks()?;
    Some(cpu_ticks(pid)? as f64 / ticks as f64)
}

/// CPU time (user + system) of `pid` in clock ticks ([`clock_ticks`] a
/// second): fields 14 and 15 of `/proc/PID/stat`.
pub fn cpu_ticks(pid: u32) -> Option<u64> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after = &stat[stat.rfind(')')? + 2..];
    let f: Vec<&str> = after.split_whitespace().collect();
    let utime: u64 = f.get(11)?.parse().ok()?;
    let stime: u64 = f.get(12)?.parse().ok()?;
    Some(utime + stime)
}

/// Clock ticks a second (`getconf CLK_TCK`).
pub fn clock_ticks() -> Option<u64> {
    // SAFETY: sysconf has no memory-safety preconditions.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    u64::try_from(ticks).ok().filter(|&t| t > 0)
}

/// Raises the open-file limit to the hard limit (for many connections).
pub fn raise_fd_limit() {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `lim` is a valid out-pointer for getrlimit.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } == 0 && lim.rlim_cur < lim.rlim_max
    {
        lim.rlim_cur = lim.rlim_max;
        // SAFETY: `lim` is a valid, initialized rlimit.
        unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lim) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_its_own_listener() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        assert_eq!(listening_pid(port), Some(std::process::id()));
        let (rss, anon) = (
            rss_kib(std::process::id()),
            rss_anon_kib(std::process::id()),
        );
        assert!(anon.unwrap() > 0 && anon <= rss, "{anon:?} of {rss:?}");
        assert_eq!(status_kib(std::process::id(), "NoSuchField"), None);
        assert!(cpu_seconds(std::process::id()).is_some());
        drop(l);
        assert_eq!(listening_pid(port), None);
    }

    #[test]
    fn host_is_described() {
        let h = Host::detect();
        assert!(h.cpus >= 1);
        assert!(h.line().contains("CPUs"));
    }
}
