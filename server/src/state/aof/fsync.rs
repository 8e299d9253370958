//! The background fsync thread (`everysec`, and the files a rewrite
//! switched away from). Writes are not its business: they happen under the
//! state lock, before the replies.

use super::*;

/// The fsync thread's view of the files.
struct Sync {
    /// The file being appended to.
    file: Arc<File>,
    /// Files a rewrite switched away from, with the logical offset at
    /// their end: fsynced before `synced` moves past it.
    old: Vec<(Arc<File>, u64)>,
    /// The logical offset handed to the kernel.
    written: u64,
    policy: Fsync,
    /// Skip fsyncs (no-appendfsync-on-rewrite while a rewrite runs).
    hold: bool,
    stop: bool,
}

/// The background fsync thread (`everysec`, and files a rewrite switched
/// away from), shared with the state. Writes are not its business: they
/// happen under the state lock, before the replies.
pub struct Io {
    m: Mutex<Sync>,
    cv: Condvar,
    /// The errno of the last fsync, 0 when it succeeded.
    pub fsync_errno: AtomicI32,
    /// An fsync is running (INFO's `aof_pending_bio_fsync`).
    pub syncing: AtomicBool,
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
}

impl Io {
    pub(super) fn start(file: Arc<File>, policy: Fsync, offset: u64) -> Arc<Io> {
        let io = Arc::new(Io {
            m: Mutex::new(Sync {
                file,
                old: Vec::new(),
                written: offset,
                policy,
                hold: false,
                stop: false,
            }),
            cv: Condvar::new(),
            fsync_errno: AtomicI32::new(0),
            syncing: AtomicBool::new(false),
            thread: Mutex::new(None),
        });
        let me = io.clone();
        let h = std::thread::Builder::new()
            .name("aof-fsync".into())
            .spawn(move || {
                crate::core::affinity::pin(crate::core::affinity::Role::Bio);
                me.run(offset)
            })
            .expect("spawn the AOF fsync thread");
        *io.thread.lock().unwrap_or_else(|e| e.into_inner()) = Some(h);
        io
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Sync> {
        self.m.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Records how far the file was written.
    pub(super) fn wrote(&self, written: u64) {
        self.lock().written = written;
    }

    /// Continues in `file`; the old file is fsynced first.
    pub(super) fn switch(&self, file: Arc<File>, written: u64) {
        let mut q = self.lock();
        let old = std::mem::replace(&mut q.file, file);
        q.old.push((old, written));
        q.written = written;
        drop(q);
        self.cv.notify_one();
    }

    pub(super) fn set_policy(&self, p: Fsync, hold: bool) {
        let mut q = self.lock();
        q.policy = p;
        q.hold = hold;
        drop(q);
        self.cv.notify_one();
    }

    /// Fsyncs what was written and ends the thread.
    pub(super) fn stop(&self) {
        self.lock().stop = true;
        self.cv.notify_one();
        if let Some(h) = self.thread.lock().unwrap_or_else(|e| e.into_inner()).take() {
            let _ = h.join();
        }
    }

    fn run(&self, start: u64) {
        let mut synced = start;
        let mut last_sync = Instant::now();
        loop {
            let (file, old, target, stop) = {
                let mut q = self.lock();
                loop {
                    if q.stop || (!q.old.is_empty() && !q.hold) {
                        break;
                    }
                    let behind = q.written > synced && !q.hold;
                    let wait = match q.policy {
                        Fsync::Everysec if behind => {
                            let due = Duration::from_secs(1).saturating_sub(last_sync.elapsed());
                            if due.is_zero() {
                                break;
                            }
                            due
                        }
                        _ => Duration::from_secs(1),
                    };
                    q = self
                        .cv
                        .wait_timeout(q, wait)
                        .unwrap_or_else(|e| e.into_inner())
                        .0;
                }
                let due = q.stop
                    || (!q.hold
                        && q.written > synced
                        && match q.policy {
                            Fsync::Everysec => last_sync.elapsed() >= Duration::from_secs(1),
                            // `always` fsyncs in make_durable.
                            Fsync::Always | Fsync::No => false,
                        });
                let file = due.then(|| q.file.clone());
                (file, std::mem::take(&mut q.old), q.written, q.stop)
            };
            let mut errno = 0;
            self.syncing
                .store(file.is_some() || !old.is_empty(), Ordering::Relaxed);
            for (f, end) in old {
                match f.sync_data() {
                    Ok(()) => synced = synced.max(end),
                    Err(e) => {
                        errno = self::errno(&e);
                        warn!("Error fsyncing the AOF file switched away from: {e}");
                    }
                }
            }
            if let Some(f) = file {
                match f.sync_data() {
                    Ok(()) => {
                        synced = synced.max(target);
                        last_sync = Instant::now();
                    }
                    Err(e) => {
                        errno = self::errno(&e);
                        warn!("Can't persist AOF for fsync error: {e}");
                        std::thread::sleep(Duration::from_millis(100));
                    }
                }
            }
            self.syncing.store(false, Ordering::Relaxed);
            self.fsync_errno.store(errno, Ordering::Relaxed);
            if stop {
                break;
            }
        }
    }
}

/// An error's errno (EIO when it has none), 0 meaning none.
pub(super) fn errno(e: &io::Error) -> i32 {
    e.raw_os_error().unwrap_or(libc::EIO)
}
