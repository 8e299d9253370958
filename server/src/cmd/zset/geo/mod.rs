//! The geo commands: positions kept in a sorted set whose scores are their
//! 52-bit geohashes (see [`hash`]), so the sets are Redis's and every
//! sorted set command works on them. GEOADD writes scores; GEODIST, GEOPOS
//! and GEOHASH decode them; GEORADIUS, GEORADIUSBYMEMBER (and their `_RO`
//! forms), GEOSEARCH and GEOSEARCHSTORE scan the score ranges of the cells
//! around a centre, keep the points inside the radius or box, and reply or
//! store them.

mod hash;
use self::hash::{decode_score, distance, geohash, geohash_string, Search, Shape};

use super::ops::{build, limits, store_result, zadd_generic};
use crate::cmd::{int_arg, is, Ctx, Handler};
use crate::core::error::{CmdResult, Error, NOT_FLOAT};
use crate::core::pqsort::pqsort;
use crate::state::shard::Keys;
use bytes::Bytes;
use protocol::ReplyBuf;
use std::cmp::Ordering::Equal;
use storage::num::parse_score;
use storage::{CBytes, ScoreRange, SortedSet, Typed, ZaddFlags};

pub static HANDLERS: &[(&str, Handler)] = &[
    ("geoadd", geoadd),
    ("geodist", geodist),
    ("geohash", geohash_cmd),
    ("geopos", geopos),
    ("georadius", georadius),
    ("georadius_ro", georadius_ro),
    ("georadiusbymember", georadiusbymember),
    ("georadiusbymember_ro", georadiusbymember_ro),
    ("geosearch", geosearch),
    ("geosearchstore", geosearchstore),
];

/// A float argument, with its own error text.
fn float_arg(a: &[u8], err: &str) -> Result<f64, Error> {
    parse_score(a).ok_or_else(|| Error::other(err))
}

/// A valid `longitude latitude` pair.
fn lonlat_arg(a: &[Bytes]) -> Result<(f64, f64), Error> {
    let lon = parse_score(&a[0]).ok_or(NOT_FLOAT)?;
    let lat = parse_score(&a[1]).ok_or(NOT_FLOAT)?;
    if !(hash::LON_MIN..=hash::LON_MAX).contains(&lon)
        || !(hash::LAT_MIN..=hash::LAT_MAX).contains(&lat)
    {
        return Err(Error::other(format!(
            "ERR invalid longitude,latitude pair {lon:.6},{lat:.6}"
        )));
    }
    Ok((lon, lat))
}

/// Metres per unit.
fn unit_arg(a: &[u8]) -> Result<f64, Error> {
    Ok(if is(a, "m") {
        1.0
    } else if is(a, "km") {
        1000.0
    } else if is(a, "ft") {
        0.3048
    } else if is(a, "mi") {
        1609.34
    } else {
        return Err(Error::other(
            "ERR unsupported unit provided. please use M, KM, FT, MI",
        ));
    })
}

/// `radius unit`: the radius shape and metres per unit.
fn radius_arg(a: &[Bytes]) -> Result<(Shape, f64), Error> {
    let r = float_arg(&a[0], "ERR need numeric radius")?;
    if r < 0.0 {
        return Err(Error::other("ERR radius cannot be negative"));
    }
    Ok((Shape::Radius(r), unit_arg(&a[1])?))
}

/// `width height unit`: the box shape and metres per unit.
fn box_arg(a: &[Bytes]) -> Result<(Shape, f64), Error> {
    let width = float_arg(&a[0], "ERR need numeric width")?;
    let height = float_arg(&a[1], "ERR need numeric height")?;
    if height < 0.0 || width < 0.0 {
        return Err(Error::other("ERR height or width cannot be negative"));
    }
    Ok((Shape::Box { width, height }, unit_arg(&a[2])?))
}

/// A distance in the unit, with 4 decimals: the value times 10^4 rounded
/// to the nearest integer (ties to even), as Redis's fixed-point printer.
fn fixed4(d: f64) -> String {
    let v = (d * 10000.0).round_ties_even() as i64;
    let sign = if v < 0 { "-" } else { "" };
    let v = v.unsigned_abs();
    format!("{sign}{}.{:04}", v / 10000, v % 10000)
}

/// A coordinate as Redis prints a long double for humans: 17 decimals,
/// trailing zeros (and a bare point) dropped; a RESP3 double.
fn coord(out: &mut ReplyBuf, v: f64) {
    let s = format!("{v:.17}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    let s = if s == "-0" { "0" } else { s };
    if out.resp3 {
        out.raw(b",");
        out.raw(s.as_bytes());
        out.raw(b"\r\n");
    } else {
        out.bulk(s.as_bytes());
    }
}

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
        let (lon, lat) = lonlat_arg(&t[..2])?;
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

/// GEODIST key member1 member2 [M|KM|FT|MI]
fn geodist(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let to_meters = match a.len() {
        4 => 1.0,
        5 => unit_arg(&a[4])?,
        _ => return Err(Error::Syntax),
    };
    let pos = |z: &SortedSet, m: &[u8]| z.score(m).map(decode_score);
    let d = match c.keys().read::<SortedSet>(&a[1])? {
        Some(z) => match (pos(z, &a[2]), pos(z, &a[3])) {
            (Some(p), Some(q)) => Some(distance(p.0, p.1, q.0, q.1) / to_meters),
            _ => None,
        },
        None => None,
    };
    match d {
        Some(d) => c.out.bulk(fixed4(d).as_bytes()),
        None => c.out.null(),
    }
    Ok(())
}

/// GEOPOS key [member [member ...]]
fn geopos(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let mut k = c.st.keys(c.cl.db, c.now);
    let z = k.read::<SortedSet>(&a[1])?;
    c.out.array(a.len() - 2);
    for m in &a[2..] {
        match z.and_then(|z| z.score(m)) {
            Some(s) => {
                let (lon, lat) = decode_score(s);
                c.out.array(2);
                coord(c.out, lon);
                coord(c.out, lat);
            }
            None => c.out.null_array(),
        }
    }
    Ok(())
}

/// GEOHASH key [member [member ...]]
fn geohash_cmd(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    let mut k = c.st.keys(c.cl.db, c.now);
    let z = k.read::<SortedSet>(&a[1])?;
    c.out.array(a.len() - 2);
    for m in &a[2..] {
        match z.and_then(|z| z.score(m)) {
            Some(s) => {
                let (lon, lat) = decode_score(s);
                c.out.bulk(&geohash_string(lon, lat));
            }
            None => c.out.null(),
        }
    }
    Ok(())
}

/// Which command of the search family runs.
#[derive(Clone, Copy, PartialEq)]
enum Form {
    /// GEORADIUS[_RO] key longitude latitude radius unit ...
    Coords,
    /// GEORADIUSBYMEMBER[_RO] key member radius unit ...
    Member,
    /// GEOSEARCH key ...
    Search,
    /// GEOSEARCHSTORE destination source ...
    SearchStore,
}

/// GEORADIUS key longitude latitude radius M|KM|FT|MI [WITHCOORD] [WITHDIST]
/// [WITHHASH] [COUNT count [ANY]] [ASC|DESC] [STORE key] [STOREDIST key]
fn georadius(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    search_generic(c, a, Form::Coords, true)
}

/// GEORADIUS_RO key longitude latitude radius M|KM|FT|MI [WITHCOORD]
/// [WITHDIST] [WITHHASH] [COUNT count [ANY]] [ASC|DESC]
fn georadius_ro(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    search_generic(c, a, Form::Coords, false)
}

/// GEORADIUSBYMEMBER key member radius M|KM|FT|MI [WITHCOORD] [WITHDIST]
/// [WITHHASH] [COUNT count [ANY]] [ASC|DESC] [STORE key] [STOREDIST key]
fn georadiusbymember(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    search_generic(c, a, Form::Member, true)
}

/// GEORADIUSBYMEMBER_RO key member radius M|KM|FT|MI [WITHCOORD]
/// [WITHDIST] [WITHHASH] [COUNT count [ANY]] [ASC|DESC]
fn georadiusbymember_ro(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    search_generic(c, a, Form::Member, false)
}

/// GEOSEARCH key FROMMEMBER member|FROMLONLAT longitude latitude
/// BYRADIUS radius unit|BYBOX width height unit [ASC|DESC]
/// [COUNT count [ANY]] [WITHCOORD] [WITHDIST] [WITHHASH]
fn geosearch(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    search_generic(c, a, Form::Search, false)
}

/// GEOSEARCHSTORE destination source FROMMEMBER member|FROMLONLAT
/// longitude latitude BYRADIUS radius unit|BYBOX width height unit
/// [ASC|DESC] [COUNT count [ANY]] [STOREDIST]
fn geosearchstore(c: &mut Ctx, a: &[Bytes]) -> CmdResult {
    search_generic(c, a, Form::SearchStore, false)
}

/// A point found by a search.
struct Hit {
    member: CBytes,
    score: f64,
    dist: f64,
    lon: f64,
    lat: f64,
}

#[derive(Clone, Copy, PartialEq)]
enum Sort {
    None,
    Asc,
    Desc,
}

/// The position of `member` in `z`, the centre of a search from a member.
fn member_pos(z: &SortedSet, member: &[u8]) -> Result<(f64, f64), Error> {
    z.score(member)
        .map(decode_score)
        .ok_or_else(|| Error::other("ERR could not decode requested zset member"))
}

/// A search's arguments, read.
struct Query<'a> {
    search: Search,
    store: Option<&'a Bytes>,
    storedist: bool,
    withdist: bool,
    withhash: bool,
    withcoord: bool,
    any: bool,
    /// 0: no COUNT.
    count: usize,
    sort: Sort,
}

/// Reads a search's arguments with Redis's checks in its order: left to
/// right (a member is looked up in the source `z` where it comes), then
/// their combinations.
fn parse_query<'a>(
    a: &'a [Bytes],
    form: Form,
    store_ok: bool,
    z: Option<&SortedSet>,
) -> Result<Query<'a>, Error> {
    let mut center = (0.0, 0.0);
    let mut shape = (Shape::Radius(0.0), 1.0);
    let mut store = None;
    let base = match form {
        Form::Coords => {
            center = lonlat_arg(&a[2..4])?;
            shape = radius_arg(&a[4..6])?;
            6
        }
        Form::Member => {
            // Without a source the member is not looked for, and neither
            // is the radius read.
            if let Some(z) = z {
                center = member_pos(z, &a[2])?;
                shape = radius_arg(&a[3..5])?;
            }
            5
        }
        Form::Search => 2,
        Form::SearchStore => {
            store = Some(&a[1]);
            3
        }
    };
    let searching = matches!(form, Form::Search | Form::SearchStore);
    let (mut withdist, mut withhash, mut withcoord, mut any) = (false, false, false, false);
    let (mut frommember, mut fromloc, mut byradius, mut bybox) = (false, false, false, false);
    let mut storedist = false;
    let mut sort = Sort::None;
    let mut count = 0;
    let opts = &a[base..];
    let mut i = 0;
    while i < opts.len() {
        let o = &opts[i];
        let left = opts.len() - i - 1;
        if is(o, "withdist") {
            withdist = true;
        } else if is(o, "withhash") {
            withhash = true;
        } else if is(o, "withcoord") {
            withcoord = true;
        } else if is(o, "any") {
            any = true;
        } else if is(o, "asc") {
            sort = Sort::Asc;
        } else if is(o, "desc") {
            sort = Sort::Desc;
        } else if is(o, "count") && left >= 1 {
            let n = int_arg(&opts[i + 1])?;
            if n <= 0 {
                return Err(Error::other("ERR COUNT must be > 0"));
            }
            count = n as usize;
            i += 1;
        } else if (is(o, "store") || is(o, "storedist")) && left >= 1 && store_ok {
            store = Some(&opts[i + 1]);
            storedist = is(o, "storedist");
            i += 1;
        } else if is(o, "storedist") && form == Form::SearchStore {
            storedist = true;
        } else if is(o, "frommember") && left >= 1 && searching && !fromloc {
            if let Some(z) = z {
                center = member_pos(z, &opts[i + 1])?;
            }
            frommember = true;
            i += 1;
        } else if is(o, "fromlonlat") && left >= 2 && searching && !frommember {
            center = lonlat_arg(&opts[i + 1..i + 3])?;
            fromloc = true;
            i += 2;
        } else if is(o, "byradius") && left >= 2 && searching && !bybox {
            shape = radius_arg(&opts[i + 1..i + 3])?;
            byradius = true;
            i += 2;
        } else if is(o, "bybox") && left >= 3 && searching && !byradius {
            shape = box_arg(&opts[i + 1..i + 4])?;
            bybox = true;
            i += 3;
        } else {
            return Err(Error::Syntax);
        }
        i += 1;
    }
    if store.is_some() && (withdist || withhash || withcoord) {
        let what = if form == Form::SearchStore {
            "GEOSEARCHSTORE"
        } else {
            "STORE option in GEORADIUS"
        };
        return Err(Error::other(format!(
            "ERR {what} is not compatible with WITHDIST, WITHHASH and WITHCOORD options"
        )));
    }
    let name = String::from_utf8_lossy(&a[0]);
    if searching && !(frommember || fromloc) {
        return Err(Error::other(format!(
            "ERR exactly one of FROMMEMBER or FROMLONLAT can be specified for {name}"
        )));
    }
    if searching && !(byradius || bybox) {
        return Err(Error::other(format!(
            "ERR exactly one of BYRADIUS and BYBOX can be specified for {name}"
        )));
    }
    if any && count == 0 {
        return Err(Error::other("ERR the ANY argument requires COUNT argument"));
    }
    // The nearest COUNT need an order: ascending unless said otherwise.
    if count != 0 && sort == Sort::None && !any {
        sort = Sort::Asc;
    }
    Ok(Query {
        search: Search::new(center.0, center.1, shape.0, shape.1),
        store,
        storedist,
        withdist,
        withhash,
        withcoord,
        any,
        count,
        sort,
    })
}

/// The source set at `key`, once looked up.
fn source<'s>(k: &'s mut Keys, key: &[u8]) -> Option<&'s SortedSet> {
    k.db().get(key).and_then(SortedSet::of)
}

/// The whole family: the source's type is checked first, then the
/// arguments; the scan; the reply or the stored set.
fn search_generic(c: &mut Ctx, a: &[Bytes], form: Form, store_ok: bool) -> CmdResult {
    let db = c.cl.db;
    let src = &a[if form == Form::SearchStore { 2 } else { 1 }];
    let mut k = c.st.keys(db, c.now);
    let found = k.read::<SortedSet>(src)?.is_some();
    let q = parse_query(a, form, store_ok, source(&mut k, src))?;
    let event = if matches!(form, Form::Search | Form::SearchStore) {
        "geosearchstore"
    } else {
        "georadiusstore"
    };
    let mut hits = Vec::new();
    if let Some(z) = source(&mut c.st.keys(db, c.now), src) {
        scan(z, &q.search, if q.any { q.count } else { 0 }, &mut hits);
    }
    if !found || (hits.is_empty() && q.store.is_none()) {
        match q.store {
            Some(dst) => store_result(c, dst, SortedSet::new_listpack(), event),
            None => c.out.array(0),
        }
        return Ok(());
    }
    let n = if q.count == 0 {
        hits.len()
    } else {
        hits.len().min(q.count)
    };
    let mut asc = |x: &Hit, y: &Hit| x.dist.partial_cmp(&y.dist).unwrap_or(Equal);
    let mut desc = |x: &Hit, y: &Hit| y.dist.partial_cmp(&x.dist).unwrap_or(Equal);
    // Equal distances keep their scan order in a full sort; a partial one
    // orders them as Redis's does.
    match q.sort {
        Sort::None => {}
        Sort::Asc if n < hits.len() => pqsort(&mut hits, 0, n - 1, &mut asc),
        Sort::Desc if n < hits.len() => pqsort(&mut hits, 0, n - 1, &mut desc),
        Sort::Asc => hits.sort_by(asc),
        Sort::Desc => hits.sort_by(desc),
    }
    hits.truncate(n);
    for h in &mut hits {
        h.dist /= q.search.to_meters;
    }
    match q.store {
        Some(dst) => {
            let lim = limits(c);
            let score = |h: &Hit| if q.storedist { h.dist } else { h.score };
            let z = build(hits.iter().map(|h| (&h.member[..], score(h))), &lim);
            store_result(c, dst, z, event);
            // Redis counts a change per element stored.
            c.st.dirty += n.saturating_sub(1) as u64;
        }
        None => reply_hits(c.out, &hits, &q),
    }
    Ok(())
}

/// The results: members, or with WITH* options one array per member.
fn reply_hits(out: &mut ReplyBuf, hits: &[Hit], q: &Query) {
    let extra = q.withdist as usize + q.withhash as usize + q.withcoord as usize;
    out.array(hits.len());
    for h in hits {
        if extra > 0 {
            out.array(extra + 1);
        }
        out.bulk(&h.member);
        if q.withdist {
            out.bulk(fixed4(h.dist).as_bytes());
        }
        if q.withhash {
            out.int(h.score as i64);
        }
        if q.withcoord {
            out.array(2);
            coord(out, h.lon);
            coord(out, h.lat);
        }
    }
}

/// The points of `z` inside the search, cell by cell in Redis's order;
/// with a `limit` (COUNT … ANY) it stops once that many are found.
fn scan(z: &SortedSet, search: &Search, limit: usize, hits: &mut Vec<Hit>) {
    let cells = search.cells();
    let full = |hits: &Vec<Hit>| limit > 0 && hits.len() >= limit;
    let mut last = 0;
    for (i, &cell) in cells.iter().enumerate() {
        if cell.step == 0 {
            continue;
        }
        // With huge radii neighbours coincide: each is scanned once.
        if last != 0 && cells[last] == cell {
            continue;
        }
        if full(hits) {
            break;
        }
        let (min, max) = cell.score_range();
        let range = ScoreRange {
            min,
            max,
            minex: false,
            maxex: true,
        };
        z.for_each_in_score(&range, |m, s| {
            let (lon, lat) = decode_score(s);
            if let Some(dist) = search.distance_if_within(lon, lat) {
                hits.push(Hit {
                    member: CBytes::new(m),
                    score: s,
                    dist,
                    lon,
                    lat,
                });
            }
            !full(hits)
        });
        last = i;
    }
}
