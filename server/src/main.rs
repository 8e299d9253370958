//! `cinnabar-server [/path/to/redis.conf] [--name value ...]`, as redis-server.

use cinnabar_server::core::config::Config;

#[global_allocator]
static GLOBAL: cinnabar_server::state::evict::CountingAlloc =
    cinnabar_server::state::evict::CountingAlloc;

fn usage() -> ! {
    eprintln!(
        "Usage: ./cinnabar-server [/path/to/redis.conf] [options] [-]\n       ./cinnabar-server - (read config from stdin)\n       ./cinnabar-server -v or --version\n       ./cinnabar-server -h or --help\n\nExamples:\n       ./cinnabar-server (run the server with default conf)\n       ./cinnabar-server /etc/redis/6379.conf\n       ./cinnabar-server --port 7777\n       ./cinnabar-server /etc/myredis.conf --loglevel verbose -"
    );
    std::process::exit(1)
}

fn main() {
    cinnabar_server::state::evict::init_allocator();
    let args: Vec<String> = std::env::args().skip(1).collect();
    // While this is the only thread: it moves the environment.
    cinnabar_server::core::proctitle::init();
    match args.first().map(String::as_str) {
        Some("-v" | "--version") => {
            println!(
                "Redis server v=7.0.15 sha=00000000:0 malloc=mimalloc bits=64 build=cinnabar-{}",
                env!("CARGO_PKG_VERSION")
            );
            return;
        }
        Some("-h" | "--help") => usage(),
        _ => {}
    }
    let cfg = match Config::from_args(&args) {
        Ok(c) => c,
        Err(msg) => {
            eprintln!("{msg}");
            std::process::exit(1);
        }
    };
    cinnabar_server::cmd::families::install();
    cinnabar_server::cmd::rename_commands(&cfg.renames);
    use cinnabar_server::net::service;
    // Before the log file is opened and any thread started: the child
    // carries on alone. Under supervision the supervisor keeps the process.
    if cfg.daemonize && !service::will_supervise(&cfg.supervised) {
        service::daemonize();
    }
    // Before any thread starts: they all inherit the mask.
    cinnabar_server::state::shutdown::block_signals();
    init_logging(&cfg);
    cinnabar_server::core::proctitle::set(&cfg);
    cinnabar_server::core::crash::install_panic_hook();
    cinnabar_server::core::crash::install_signal_handlers();
    service::supervise(&cfg.supervised);
    tracing::warn!("oO0OoO0OoO0Oo Redis is starting oO0OoO0OoO0Oo");
    tracing::warn!(
        "Redis version=7.0.15, bits=64, commit=00000000, modified=0, pid={}, just started",
        std::process::id()
    );
    tracing::warn!("Configuration loaded");
    cinnabar_server::core::log::set_role(!cfg.replicaof.is_empty());
    // cinnabar cannot load Redis modules: refused as Redis refuses a module
    // it fails to load.
    if let Some(path) = cfg.modules.first() {
        tracing::warn!(
            "Module {path} failed to load: {}",
            cinnabar_server::core::os::module_load_error(path)
        );
        tracing::warn!("Can't load module from {path}: server aborting");
        std::process::exit(1);
    }
    disable_thp(&cfg);
    // Before the runtime starts its workers: they inherit the mask.
    cinnabar_server::core::affinity::init(
        &cfg.server_cpulist,
        &cfg.bio_cpulist,
        &cfg.bgsave_cpulist,
        &cfg.aof_rewrite_cpulist,
    );
    // `io-threads` worker threads (default 1, as Redis's single thread): on
    // a machine whose other cores run the clients, one thread that never
    // contends for the state lock serves them fastest. A script that runs
    // long hands the worker on (state.rs, hand_off_worker).
    let workers = cfg.io_threads.clamp(1, 128) as usize;
    cinnabar_server::core::netstat::configure(workers as i64, cfg.io_threads_do_reads);
    // Without the LIFO slot, connections that became readable together run
    // in the order epoll reported them, i.e. their requests' arrival order,
    // as Redis serves them within one event-loop round. With it, the last
    // one woken ran first: a PUBLISH sent after another connection's
    // UNSUBSCRIBE reached the unsubscribed client, and of two BRPOPLPUSH
    // sent in a row the second blocked first.
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .disable_lifo_slot()
        .on_thread_park(cinnabar_server::core::round::end)
        .enable_all()
        .build()
        .expect("tokio runtime");
    if let Err(e) = rt.block_on(cinnabar_server::net::server::run(cfg)) {
        tracing::error!("{e}");
        std::process::exit(1);
    }
    std::process::exit(0);
}

/// `disable-thp yes` (the default), as Redis: transparent huge pages off for
/// this process. mimalloc advises huge pages on its arenas, which makes
/// resident memory grow in 2MB steps wherever a page is first touched.
fn disable_thp(cfg: &Config) {
    #[cfg(target_os = "linux")]
    if cfg.disable_thp {
        // SAFETY: prctl with integer arguments only; failure is harmless.
        unsafe {
            libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0);
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = cfg;
}

/// `loglevel` and `logfile` as Redis: debug/verbose/notice/warning, stdout
/// when `logfile` is empty.
fn init_logging(cfg: &Config) {
    use cinnabar_server::core::log;
    use tracing_subscriber::fmt::writer::BoxMakeWriter;
    use tracing_subscriber::prelude::*;
    let file = &cfg.logfile;
    let writer = if file.is_empty() {
        BoxMakeWriter::new(std::io::stdout)
    } else {
        match std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(file)
        {
            Ok(f) => BoxMakeWriter::new(std::sync::Mutex::new(f)),
            Err(e) => {
                eprintln!("Can't open the log file: {e}");
                std::process::exit(1);
            }
        }
    };
    let lines = tracing_subscriber::fmt::layer()
        .with_ansi(false)
        .event_format(log::RedisFormat)
        .with_writer(writer);
    tracing_subscriber::registry()
        .with(log::level_layer(cfg.loglevel))
        .with(lines)
        .init();
}
