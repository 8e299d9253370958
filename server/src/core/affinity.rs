//! CPU affinity of the server's threads: `server_cpulist`, `bio_cpulist`,
//! `bgsave_cpulist` and `aof_rewrite_cpulist`. Redis pins its main and I/O
//! threads, its background threads and its fork children; cinnabar has no
//! fork, so the last two pin the saver thread of a snapshot instead. The
//! options are start-up only, so the lists are read once and kept here for
//! threads that have no configuration at hand.

use std::sync::OnceLock;

/// Which of Redis's thread kinds a thread does the work of.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// The main thread and the runtime's workers.
    Server,
    /// Lazy freeing and the AOF's fsync (Redis's bio threads).
    Bio,
    /// The saver thread of BGSAVE and of a diskless sync.
    Bgsave,
    /// The saver thread of BGREWRITEAOF.
    AofRewrite,
}

struct Masks {
    /// The process's mask at start-up: what Redis's bio threads keep when
    /// `bio_cpulist` is empty, as they start before the main thread is
    /// pinned.
    original: Option<libc::cpu_set_t>,
    server: Option<libc::cpu_set_t>,
    bio: Option<libc::cpu_set_t>,
    bgsave: Option<libc::cpu_set_t>,
    aof_rewrite: Option<libc::cpu_set_t>,
}

// SAFETY: cpu_set_t is plain bits.
unsafe impl Send for Masks {}
unsafe impl Sync for Masks {}

static MASKS: OnceLock<Masks> = OnceLock::new();

/// Reads the four lists and pins the calling thread (main, before the
/// runtime starts, so that its workers inherit the mask) to
/// `server_cpulist`. A list Redis cannot parse is ignored without a word,
/// as Redis does.
pub fn init(server: &str, bio: &str, bgsave: &str, aof_rewrite: &str) {
    let masks = Masks {
        original: current(),
        server: mask(server),
        bio: mask(bio),
        bgsave: mask(bgsave),
        aof_rewrite: mask(aof_rewrite),
    };
    let masks = MASKS.get_or_init(|| masks);
    if let Some(m) = &masks.server {
        set_current(m);
    }
}

/// Pins the calling thread for `role`. A bio thread without its own list
/// goes back to the start-up mask, since it may have been started by a
/// pinned worker; a saver without one keeps its spawner's, the server's,
/// as a fork child inherits its parent's.
pub fn pin(role: Role) {
    let Some(m) = MASKS.get() else {
        return;
    };
    let set = match role {
        Role::Server => m.server.as_ref(),
        Role::Bio => m.bio.as_ref().or(m.original.as_ref()),
        Role::Bgsave => m.bgsave.as_ref(),
        Role::AofRewrite => m.aof_rewrite.as_ref(),
    };
    if let Some(set) = set {
        set_current(set);
    }
}

fn mask(list: &str) -> Option<libc::cpu_set_t> {
    let cpus = parse(list)?;
    // SAFETY: an all-zero cpu_set_t is the empty set; CPU_SET writes
    // within it for any cpu below CPU_SETSIZE, which parse guarantees.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        for cpu in cpus {
            libc::CPU_SET(cpu, &mut set);
        }
        Some(set)
    }
}

fn current() -> Option<libc::cpu_set_t> {
    // SAFETY: sched_getaffinity writes at most the size given into `set`.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        let size = std::mem::size_of::<libc::cpu_set_t>();
        (libc::sched_getaffinity(0, size, &mut set) == 0).then_some(set)
    }
}

/// A mask with no CPU of this machine is refused by the kernel and the
/// thread keeps its mask, as Redis's does.
fn set_current(set: &libc::cpu_set_t) {
    // SAFETY: `set` is a valid cpu_set_t of the size given; pid 0 is the
    // calling thread.
    unsafe {
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), set);
    }
}

const SETSIZE: i64 = libc::CPU_SETSIZE as i64;

/// The CPUs of a list as Redis 7.0.15 reads it: comma-separated entries,
/// each a CPU or a range `a-b` with an optional step `a-b:s`. None for a
/// list Redis rejects (empty entries, `b < a`, a step below 1, a number
/// not starting with a digit, anything after the last number). Redis
/// skips what follows a number up to the next separator (`1x,0` is 0 and
/// 1), and takes a number as a C `int` from a saturated `long` (4294967297
/// is CPU 1; a negative one is no CPU). CPUs past CPU_SETSIZE are left
/// out, as CPU_SET leaves them.
pub fn parse(list: &str) -> Option<Vec<usize>> {
    let mut cpus = Vec::new();
    let mut rest = list.as_bytes();
    loop {
        let (entry, more) = match rest.iter().position(|&c| c == b',') {
            Some(i) => (&rest[..i], Some(&rest[i + 1..])),
            None => (rest, None),
        };
        let last = more.is_none();
        let (a, b, step) = match entry.iter().position(|&c| c == b'-') {
            None => {
                let a = number(entry, last)?;
                (a, a, 1)
            }
            Some(d) => {
                let a = number(&entry[..d], false)?;
                let after = &entry[d + 1..];
                match after.iter().position(|&c| c == b':') {
                    None => (a, number(after, last)?, 1),
                    Some(k) => (
                        a,
                        number(&after[..k], false)?,
                        number(&after[k + 1..], last)?,
                    ),
                }
            }
        };
        if a > b || step < 1 {
            return None;
        }
        let (a, b, step) = (i64::from(a), i64::from(b), i64::from(step));
        // The first CPU of the progression that is not negative.
        let mut cpu = if a < 0 {
            a + (-a + step - 1) / step * step
        } else {
            a
        };
        while cpu <= b.min(SETSIZE - 1) {
            cpus.push(cpu as usize);
            cpu += step;
        }
        match more {
            Some(m) => rest = m,
            None => return Some(cpus),
        }
    }
}

/// The number at the start of `s`, which must start with a digit; with
/// `whole`, nothing may follow it.
fn number(s: &[u8], whole: bool) -> Option<i32> {
    let digits = s.iter().take_while(|c| c.is_ascii_digit()).count();
    if digits == 0 || (whole && digits < s.len()) {
        return None;
    }
    let long = s[..digits].iter().try_fold(0i64, |n, &c| {
        n.checked_mul(10)?.checked_add(i64::from(c - b'0'))
    });
    Some(long.unwrap_or(i64::MAX) as i32)
}

#[cfg(test)]
mod tests {
    use super::parse;

    /// Each case was started with real Redis 7.0.15 (`server_cpulist`,
    /// from a mask of CPU 0 on a 2-CPU machine) and its main thread's
    /// Cpus_allowed_list read; a list Redis rejected left the mask alone.
    #[test]
    fn lists_as_redis_reads_them() {
        let ok: &[(&str, &[usize])] = &[
            ("0", &[0]),
            ("1", &[1]),
            ("0-1", &[0, 1]),
            ("1,0", &[1, 0]),
            ("0-7:2", &[0, 2, 4, 6]),
            ("1,3,5-7", &[1, 3, 5, 6, 7]),
            ("0-1:3", &[0]),
            ("1-3:2,0", &[1, 3, 0]),
            ("01", &[1]),
            ("00-01", &[0, 1]),
            ("1-1:01", &[1]),
            ("0-0", &[0]),
            ("1 ,0", &[1, 0]),
            ("1\t,1", &[1, 1]),
            ("0 -1", &[0, 1]),
            ("0-1 :1", &[0, 1]),
            ("0x-1", &[0, 1]),
            ("1x,0", &[1, 0]),
            ("1 x,0", &[1, 0]),
            ("0-1:1x,1", &[0, 1, 1]),
            ("4294967297", &[1]),
            ("1-4294967297", &[1]),
            ("2147483648,1", &[1]),
            ("4294967295,1", &[1]),
            ("18446744073709551617,0", &[0]),
            ("1,1024", &[1]),
            ("99", &[99]),
        ];
        for (list, cpus) in ok {
            assert_eq!(parse(list).as_deref(), Some(*cpus), "{list:?}");
        }
        let bad = [
            "",
            "abc",
            "1-0",
            "1 -0",
            "0,,1",
            "0-",
            "1-",
            "-1",
            "0:2",
            "1:1",
            "1:",
            "0-1:",
            "0-1:0",
            "1-1:0",
            "1-1:-1",
            "1-1:+1",
            "0-1:x",
            "0--1",
            "1-1-1",
            "1-1:1:1",
            "0,1,",
            ",1",
            "+1",
            "0x1",
            "1x",
            "0-1x",
            "0-1:1x",
            " 1",
            "1 ",
            "1, 1",
            "1- 1",
            "1-1: 1",
            "1-1 ",
            "1-1:1 ",
            "1 :1",
            "0 1",
            "1-2147483649,0",
        ];
        for list in bad {
            assert_eq!(parse(list), None, "{list:?}");
        }
    }
}
