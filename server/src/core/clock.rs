//! The wall clock in Redis's units, and the random IDs Redis makes.

pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

pub fn now_us() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_micros() as i64)
        .unwrap_or(0)
}

/// 40 random hex digits, the form of Redis's run and replication IDs.
pub fn random_hex40() -> String {
    use rand::Rng;
    let mut r = rand::thread_rng();
    (0..40)
        .map(|_| char::from_digit(r.gen_range(0..16), 16).unwrap_or('0'))
        .collect()
}
