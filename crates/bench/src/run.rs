//! Running one measured execution: through the small `runrss` helper (its own wall clock and
//! the child's `ru_maxrss` from `wait4`), with a timeout, the runtime's statistics parsed from
//! stderr; and finding the smallest fixed stack a program needs.

use std::collections::BTreeMap;
use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The stack limit of the process (`ulimit -s`), which sizes the main thread's stack.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MainStack {
    Unlimited,
    KiB(u64),
}

/// One execution to make.
#[derive(Debug, Clone)]
pub struct Invocation {
    pub exe: PathBuf,
    pub args: Vec<String>,
    pub env: Vec<(String, String)>,
    pub main_stack: MainStack,
    pub timeout: Duration,
    /// Where the program's stdout goes (`None`: discarded).
    pub stdout: Option<PathBuf>,
}

/// Processes the kernel's OOM killer has killed since boot (`oom_kill` in `/proc/vmstat`, Linux
/// 4.13 and later; 0 where it cannot be read). A run killed by signal 9 while it rose was most
/// likely the victim: the harness's own timeout is told apart ([`Ending::TimedOut`]), and
/// nothing else here sends signal 9.
pub fn oom_kills() -> u64 {
    std::fs::read_to_string("/proc/vmstat")
        .ok()
        .and_then(|text| parse_oom_kills(&text))
        .unwrap_or(0)
}

/// The `oom_kill` line of `/proc/vmstat`'s text.
fn parse_oom_kills(vmstat: &str) -> Option<u64> {
    vmstat
        .lines()
        .find_map(|l| l.strip_prefix("oom_kill "))
        .and_then(|n| n.trim().parse().ok())
}

/// How an execution ended.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Ending {
    Exited(i32),
    Signaled(i32),
    TimedOut,
    /// Killed by signal 9 while the kernel's OOM killer killed a process ([`oom_kills`] rose
    /// during the run): the machine ran out of memory.
    OomKilled,
    /// The helper itself failed (the message says why).
    Broken(String),
}

impl Ending {
    pub fn ok(&self) -> bool {
        *self == Ending::Exited(0)
    }

    pub fn describe(&self) -> String {
        match self {
            Ending::Exited(code) => format!("exit status {code}"),
            Ending::Signaled(sig) => format!("killed by signal {sig}"),
            Ending::TimedOut => "timed out".into(),
            Ending::OomKilled => {
                "killed by signal 9 from the kernel's OOM killer: the machine ran out of memory"
                    .into()
            }
            Ending::Broken(why) => why.clone(),
        }
    }

    /// A short form for the CSV.
    pub fn code(&self) -> String {
        match self {
            Ending::Exited(code) => format!("{code}"),
            Ending::Signaled(sig) => format!("signal{sig}"),
            Ending::TimedOut => "timeout".into(),
            Ending::OomKilled => "oom".into(),
            Ending::Broken(_) => "broken".into(),
        }
    }
}

/// What one execution measured.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Outcome {
    pub ending: Ending,
    #[serde(with = "crate::persist::maybe_nan")]
    pub seconds: f64,
    pub maxrss_kib: u64,
    /// Page faults served without / with I/O (`ru_minflt`, `ru_majflt`).
    pub minor_faults: u64,
    pub major_faults: u64,
    /// CPU time in user and kernel mode, all threads (NaN: not known, the run timed out).
    #[serde(with = "crate::persist::maybe_nan")]
    pub user_seconds: f64,
    #[serde(with = "crate::persist::maybe_nan")]
    pub system_seconds: f64,
    /// `stackrt` statistics (`STACKRT_STATS=1`), by snake_case name, first number of the line.
    pub stats: BTreeMap<String, u64>,
    /// The last lines of stderr that are not statistics (error messages).
    pub stderr_tail: String,
}

/// Parses the `stackrt:   name   value ...` lines the runtime prints at exit.
pub fn parse_stats(stderr: &str) -> (BTreeMap<String, u64>, String) {
    let mut stats = BTreeMap::new();
    let mut other = Vec::new();
    for line in stderr.lines() {
        let Some(rest) = line.strip_prefix("stackrt:   ") else {
            // mtss prints its statistics on one line of its own.
            if parse_mtss_stats_line(line, &mut stats) {
                continue;
            }
            if !line.starts_with("stackrt: stack statistics") && !line.trim().is_empty() {
                other.push(line);
            }
            continue;
        };
        let words: Vec<&str> = rest.split_whitespace().collect();
        let Some(position) = words.iter().position(|w| w.parse::<u64>().is_ok()) else {
            other.push(line);
            continue;
        };
        let name = words[..position].join("_").to_lowercase();
        stats.insert(name, words[position].parse().expect("checked above"));
    }
    let keep = other.len().saturating_sub(3);
    let mut tail: Vec<&str> = other[keep..].to_vec();
    // A Go peer's fatal error comes first and its goroutines' stacks after it: the line that
    // says why leads the tail.
    if let Some(why) = other[..keep].iter().find(|l| {
        l.starts_with("fatal error:")
            || l.starts_with("panic:")
            || l.starts_with("runtime: goroutine stack exceeds")
    }) {
        tail.insert(0, why);
    }
    (stats, tail.join(" | "))
}

/// Runs executions through the `runrss` helper.
#[derive(Debug, Clone)]
pub struct Runner {
    helper: PathBuf,
}

impl Runner {
    /// Finds `runrss` next to the running executable (cargo builds both into one directory).
    pub fn beside_current_exe() -> Result<Runner, String> {
        let me = std::env::current_exe().map_err(|e| format!("current_exe: {e}"))?;
        let mut dirs = vec![me.parent().map(Path::to_path_buf)];
        // Test binaries live one level deeper (target/<profile>/deps).
        dirs.push(me.parent().and_then(Path::parent).map(Path::to_path_buf));
        for dir in dirs.into_iter().flatten() {
            let helper = dir.join("runrss");
            if helper.is_file() {
                return Ok(Runner { helper });
            }
        }
        Err(format!(
            "the runrss helper is not next to {} (build it: cargo build -p bench --release)",
            me.display()
        ))
    }

    /// Runs one execution to its end or its timeout.
    pub fn run(&self, inv: &Invocation) -> Outcome {
        let broken = |why: String| Outcome {
            ending: Ending::Broken(why),
            seconds: f64::NAN,
            maxrss_kib: 0,
            minor_faults: 0,
            major_faults: 0,
            user_seconds: f64::NAN,
            system_seconds: f64::NAN,
            stats: BTreeMap::new(),
            stderr_tail: String::new(),
        };
        let mut cmd = Command::new(&self.helper);
        match inv.main_stack {
            MainStack::Unlimited => cmd.args(["--stack-kib", "unlimited"]),
            MainStack::KiB(kib) => cmd.args(["--stack-kib", &kib.to_string()]),
        };
        if let Some(path) = &inv.stdout {
            cmd.arg("--stdout").arg(path);
        }
        cmd.arg("--")
            .arg(&inv.exe)
            .args(&inv.args)
            .envs(inv.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            // Its own process group: a timeout kills the helper and the program together.
            .process_group(0);
        let oom_before = oom_kills();
        let mut child = match cmd.spawn() {
            Ok(child) => child,
            Err(e) => return broken(format!("cannot start {}: {e}", self.helper.display())),
        };
        let mut stderr_pipe = child.stderr.take().expect("piped");
        // Read stderr concurrently: a program printing more than a pipe holds would block.
        let stderr_reader = std::thread::spawn(move || {
            let mut text = String::new();
            let _ = stderr_pipe.read_to_string(&mut text);
            text
        });
        let start = Instant::now();
        let mut timed_out = false;
        loop {
            match child.try_wait() {
                Ok(Some(_)) => break,
                Ok(None) if start.elapsed() > inv.timeout => {
                    // SAFETY: kill with a negative pid signals the process group we created;
                    // it touches no memory.
                    unsafe {
                        libc::kill(-(child.id() as i32), libc::SIGKILL);
                    }
                    let _ = child.wait();
                    timed_out = true;
                    break;
                }
                Ok(None) => std::thread::sleep(Duration::from_millis(2)),
                Err(e) => return broken(format!("waiting for the helper: {e}")),
            }
        }
        let mut report = String::new();
        if let Some(mut out) = child.stdout.take() {
            let _ = out.read_to_string(&mut report);
        }
        let stderr = stderr_reader.join().unwrap_or_default();
        let (stats, stderr_tail) = parse_stats(&stderr);
        if timed_out {
            return Outcome {
                ending: Ending::TimedOut,
                seconds: inv.timeout.as_secs_f64(),
                maxrss_kib: 0,
                minor_faults: 0,
                major_faults: 0,
                user_seconds: f64::NAN,
                system_seconds: f64::NAN,
                stats,
                stderr_tail,
            };
        }
        let fields: Vec<&str> = report.split_whitespace().collect();
        let number = |i: usize| fields.get(i).and_then(|f| f.parse::<f64>().ok());
        let (
            Some(status),
            Some(seconds),
            Some(maxrss),
            Some(minflt),
            Some(majflt),
            Some(user),
            Some(system),
        ) = (
            fields.first().and_then(|f| f.parse::<i32>().ok()),
            number(1),
            number(2),
            number(3),
            number(4),
            number(5),
            number(6),
        )
        else {
            return broken(format!("runrss said {report:?}; stderr: {stderr_tail}"));
        };
        let ending = if libc::WIFEXITED(status) {
            match libc::WEXITSTATUS(status) {
                127 => Ending::Broken(format!("cannot execute {}", inv.exe.display())),
                code => Ending::Exited(code),
            }
        } else if libc::WTERMSIG(status) == libc::SIGKILL && oom_kills() > oom_before {
            Ending::OomKilled
        } else {
            Ending::Signaled(libc::WTERMSIG(status))
        };
        Outcome {
            ending,
            seconds,
            maxrss_kib: maxrss as u64,
            minor_faults: minflt as u64,
            major_faults: majflt as u64,
            user_seconds: user,
            system_seconds: system,
            stats,
            stderr_tail,
        }
    }

    /// The smallest stack-size argument (to a page, from 16 KiB) with which `args(stack)` exits
    /// 0, searching up to `max`; `None` if even `max` fails. With `no_overflow` (`mtss`, whose
    /// too-small stacks borrow instead of failing) a run works only if `STACKRT_STATS` counts
    /// no overflow: the least stack the thread needs on its own.
    pub fn min_stack(
        &self,
        exe: &Path,
        args: impl Fn(u64) -> Vec<String>,
        main_stack: MainStack,
        max: u64,
        no_overflow: bool,
    ) -> Option<u64> {
        const PAGE: u64 = 4096;
        let works = |stack: u64| {
            let outcome = self.run(&Invocation {
                exe: exe.to_path_buf(),
                args: args(stack),
                env: stats_env(no_overflow),
                main_stack,
                timeout: Duration::from_secs(30),
                stdout: None,
            });
            works_alone(&outcome, no_overflow)
        };
        let mut low = 16 * 1024 - PAGE; // known (assumed) to fail
        let mut high = 1 << 20;
        while !works(high) {
            if high >= max {
                return None;
            }
            low = high;
            high = (high * 4).min(max);
        }
        while high - low > PAGE {
            let mid = (low + high) / 2 / PAGE * PAGE;
            if mid <= low {
                break;
            }
            if works(mid) {
                high = mid;
            } else {
                low = mid;
            }
        }
        Some(high)
    }
}

/// `STACKRT_STATS=1` when a stack probe must see the overflow count.
pub fn stats_env(no_overflow: bool) -> Vec<(String, String)> {
    if no_overflow {
        vec![("STACKRT_STATS".into(), "1".into())]
    } else {
        Vec::new()
    }
}

/// Whether a probe's run shows the stack was enough: it exited 0 and, with `no_overflow`, its
/// statistics count no overflow (a missing count is taken as an overflow).
pub fn works_alone(outcome: &Outcome, no_overflow: bool) -> bool {
    outcome.ending.ok() && (!no_overflow || outcome.stats.get("overflows") == Some(&0))
}

/// Parses the line `STACKRT_STATS=1` prints at exit under `mtss` ("stackrt: mtss: region R
/// bytes, page P bytes, O overflows, L pages lent at most, U bytes of native stacks at most")
/// into `stats`: `overflows` (the name the other mechanisms' statistics use, so the report's
/// overflow column shows it) and `mtss_<words>` for the rest. False for any other line (the
/// out-of-room message also begins with "stackrt: mtss:").
pub fn parse_mtss_stats_line(line: &str, stats: &mut BTreeMap<String, u64>) -> bool {
    let Some(rest) = line.strip_prefix("stackrt: mtss: region ") else {
        return false;
    };
    for item in format!("region {rest}").split(", ") {
        let words: Vec<&str> = item.split_whitespace().collect();
        let Some(at) = words.iter().position(|w| w.parse::<u64>().is_ok()) else {
            continue;
        };
        let mut name: Vec<&str> = words.clone();
        name.remove(at);
        let name = name.join("_");
        let key = if name == "overflows" {
            name
        } else {
            format!("mtss_{name}")
        };
        stats.insert(key, words[at].parse().expect("checked above"));
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_oom_kill_counter_is_parsed() {
        let text = "pgsteal_kswapd 0\noom_kill 3\noom_kill_other 9\n";
        assert_eq!(parse_oom_kills(text), Some(3));
        assert_eq!(parse_oom_kills("pgfault 12\n"), None);
        let a = oom_kills();
        assert!(oom_kills() >= a);
    }

    #[test]
    fn a_go_fatal_error_leads_the_tail_of_its_stack_traces() {
        let stderr = "runtime: goroutine stack exceeds 1000000000-byte limit\n\
                      runtime: sp=0xc020160398 stack=[0xc020160000, 0xc040160000]\n\
                      fatal error: stack overflow\n\nruntime stack:\n\
                      runtime.throw({0x4b2c2a?, 0x0?})\n\
                      \t/usr/local/go/src/runtime/panic.go:1101 +0x48\n\
                      created by runtime.createfing in goroutine 1\n\
                      \t/usr/local/go/src/runtime/mfinal.go:172 +0x3d\n";
        let (_, tail) = parse_stats(stderr);
        assert!(
            tail.starts_with("runtime: goroutine stack exceeds 1000000000-byte limit | "),
            "{tail}"
        );
        assert!(tail.ends_with("mfinal.go:172 +0x3d"), "{tail}");
        // Short messages stay as they are.
        let (_, tail) = parse_stats("stackrt: thread 3: out of memory\n");
        assert_eq!(tail, "stackrt: thread 3: out of memory");
    }

    #[test]
    fn stats_lines_are_parsed() {
        let stderr = "stackrt: stack statistics (chunk size 32768 bytes)\n\
            stackrt:   overflows             979\n\
            stackrt:   chunks from pool      0 in 0 takes (4 gives)\n\
            stackrt:   peak chunks in use    980 (32112640 bytes)\n\
            stackrt: thread 3 (tid 4711): stack limit exceeded\n";
        let (stats, other) = parse_stats(stderr);
        assert_eq!(stats["overflows"], 979);
        assert_eq!(stats["chunks_from_pool"], 0);
        assert_eq!(stats["peak_chunks_in_use"], 980);
        assert!(other.contains("stack limit exceeded"));
    }
}
