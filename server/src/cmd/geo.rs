//! GEOADD: a position is stored in a sorted set as the score that is its
//! 52-bit geohash (26 bits of latitude interleaved with 26 of longitude),
//! exactly as Redis computes it, so the sets are interchangeable.

use super::zset::zadd_generic;
use super::{is, Ctx, Handler};
use crate::error::{CmdResult, Error, NOT_FLOAT};
use bytes::Bytes;
use storage::num::parse_score;
use storage::ZaddFlags;

pub static HANDLERS: &[(&str, Handler)] = &[("geoadd", geoadd)];

const LON_MIN: f64 = -180.0;
const LON_MAX: f64 = 180.0;
/// The latitudes the Web Mercator projection covers.
const LAT_MIN: f64 = -85.05112878;
const LAT_MAX: f64 = 85.05112878;
const STEP: u32 = 26;

/// GEOADD key [NX|XX] [CH] longitude latitude member [...]
fn geoadd(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let mut f = ZaddFlags::default();
    let mut ch = false;
    let mut i = 2;
    while i < a.len() {
        if is(&a[i], "nx") {
            f.nx = true;
        } else if is(&a[i], "xx") {
            f.xx = true;
        } else if is(&a[i], "ch") {
            ch = true;
        } else {
            break;
        }
        i += 1;
    }
    let triples = &a[i..];
    if triples.is_empty() || !triples.len().is_multiple_of(3) || (f.nx && f.xx) {
        return Err(Error::Syntax);
    }
    let mut pairs = Vec::with_capacity(triples.len() / 3 * 2);
    for t in triples.chunks(3) {
        let lon = parse_score(&t[0]).ok_or(NOT_FLOAT)?;
        let lat = parse_score(&t[1]).ok_or(NOT_FLOAT)?;
        if !(LON_MIN..=LON_MAX).contains(&lon) || !(LAT_MIN..=LAT_MAX).contains(&lat) {
            return Err(Error::other(format!(
                "ERR invalid longitude,latitude pair {lon:.6},{lat:.6}"
            )));
        }
        pairs.push(Bytes::from(geohash(lon, lat).to_string()));
        pairs.push(t[2].clone());
    }
    // Replicas and the AOF get the ZADD it amounts to, as from Redis.
    if c.propagating() {
        let mut op = vec![Bytes::from_static(b"zadd"), a[1].clone()];
        op.extend(a[2..i].iter().cloned());
        op.extend(pairs.iter().cloned());
        c.propagate_as(op);
    }
    zadd_generic(c, &a[1], &pairs, f, ch)
}

/// The 52-bit geohash of a valid position, as Redis's `geohashEncode`
/// computes it (the top of each range maps one past the last cell).
pub fn geohash(lon: f64, lat: f64) -> u64 {
    let scale = (1u64 << STEP) as f64;
    let lat_cell = ((lat - LAT_MIN) / (LAT_MAX - LAT_MIN) * scale) as u32;
    let lon_cell = ((lon - LON_MIN) / (LON_MAX - LON_MIN) * scale) as u32;
    spread(lat_cell) | (spread(lon_cell) << 1)
}

/// The bits of `v` moved to the even positions.
fn spread(v: u32) -> u64 {
    (0..32).fold(0, |acc, b| acc | ((((v >> b) & 1) as u64) << (2 * b)))
}

#[cfg(test)]
mod tests {
    use super::geohash;

    /// Scores redis-server 7.0.15 stored for these positions.
    #[test]
    fn geohash_matches_redis() {
        assert_eq!(geohash(-122.33207, 47.60621), 1558507292839943);
        assert_eq!(geohash(0.0, 0.0), 3377699720527872);
        assert_eq!(geohash(13.361389, 38.115556), 3479099956230698);
        assert_eq!(geohash(180.0, 85.05112878), 13510798882111488);
        assert_eq!(geohash(-180.0, -85.05112878), 0);
    }
}
