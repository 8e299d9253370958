//! Log lines in Redis's format, so tools that read Redis logs read ours:
//! `pid:M 21 Nov 2026 07:11:01.944 * Ready to accept connections`, with
//! the level marks `.` debug, `-` verbose, `*` notice, `#` warning.

use crate::core::config::Loglevel;
use std::fmt;
use std::sync::atomic::{AtomicU8, Ordering::Relaxed};
use std::sync::OnceLock;
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::filter::LevelFilter;
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::{reload, Registry};

pub struct RedisFormat;

type LevelHandle = reload::Handle<LevelFilter, Registry>;

/// Where `loglevel` changes the filter at run time, as CONFIG SET does in
/// Redis; set once by [`level_layer`].
static LEVEL: OnceLock<LevelHandle> = OnceLock::new();

fn filter_of(l: Loglevel) -> LevelFilter {
    match l {
        Loglevel::Debug => LevelFilter::TRACE,
        Loglevel::Verbose => LevelFilter::DEBUG,
        Loglevel::Notice => LevelFilter::INFO,
        Loglevel::Warning => LevelFilter::WARN,
    }
}

/// The filter of the log's lines, at `l` until [`set_level`] changes it.
/// Reloading rebuilds tracing's cached interest, so the levels left out
/// cost nothing at their call sites.
pub fn level_layer(l: Loglevel) -> reload::Layer<LevelFilter, Registry> {
    let (layer, handle) = reload::Layer::new(filter_of(l));
    let _ = LEVEL.set(handle);
    layer
}

/// `loglevel` changed: the lines written from now on follow it.
pub fn set_level(l: Loglevel) {
    if let Some(h) = LEVEL.get() {
        let _ = h.reload(filter_of(l));
    }
}

/// The target of events logged without the `pid:M date mark` prefix.
pub const RAW: &str = "raw";

/// The target of events logged where Redis logs from a signal handler:
/// `pid:signal-handler (unix seconds) message`.
pub const SIGNAL: &str = "signal-handler";

/// The facts of Redis's start-up logo, one a line, each with a leading
/// space as Redis prints them (Redis's test suite waits for ` PID: <pid>`).
/// Without the logo (`always-show-logo no` and no terminal), one line.
/// The port named is the TCP one, else (`port 0`) the TLS one.
pub fn startup_banner(show_logo: bool, (port, tls_port): (i64, i64), cluster: bool) {
    let port = if port == 0 { tls_port } else { port };
    let mode = if cluster { "cluster" } else { "standalone" };
    let pid = std::process::id();
    // `Instant` reads CLOCK_MONOTONIC through clock_gettime.
    tracing::info!("monotonic clock: POSIX clock_gettime");
    if show_logo {
        tracing::info!(
            target: RAW,
            "\n    Redis 7.0.15 (00000000/0) 64 bit (cinnabar {})\n    Running in {mode} mode\n    Port: {port}\n    PID: {pid}\n",
            env!("CARGO_PKG_VERSION")
        );
    } else {
        tracing::info!("Running mode={mode}, port={port}.");
    }
}

impl<S, N> FormatEvent<S, N> for RedisFormat
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut w: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        // Redis's raw log lines (the start-up logo) carry no prefix.
        if event.metadata().target() == RAW {
            ctx.field_format().format_fields(w.by_ref(), event)?;
            return writeln!(w);
        }
        if event.metadata().target() == SIGNAL {
            write!(
                w,
                "{}:signal-handler ({}) ",
                std::process::id(),
                crate::core::clock::now_ms() / 1000
            )?;
            ctx.field_format().format_fields(w.by_ref(), event)?;
            return writeln!(w);
        }
        let mark = match *event.metadata().level() {
            Level::TRACE => '.',
            Level::DEBUG => '-',
            Level::INFO => '*',
            _ => '#',
        };
        write!(
            w,
            "{}:{} {} {} ",
            std::process::id(),
            ROLE.load(Relaxed) as char,
            timestamp(crate::core::clock::now_ms()),
            mark
        )?;
        ctx.field_format().format_fields(w.by_ref(), event)?;
        writeln!(w)
    }
}

/// The role letter of the prefix, as Redis's: `C` until the configuration
/// is loaded (Redis's server is not set up yet), then `M`, or `S` while
/// following a master.
static ROLE: AtomicU8 = AtomicU8::new(b'C');

pub fn set_role(replica: bool) {
    ROLE.store(if replica { b'S' } else { b'M' }, Relaxed);
}

/// `21 Nov 2026 07:11:01.944` (UTC) from unix ms.
pub fn timestamp(ms: i64) -> String {
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let secs = ms.div_euclid(1000);
    let (days, rem) = (secs.div_euclid(86400), secs.rem_euclid(86400));
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{:02} {} {} {:02}:{:02}:{:02}.{:03}",
        day,
        MONTHS[(month - 1) as usize],
        year,
        rem / 3600,
        rem % 3600 / 60,
        rem % 60,
        ms.rem_euclid(1000)
    )
}

#[cfg(test)]
mod tests {
    #[test]
    fn timestamps() {
        assert_eq!(super::timestamp(0), "01 Jan 1970 00:00:00.000");
        assert_eq!(
            super::timestamp(1_795_238_461_944),
            "21 Nov 2026 05:21:01.944"
        );
        assert_eq!(
            super::timestamp(951_782_400_000),
            "29 Feb 2000 00:00:00.000"
        );
    }
}
