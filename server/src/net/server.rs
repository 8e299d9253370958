//! Start-up, listeners, the cron task and shutdown.

use crate::core::clock::now_ms;
use crate::core::config::Config;
use crate::core::listening::LISTENING;
use crate::net::conn::Peer;
use crate::state::{Shared, State};
use std::os::fd::{AsRawFd, RawFd};
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tracing::{info, warn};

/// Listens on `port` (with `tcp`) and `tls-port` (with `tls`); 0 is not
/// at all. Each listener comes with whether it speaks TLS.
fn listen(cfg: &Config, tcp: bool, tls: bool) -> std::io::Result<Vec<(TcpListener, bool)>> {
    let mut out = Vec::new();
    for (port, tls) in [
        (cfg.port * tcp as i64, false),
        (cfg.tls_port * tls as i64, true),
    ] {
        if port != 0 {
            out.extend(
                listen_port(cfg, port as u16, tls)?
                    .into_iter()
                    .map(|l| (l, tls)),
            );
        }
    }
    Ok(out)
}

/// Binds every address of `bind` (a leading `-` marks one whose failure is
/// ignored, as in Redis) on `port`.
fn listen_port(cfg: &Config, port: u16, tls: bool) -> std::io::Result<Vec<TcpListener>> {
    let kind = if tls { "TLS" } else { "TCP" };
    let mut out = Vec::new();
    for addr in cfg.bind.iter().map(String::as_str) {
        let (optional, addr) = match addr.strip_prefix('-') {
            Some(a) => (true, a),
            None => (false, addr),
        };
        let host = match addr {
            "*" => "0.0.0.0",
            "::*" => "::",
            a => a,
        };
        let sock = if host.contains(':') {
            format!("[{host}]:{port}")
        } else {
            format!("{host}:{port}")
        };
        match bind_one(&sock, cfg.tcp_backlog as i32, cfg.socket_mark_id as u32) {
            Ok(l) => out.push(l),
            Err(e) if optional => {
                warn!("Warning: Could not create server {kind} listening socket {sock}: {e}")
            }
            Err(e) => {
                // The suite retries on another port when it reads this.
                warn!("Warning: Could not create server {kind} listening socket {sock}: {e}");
                return Err(std::io::Error::new(
                    e.kind(),
                    format!("Failed listening on port {port} ({kind}), aborting."),
                ));
            }
        }
    }
    Ok(out)
}

/// A listening socket as Redis makes one: SO_REUSEADDR, `tcp-backlog`,
/// IPv6 sockets IPv6-only so `* ::*` can bind both families on one port,
/// and `socket-mark-id` as its SO_MARK (inherited by the connections it
/// accepts; without CAP_NET_ADMIN it stays unmarked, silently, as Redis).
fn bind_one(addr: &str, backlog: i32, mark: u32) -> std::io::Result<TcpListener> {
    use socket2::{Domain, Socket, Type};
    use std::net::ToSocketAddrs;
    // Host names resolve as in Redis (getaddrinfo); the first address is used.
    let addr = addr.to_socket_addrs()?.next().ok_or_else(|| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("{addr}: no address"),
        )
    })?;
    let sock = Socket::new(Domain::for_address(addr), Type::STREAM, None)?;
    if addr.is_ipv6() {
        sock.set_only_v6(true)?;
    }
    sock.set_reuse_address(true)?;
    if mark != 0 {
        let _ = sock.set_mark(mark);
    }
    sock.set_nonblocking(true)?;
    sock.bind(&addr.into())?;
    sock.listen(backlog.max(1))?;
    TcpListener::from_std(sock.into())
}

/// `unixsocket`: listens on that path (a file left there is replaced),
/// with the `unixsocketperm` permissions when set.
fn listen_unix(cfg: &Config) -> std::io::Result<Option<tokio::net::UnixListener>> {
    let path = &cfg.unixsocket;
    if path.is_empty() {
        return Ok(None);
    }
    let _ = std::fs::remove_file(path);
    let failed = |e: std::io::Error| {
        let msg = match e.raw_os_error() {
            Some(n) => crate::core::os::strerror(&std::io::Error::from_raw_os_error(n)),
            None => e.to_string(),
        };
        std::io::Error::new(e.kind(), format!("Failed opening Unix socket: bind: {msg}"))
    };
    let l = std::os::unix::net::UnixListener::bind(path).map_err(failed)?;
    let perm = u32::from_str_radix(&cfg.unixsocketperm, 8).unwrap_or(0);
    if perm != 0 {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(perm)).map_err(failed)?;
    }
    l.set_nonblocking(true)?;
    tokio::net::UnixListener::from_std(l).map(Some)
}

/// Connections on the Unix socket, served as TCP ones.
async fn accept_unix(shared: Arc<Shared>, l: tokio::net::UnixListener, path: String) {
    LISTENING.lock().push(l.as_raw_fd());
    loop {
        match l.accept().await {
            Ok((sock, _)) => {
                let peer = Peer {
                    addr: format!("{path}:0"),
                    laddr: format!("{path}:0"),
                    local: true,
                    unix: true,
                };
                tokio::spawn(crate::net::conn::serve(shared.clone(), sock, peer));
            }
            // Shut by `stop_listening`: the server is exiting.
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => return,
            Err(e) => {
                warn!("Accepting client connection: {e}");
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
    }
}

pub async fn run(cfg: Config) -> std::io::Result<()> {
    for w in &cfg.warnings {
        warn!("{w}");
    }
    let mut state = State::new(cfg);
    // Made whole now, as Redis's command table holds its statistics: not
    // grown when a command is first called (a replica's first REPLCONF
    // and PSYNC would grow it during its full sync).
    let slots = crate::cmd::all_commands().map(|c| c.slot + 1).max();
    state
        .stats
        .cmd
        .resize_with(slots.unwrap_or(0), Default::default);
    crate::state::cluster::init(&mut state)
        .map_err(|msg| std::io::Error::new(std::io::ErrorKind::InvalidInput, msg))?;
    crate::state::acl::at_startup(&mut state)
        .map_err(|msg| std::io::Error::new(std::io::ErrorKind::InvalidInput, msg))?;
    if crate::core::tls::wanted(&state.cfg) {
        state.build_tls().map_err(|e| {
            warn!("{e}");
            std::io::Error::other("Failed to configure TLS. Check logs for more info.")
        })?;
    }
    let listeners = listen(&state.cfg, true, true)?;
    let bus = match state.cluster {
        Some(_) => {
            let port = crate::state::cluster::bus_port(&state);
            listen_port(&state.cfg, port, false).map_err(|e| {
                std::io::Error::new(
                    e.kind(),
                    format!("Failed listening on port {port} (cluster), aborting."),
                )
            })?
        }
        None => Vec::new(),
    };
    let unix = listen_unix(&state.cfg)?;
    let show_logo = state.cfg.always_show_logo
        || (state.cfg.logfile.is_empty() && std::io::IsTerminal::is_terminal(&std::io::stdout()));
    let ports = (state.cfg.port, state.cfg.tls_port);
    crate::core::log::startup_banner(show_logo, ports, state.cluster.is_some());
    let shared = Arc::new(Shared::new(state));
    crate::net::bus::start(&shared, bus);
    warn!("Server initialized");
    {
        let mut st = shared.state.lock();
        st.tcp_port = st.cfg.port as u16;
        let pidfile = st.cfg.pidfile.clone();
        if !pidfile.is_empty() {
            let _ = std::fs::write(&pidfile, format!("{}\n", std::process::id()));
        }
    }
    // With a dataset on disk, clients connecting while it loads are answered
    // (-LOADING for what cannot run yet), as Redis does. With nothing on
    // disk there is nothing to wait for: the server is ready before it
    // accepts anyone, so no client sees -LOADING or is served before
    // "Ready to accept connections" is logged.
    let on_disk = {
        let st = shared.state.lock();
        st.cfg.appendonly || crate::state::persist::rdb_path(&st).exists()
    };
    // Redis tells its supervisor it loads either way.
    crate::net::service::loading();
    if !on_disk {
        crate::net::load::at_startup(&shared)
            .map_err(|msg| std::io::Error::new(std::io::ErrorKind::InvalidData, msg))?;
        tokio::spawn(cron(shared.clone()));
        info!("Ready to accept connections");
        crate::net::service::ready();
    }
    {
        if on_disk {
            // Until the loader has its figures: nobody connecting may see
            // the dataset before it is loaded.
            shared.state.lock().loading = Some(crate::state::persist::Loading::new(0));
        }
        let tls_ctx = shared.state.lock().tls.clone();
        let tasks = spawn_accept(&shared, &tls_ctx, listeners);
        let mut st = shared.state.lock();
        st.accept_tasks = tasks;
        st.relisten = Some(relisten);
        st.shared = Arc::downgrade(&shared);
    }
    let unix_path = shared.state.lock().cfg.unixsocket.clone();
    if let Some(l) = unix {
        tokio::spawn(accept_unix(shared.clone(), l, unix_path.clone()));
    }
    let shutdown_cmd = shared.state.lock().shutdown_notify.clone();
    crate::state::shutdown::spawn_signal_thread(shared.clone())?;
    crate::core::crash::set_report({
        let shared = Arc::downgrade(&shared);
        move || {
            let shared = shared.upgrade()?;
            // Not when the crashing thread holds it (DEBUG SEGFAULT).
            let mut st = shared.state.try_lock_for(Duration::from_millis(200))?;
            Some(crate::state::info::crash_report(&mut st))
        }
    });
    let mut loading = on_disk;
    let mut loader = tokio::task::spawn_blocking({
        let shared = shared.clone();
        move || match on_disk {
            true => crate::net::load::at_startup(&shared),
            false => Ok(()),
        }
    });

    loop {
        tokio::select! {
            res = &mut loader, if loading => {
                loading = false;
                res.map_err(std::io::Error::other)?
                    .map_err(|msg| std::io::Error::new(std::io::ErrorKind::InvalidData, msg))?;
                tokio::spawn(cron(shared.clone()));
                info!("Ready to accept connections");
                crate::net::service::ready();
                continue;
            }
            // A signal: the cron acts on it once the dataset is loaded.
            _ = shared.shutdown.notified() => {
                if !loading || !crate::state::shutdown::while_loading(&mut shared.state.lock()) {
                    continue;
                }
            }
            _ = shutdown_cmd.notified() => {
                if shared.state.lock().shutdown.is_none() {
                    continue;
                }
            }
        }
        break;
    }
    crate::net::service::stopping();
    let mut st = shared.state.lock();
    crate::state::aof::shutdown(&mut st);
    if !unix_path.is_empty() {
        info!("Removing the unix socket file.");
        let _ = std::fs::remove_file(&unix_path);
    }
    let pidfile = &st.cfg.pidfile;
    if !pidfile.is_empty() {
        info!("Removing the pid file.");
        let _ = std::fs::remove_file(pidfile);
    }
    warn!("Redis is now ready to exit, bye bye...");
    Ok(())
}

/// Listens on the configured port and bind (the TCP listeners with `tcp`,
/// the TLS ones with `tls`), then stops the old accept loops of that kind.
/// The new sockets are bound while the old ones still are, so a new
/// address that overlaps an old one on the same port fails (Redis closes
/// first).
fn relisten(st: &mut State, tcp: bool, tls: bool) -> std::io::Result<()> {
    let listeners = listen(&st.cfg, tcp, tls)?;
    let shared = st
        .shared
        .upgrade()
        .ok_or(std::io::ErrorKind::NotConnected)?;
    let mut tasks = spawn_accept(&shared, &st.tls, listeners);
    for (t, is_tls, fd) in std::mem::take(&mut st.accept_tasks) {
        if if is_tls { tls } else { tcp } {
            LISTENING.lock().retain(|&f| f != fd);
            t.abort();
        } else {
            tasks.push((t, is_tls, fd));
        }
    }
    st.accept_tasks = tasks;
    st.tcp_port = st.cfg.port as u16;
    Ok(())
}

/// One accept loop per listener; the handles let CONFIG SET port/bind stop
/// them once new listeners are up.
fn spawn_accept(
    shared: &Arc<Shared>,
    tls_ctx: &Arc<crate::core::tls::Current>,
    listeners: Vec<(TcpListener, bool)>,
) -> Vec<(tokio::task::AbortHandle, bool, RawFd)> {
    listeners
        .into_iter()
        .map(|(l, tls)| {
            let fd = l.as_raw_fd();
            LISTENING.lock().push(fd);
            let shared = shared.clone();
            let tls_ctx = tls_ctx.clone();
            let task = tokio::spawn(async move {
                loop {
                    match l.accept().await {
                        Ok((sock, peer)) => {
                            let _ = sock.set_nodelay(true);
                            let local = sock.local_addr().unwrap_or(peer);
                            let peer = Peer {
                                addr: peer.to_string(),
                                laddr: local.to_string(),
                                local: peer.ip().is_loopback(),
                                unix: false,
                            };
                            match tls_ctx.get().filter(|_| tls).map(|c| c.server.clone()) {
                                Some(ctx) => {
                                    tokio::spawn(serve_tls(shared.clone(), ctx, sock, peer));
                                }
                                None => {
                                    tokio::spawn(crate::net::conn::serve(
                                        shared.clone(),
                                        sock,
                                        peer,
                                    ));
                                }
                            }
                        }
                        // Shut by `stop_listening`: the server is exiting.
                        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => return,
                        Err(e) => {
                            warn!("Accepting client connection: {e}");
                            tokio::time::sleep(Duration::from_millis(10)).await;
                        }
                    }
                }
            });
            (task.abort_handle(), tls, fd)
        })
        .collect()
}

/// A connection on a `tls-port`: the handshake in its own task, so a slow
/// or hostile one holds up nobody else; a failed one is logged and closed.
async fn serve_tls(
    shared: Arc<Shared>,
    ctx: Arc<rustls::ServerConfig>,
    sock: tokio::net::TcpStream,
    peer: Peer,
) {
    match crate::core::tls::accept(ctx, sock).await {
        Ok(s) => crate::net::conn::serve(shared, s, peer).await,
        Err(e) => warn!("Error accepting a client connection: {e}"),
    }
}

/// Housekeeping `hz` times a second: active expiry, incremental rehashing,
/// statistics samples, the end of CLIENT PAUSE.
async fn cron(shared: Arc<Shared>) {
    let mut last_release = 0;
    loop {
        // Never a blocking lock(): a long script holds it, and a blocked
        // worker would strand the tasks queued on it.
        let Some(hz) = shared.lock_or_busy().await.map(|st| st.hz()) else {
            tokio::time::sleep(Duration::from_millis(10)).await;
            continue;
        };
        tokio::time::sleep(Duration::from_millis((1000 / hz) as u64)).await;
        let Some(mut st) = shared.lock_or_busy().await else {
            continue;
        };
        if st.cron_paused {
            continue;
        }
        if crate::state::shutdown::cron(&mut st) {
            return;
        }
        let now = now_ms();
        crate::core::crash::beat();
        st.clock_base = (
            st.since_start_us(std::time::Instant::now()),
            crate::core::clock::now_us(),
        );
        // A replica's keys expire through its master's DELs, but for those
        // a writable replica wrote itself.
        if st.active_expire && st.pause.is_none() && st.repl.master.is_none() {
            active_expire(&mut st, now, hz);
        } else if st.active_expire && st.repl.master.is_some() {
            crate::state::repl::expire_own_keys(&mut st, now);
        }
        st.tracking_cron();
        st.migrate.close_idle(now);
        let rehash = st.cfg.activerehashing;
        for db in st.shard.dbs.iter_mut() {
            db.cron(rehash);
        }
        // A soft output limit must also close a client nobody writes to.
        let limits = st.tun.obuf_limits;
        let (mut input, mut output) = (0, 0);
        for cl in st.clients.values_mut() {
            input = input.max(std::mem::take(&mut cl.input_peak));
            output = output.max(cl.output_bytes());
            if cl.obuf_soft_since.is_some()
                && !cl.killed
                && crate::state::pubsub::close_if_over_limit(cl, &limits, 0)
            {
                cl.wake.notify_one();
            }
        }
        st.stats.sample_client_buffers(now / 1000, input, output);
        if st.rbuf_resizing {
            let reset = st.rbuf_peak_reset_ms;
            let (mut shrunk, mut grown) = (0, 0);
            for cl in st.clients.values_mut() {
                match cl.rbuf.resize(now, reset) {
                    std::cmp::Ordering::Less => shrunk += 1,
                    std::cmp::Ordering::Greater => grown += 1,
                    std::cmp::Ordering::Equal => {}
                }
            }
            st.stats.reply_buffer_shrinks += shrunk;
            st.stats.reply_buffer_expands += grown;
        }
        let s = crate::state::Sample {
            ms: now,
            commands: st.stats.total_commands,
            input: crate::core::netstat::input_bytes(),
            output: st.stats.net_output_bytes,
            repl_input: st.stats.net_repl_input_bytes,
            repl_output: st.stats.net_repl_output_bytes,
        };
        st.stats.samples.push_back(s);
        if st.stats.samples.len() > 16 {
            st.stats.samples.pop_front();
        }
        crate::state::aof::cron(&mut st);
        if st.pause.as_ref().is_some_and(|p| p.until_ms <= now) {
            st.pause = None;
        }
        crate::state::persist::cron(&mut st);
        crate::state::repl_cron::cron(&mut st);
        crate::net::replica::cron(&shared, &mut st);
        drop(st);
        if now / 1000 != last_release / 1000 {
            last_release = now;
            crate::state::evict::release_idle();
        }
    }
}

/// Redis's active expire cycle: sample keys with a TTL in each database,
/// delete the expired ones, and keep going in a database while more than
/// an acceptable share of a sample was expired, within a share of the CPU
/// per tick. `active-expire-effort` (1-10) scales all three as Redis's
/// does: each step up samples 5 more keys, tolerates 1% fewer expired
/// keys and allows 2% more CPU (20 keys, 10% and 25% at 1).
fn active_expire(st: &mut State, now: i64, hz: i64) {
    let effort = st.cfg.active_expire_effort.clamp(1, 10) as usize - 1;
    let (per_loop, stale_perc, cpu_perc) = (20 + 5 * effort, 10 - effort, 25 + 2 * effort as i64);
    let budget = Duration::from_micros((cpu_perc * 10_000 / hz) as u64);
    let start = std::time::Instant::now();
    let mut sampled_total = 0usize;
    let mut expired_total = 0usize;
    for db in 0..st.shard.dbs.len() {
        loop {
            if st.shard.dbs[db].expires_len() == 0 {
                break;
            }
            let (seen, dead) = st.shard.dbs[db].expire_sample(now, per_loop);
            let n = dead.len();
            sampled_total += seen;
            expired_total += n;
            for (k, v) in dead {
                crate::state::lazyfree::drop_value(v, st.cfg.lazyfree_lazy_expire);
                st.expired(db, &k);
            }
            if seen == 0 || n * 100 / seen <= stale_perc || start.elapsed() > budget {
                break;
            }
        }
        if start.elapsed() > budget {
            st.stats.expired_time_cap_reached += 1;
            break;
        }
    }
    if sampled_total > 0 {
        let perc = expired_total as f64 / sampled_total as f64;
        st.stats.expired_stale_perc = perc * 0.05 + st.stats.expired_stale_perc * 0.95;
    }
    let elapsed_ms = start.elapsed().as_millis() as u64;
    st.stats.expire_cycle_cpu_ms += elapsed_ms;
    st.memory
        .latency_sample_if_needed("expire-cycle", elapsed_ms);
}
