//! Data-type workloads of the seed articles (/work/shared/seeds), ported
//! from their Java (and, where the Java port is broken, the book's Python)
//! to the `redis` crate: same keys, same commands, same options. Timestamps
//! are parameters so orderings are deterministic. Lua parts are left out.
//!
//! Deviations from the articles' Java, each a bug in the port, not in Redis:
//! `fetchPendingMessages` reads from `seenId + 1` (the Java re-delivers the
//! last seen message), `unfollowUser` queues the two ZCARDs it reads,
//! `acquireFairSemaphore`'s failure path executes its ZREMs, `findJobs` reads
//! `idx:<result>`, `recordTargetingResult` counts matched words (the
//! intersection), `stringToScore` uses 64-bit arithmetic and page ranges end
//! at `start + count - 1`.

use cinnabar_tests::Server;
use redis::{cmd, pipe, Connection, Value};
use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

/// `r!(conn, "CMD", args...)`: runs a command, the reply type inferred.
macro_rules! r {
    ($c:expr, $name:expr $(, $a:expr)* $(,)?) => {
        cmd($name)$(.arg($a))*.query($c).unwrap()
    };
}

fn uuid() -> String {
    let h = format!("{:032x}", rand::random::<u128>());
    format!(
        "{}-{}-{}-{}-{}",
        &h[0..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..32]
    )
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

fn f(v: &Value) -> f64 {
    redis::from_redis_value(v).unwrap()
}

/// The value of `"name":` in a flat JSON object written by these tests.
fn json_field(json: &str, name: &str) -> String {
    let pat = format!("\"{name}\":");
    let rest = &json[json.find(&pat).unwrap() + pat.len()..];
    if let Some(s) = rest.strip_prefix('"') {
        s[..s.find('"').unwrap()].to_string()
    } else {
        rest[..rest.find([',', '}']).unwrap()].to_string()
    }
}

fn json_array(items: &[&str]) -> String {
    let q: Vec<String> = items.iter().map(|s| format!("\"{s}\"")).collect();
    format!("[{}]", q.join(","))
}

fn parse_json_array(json: &str) -> Vec<String> {
    let inner = json.trim_start_matches('[').trim_end_matches(']');
    inner
        .split(',')
        .filter(|s| !s.is_empty())
        .map(|s| s.trim_matches('"').to_string())
        .collect()
}

// ---------------------------------------------------------------------------
// 000: article voting

const ONE_WEEK_IN_SECONDS: i64 = 7 * 86400;
const VOTE_SCORE: i64 = 432;
const ARTICLES_PER_PAGE: isize = 25;

fn post_article(c: &mut Connection, user: &str, title: &str, link: &str, now: i64) -> String {
    let id: i64 = r!(c, "INCR", "article:");
    let voted = format!("voted:{id}");
    let _: i64 = r!(c, "SADD", &voted, user);
    let _: i64 = r!(c, "EXPIRE", &voted, ONE_WEEK_IN_SECONDS);
    let article = format!("article:{id}");
    let _: () = r!(
        c, "HMSET", &article, "title", title, "link", link, "user", user, "now", now, "oppose",
        "0", "votes", "1"
    );
    let _: i64 = r!(c, "ZADD", "score:", now + VOTE_SCORE, &article);
    let _: i64 = r!(c, "ZADD", "time:", now, &article);
    id.to_string()
}

fn article_vote(c: &mut Connection, user: &str, article: &str, now: i64, oppose: bool) {
    let cutoff = now - ONE_WEEK_IN_SECONDS;
    let posted: Option<f64> = r!(c, "ZSCORE", "time:", article);
    if posted.is_none_or(|t| t < cutoff as f64) {
        return;
    }
    let id = &article[article.find(':').unwrap() + 1..];
    let (set, delta) = if oppose {
        ("oppose:", -1)
    } else {
        ("voted:", 1)
    };
    let added: i64 = r!(c, "SADD", format!("{set}{id}"), user);
    if added == 1 {
        let _: f64 = r!(c, "ZINCRBY", "score:", delta * VOTE_SCORE, article);
        let _: i64 = r!(c, "HINCRBY", article, "votes", delta);
    }
}

fn get_articles(c: &mut Connection, page: isize, order: &str) -> Vec<HashMap<String, String>> {
    let start = (page - 1) * ARTICLES_PER_PAGE;
    let end = start + ARTICLES_PER_PAGE - 1;
    let ids: Vec<String> = r!(c, "ZREVRANGE", order, start, end);
    ids.into_iter()
        .map(|id| {
            let mut data: HashMap<String, String> = r!(c, "HGETALL", &id);
            data.insert("id".into(), id);
            data
        })
        .collect()
}

fn add_groups(c: &mut Connection, article_id: &str, to_add: &[&str]) {
    for g in to_add {
        let _: i64 = r!(
            c,
            "SADD",
            format!("group:{g}"),
            format!("article:{article_id}")
        );
    }
}

fn get_group_articles(
    c: &mut Connection,
    group: &str,
    page: isize,
    order: &str,
) -> Vec<HashMap<String, String>> {
    let key = format!("{order}{group}");
    let exists: bool = r!(c, "EXISTS", &key);
    if !exists {
        let _: i64 = r!(
            c,
            "ZINTERSTORE",
            &key,
            2,
            format!("group:{group}"),
            order,
            "AGGREGATE",
            "MAX"
        );
        let _: i64 = r!(c, "EXPIRE", &key, 60);
    }
    get_articles(c, page, &key)
}

fn ids_of(articles: &[HashMap<String, String>]) -> Vec<String> {
    articles.iter().map(|a| a["id"].clone()).collect()
}

/// ZREVRANGE order: score descending, ties by member descending.
fn expected_order(c: &mut Connection, key: &str) -> Vec<String> {
    let mut all: Vec<(String, f64)> = r!(c, "ZRANGE", key, 0, -1, "WITHSCORES");
    all.sort_by(|a, b| b.1.total_cmp(&a.1).then(b.0.cmp(&a.0)));
    all.into_iter().map(|(m, _)| m).collect()
}

#[test]
fn seed000_article_voting() {
    let s = Server::start(&[]);
    let mut c = s.redis();
    let c = &mut c;
    let _: () = r!(c, "SELECT", 15);
    let now = 1_700_000_000i64;

    let id = post_article(
        c,
        "pingxin",
        "A title",
        "https://pingxin0521.coding.me/",
        now,
    );
    assert_eq!(id, "1");
    let article = format!("article:{id}");
    let data: HashMap<String, String> = r!(c, "HGETALL", &article);
    let want: HashMap<String, String> = [
        ("title", "A title"),
        ("link", "https://pingxin0521.coding.me/"),
        ("user", "pingxin"),
        ("now", "1700000000"),
        ("oppose", "0"),
        ("votes", "1"),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    assert_eq!(data, want);
    let voted: Vec<String> = r!(c, "SMEMBERS", "voted:1");
    assert_eq!(voted, ["pingxin"]);
    let ttl: i64 = r!(c, "TTL", "voted:1");
    assert_eq!(ttl, ONE_WEEK_IN_SECONDS);
    let score: f64 = r!(c, "ZSCORE", "score:", &article);
    assert_eq!(score, (now + VOTE_SCORE) as f64);

    // Voting: once per user; the poster already voted.
    article_vote(c, "other_user", &article, now + 10, false);
    let votes: String = r!(c, "HGET", &article, "votes");
    assert_eq!(votes, "2");
    article_vote(c, "other_user", &article, now + 11, false);
    article_vote(c, "pingxin", &article, now + 12, false);
    let votes: String = r!(c, "HGET", &article, "votes");
    assert_eq!(votes, "2");
    let score: f64 = r!(c, "ZSCORE", "score:", &article);
    assert_eq!(score, (now + 2 * VOTE_SCORE) as f64);
    // Opposing: its own set, once per user.
    article_vote(c, "other_user", &article, now + 13, true);
    article_vote(c, "other_user", &article, now + 14, true);
    let votes: String = r!(c, "HGET", &article, "votes");
    assert_eq!(votes, "1");
    let score: f64 = r!(c, "ZSCORE", "score:", &article);
    assert_eq!(score, (now + VOTE_SCORE) as f64);
    let opp: bool = r!(c, "SISMEMBER", "oppose:1", "other_user");
    assert!(opp);
    // Past the one-week cutoff nobody can vote.
    article_vote(c, "late", &article, now + ONE_WEEK_IN_SECONDS + 1, false);
    let votes: String = r!(c, "HGET", &article, "votes");
    assert_eq!(votes, "1");

    // 30 more articles with 0..4 extra votes each: paging by score and time.
    for i in 2..=31i64 {
        let a = post_article(c, &format!("u{i}"), &format!("t{i}"), "l", now + i);
        for v in 0..(i % 5) {
            article_vote(
                c,
                &format!("v{v}"),
                &format!("article:{a}"),
                now + 100,
                false,
            );
        }
        let votes: String = r!(c, "HGET", format!("article:{a}"), "votes");
        assert_eq!(votes, (1 + i % 5).to_string());
    }
    for order in ["score:", "time:"] {
        let want = expected_order(c, order);
        assert_eq!(want.len(), 31);
        let p1 = get_articles(c, 1, order);
        let p2 = get_articles(c, 2, order);
        let p3 = get_articles(c, 3, order);
        assert_eq!(p1.len(), 25);
        assert_eq!(p2.len(), 6);
        assert!(p3.is_empty());
        assert_eq!(ids_of(&p1), want[..25]);
        assert_eq!(ids_of(&p2), want[25..]);
        // Each entry is the article's full hash.
        for a in p1.iter().chain(&p2) {
            assert_eq!(a.len(), 7, "{a:?}");
            assert_eq!(a["id"], format!("article:{}", &a["id"][8..]));
        }
    }
    let top = get_articles(c, 1, "score:");
    // Most votes (i % 5 == 4, latest first), then ties broken by time.
    assert_eq!(top[0]["id"], "article:29");
    assert_eq!(top[0]["votes"], "5");
    let newest = get_articles(c, 1, "time:");
    assert_eq!(newest[0]["id"], "article:31");

    // Groups: ZINTERSTORE of the group set (scores 1) with score: / time:,
    // AGGREGATE MAX, cached for 60 s.
    add_groups(c, &id, &["new-group"]);
    for a in ["5", "9", "12"] {
        add_groups(c, a, &["new-group", "programming"]);
    }
    let g = get_group_articles(c, "new-group", 1, "score:");
    let mut want: Vec<(String, f64)> = vec![];
    for a in ["1", "5", "9", "12"] {
        let sc: f64 = r!(c, "ZSCORE", "score:", format!("article:{a}"));
        want.push((format!("article:{a}"), sc));
    }
    want.sort_by(|a, b| b.1.total_cmp(&a.1).then(b.0.cmp(&a.0)));
    let want_ids: Vec<String> = want.iter().map(|(m, _)| m.clone()).collect();
    assert_eq!(ids_of(&g), want_ids);
    let cached: Vec<(String, f64)> = r!(c, "ZREVRANGE", "score:new-group", 0, -1, "WITHSCORES");
    assert_eq!(cached, want);
    let ttl: i64 = r!(c, "TTL", "score:new-group");
    assert!((59..=60).contains(&ttl), "{ttl}");
    // The cache is served until it expires, even when the group grows.
    add_groups(c, "30", &["new-group"]);
    let g2 = get_group_articles(c, "new-group", 1, "score:");
    assert_eq!(ids_of(&g2), want_ids);
    let _: i64 = r!(c, "DEL", "score:new-group");
    let g3 = get_group_articles(c, "new-group", 1, "score:");
    assert_eq!(g3.len(), 5);
    let by_time = get_group_articles(c, "programming", 1, "time:");
    assert_eq!(ids_of(&by_time), ["article:12", "article:9", "article:5"]);
    let t: Vec<(String, f64)> = r!(c, "ZRANGE", "time:programming", 0, -1, "WITHSCORES");
    assert_eq!(
        t,
        [
            ("article:5".to_string(), (now + 5) as f64),
            ("article:9".to_string(), (now + 9) as f64),
            ("article:12".to_string(), (now + 12) as f64)
        ]
    );
    // Everything lived in db 15.
    let _: () = r!(c, "SELECT", 0);
    let n: i64 = r!(c, "DBSIZE");
    assert_eq!(n, 0);
}

// ---------------------------------------------------------------------------
// 003: red-envelope rain (the Lua grab replayed command by command)

/// RedBagBatchGrab.lua without Lua: HINCRBY the user's grab count, at most
/// 3 grabs, LPOP an amount, ZADD it under "<user>-<n>".
fn grab(c: &mut Connection, user: &str) -> String {
    let n: i64 = r!(c, "HINCRBY", "RedBagBatch:7758521:Limit", user, 1);
    if n > 3 {
        return "-1".into();
    }
    let amount: Option<String> = r!(c, "LPOP", "RedBagBatch:7758521");
    let Some(amount) = amount else {
        return "-2".into();
    };
    let _: i64 = r!(
        c,
        "ZADD",
        "RedBagBatch:7758521:Users",
        &amount,
        format!("{user}-{n}")
    );
    amount
}

#[test]
fn seed003_red_envelope_rain() {
    let s = Server::start(&[("requirepass", "123456")]);
    let mut c = s.redis();
    let c = &mut c;
    let n: i64 = r!(
        c,
        "LPUSH",
        "RedBagBatch:7758521",
        1,
        3,
        10,
        6,
        8,
        7,
        2,
        5,
        4,
        9
    );
    assert_eq!(n, 10);
    // The transcript's exact redis-cli output.
    let out = s.cli_out(&[
        "-a",
        "123456",
        "--no-auth-warning",
        "lrange",
        "RedBagBatch:7758521",
        "0",
        "-1",
    ]);
    assert_eq!(out, "9\n4\n5\n2\n7\n8\n6\n10\n3\n1");
    let grabs = [
        ("u1", "9"),
        ("u2", "4"),
        ("u3", "5"),
        ("u4", "2"),
        ("u5", "7"),
        ("u1", "8"),
        ("u2", "6"),
        ("u1", "10"),
        ("u1", "-1"),
        ("u2", "3"),
        ("u2", "-1"),
        ("u3", "1"),
    ];
    for (user, want) in grabs {
        assert_eq!(grab(c, user), want, "{user}");
    }
    // The pool is empty (and gone); a new user gets "-2".
    assert_eq!(grab(c, "u4"), "-2");
    let exists: bool = r!(c, "EXISTS", "RedBagBatch:7758521");
    assert!(!exists);
    let ranking: Vec<(String, i64)> = r!(
        c,
        "ZREVRANGE",
        "RedBagBatch:7758521:Users",
        0,
        -1,
        "WITHSCORES"
    );
    let want = [
        ("u1-3", 10),
        ("u1-1", 9),
        ("u1-2", 8),
        ("u5-1", 7),
        ("u2-2", 6),
        ("u3-1", 5),
        ("u2-1", 4),
        ("u2-3", 3),
        ("u4-1", 2),
        ("u3-2", 1),
    ];
    let want: Vec<(String, i64)> = want.iter().map(|(m, s)| (m.to_string(), *s)).collect();
    assert_eq!(ranking, want);
    // redis-cli prints member and score on alternate lines, as transcribed.
    let out = s.cli_out(&[
        "-a",
        "123456",
        "--no-auth-warning",
        "zrevrange",
        "RedBagBatch:7758521:Users",
        "0",
        "-1",
        "WITHSCORES",
    ]);
    let lines: Vec<String> = want
        .iter()
        .flat_map(|(m, s)| [m.clone(), s.to_string()])
        .collect();
    assert_eq!(out, lines.join("\n"));
    let limits: HashMap<String, i64> = r!(c, "HGETALL", "RedBagBatch:7758521:Limit");
    let want: HashMap<String, i64> = [("u1", 4), ("u2", 4), ("u3", 2), ("u4", 2), ("u5", 1)]
        .iter()
        .map(|(k, v)| (k.to_string(), *v))
        .collect();
    assert_eq!(limits, want);
}

/// 001/000 red envelope pool: LPUSH JSON envelopes, HEXISTS/RPOP/HSET/LPUSH
/// per grab (the Lua body, one client at a time), each user at most once.
#[test]
fn seed001_envelope_pool_commands() {
    let s = Server::start(&[]);
    let mut c = s.redis();
    let c = &mut c;
    let pool = "hb:pool:111111";
    let amounts = [126, 526, 666, 490, 192];
    let packed: Vec<String> = amounts
        .iter()
        .enumerate()
        .map(|(i, a)| format!("{{\"hbId\":{},\"amount\":{a}}}", i + 1))
        .collect();
    let n: i64 = r!(c, "LPUSH", pool, &packed);
    assert_eq!(n, 5);
    let mut got = vec![];
    for user in [
        "11111", "11112", "11111", "11113", "11114", "11115", "11116",
    ] {
        let seen: bool = r!(c, "HEXISTS", "hb:rd:111111", user);
        if seen {
            got.push("1".to_string());
            continue;
        }
        let hb: Option<String> = r!(c, "RPOP", pool);
        match hb {
            Some(hb) => {
                let re = format!("{{\"userId\":\"{user}\",{}", &hb[1..]);
                let _: i64 = r!(c, "HSET", "hb:rd:111111", user, "1");
                let _: i64 = r!(c, "LPUSH", "hb:detailList:111111", &re);
                got.push(json_field(&re, "amount"));
            }
            None => got.push("0".into()),
        }
    }
    assert_eq!(got, ["126", "526", "1", "666", "490", "192", "0"]);
    let detail: Vec<String> = r!(c, "LRANGE", "hb:detailList:111111", 0, -1);
    assert_eq!(detail.len(), 5);
    assert_eq!(json_field(&detail[0], "userId"), "11115");
    assert_eq!(json_field(&detail[4], "hbId"), "1");
    let users: i64 = r!(c, "HLEN", "hb:rd:111111");
    assert_eq!(users, 5);
    let len: i64 = r!(c, "LLEN", pool);
    assert_eq!(len, 0);
}

// ---------------------------------------------------------------------------
// 002 chapter 5: logs, counters, stats, IP lookup

fn log_recent(c: &mut Connection, name: &str, message: &str, severity: &str, ts: &str) {
    let dest = format!("recent:{name}:{severity}");
    let _: () = pipe()
        .cmd("LPUSH")
        .arg(&dest)
        .arg(format!("{ts} {message}"))
        .ignore()
        .cmd("LTRIM")
        .arg(&dest)
        .arg(0)
        .arg(99)
        .ignore()
        .query(c)
        .unwrap();
}

/// The start of logCommon's and updateStats's transaction: when the hour
/// whose data `key` holds (`start_key`) is over, it becomes `key:last`.
fn hour_rollover(
    key: &str,
    start_key: &str,
    existing: Option<String>,
    hour_start: &str,
) -> redis::Pipeline {
    let mut p = pipe();
    p.atomic();
    match existing {
        Some(e) if e.as_str() < hour_start => {
            p.cmd("RENAME").arg(key).arg(format!("{key}:last"));
            p.cmd("RENAME").arg(start_key).arg(format!("{key}:pstart"));
            p.cmd("SET").arg(start_key).arg(hour_start);
        }
        None => {
            p.cmd("SET").arg(start_key).arg(hour_start);
        }
        _ => {}
    }
    p
}

/// Returns how many attempts the WATCH loop took.
fn log_common(
    c: &mut Connection,
    name: &str,
    message: &str,
    severity: &str,
    hour_start: &str,
) -> usize {
    let common = format!("common:{name}:{severity}");
    let start_key = format!("{common}:start");
    let mut attempts = 0;
    loop {
        attempts += 1;
        let _: () = r!(c, "WATCH", &start_key);
        let existing: Option<String> = r!(c, "GET", &start_key);
        let mut p = hour_rollover(&common, &start_key, existing, hour_start);
        p.cmd("ZINCRBY").arg(&common).arg(1).arg(message);
        let recent = format!("recent:{name}:{severity}");
        p.cmd("LPUSH")
            .arg(&recent)
            .arg(format!("{hour_start} {message}"));
        p.cmd("LTRIM").arg(&recent).arg(0).arg(99);
        let res: Option<Vec<Value>> = p.query(c).unwrap();
        if res.is_some() {
            return attempts;
        }
    }
}

#[test]
fn seed002_ch5_logs() {
    let s = Server::start(&[]);
    let mut c = s.redis();
    let c = &mut c;
    for i in 0..150 {
        log_recent(
            c,
            "web",
            &format!("msg {i}"),
            "info",
            "Mon Jan 01 10:00:00 2024",
        );
    }
    let len: i64 = r!(c, "LLEN", "recent:web:info");
    assert_eq!(len, 100);
    let first: Vec<String> = r!(c, "LRANGE", "recent:web:info", 0, 0);
    assert_eq!(first, ["Mon Jan 01 10:00:00 2024 msg 149"]);
    let last: Vec<String> = r!(c, "LRANGE", "recent:web:info", -1, -1);
    assert_eq!(last, ["Mon Jan 01 10:00:00 2024 msg 50"]);

    let h1 = "2024-01-01T10:00:00";
    let h2 = "2024-01-01T11:00:00";
    for m in ["a", "b", "a", "a", "c", "b"] {
        assert_eq!(log_common(c, "web", m, "error", h1), 1);
    }
    let common: Vec<(String, i64)> = r!(c, "ZREVRANGE", "common:web:error", 0, -1, "WITHSCORES");
    assert_eq!(
        common,
        [
            ("a".to_string(), 3),
            ("b".to_string(), 2),
            ("c".to_string(), 1)
        ]
    );
    let start: String = r!(c, "GET", "common:web:error:start");
    assert_eq!(start, h1);
    // The hour rolls over: the counts move to :last, the start to :pstart.
    log_common(c, "web", "d", "error", h2);
    log_common(c, "web", "d", "error", h2);
    // A writer still in the previous hour does not roll back.
    log_common(c, "web", "e", "error", h1);
    let common: Vec<(String, i64)> = r!(c, "ZREVRANGE", "common:web:error", 0, -1, "WITHSCORES");
    assert_eq!(common, [("d".to_string(), 2), ("e".to_string(), 1)]);
    let last: Vec<(String, i64)> = r!(c, "ZREVRANGE", "common:web:error:last", 0, -1, "WITHSCORES");
    assert_eq!(
        last,
        [
            ("a".to_string(), 3),
            ("b".to_string(), 2),
            ("c".to_string(), 1)
        ]
    );
    let pstart: String = r!(c, "GET", "common:web:error:pstart");
    assert_eq!(pstart, h1);
    let start: String = r!(c, "GET", "common:web:error:start");
    assert_eq!(start, h2);
    let recent: Vec<String> = r!(c, "LRANGE", "recent:web:error", 0, 1);
    assert_eq!(recent, [format!("{h1} e"), format!("{h2} d")]);
    // A concurrent change of the start key between WATCH and EXEC retries.
    let mut other = s.redis();
    let _: () = r!(c, "WATCH", "common:web:error:start");
    let _: () = r!(&mut other, "SET", "common:web:error:start", h2);
    let res: Option<Vec<Value>> = pipe()
        .atomic()
        .cmd("ZINCRBY")
        .arg("common:web:error")
        .arg(1)
        .arg("lost")
        .query(c)
        .unwrap();
    assert_eq!(res, None);
    let lost: Option<f64> = r!(c, "ZSCORE", "common:web:error", "lost");
    assert_eq!(lost, None);
}

const PRECISION: [i64; 7] = [1, 5, 60, 300, 3600, 18000, 86400];

fn update_counter(c: &mut Connection, name: &str, count: i64, now: i64) {
    let mut p = pipe();
    p.atomic();
    for prec in PRECISION {
        let pnow = (now / prec) * prec;
        let hash = format!("{prec}:{name}");
        p.cmd("ZADD").arg("known:").arg(0).arg(&hash).ignore();
        p.cmd("HINCRBY")
            .arg(format!("count:{hash}"))
            .arg(pnow)
            .arg(count)
            .ignore();
    }
    let _: () = p.query(c).unwrap();
}

fn get_counter(c: &mut Connection, name: &str, prec: i64) -> Vec<(i64, i64)> {
    let data: HashMap<i64, i64> = r!(c, "HGETALL", format!("count:{prec}:{name}"));
    let mut v: Vec<(i64, i64)> = data.into_iter().collect();
    v.sort();
    v
}

/// One pass of CleanCountersThread.run() at `now` (seconds).
fn clean_counters_pass(c: &mut Connection, passes: i64, now: i64, sample_count: i64) {
    let mut index: i64 = 0;
    loop {
        let card: i64 = r!(c, "ZCARD", "known:");
        if index >= card {
            break;
        }
        let hashes: Vec<String> = r!(c, "ZRANGE", "known:", index, index);
        index += 1;
        let Some(hash) = hashes.into_iter().next() else {
            break;
        };
        let prec: i64 = hash[..hash.find(':').unwrap()].parse().unwrap();
        let bprec = (prec / 60).max(1);
        if passes % bprec != 0 {
            continue;
        }
        let hkey = format!("count:{hash}");
        let cutoff = (now - sample_count * prec).to_string();
        let mut samples: Vec<String> = r!(c, "HKEYS", &hkey);
        samples.sort();
        let remove = samples.partition_point(|x| x.as_str() <= cutoff.as_str());
        if remove != 0 {
            let _: i64 = r!(c, "HDEL", &hkey, &samples[..remove]);
            if remove == samples.len() {
                let _: () = r!(c, "WATCH", &hkey);
                let len: i64 = r!(c, "HLEN", &hkey);
                if len == 0 {
                    let _: Option<Vec<Value>> = pipe()
                        .atomic()
                        .cmd("ZREM")
                        .arg("known:")
                        .arg(&hash)
                        .query(c)
                        .unwrap();
                    index -= 1;
                } else {
                    let _: () = r!(c, "UNWATCH");
                }
            }
        }
    }
}

#[test]
fn seed002_ch5_counters() {
    let s = Server::start(&[]);
    let mut c = s.redis();
    let c = &mut c;
    let now = 1_700_000_003i64;
    update_counter(c, "hits", 1, now);
    update_counter(c, "hits", 2, now + 1);
    update_counter(c, "hits", 5, now + 400);
    update_counter(c, "views", 7, now);
    let known: Vec<(String, i64)> = r!(c, "ZRANGE", "known:", 0, -1, "WITHSCORES");
    assert_eq!(known.len(), 14);
    assert!(known.iter().all(|(_, s)| *s == 0));
    // Same score: ordered by member bytes.
    let mut names: Vec<String> = known.iter().map(|(m, _)| m.clone()).collect();
    let sorted = {
        let mut v = names.clone();
        v.sort();
        v
    };
    assert_eq!(names, sorted);
    for prec in PRECISION {
        let mut want: Vec<(i64, i64)> = vec![];
        for (t, n) in [(now, 1), (now + 1, 2), (now + 400, 5)] {
            let p = t / prec * prec;
            match want.last_mut() {
                Some(l) if l.0 == p => l.1 += n,
                _ => want.push((p, n)),
            }
        }
        assert_eq!(get_counter(c, "hits", prec), want, "precision {prec}");
    }
    // Cleaning at now+1000 keeping 100 samples: the 1 s and 5 s counters
    // lose every sample and leave known:, the others keep theirs.
    clean_counters_pass(c, 0, now + 1000, 100);
    assert_eq!(get_counter(c, "hits", 1), []);
    assert_eq!(get_counter(c, "hits", 5), []);
    assert_eq!(get_counter(c, "hits", 60).len(), 2);
    names = r!(c, "ZRANGE", "known:", 0, -1);
    assert_eq!(names.len(), 10);
    assert!(!names.contains(&"1:hits".to_string()));
    assert!(!names.contains(&"5:views".to_string()));
    // Partial: at now+6300 the 60 s counter keeps only the newest sample.
    clean_counters_pass(c, 0, now + 6300, 100);
    let kept = get_counter(c, "hits", 60);
    assert_eq!(kept, [((now + 400) / 60 * 60, 5)]);
    // Pass 1 skips the 300 s+ counters (bprec 5, 60, 300, 1440).
    let before = get_counter(c, "hits", 300);
    clean_counters_pass(c, 1, now + 10_000_000, 100);
    assert_eq!(get_counter(c, "hits", 300), before);
    assert_eq!(get_counter(c, "hits", 60), []);
    let hlen: i64 = r!(c, "HLEN", "count:60:hits");
    assert_eq!(hlen, 0);
}

/// updateStats(): returns the replies of the last three ZINCRBYs.
fn update_stats(
    c: &mut Connection,
    context: &str,
    typ: &str,
    value: f64,
    hour_start: &str,
) -> (Vec<f64>, usize) {
    let dest = format!("stats:{context}:{typ}");
    let start_key = format!("{dest}:start");
    let mut attempts = 0;
    loop {
        attempts += 1;
        let _: () = r!(c, "WATCH", &start_key);
        let existing: Option<String> = r!(c, "GET", &start_key);
        let mut p = hour_rollover(&dest, &start_key, existing, hour_start);
        let tkey1 = uuid();
        let tkey2 = uuid();
        p.cmd("ZADD").arg(&tkey1).arg(value).arg("min");
        p.cmd("ZADD").arg(&tkey2).arg(value).arg("max");
        p.cmd("ZUNIONSTORE")
            .arg(&dest)
            .arg(2)
            .arg(&dest)
            .arg(&tkey1)
            .arg("AGGREGATE")
            .arg("MIN");
        p.cmd("ZUNIONSTORE")
            .arg(&dest)
            .arg(2)
            .arg(&dest)
            .arg(&tkey2)
            .arg("AGGREGATE")
            .arg("MAX");
        p.cmd("DEL").arg(&tkey1).arg(&tkey2);
        p.cmd("ZINCRBY").arg(&dest).arg(1).arg("count");
        p.cmd("ZINCRBY").arg(&dest).arg(value).arg("sum");
        p.cmd("ZINCRBY").arg(&dest).arg(value * value).arg("sumsq");
        let res: Option<Vec<Value>> = p.query(c).unwrap();
        if let Some(v) = res {
            let n = v.len();
            return (v[n - 3..].iter().map(f).collect(), attempts);
        }
    }
}

fn get_stats(c: &mut Connection, context: &str, typ: &str) -> HashMap<String, f64> {
    let data: Vec<(String, f64)> = r!(
        c,
        "ZRANGE",
        format!("stats:{context}:{typ}"),
        0,
        -1,
        "WITHSCORES"
    );
    let mut stats: HashMap<String, f64> = data.into_iter().collect();
    let (sum, count, sumsq) = (stats["sum"], stats["count"], stats["sumsq"]);
    stats.insert("average".into(), sum / count);
    let numerator = sumsq - sum.powi(2) / count;
    stats.insert(
        "stddev".into(),
        (numerator / if count > 1.0 { count - 1.0 } else { 1.0 }).powf(0.5),
    );
    stats
}

#[test]
fn seed002_ch5_stats_and_access_timer() {
    let s = Server::start(&[]);
    let mut c = s.redis();
    let c = &mut c;
    let h1 = "2024-01-01T10:00:00";
    let h2 = "2024-01-01T11:00:00";
    let (r, _) = update_stats(c, "ProfilePage", "AccessTime", 3.0, h1);
    assert_eq!(r, [1.0, 3.0, 9.0]);
    update_stats(c, "ProfilePage", "AccessTime", 5.0, h1);
    let (r, _) = update_stats(c, "ProfilePage", "AccessTime", 1.0, h1);
    assert_eq!(r, [3.0, 9.0, 35.0]);
    let raw: Vec<(String, f64)> = r!(
        c,
        "ZRANGE",
        "stats:ProfilePage:AccessTime",
        0,
        -1,
        "WITHSCORES"
    );
    let want = [
        ("min", 1.0),
        ("count", 3.0),
        ("max", 5.0),
        ("sum", 9.0),
        ("sumsq", 35.0),
    ];
    let want: Vec<(String, f64)> = want.iter().map(|(m, s)| (m.to_string(), *s)).collect();
    assert_eq!(raw, want);
    let st = get_stats(c, "ProfilePage", "AccessTime");
    assert_eq!(st["average"], 3.0);
    assert_eq!(st["stddev"], 2.0);
    // No temporary key survives.
    let keys: Vec<String> = r!(c, "KEYS", "*");
    let keys: BTreeSet<String> = keys.into_iter().collect();
    assert_eq!(
        keys,
        BTreeSet::from([
            "stats:ProfilePage:AccessTime".to_string(),
            "stats:ProfilePage:AccessTime:start".to_string()
        ])
    );
    // Fractional values and the hour rollover.
    update_stats(c, "ProfilePage", "AccessTime", 0.25, h2);
    let st = get_stats(c, "ProfilePage", "AccessTime");
    assert_eq!((st["min"], st["max"], st["count"]), (0.25, 0.25, 1.0));
    assert_eq!(st["sumsq"], 0.0625);
    let last: Option<f64> = r!(c, "ZSCORE", "stats:ProfilePage:AccessTime:last", "sumsq");
    assert_eq!(last, Some(35.0));
    let pstart: String = r!(c, "GET", "stats:ProfilePage:AccessTime:pstart");
    assert_eq!(pstart, h1);

    // AccessTimer.stop(): keep the 100 slowest contexts.
    for i in 0..105 {
        let ctx = format!("page{i:03}");
        let (r, _) = update_stats(c, &ctx, "AccessTime", i as f64 / 1000.0, h1);
        let average = r[1] / r[0];
        let _: Vec<Value> = pipe()
            .atomic()
            .cmd("ZADD")
            .arg("slowest:AccessTime")
            .arg(average)
            .arg(&ctx)
            .cmd("ZREMRANGEBYRANK")
            .arg("slowest:AccessTime")
            .arg(0)
            .arg(-101)
            .query(c)
            .unwrap();
    }
    let n: i64 = r!(c, "ZCARD", "slowest:AccessTime");
    assert_eq!(n, 100);
    let slowest: Vec<(String, f64)> = r!(c, "ZREVRANGE", "slowest:AccessTime", 0, 0, "WITHSCORES");
    assert_eq!(slowest, [("page104".to_string(), 0.104)]);
    let fastest: Vec<String> = r!(c, "ZRANGE", "slowest:AccessTime", 0, 0);
    assert_eq!(fastest, ["page005"]);
}

fn ip_to_score(ip: &str) -> i64 {
    ip.split('.')
        .fold(0i64, |s, v| s * 256 + v.parse::<i64>().unwrap())
}

fn import_ips_to_redis(c: &mut Connection, csv: &str) {
    let mut count = 0;
    for line in csv.lines() {
        let cols: Vec<&str> = line.split(',').collect();
        let start_ip = if cols.len() > 1 {
            &cols[0][..cols[0].len() - 3]
        } else {
            ""
        };
        if start_ip.to_lowercase().contains('i') {
            continue;
        }
        let score = if start_ip.contains('.') {
            ip_to_score(start_ip)
        } else {
            match start_ip.parse() {
                Ok(n) => n,
                Err(_) => continue,
            }
        };
        if cols[1].is_empty() {
            break;
        }
        let city_id = format!("{}_{count}", cols[1]);
        let _: i64 = r!(c, "ZADD", "ip2cityid:", score, city_id);
        count += 1;
    }
}

fn import_cities_to_redis(c: &mut Connection, csv: &str) {
    for line in csv.lines() {
        let cols: Vec<&str> = line.split(',').collect();
        if cols.len() < 4 || !cols[0].starts_with(|ch: char| ch.is_ascii_digit()) {
            continue;
        }
        let json = json_array(&[cols[3], cols[2], cols[1]]);
        let _: i64 = r!(c, "HSET", "cityid2city:", cols[0], json);
    }
}

fn find_city_by_ip(c: &mut Connection, ip: &str) -> Option<Vec<String>> {
    let score = ip_to_score(ip);
    let results: Vec<String> = r!(c, "ZREVRANGEBYSCORE", "ip2cityid:", score, 0, "LIMIT", 0, 1);
    let city_id = results.first()?;
    let city_id = &city_id[..city_id.find('_').unwrap()];
    let json: String = r!(c, "HGET", "cityid2city:", city_id);
    Some(parse_json_array(&json))
}

#[test]
fn seed002_ch5_ip_to_city() {
    let s = Server::start(&[]);
    let mut c = s.redis();
    let c = &mut c;
    let blocks = "network,geoname_id\n\
                  1.0.0.0/24,100\n\
                  1.0.1.0/24,200\n\
                  1.0.4.0/22,100\n\
                  16909056/24,300\n\
                  bogus/24,400\n\
                  8.8.8.0/24,500\n\
                  9.0.0.0/24,\n\
                  10.0.0.0/24,600\n";
    import_ips_to_redis(c, blocks);
    let n: i64 = r!(c, "ZCARD", "ip2cityid:");
    assert_eq!(n, 5);
    let all: Vec<(String, i64)> = r!(c, "ZRANGE", "ip2cityid:", 0, -1, "WITHSCORES");
    let want = [
        ("100_0", 16777216),
        ("200_1", 16777472),
        ("100_2", 16778240),
        ("300_3", 16909056),
        ("500_4", 134744064),
    ];
    let want: Vec<(String, i64)> = want.iter().map(|(m, s)| (m.to_string(), *s)).collect();
    assert_eq!(all, want);
    let cities = "geoname_id,country,region,city\n\
                  100,AU,QLD,Brisbane\n\
                  200,CN,FJ,Fuzhou\n\
                  300,CN,BJ,Beijing\n\
                  500,US,CA,Mountain View\n";
    import_cities_to_redis(c, cities);
    let json: String = r!(c, "HGET", "cityid2city:", "500");
    assert_eq!(json, r#"["Mountain View","CA","US"]"#);
    let city = |c: &mut Connection, ip| find_city_by_ip(c, ip);
    assert_eq!(city(c, "1.0.0.1").unwrap(), ["Brisbane", "QLD", "AU"]);
    assert_eq!(city(c, "1.0.1.255").unwrap(), ["Fuzhou", "FJ", "CN"]);
    assert_eq!(city(c, "1.0.3.9").unwrap(), ["Fuzhou", "FJ", "CN"]);
    assert_eq!(city(c, "1.0.4.0").unwrap(), ["Brisbane", "QLD", "AU"]);
    assert_eq!(city(c, "1.2.3.4").unwrap(), ["Beijing", "BJ", "CN"]);
    assert_eq!(
        city(c, "255.255.255.255").unwrap(),
        ["Mountain View", "CA", "US"]
    );
    assert_eq!(city(c, "0.255.255.255"), None);
}

// ---------------------------------------------------------------------------
// 002 chapter 6: autocomplete, locks, semaphores, queues, chat

fn add_update_contact(c: &mut Connection, user: &str, contact: &str) {
    let ac = format!("recent:{user}");
    let _: () = pipe()
        .atomic()
        .cmd("LREM")
        .arg(&ac)
        .arg(1)
        .arg(contact)
        .ignore()
        .cmd("LPUSH")
        .arg(&ac)
        .arg(contact)
        .ignore()
        .cmd("LTRIM")
        .arg(&ac)
        .arg(0)
        .arg(99)
        .ignore()
        .query(c)
        .unwrap();
}

fn fetch_autocomplete_list(c: &mut Connection, user: &str, prefix: &str) -> Vec<String> {
    let candidates: Vec<String> = r!(c, "LRANGE", format!("recent:{user}"), 0, -1);
    candidates
        .into_iter()
        .filter(|x| x.to_lowercase().starts_with(prefix))
        .collect()
}

#[test]
fn seed002_ch6_recent_contacts() {
    let s = Server::start(&[]);
    let mut c = s.redis();
    let c = &mut c;
    for who in ["alice", "bob", "alfred", "alice", "Albert"] {
        add_update_contact(c, "u1", who);
    }
    let list: Vec<String> = r!(c, "LRANGE", "recent:u1", 0, -1);
    assert_eq!(list, ["Albert", "alice", "alfred", "bob"]);
    assert_eq!(
        fetch_autocomplete_list(c, "u1", "al"),
        ["Albert", "alice", "alfred"]
    );
    assert_eq!(fetch_autocomplete_list(c, "u1", "ali"), ["alice"]);
    // removeContact()
    let n: i64 = r!(c, "LREM", "recent:u1", 1, "alice");
    assert_eq!(n, 1);
    assert_eq!(fetch_autocomplete_list(c, "u1", "al"), ["Albert", "alfred"]);
    for i in 0..120 {
        add_update_contact(c, "u1", &format!("contact{i}"));
    }
    let len: i64 = r!(c, "LLEN", "recent:u1");
    assert_eq!(len, 100);
    add_update_contact(c, "u1", "contact50");
    let list: Vec<String> = r!(c, "LRANGE", "recent:u1", 0, 1);
    assert_eq!(list, ["contact50", "contact119"]);
    let len: i64 = r!(c, "LLEN", "recent:u1");
    assert_eq!(len, 100);
    assert!(fetch_autocomplete_list(c, "u1", "bob").is_empty());
}

const VALID_CHARACTERS: &str = "`abcdefghijklmnopqrstuvwxyz{";

fn find_prefix_range(prefix: &str) -> (String, String) {
    let last = prefix.chars().last().unwrap();
    let posn = VALID_CHARACTERS
        .chars()
        .position(|ch| ch >= last)
        .unwrap_or(VALID_CHARACTERS.len());
    let suffix = VALID_CHARACTERS
        .chars()
        .nth(if posn == 0 { 1 } else { posn } - 1)
        .unwrap();
    let head = &prefix[..prefix.len() - last.len_utf8()];
    (format!("{head}{suffix}{{"), format!("{prefix}{{"))
}

/// autocompleteOnPrefix(): returns the items and the attempts taken.
fn autocomplete_on_prefix(c: &mut Connection, guild: &str, prefix: &str) -> (Vec<String>, usize) {
    let (start, end) = find_prefix_range(prefix);
    let id = uuid();
    let (start, end) = (format!("{start}{id}"), format!("{end}{id}"));
    let zset = format!("members:{guild}");
    let _: i64 = r!(c, "ZADD", &zset, 0, &start);
    let _: i64 = r!(c, "ZADD", &zset, 0, &end);
    let mut attempts = 0;
    let items: Vec<String> = loop {
        attempts += 1;
        let _: () = r!(c, "WATCH", &zset);
        let sindex: i64 = r!(c, "ZRANK", &zset, &start);
        let eindex: i64 = r!(c, "ZRANK", &zset, &end);
        let erange = (sindex + 9).min(eindex - 2);
        let res: Option<(i64, i64, Vec<String>)> = pipe()
            .atomic()
            .cmd("ZREM")
            .arg(&zset)
            .arg(&start)
            .cmd("ZREM")
            .arg(&zset)
            .arg(&end)
            .cmd("ZRANGE")
            .arg(&zset)
            .arg(sindex)
            .arg(erange)
            .query(c)
            .unwrap();
        if let Some((1, 1, items)) = res {
            break items;
        }
        assert!(res.is_none(), "markers vanished: {res:?}");
    };
    (
        items.into_iter().filter(|x| !x.contains('{')).collect(),
        attempts,
    )
}

#[test]
fn seed002_ch6_autocomplete_on_prefix() {
    let s = Server::start(&[]);
    let mut c = s.redis();
    let c = &mut c;
    assert_eq!(find_prefix_range("abc"), ("abb{".into(), "abc{".into()));
    assert_eq!(find_prefix_range("aba"), ("ab`{".into(), "aba{".into()));
    assert_eq!(find_prefix_range("a"), ("`{".into(), "a{".into()));
    for name in [
        "jeff", "jenny", "jack", "jennifer", "je", "jz", "ja", "jeffrey", "ab",
    ] {
        let _: i64 = r!(c, "ZADD", "members:test", 0, name); // joinGuild
    }
    assert_eq!(
        autocomplete_on_prefix(c, "test", "je").0,
        ["je", "jeff", "jeffrey", "jennifer", "jenny"]
    );
    assert_eq!(
        autocomplete_on_prefix(c, "test", "jen").0,
        ["jennifer", "jenny"]
    );
    assert_eq!(autocomplete_on_prefix(c, "test", "ja").0, ["ja", "jack"]);
    assert!(autocomplete_on_prefix(c, "test", "k").0.is_empty());
    // leaveGuild()
    let _: i64 = r!(c, "ZREM", "members:test", "jeff");
    assert_eq!(
        autocomplete_on_prefix(c, "test", "jef").0,
        ["jeffrey"].map(String::from)
    );
    // At most ten results.
    for i in 0..15 {
        let _: i64 = r!(c, "ZADD", "members:test", 0, format!("ba{i:02}"));
    }
    let got = autocomplete_on_prefix(c, "test", "ba").0;
    let want: Vec<String> = (0..10).map(|i| format!("ba{i:02}")).collect();
    assert_eq!(got, want);
    // The markers are gone.
    let n: i64 = r!(c, "ZCARD", "members:test");
    assert_eq!(n, 23);
}

fn acquire_lock(c: &mut Connection, name: &str, acquire_timeout_ms: u64) -> Option<String> {
    let id = uuid();
    let end = Instant::now() + Duration::from_millis(acquire_timeout_ms);
    while Instant::now() < end {
        let got: i64 = r!(c, "SETNX", format!("lock:{name}"), &id);
        if got == 1 {
            return Some(id);
        }
        thread::sleep(Duration::from_millis(1));
    }
    None
}

fn release_lock(c: &mut Connection, name: &str, id: &str) -> bool {
    let lock = format!("lock:{name}");
    loop {
        let _: () = r!(c, "WATCH", &lock);
        let cur: Option<String> = r!(c, "GET", &lock);
        if cur.as_deref() == Some(id) {
            let res: Option<(i64,)> = pipe().atomic().cmd("DEL").arg(&lock).query(c).unwrap();
            if res.is_some() {
                return true;
            }
            continue;
        }
        let _: () = r!(c, "UNWATCH");
        return false;
    }
}

#[test]
fn seed002_ch6_lock_release_with_watch() {
    let s = Server::start(&[]);
    let mut a = s.redis();
    let mut b = s.redis();
    let id = acquire_lock(&mut a, "market", 100).expect("free lock");
    assert_eq!(acquire_lock(&mut b, "market", 20), None);
    assert!(!release_lock(&mut b, "market", "not-the-owner"));
    let cur: String = r!(&mut a, "GET", "lock:market");
    assert_eq!(cur, id);
    assert!(release_lock(&mut a, "market", &id));
    assert!(!release_lock(&mut a, "market", &id));
    let id2 = acquire_lock(&mut b, "market", 100).expect("released lock");
    assert_ne!(id, id2);
    // A release whose WATCH fires (the lock changes hands under it) retries
    // and then finds it no longer owns the lock.
    let _: () = r!(&mut b, "WATCH", "lock:market");
    let _: () = r!(&mut a, "SET", "lock:market", "stolen");
    let res: Option<(i64,)> = pipe()
        .atomic()
        .cmd("DEL")
        .arg("lock:market")
        .query(&mut b)
        .unwrap();
    assert_eq!(res, None);
    assert!(!release_lock(&mut b, "market", &id2));
    let cur: String = r!(&mut a, "GET", "lock:market");
    assert_eq!(cur, "stolen");
}

fn acquire_semaphore(
    c: &mut Connection,
    sem: &str,
    limit: i64,
    timeout: i64,
    now: i64,
) -> Option<String> {
    let id = uuid();
    let (_, _, rank): (i64, i64, i64) = pipe()
        .atomic()
        .cmd("ZREMRANGEBYSCORE")
        .arg(sem)
        .arg("-inf")
        .arg(now - timeout)
        .cmd("ZADD")
        .arg(sem)
        .arg(now)
        .arg(&id)
        .cmd("ZRANK")
        .arg(sem)
        .arg(&id)
        .query(c)
        .unwrap();
    if rank < limit {
        return Some(id);
    }
    let _: i64 = r!(c, "ZREM", sem, &id);
    None
}

fn acquire_fair_semaphore(
    c: &mut Connection,
    sem: &str,
    limit: i64,
    timeout: i64,
    now: i64,
) -> Option<String> {
    let id = uuid();
    let czset = format!("{sem}:owner");
    let ctr = format!("{sem}:counter");
    let (_, _, counter): (i64, i64, i64) = pipe()
        .atomic()
        .cmd("ZREMRANGEBYSCORE")
        .arg(sem)
        .arg("-inf")
        .arg(now - timeout)
        .cmd("ZINTERSTORE")
        .arg(&czset)
        .arg(2)
        .arg(&czset)
        .arg(sem)
        .arg("WEIGHTS")
        .arg(1)
        .arg(0)
        .cmd("INCR")
        .arg(&ctr)
        .query(c)
        .unwrap();
    let (_, _, rank): (i64, i64, i64) = pipe()
        .atomic()
        .cmd("ZADD")
        .arg(sem)
        .arg(now)
        .arg(&id)
        .cmd("ZADD")
        .arg(&czset)
        .arg(counter)
        .arg(&id)
        .cmd("ZRANK")
        .arg(&czset)
        .arg(&id)
        .query(c)
        .unwrap();
    if rank < limit {
        return Some(id);
    }
    let _: (i64, i64) = pipe()
        .atomic()
        .cmd("ZREM")
        .arg(sem)
        .arg(&id)
        .cmd("ZREM")
        .arg(&czset)
        .arg(&id)
        .query(c)
        .unwrap();
    None
}

fn release_fair_semaphore(c: &mut Connection, sem: &str, id: &str) -> bool {
    let (_, owner): (i64, i64) = pipe()
        .atomic()
        .cmd("ZREM")
        .arg(sem)
        .arg(id)
        .cmd("ZREM")
        .arg(format!("{sem}:owner"))
        .arg(id)
        .query(c)
        .unwrap();
    owner == 1
}

fn refresh_fair_semaphore(c: &mut Connection, sem: &str, id: &str, now: i64) -> bool {
    let added: i64 = r!(c, "ZADD", sem, now, id);
    if added > 0 {
        release_fair_semaphore(c, sem, id);
        return false;
    }
    true
}

#[test]
fn seed002_ch6_semaphores() {
    let s = Server::start(&[]);
    let mut c = s.redis();
    let c = &mut c;
    let t = 1_700_000_000_000i64;
    // Simple semaphore.
    let a = acquire_semaphore(c, "semaphore:remote", 3, 1000, t).unwrap();
    let _b = acquire_semaphore(c, "semaphore:remote", 3, 1000, t + 1).unwrap();
    let _c = acquire_semaphore(c, "semaphore:remote", 3, 1000, t + 2).unwrap();
    assert_eq!(
        acquire_semaphore(c, "semaphore:remote", 3, 1000, t + 3),
        None
    );
    let n: i64 = r!(c, "ZCARD", "semaphore:remote");
    assert_eq!(n, 3);
    let rel: i64 = r!(c, "ZREM", "semaphore:remote", &a);
    assert_eq!(rel, 1);
    assert!(acquire_semaphore(c, "semaphore:remote", 3, 1000, t + 4).is_some());
    // After the timeout every old holder is dropped.
    assert!(acquire_semaphore(c, "semaphore:remote", 3, 1000, t + 2000).is_some());
    let n: i64 = r!(c, "ZCARD", "semaphore:remote");
    assert_eq!(n, 1);

    // Fair semaphore: the owner zset orders by the counter, not the clock.
    let sem = "semaphore:fair";
    let a = acquire_fair_semaphore(c, sem, 2, 1000, t).unwrap();
    // B's clock runs 300 ms behind: still second by counter.
    let b = acquire_fair_semaphore(c, sem, 2, 1000, t - 300).unwrap();
    assert_eq!(acquire_fair_semaphore(c, sem, 2, 1000, t + 2), None);
    let owners: Vec<(String, i64)> = r!(c, "ZRANGE", format!("{sem}:owner"), 0, -1, "WITHSCORES");
    assert_eq!(owners, [(a.clone(), 1), (b.clone(), 2)]);
    let ctr: i64 = r!(c, "GET", format!("{sem}:counter"));
    assert_eq!(ctr, 3);
    let n: i64 = r!(c, "ZCARD", sem);
    assert_eq!(n, 2);
    // A refreshes; B times out (its stamp t-300 < t+800-1000).
    assert!(refresh_fair_semaphore(c, sem, &a, t + 500));
    let d = acquire_fair_semaphore(c, sem, 2, 1000, t + 800).unwrap();
    let owners: Vec<String> = r!(c, "ZRANGE", format!("{sem}:owner"), 0, -1);
    assert_eq!(owners, [a.clone(), d.clone()]);
    assert!(!refresh_fair_semaphore(c, sem, &b, t + 801));
    let n: i64 = r!(c, "ZCARD", sem);
    assert_eq!(n, 2);
    assert!(release_fair_semaphore(c, sem, &a));
    assert!(!release_fair_semaphore(c, sem, &a));
    assert!(release_fair_semaphore(c, sem, &d));
    let n: i64 = r!(c, "EXISTS", sem, format!("{sem}:owner"));
    assert_eq!(n, 0);

    // acquireSemaphoreWithLock(): the fair semaphore under a lock.
    let lock = acquire_lock(c, sem, 100).unwrap();
    let e = acquire_fair_semaphore(c, sem, 2, 1000, t + 900);
    assert!(release_lock(c, sem, &lock));
    assert!(e.is_some());
}

fn send_sold_email_via_queue(
    c: &mut Connection,
    seller: &str,
    item: &str,
    price: f64,
    buyer: &str,
) {
    let json = format!(
        "{{\"sellerId\":\"{seller}\",\"itemId\":\"{item}\",\"price\":{price},\"buyerId\":\"{buyer}\",\"time\":{}}}",
        now_ms()
    );
    let _: i64 = r!(c, "RPUSH", "queue:email", json);
}

fn execute_later(
    c: &mut Connection,
    queue: &str,
    name: &str,
    args: &str,
    delay: i64,
    now: i64,
) -> String {
    let id = uuid();
    let item = json_array(&[&id, queue, name, args]);
    if delay > 0 {
        let _: i64 = r!(c, "ZADD", "delayed:", now + delay, item);
    } else {
        let _: i64 = r!(c, "RPUSH", format!("queue:{queue}"), item);
    }
    id
}

/// One iteration of poll_queue(); true if it moved a task.
fn poll_queue_once(c: &mut Connection, now: i64) -> bool {
    let items: Vec<(String, f64)> = r!(c, "ZRANGE", "delayed:", 0, 0, "WITHSCORES");
    let Some((json, score)) = items.into_iter().next() else {
        return false;
    };
    if score > now as f64 {
        return false;
    }
    let values = parse_json_array(&json);
    let (id, queue) = (&values[0], &values[1]);
    let Some(locked) = acquire_lock(c, id, 100) else {
        return false;
    };
    let removed: i64 = r!(c, "ZREM", "delayed:", &json);
    if removed > 0 {
        let _: i64 = r!(c, "RPUSH", format!("queue:{queue}"), &json);
    }
    release_lock(c, id, &locked);
    removed > 0
}

#[test]
fn seed002_ch6_task_queues() {
    let s = Server::start(&[]);
    let mut c = s.redis();
    let c = &mut c;
    // FIFO email queue: RPUSH in, BLPOP out.
    for (i, buyer) in ["b1", "b2", "b3"].iter().enumerate() {
        send_sold_email_via_queue(c, "seller", &format!("item{i}"), 9.5 + i as f64, buyer);
    }
    for (i, buyer) in ["b1", "b2", "b3"].iter().enumerate() {
        let (q, json): (String, String) = r!(c, "BLPOP", "queue:email", 30);
        assert_eq!(q, "queue:email");
        assert_eq!(json_field(&json, "buyerId"), *buyer);
        assert_eq!(json_field(&json, "itemId"), format!("item{i}"));
    }
    let none: Option<(String, String)> = r!(c, "BLPOP", "queue:email", 0.05);
    assert_eq!(none, None);

    // Priority queues: BLPOP takes from the first non-empty key.
    let queues = ["queue:high", "queue:medium", "queue:low"];
    let _: i64 = r!(c, "RPUSH", "queue:low", r#"{"method":"sendEmail","n":1}"#);
    let _: i64 = r!(c, "RPUSH", "queue:medium", r#"{"method":"getEmail","n":2}"#);
    let _: i64 = r!(c, "RPUSH", "queue:high", r#"{"method":"other","n":3}"#);
    let _: i64 = r!(c, "RPUSH", "queue:low", r#"{"method":"sendEmail","n":4}"#);
    let mut order = vec![];
    for _ in 0..4 {
        let (q, json): (String, String) = r!(c, "BLPOP", &queues, 30);
        order.push((q, json_field(&json, "n")));
    }
    let want = [
        ("queue:high", "3"),
        ("queue:medium", "2"),
        ("queue:low", "1"),
        ("queue:low", "4"),
    ];
    let want: Vec<(String, String)> = want
        .iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect();
    assert_eq!(order, want);
    // A worker blocked on all three wakes for the first push.
    let port_client = s.redis();
    let worker = thread::spawn(move || {
        let mut w = port_client;
        let got: Option<(String, String)> = r!(
            &mut w,
            "BLPOP",
            &["queue:high", "queue:medium", "queue:low"],
            10
        );
        got
    });
    thread::sleep(Duration::from_millis(100));
    let _: i64 = r!(c, "RPUSH", "queue:medium", r#"{"method":"getEmail","n":5}"#);
    let got = worker.join().unwrap().expect("worker woke");
    assert_eq!(got.0, "queue:medium");
    assert_eq!(json_field(&got.1, "n"), "5");

    // Delayed tasks: a zset scored by due time, moved by the poller.
    let t = 1_700_000_000_000i64;
    let d1 = execute_later(c, "default", "f", "a1", 0, t);
    let d2 = execute_later(c, "default", "f", "a2", 500, t);
    let d3 = execute_later(c, "default", "f", "a3", 100, t);
    let n: i64 = r!(c, "ZCARD", "delayed:");
    assert_eq!(n, 2);
    assert!(!poll_queue_once(c, t + 50));
    assert!(poll_queue_once(c, t + 150));
    assert!(!poll_queue_once(c, t + 150));
    assert!(poll_queue_once(c, t + 600));
    let q: Vec<String> = r!(c, "LRANGE", "queue:default", 0, -1);
    let ids: Vec<String> = q.iter().map(|j| parse_json_array(j)[0].clone()).collect();
    assert_eq!(ids, [d1, d3, d2]);
    let n: i64 = r!(c, "EXISTS", "delayed:");
    assert_eq!(n, 0);
    let locks: Vec<String> = r!(c, "KEYS", "lock:*");
    assert!(locks.is_empty());
}

fn create_chat(
    c: &mut Connection,
    sender: &str,
    recipients: &[&str],
    chat_id: Option<&str>,
) -> String {
    let chat_id = match chat_id {
        Some(id) => id.to_string(),
        None => {
            let id: i64 = r!(c, "INCR", "ids:chat:");
            id.to_string()
        }
    };
    let mut all: Vec<&str> = recipients.to_vec();
    all.push(sender);
    let mut p = pipe();
    p.atomic();
    for rec in all {
        p.cmd("ZADD")
            .arg(format!("chat:{chat_id}"))
            .arg(0)
            .arg(rec)
            .ignore();
        p.cmd("ZADD")
            .arg(format!("seen:{rec}"))
            .arg(0)
            .arg(&chat_id)
            .ignore();
    }
    let _: () = p.query(c).unwrap();
    chat_id
}

fn send_message(c: &mut Connection, chat_id: &str, sender: &str, message: &str) -> i64 {
    let lock = format!("chat:{chat_id}");
    let id = acquire_lock(c, &lock, 100).expect("Couldn't get the lock");
    let mid: i64 = r!(c, "INCR", format!("ids:{chat_id}"));
    let packed = format!(
        "{{\"id\":{mid},\"ts\":{},\"sender\":\"{sender}\",\"message\":\"{message}\"}}",
        now_ms()
    );
    let _: i64 = r!(c, "ZADD", format!("msgs:{chat_id}"), mid, packed);
    release_lock(c, &lock, &id);
    mid
}

type ChatMessages = Vec<(String, Vec<(i64, String, String)>)>;

fn fetch_pending_messages(c: &mut Connection, recipient: &str) -> ChatMessages {
    let seen: Vec<(String, i64)> = r!(
        c,
        "ZRANGE",
        format!("seen:{recipient}"),
        0,
        -1,
        "WITHSCORES"
    );
    let mut p = pipe();
    p.atomic();
    for (chat_id, seen_id) in &seen {
        p.cmd("ZRANGEBYSCORE")
            .arg(format!("msgs:{chat_id}"))
            .arg(seen_id + 1)
            .arg("inf");
    }
    let results: Vec<Vec<String>> = p.query(c).unwrap();
    let mut out = vec![];
    let mut seen_updates = vec![];
    let mut msg_removes = vec![];
    for ((chat_id, _), msgs) in seen.iter().zip(results) {
        if msgs.is_empty() {
            continue;
        }
        let mut seen_id = 0;
        let mut messages = vec![];
        for m in msgs {
            let id: i64 = json_field(&m, "id").parse().unwrap();
            seen_id = seen_id.max(id);
            messages.push((id, json_field(&m, "sender"), json_field(&m, "message")));
        }
        let _: i64 = r!(c, "ZADD", format!("chat:{chat_id}"), seen_id, recipient);
        seen_updates.push((format!("seen:{recipient}"), seen_id, chat_id.clone()));
        let min: Vec<(String, f64)> =
            r!(c, "ZRANGE", format!("chat:{chat_id}"), 0, 0, "WITHSCORES");
        if let Some((_, score)) = min.first() {
            msg_removes.push((format!("msgs:{chat_id}"), *score as i64));
        }
        out.push((chat_id.clone(), messages));
    }
    let mut p = pipe();
    p.atomic();
    for (k, id, chat) in seen_updates {
        p.cmd("ZADD").arg(k).arg(id).arg(chat).ignore();
    }
    for (k, score) in msg_removes {
        p.cmd("ZREMRANGEBYSCORE").arg(k).arg(0).arg(score).ignore();
    }
    let _: () = p.query(c).unwrap();
    out
}

fn join_chat(c: &mut Connection, chat_id: &str, user: &str) {
    let mid: i64 = r!(c, "GET", format!("ids:{chat_id}"));
    let _: () = pipe()
        .atomic()
        .cmd("ZADD")
        .arg(format!("chat:{chat_id}"))
        .arg(mid)
        .arg(user)
        .ignore()
        .cmd("ZADD")
        .arg(format!("seen:{user}"))
        .arg(mid)
        .arg(chat_id)
        .ignore()
        .query(c)
        .unwrap();
}

fn leave_chat(c: &mut Connection, chat_id: &str, user: &str) {
    let (_, _, card): (i64, i64, i64) = pipe()
        .atomic()
        .cmd("ZREM")
        .arg(format!("chat:{chat_id}"))
        .arg(user)
        .cmd("ZREM")
        .arg(format!("seen:{user}"))
        .arg(chat_id)
        .cmd("ZCARD")
        .arg(format!("chat:{chat_id}"))
        .query(c)
        .unwrap();
    if card < 1 {
        let _: () = pipe()
            .atomic()
            .cmd("DEL")
            .arg(format!("msgs:{chat_id}"))
            .ignore()
            .cmd("DEL")
            .arg(format!("ids:{chat_id}"))
            .ignore()
            .query(c)
            .unwrap();
    } else {
        let oldest: Vec<(String, f64)> =
            r!(c, "ZRANGE", format!("chat:{chat_id}"), 0, 0, "WITHSCORES");
        let _: i64 = r!(
            c,
            "ZREMRANGEBYSCORE",
            format!("msgs:{chat_id}"),
            0,
            oldest[0].1
        );
    }
}

#[test]
fn seed002_ch6_group_chat() {
    let s = Server::start(&[]);
    let mut c = s.redis();
    let c = &mut c;
    let chat = create_chat(c, "joe", &["jeff", "jenny", "noah"], None);
    assert_eq!(chat, "1");
    for i in 1..=4 {
        assert_eq!(send_message(c, &chat, "joe", &format!("message {i}")), i);
    }
    let want: Vec<(i64, String, String)> = (1..=4)
        .map(|i| (i, "joe".to_string(), format!("message {i}")))
        .collect();
    let r1 = fetch_pending_messages(c, "joe");
    assert_eq!(r1, [(chat.clone(), want.clone())]);
    // Messages stay until every member has seen them.
    let n: i64 = r!(c, "ZCARD", "msgs:1");
    assert_eq!(n, 4);
    for who in ["jeff", "jenny"] {
        assert_eq!(fetch_pending_messages(c, who), r1);
    }
    let n: i64 = r!(c, "ZCARD", "msgs:1");
    assert_eq!(n, 4);
    assert_eq!(fetch_pending_messages(c, "noah"), r1);
    let n: i64 = r!(c, "ZCARD", "msgs:1");
    assert_eq!(n, 0);
    assert!(fetch_pending_messages(c, "joe").is_empty());
    let seen: Vec<(String, i64)> = r!(c, "ZRANGE", "seen:jeff", 0, -1, "WITHSCORES");
    assert_eq!(seen, [("1".to_string(), 4)]);

    // A late joiner sees only what comes after joining.
    send_message(c, &chat, "jeff", "message 5");
    join_chat(c, &chat, "bob");
    send_message(c, &chat, "bob", "message 6");
    let got = fetch_pending_messages(c, "bob");
    assert_eq!(
        got,
        [(
            chat.clone(),
            vec![(6, "bob".to_string(), "message 6".to_string())]
        )]
    );
    // A second chat: joe is in both.
    let chat2 = create_chat(c, "ann", &["joe"], None);
    assert_eq!(chat2, "2");
    send_message(c, &chat2, "ann", "hi");
    let got = fetch_pending_messages(c, "joe");
    // seen:joe is ordered by score: chat 2 (0) before chat 1 (4).
    assert_eq!(got.len(), 2);
    assert_eq!(
        got[0],
        (
            chat2.clone(),
            vec![(1, "ann".to_string(), "hi".to_string())]
        )
    );
    assert_eq!(got[1].0, chat);
    assert_eq!(got[1].1.len(), 2);

    // Leaving trims what the remaining members have all seen; the last one
    // out deletes the chat's messages and id counter.
    for who in ["jeff", "jenny", "noah"] {
        fetch_pending_messages(c, who);
    }
    leave_chat(c, &chat, "bob");
    let n: i64 = r!(c, "ZCARD", "msgs:1");
    assert_eq!(n, 0);
    for who in ["joe", "jeff", "jenny"] {
        leave_chat(c, &chat, who);
    }
    let ids: Option<String> = r!(c, "GET", "ids:1");
    assert_eq!(ids.as_deref(), Some("6"));
    leave_chat(c, &chat, "noah");
    let n: i64 = r!(c, "EXISTS", "msgs:1", "ids:1", "chat:1");
    assert_eq!(n, 0);
    let seen: Vec<String> = r!(c, "ZRANGE", "seen:joe", 0, -1);
    assert_eq!(seen, ["2"]);
}

// ---------------------------------------------------------------------------
// 002 chapter 7: search, sorted search, ad targeting, job search

const STOP_WORDS: &str = "able about across after all almost also am among an and any are as at be because been but by can cannot could dear did do does either else ever every for from get got had has have he her hers him his how however if in into is it its just least let like likely may me might most must my neither no nor not of off often on only or other our own rather said say says she should since so some than that the their them then there these they this tis to too twas us wants was we were what when where which while who whom why will with would yet you your";

fn is_stop(w: &str) -> bool {
    STOP_WORDS.split(' ').any(|s| s == w)
}

/// Matches of `[+-]?[a-z']{2,}` (with_sign) or `[a-z']{2,}`.
fn regex_words(text: &str, with_sign: bool) -> Vec<String> {
    let b = text.as_bytes();
    let word = |ch: u8| ch.is_ascii_lowercase() || ch == b'\'';
    let mut out = vec![];
    let mut i = 0;
    while i < b.len() {
        let start = i;
        if with_sign && (b[i] == b'+' || b[i] == b'-') {
            i += 1;
        }
        let ws = i;
        while i < b.len() && word(b[i]) {
            i += 1;
        }
        if i - ws >= 2 {
            out.push(text[start..i].to_string());
        } else {
            i = start + 1;
        }
    }
    out
}

fn tokenize(content: &str) -> BTreeSet<String> {
    regex_words(content, false)
        .into_iter()
        .filter(|w| w.len() > 2 && !is_stop(w))
        .collect()
}

fn index_document(c: &mut Connection, docid: &str, content: &str) -> usize {
    let words = tokenize(content);
    let old: Option<String> = r!(c, "GET", docid);
    if let Some(old) = old {
        let mut p = pipe();
        p.atomic();
        for w in parse_json_array(&old) {
            if !words.contains(&w) {
                p.cmd("SREM").arg(format!("idx:{w}")).arg(docid).ignore();
            }
        }
        let _: () = p.query(c).unwrap();
    }
    let mut p = pipe();
    p.atomic();
    for w in &words {
        p.cmd("SADD").arg(format!("idx:{w}")).arg(docid);
    }
    let ws: Vec<&str> = words.iter().map(String::as_str).collect();
    p.cmd("SET").arg(docid).arg(json_array(&ws));
    let res: Vec<Value> = p.query(c).unwrap();
    res.len() - 1
}

fn set_common(p: &mut redis::Pipeline, method: &str, ttl: i64, items: &[String]) -> String {
    let id = uuid();
    let keys: Vec<String> = items.iter().map(|i| format!("idx:{i}")).collect();
    p.cmd(method).arg(format!("idx:{id}")).arg(&keys).ignore();
    p.cmd("EXPIRE").arg(format!("idx:{id}")).arg(ttl).ignore();
    id
}

fn run_set_op(c: &mut Connection, method: &str, items: &[&str]) -> String {
    let items: Vec<String> = items.iter().map(|s| s.to_string()).collect();
    let mut p = pipe();
    p.atomic();
    let id = set_common(&mut p, method, 30, &items);
    let _: () = p.query(c).unwrap();
    id
}

#[derive(Debug, PartialEq)]
struct Query {
    all: Vec<Vec<String>>,
    unwanted: BTreeSet<String>,
}

fn parse(query: &str) -> Query {
    let mut q = Query {
        all: vec![],
        unwanted: BTreeSet::new(),
    };
    let mut current: Vec<String> = vec![];
    for w in regex_words(&query.to_lowercase(), true) {
        let prefix = w.chars().next().unwrap();
        let word = if prefix == '+' || prefix == '-' {
            w[1..].to_string()
        } else {
            w
        };
        if word.len() < 2 || is_stop(&word) {
            continue;
        }
        if prefix == '-' {
            q.unwanted.insert(word);
            continue;
        }
        if !current.is_empty() && prefix != '+' {
            q.all.push(std::mem::take(&mut current));
        }
        if !current.contains(&word) {
            current.push(word);
        }
    }
    if !current.is_empty() {
        q.all.push(current);
    }
    q
}

fn parse_and_search(c: &mut Connection, query: &str, ttl: i64) -> Option<String> {
    let q = parse(query);
    if q.all.is_empty() {
        return None;
    }
    let mut to_intersect = vec![];
    for syn in &q.all {
        if syn.len() > 1 {
            let mut p = pipe();
            p.atomic();
            to_intersect.push(set_common(&mut p, "SUNIONSTORE", ttl, syn));
            let _: () = p.query(c).unwrap();
        } else {
            to_intersect.push(syn[0].clone());
        }
    }
    let mut result = if to_intersect.len() > 1 {
        let mut p = pipe();
        p.atomic();
        let id = set_common(&mut p, "SINTERSTORE", ttl, &to_intersect);
        let _: () = p.query(c).unwrap();
        id
    } else {
        to_intersect[0].clone()
    };
    if !q.unwanted.is_empty() {
        let mut keys = vec![result];
        keys.extend(q.unwanted.iter().cloned());
        let mut p = pipe();
        p.atomic();
        result = set_common(&mut p, "SDIFFSTORE", ttl, &keys);
        let _: () = p.query(c).unwrap();
    }
    Some(result)
}

fn search_and_sort(
    c: &mut Connection,
    query: &str,
    sort: &str,
    page: i64,
    size: i64,
) -> (String, i64, Vec<String>) {
    let desc = sort.starts_with('-');
    let sort = sort.trim_start_matches('-');
    let alpha = sort != "updated" && sort != "id";
    let by = format!("kb:doc:*->{sort}");
    let id = parse_and_search(c, query, 300).unwrap();
    let mut p = pipe();
    p.atomic();
    p.cmd("SCARD").arg(format!("idx:{id}"));
    let sc = p
        .cmd("SORT")
        .arg(format!("idx:{id}"))
        .arg("BY")
        .arg(&by)
        .arg("LIMIT")
        .arg((page - 1) * size)
        .arg(size);
    if desc {
        sc.arg("DESC");
    }
    if alpha {
        sc.arg("ALPHA");
    }
    let (total, results): (i64, Vec<String>) = p.query(c).unwrap();
    (id, total, results)
}

fn members(c: &mut Connection, key: &str) -> BTreeSet<String> {
    let v: Vec<String> = r!(c, "SMEMBERS", key);
    v.into_iter().collect()
}

const CONTENT: &str = "this is some random content, look at how it is indexed.";

#[test]
fn seed002_ch7_index_and_search() {
    let s = Server::start(&[]);
    let mut c = s.redis();
    let c = &mut c;
    let toks = tokenize(CONTENT);
    assert_eq!(
        toks,
        ["content", "indexed", "look", "random"]
            .map(String::from)
            .into_iter()
            .collect()
    );
    assert_eq!(index_document(c, "test", CONTENT), 4);
    for t in &toks {
        assert_eq!(
            members(c, &format!("idx:{t}")),
            BTreeSet::from(["test".to_string()])
        );
    }
    let set = |v: &[&str]| -> BTreeSet<String> { v.iter().map(|s| s.to_string()).collect() };
    let r = run_set_op(c, "SINTERSTORE", &["content", "indexed"]);
    assert_eq!(members(c, &format!("idx:{r}")), set(&["test"]));
    let ttl: i64 = r!(c, "TTL", format!("idx:{r}"));
    assert!((29..=30).contains(&ttl));
    let r = run_set_op(c, "SINTERSTORE", &["content", "ignored"]);
    assert_eq!(members(c, &format!("idx:{r}")), set(&[]));
    // An empty result stores nothing, so nothing to expire.
    let e: i64 = r!(c, "EXISTS", format!("idx:{r}"));
    assert_eq!(e, 0);
    let r = run_set_op(c, "SUNIONSTORE", &["content", "ignored"]);
    assert_eq!(members(c, &format!("idx:{r}")), set(&["test"]));
    let r = run_set_op(c, "SDIFFSTORE", &["content", "ignored"]);
    assert_eq!(members(c, &format!("idx:{r}")), set(&["test"]));
    let r = run_set_op(c, "SDIFFSTORE", &["content", "indexed"]);
    assert_eq!(members(c, &format!("idx:{r}")), set(&[]));

    // Re-indexing drops words the document lost.
    assert_eq!(index_document(c, "test", "random content, updated"), 3);
    assert_eq!(members(c, "idx:look"), set(&[]));
    assert_eq!(members(c, "idx:updated"), set(&["test"]));
    index_document(c, "test", CONTENT);

    let w = |v: &[&str]| -> Vec<String> { v.iter().map(|s| s.to_string()).collect() };
    assert_eq!(
        parse("test query without stopwords"),
        Query {
            all: vec![
                w(&["test"]),
                w(&["query"]),
                w(&["without"]),
                w(&["stopwords"])
            ],
            unwanted: BTreeSet::new()
        }
    );
    assert_eq!(
        parse("test +query without -stopwords"),
        Query {
            all: vec![w(&["test", "query"]), w(&["without"])],
            unwanted: set(&["stopwords"])
        }
    );

    index_document(c, "test2", &format!("{CONTENT} wooooo"));
    let search = |c: &mut Connection, q: &str| -> BTreeSet<String> {
        let id = parse_and_search(c, q, 30).unwrap();
        members(c, &format!("idx:{id}"))
    };
    assert_eq!(search(c, "content"), set(&["test", "test2"]));
    assert_eq!(search(c, "content indexed random"), set(&["test", "test2"]));
    assert_eq!(
        search(c, "content +indexed random"),
        set(&["test", "test2"])
    );
    assert_eq!(
        search(c, "content indexed +random"),
        set(&["test", "test2"])
    );
    assert_eq!(search(c, "content indexed -random"), set(&[]));
    assert_eq!(search(c, "content -wooooo"), set(&["test"]));
    assert_eq!(search(c, "wooooo +nothere"), set(&["test2"]));
    assert_eq!(search(c, "nothere"), set(&[]));
    assert_eq!(parse_and_search(c, "the of", 30), None);
}

#[test]
fn seed002_ch7_search_and_sort() {
    let s = Server::start(&[]);
    let mut c = s.redis();
    let c = &mut c;
    index_document(c, "test", CONTENT);
    index_document(c, "test2", CONTENT);
    index_document(c, "test3", &format!("{CONTENT} extra"));
    // addDoc(): HMSET kb:doc:<docid> updated id
    for (doc, updated, id, title) in [
        ("test", "12345", "10", "Banana"),
        ("test2", "54321", "1", "apple"),
        ("test3", "23456", "5", "cherry"),
    ] {
        let _: () = r!(
            c,
            "HMSET",
            format!("kb:doc:{doc}"),
            "updated",
            updated,
            "id",
            id,
            "title",
            title
        );
    }
    let (_, total, r) = search_and_sort(c, "content", "-updated", 1, 20);
    assert_eq!(total, 3);
    assert_eq!(r, ["test2", "test3", "test"]);
    let (_, _, r) = search_and_sort(c, "content", "-id", 1, 20);
    assert_eq!(r, ["test", "test3", "test2"]);
    let (_, _, r) = search_and_sort(c, "content", "id", 1, 2);
    assert_eq!(r, ["test2", "test3"]);
    let (_, _, r) = search_and_sort(c, "content", "id", 2, 2);
    assert_eq!(r, ["test"]);
    // ALPHA: byte order, so upper case first.
    let (_, _, r) = search_and_sort(c, "content", "title", 1, 20);
    assert_eq!(r, ["test", "test2", "test3"]);
    let (_, _, r) = search_and_sort(c, "content", "-title", 1, 20);
    assert_eq!(r, ["test3", "test2", "test"]);
    let (id, total, r) = search_and_sort(c, "content -extra", "-updated", 1, 20);
    assert_eq!(total, 2);
    assert_eq!(r, ["test2", "test"]);

    // The exact form from the brief, and BY + GET to fetch fields at once.
    let r: Vec<String> = r!(
        c,
        "SORT",
        format!("idx:{id}"),
        "BY",
        "kb:doc:*->updated",
        "LIMIT",
        0,
        20,
        "DESC"
    );
    assert_eq!(r, ["test2", "test"]);
    let r: Vec<Option<String>> = r!(
        c,
        "SORT",
        "idx:content",
        "BY",
        "kb:doc:*->updated",
        "GET",
        "#",
        "GET",
        "kb:doc:*->id",
        "GET",
        "kb:doc:*->missing",
        "LIMIT",
        0,
        20,
        "DESC"
    );
    let want = [
        Some("test2"),
        Some("1"),
        None,
        Some("test3"),
        Some("5"),
        None,
        Some("test"),
        Some("10"),
        None,
    ];
    assert_eq!(r, want.map(|o| o.map(String::from)));
    let n: i64 = r!(
        c,
        "SORT",
        "idx:content",
        "BY",
        "kb:doc:*->updated",
        "GET",
        "kb:doc:*->title",
        "ALPHA",
        "STORE",
        "sorted:titles"
    );
    assert_eq!(n, 3);
    let titles: Vec<String> = r!(c, "LRANGE", "sorted:titles", 0, -1);
    assert_eq!(titles, ["Banana", "cherry", "apple"]);
}

fn zset_common(
    p: &mut redis::Pipeline,
    method: &str,
    ttl: i64,
    sets: &[&str],
    weights: &[f64],
    aggregate: Option<&str>,
) -> String {
    let id = uuid();
    let keys: Vec<String> = sets.iter().map(|s| format!("idx:{s}")).collect();
    let c = p
        .cmd(method)
        .arg(format!("idx:{id}"))
        .arg(keys.len())
        .arg(&keys);
    if !weights.is_empty() {
        c.arg("WEIGHTS").arg(weights);
    }
    if let Some(a) = aggregate {
        c.arg("AGGREGATE").arg(a);
    }
    p.ignore();
    p.cmd("EXPIRE").arg(format!("idx:{id}")).arg(ttl).ignore();
    id
}

fn search_and_zsort(
    c: &mut Connection,
    query: &str,
    desc: bool,
    update: f64,
    vote: f64,
    page: i64,
    size: i64,
) -> (i64, Vec<String>) {
    let id = parse_and_search(c, query, 30).unwrap();
    let mut p = pipe();
    p.atomic();
    let id = zset_common(
        &mut p,
        "ZINTERSTORE",
        30,
        &[&id, "sort:update", "sort:votes"],
        &[0.0, update, vote],
        None,
    );
    p.cmd("ZCARD").arg(format!("idx:{id}"));
    let start = (page - 1) * size;
    p.cmd(if desc { "ZREVRANGE" } else { "ZRANGE" })
        .arg(format!("idx:{id}"))
        .arg(start)
        .arg(start + size - 1);
    p.query(c).unwrap()
}

fn string_to_score(s: &str, ignore_case: bool) -> i64 {
    let s = if ignore_case {
        s.to_lowercase()
    } else {
        s.to_string()
    };
    let mut pieces: Vec<i64> = s.bytes().take(6).map(i64::from).collect();
    while pieces.len() < 6 {
        pieces.push(-1);
    }
    let mut score = 0i64;
    for p in pieces {
        score = score * 257 + p + 1;
    }
    score * 2 + i64::from(s.len() > 6)
}

#[test]
fn seed002_ch7_zset_search() {
    let s = Server::start(&[]);
    let mut c = s.redis();
    let c = &mut c;
    index_document(c, "test", CONTENT);
    index_document(c, "test2", CONTENT);
    let _: i64 = r!(c, "ZADD", "idx:sort:update", 12345, "test", 54321, "test2");
    let _: i64 = r!(c, "ZADD", "idx:sort:votes", 10, "test", 1, "test2");
    let (n, r) = search_and_zsort(c, "content", false, 1.0, 0.0, 1, 20);
    assert_eq!(n, 2);
    assert_eq!(r, ["test", "test2"]);
    let (_, r) = search_and_zsort(c, "content", false, 0.0, 1.0, 1, 20);
    assert_eq!(r, ["test2", "test"]);
    let (_, r) = search_and_zsort(c, "content", true, 1.0, 1000.0, 1, 1);
    assert_eq!(r, ["test2"]); // 54321 + 1000 > 12345 + 10000
    let (_, r) = search_and_zsort(c, "content", true, 1.0, 10000.0, 1, 1);
    assert_eq!(r, ["test"]);

    // Non-numeric sort through string_to_score.
    let words = "these are some words that will be sorted robber robbers robbery";
    let mut by_score: Vec<(i64, &str)> = words
        .split(' ')
        .map(|w| (string_to_score(w, false), w))
        .collect();
    for (sc, w) in &by_score {
        let _: i64 = r!(c, "ZADD", "idx:sort:score", *sc, *w);
        let _: i64 = r!(c, "SADD", "idx:all", *w);
    }
    by_score.sort();
    let mut sorted: Vec<&str> = words.split(' ').collect();
    sorted.sort();
    assert_eq!(by_score.iter().map(|(_, w)| *w).collect::<Vec<_>>(), sorted);
    let mut p = pipe();
    p.atomic();
    let id = zset_common(
        &mut p,
        "ZINTERSTORE",
        30,
        &["all", "sort:score"],
        &[0.0, 1.0],
        None,
    );
    p.cmd("ZCARD").arg(format!("idx:{id}"));
    p.cmd("ZRANGE").arg(format!("idx:{id}")).arg(0).arg(-1);
    let (n, got): (usize, Vec<String>) = p.query(c).unwrap();
    assert_eq!(n, sorted.len());
    assert_eq!(got, sorted);

    // autocompleteOnPrefixWithScore(): ZRANGEBYSCORE over the prefix range.
    for name in ["abc", "abcd", "abd", "ab", "abz", "b", "Abc"] {
        let _: i64 = r!(c, "ZADD", "members:g", string_to_score(name, false), name);
    }
    let range = |p: &str| {
        let start = string_to_score(p, false);
        let end = string_to_score(&format!("{p}{}", "z".repeat(6 - p.len())), false);
        (start, end)
    };
    let (a, b) = range("abc");
    let got: Vec<String> = r!(c, "ZRANGEBYSCORE", "members:g", a, b);
    assert_eq!(got, ["abc", "abcd"]);
    let (a, b) = range("ab");
    let got: Vec<String> = r!(c, "ZRANGEBYSCORE", "members:g", a, b);
    assert_eq!(got, ["ab", "abc", "abcd", "abd", "abz"]);
}

// Ad targeting (book ch.7.3), all of it plain commands.

fn to_ecpm(typ: &str, views: f64, avg: f64, value: f64) -> f64 {
    match typ {
        "cpc" | "cpa" => 1000.0 * value * avg / views,
        _ => value,
    }
}

struct Ads {
    average_per_1k: HashMap<String, f64>,
}

impl Ads {
    fn index_ad(
        &self,
        c: &mut Connection,
        id: &str,
        locations: &[&str],
        content: &str,
        typ: &str,
        value: f64,
    ) {
        let mut p = pipe();
        p.atomic();
        for loc in locations {
            p.cmd("SADD").arg(format!("idx:req:{loc}")).arg(id).ignore();
        }
        let words = tokenize(content);
        for w in &words {
            p.cmd("ZADD")
                .arg(format!("idx:{w}"))
                .arg(0)
                .arg(id)
                .ignore();
        }
        let avg = self.average_per_1k.get(typ).copied().unwrap_or(1.0);
        let rvalue = to_ecpm(typ, 1000.0, avg, value);
        p.cmd("HSET").arg("type:").arg(id).arg(typ).ignore();
        p.cmd("ZADD")
            .arg("idx:ad:value:")
            .arg(rvalue)
            .arg(id)
            .ignore();
        p.cmd("ZADD")
            .arg("ad:base_value:")
            .arg(value)
            .arg(id)
            .ignore();
        for w in &words {
            p.cmd("SADD").arg(format!("terms:{id}")).arg(w).ignore();
        }
        let _: () = p.query(c).unwrap();
    }

    fn target_ads(
        &mut self,
        c: &mut Connection,
        locations: &[&str],
        content: &str,
    ) -> (i64, Option<String>) {
        let mut p = pipe();
        p.atomic();
        // match_location(): union of the location sets, then their eCPMs.
        let required: Vec<String> = locations.iter().map(|l| format!("req:{l}")).collect();
        let matched = set_common(&mut p, "SUNIONSTORE", 300, &required);
        let base = zset_common(
            &mut p,
            "ZINTERSTORE",
            30,
            &[&matched, "ad:value:"],
            &[0.0, 1.0],
            None,
        );
        // finish_scoring(): min and max word bonus averaged into the base.
        let words = tokenize(content);
        let mut bonus = vec![];
        for w in &words {
            bonus.push(zset_common(
                &mut p,
                "ZINTERSTORE",
                30,
                &[&matched, w],
                &[0.0, 1.0],
                None,
            ));
        }
        let targeted = if bonus.is_empty() {
            base
        } else {
            let b: Vec<&str> = bonus.iter().map(String::as_str).collect();
            let ones = vec![1.0; b.len()];
            let min = zset_common(&mut p, "ZUNIONSTORE", 30, &b, &ones, Some("MIN"));
            let max = zset_common(&mut p, "ZUNIONSTORE", 30, &b, &ones, Some("MAX"));
            zset_common(
                &mut p,
                "ZUNIONSTORE",
                30,
                &[&base, &min, &max],
                &[2.0, 1.0, 1.0],
                None,
            )
        };
        p.cmd("INCR").arg("ads:served:");
        p.cmd("ZREVRANGE")
            .arg(format!("idx:{targeted}"))
            .arg(0)
            .arg(0);
        let (target_id, ad): (i64, Vec<String>) = p.query(c).unwrap();
        let Some(ad) = ad.into_iter().next() else {
            return (target_id, None);
        };
        self.record_targeting_result(c, target_id, &ad, &words);
        (target_id, Some(ad))
    }

    fn record_targeting_result(
        &mut self,
        c: &mut Connection,
        target_id: i64,
        ad: &str,
        words: &BTreeSet<String>,
    ) {
        let terms = members(c, &format!("terms:{ad}"));
        let matched: Vec<&String> = words.intersection(&terms).collect();
        let typ: String = r!(c, "HGET", "type:", ad);
        let mut p = pipe();
        p.atomic();
        if !matched.is_empty() {
            let key = format!("terms:matched:{target_id}");
            p.cmd("SADD").arg(&key).arg(&matched).ignore();
            p.cmd("EXPIRE").arg(&key).arg(900).ignore();
        }
        p.cmd("INCR").arg(format!("type:{typ}:views:")).ignore();
        for w in &matched {
            p.cmd("ZINCRBY")
                .arg(format!("views:{ad}"))
                .arg(1)
                .arg(*w)
                .ignore();
        }
        p.cmd("ZINCRBY").arg(format!("views:{ad}")).arg(1).arg("");
        let (views,): (f64,) = p.query(c).unwrap();
        if views % 100.0 == 0.0 {
            self.update_cpms(c, ad);
        }
    }

    fn record_click(&mut self, c: &mut Connection, target_id: i64, ad: &str, action: bool) {
        let typ: String = r!(c, "HGET", "type:", ad);
        let mut click_key = format!("clicks:{ad}");
        let match_key = format!("terms:matched:{target_id}");
        let mut matched = members(c, &match_key);
        matched.insert(String::new());
        let mut p = pipe();
        p.atomic();
        if typ == "cpa" {
            p.cmd("EXPIRE").arg(&match_key).arg(900).ignore();
            if action {
                click_key = format!("actions:{ad}");
            }
        }
        if action && typ == "cpa" {
            p.cmd("INCR").arg(format!("type:{typ}:actions:")).ignore();
        } else {
            p.cmd("INCR").arg(format!("type:{typ}:clicks:")).ignore();
        }
        for w in &matched {
            p.cmd("ZINCRBY").arg(&click_key).arg(1).arg(w).ignore();
        }
        let _: () = p.query(c).unwrap();
        self.update_cpms(c, ad);
    }

    fn update_cpms(&mut self, c: &mut Connection, ad: &str) {
        let (typ, base_value, words): (String, f64, Vec<String>) = pipe()
            .atomic()
            .cmd("HGET")
            .arg("type:")
            .arg(ad)
            .cmd("ZSCORE")
            .arg("ad:base_value:")
            .arg(ad)
            .cmd("SMEMBERS")
            .arg(format!("terms:{ad}"))
            .query(c)
            .unwrap();
        let which = if typ == "cpa" { "actions" } else { "clicks" };
        let (type_views, type_clicks): (Option<String>, Option<String>) = pipe()
            .atomic()
            .cmd("GET")
            .arg(format!("type:{typ}:views:"))
            .cmd("GET")
            .arg(format!("type:{typ}:{which}"))
            .query(c)
            .unwrap();
        let num = |o: Option<String>| o.map_or(1.0, |s| s.parse::<f64>().unwrap());
        self.average_per_1k
            .insert(typ.clone(), 1000.0 * num(type_clicks) / num(type_views));
        if typ == "cpm" {
            return;
        }
        let view_key = format!("views:{ad}");
        let click_key = format!("{which}:{ad}");
        let (ad_views, ad_clicks): (Option<f64>, Option<f64>) = pipe()
            .atomic()
            .cmd("ZSCORE")
            .arg(&view_key)
            .arg("")
            .cmd("ZSCORE")
            .arg(&click_key)
            .arg("")
            .query(c)
            .unwrap();
        let ad_ecpm = match ad_clicks {
            Some(clicks) if clicks >= 1.0 => {
                let e = to_ecpm(&typ, ad_views.unwrap_or(1.0), clicks, base_value);
                let _: i64 = r!(c, "ZADD", "idx:ad:value:", e, ad);
                e
            }
            _ => {
                let sc: Option<f64> = r!(c, "ZSCORE", "idx:ad:value:", ad);
                sc.unwrap_or(0.0)
            }
        };
        for w in words {
            let (views, clicks): (Option<f64>, Option<f64>) = pipe()
                .atomic()
                .cmd("ZSCORE")
                .arg(&view_key)
                .arg(&w)
                .cmd("ZSCORE")
                .arg(&click_key)
                .arg(&w)
                .query(c)
                .unwrap();
            let Some(clicks) = clicks.filter(|c| *c >= 1.0) else {
                continue;
            };
            let word_ecpm = to_ecpm(&typ, views.unwrap_or(1.0), clicks, base_value);
            let _: i64 = r!(c, "ZADD", format!("idx:{w}"), word_ecpm - ad_ecpm, ad);
        }
    }
}

#[test]
fn seed002_ch7_ad_targeting() {
    let s = Server::start(&[]);
    let mut c = s.redis();
    let c = &mut c;
    let mut ads = Ads {
        average_per_1k: HashMap::new(),
    };
    ads.index_ad(c, "1", &["USA", "CA"], CONTENT, "cpc", 0.25);
    ads.index_ad(
        c,
        "2",
        &["USA", "VA"],
        &format!("{CONTENT} wooooo"),
        "cpc",
        0.125,
    );
    let mut last = (0, None);
    for _ in 0..100 {
        last = ads.target_ads(c, &["USA"], CONTENT);
    }
    assert_eq!(last.0, 100);
    assert_eq!(last.1.as_deref(), Some("1"));
    let r = ads.target_ads(c, &["VA"], "wooooo");
    assert_eq!(r.1.as_deref(), Some("2"));
    let r2 = ads.target_ads(c, &["Nowhere"], "wooooo");
    assert_eq!(r2, (102, None));
    let value: Vec<(String, f64)> = r!(c, "ZRANGE", "idx:ad:value:", 0, -1, "WITHSCORES");
    assert_eq!(value, [("2".to_string(), 0.125), ("1".to_string(), 0.25)]);
    let base: Vec<(String, f64)> = r!(c, "ZRANGE", "ad:base_value:", 0, -1, "WITHSCORES");
    assert_eq!(base, [("2".to_string(), 0.125), ("1".to_string(), 0.25)]);
    let views: Option<f64> = r!(c, "ZSCORE", "views:1", "");
    assert_eq!(views, Some(100.0));
    let views: Option<f64> = r!(c, "ZSCORE", "views:1", "content");
    assert_eq!(views, Some(100.0));
    let typeviews: i64 = r!(c, "GET", "type:cpc:views:");
    assert_eq!(typeviews, 101);
    let matched = members(c, &format!("terms:matched:{}", last.0));
    assert_eq!(matched, tokenize(CONTENT));

    ads.record_click(c, last.0, "1", false);
    let value: Vec<(String, f64)> = r!(c, "ZRANGE", "idx:ad:value:", 0, -1, "WITHSCORES");
    assert_eq!(value, [("2".to_string(), 0.125), ("1".to_string(), 2.5)]);
    let base: Vec<(String, f64)> = r!(c, "ZRANGE", "ad:base_value:", 0, -1, "WITHSCORES");
    assert_eq!(base, [("2".to_string(), 0.125), ("1".to_string(), 0.25)]);
    // Each word of the clicked ad now carries a bonus of 0 (same CTR).
    let bonus: Option<f64> = r!(c, "ZSCORE", "idx:content", "1");
    assert_eq!(bonus, Some(0.0));
    let clicks: i64 = r!(c, "GET", "type:cpc:clicks:");
    assert_eq!(clicks, 1);
    let served: i64 = r!(c, "GET", "ads:served:");
    assert_eq!(served, 102);
}

#[test]
fn seed002_ch7_job_search() {
    let s = Server::start(&[]);
    let mut c = s.redis();
    let c = &mut c;
    // addJob() / isQualified(): SDIFF against a temporary set.
    let _: i64 = r!(c, "SADD", "job:test", &["q1", "q2", "q3"]);
    let qualified = |c: &mut Connection, skills: &[&str]| -> bool {
        let temp = uuid();
        let (_, _, missing): (i64, i64, Vec<String>) = pipe()
            .atomic()
            .cmd("SADD")
            .arg(&temp)
            .arg(skills)
            .cmd("EXPIRE")
            .arg(&temp)
            .arg(5)
            .cmd("SDIFF")
            .arg("job:test")
            .arg(&temp)
            .query(c)
            .unwrap();
        missing.is_empty()
    };
    assert!(qualified(c, &["q1", "q3", "q2"]));
    assert!(!qualified(c, &["q1", "q2"]));

    let index_job = |c: &mut Connection, job: &str, skills: &[&str]| {
        let mut p = pipe();
        p.atomic();
        for s in skills {
            p.cmd("SADD")
                .arg(format!("idx:skill:{s}"))
                .arg(job)
                .ignore();
        }
        p.cmd("ZADD")
            .arg("idx:jobs:req")
            .arg(skills.len())
            .arg(job)
            .ignore();
        let _: () = p.query(c).unwrap();
    };
    index_job(c, "test1", &["q1", "q2", "q3"]);
    index_job(c, "test2", &["q1", "q3", "q4"]);
    index_job(c, "test3", &["q1", "q3", "q5"]);
    let find_jobs = |c: &mut Connection, skills: &[&str]| -> Vec<String> {
        let keys: Vec<String> = skills.iter().map(|s| format!("skill:{s}")).collect();
        let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
        let ones = vec![1.0; keys.len()];
        let mut p = pipe();
        p.atomic();
        let scores = zset_common(&mut p, "ZUNIONSTORE", 30, &keys, &ones, None);
        let fin = zset_common(
            &mut p,
            "ZINTERSTORE",
            30,
            &[&scores, "jobs:req"],
            &[-1.0, 1.0],
            None,
        );
        let _: () = p.query(c).unwrap();
        r!(c, "ZRANGEBYSCORE", format!("idx:{fin}"), 0, 0)
    };
    assert!(find_jobs(c, &["q1"]).is_empty());
    assert_eq!(find_jobs(c, &["q1", "q3", "q4"]), ["test2"]);
    assert_eq!(find_jobs(c, &["q1", "q3", "q5"]), ["test3"]);
    assert_eq!(
        find_jobs(c, &["q1", "q2", "q3", "q4", "q5"]),
        ["test1", "test2", "test3"]
    );

    // With proficiency: ZADD per skill, then a per-job ZINTERSTORE WEIGHTS 1 -1.
    let index_job_prof = |c: &mut Connection, job: &str, skills: &[(&str, i64)]| {
        let mut p = pipe();
        p.atomic();
        let mut req = 0;
        for (s, prof) in skills {
            p.cmd("ZADD")
                .arg(format!("idx:skill:{s}"))
                .arg(*prof)
                .arg(job)
                .ignore();
            p.cmd("ZADD")
                .arg(format!("idx:skills:{job}"))
                .arg(*prof)
                .arg(*s)
                .ignore();
            req += prof;
        }
        p.cmd("ZADD").arg("idx:jobs:req").arg(req).arg(job).ignore();
        let _: () = p.query(c).unwrap();
    };
    let _: () = r!(c, "FLUSHDB");
    index_job_prof(c, "j1", &[("java", 3), ("sql", 2)]);
    index_job_prof(c, "j2", &[("java", 5)]);
    let find_prof = |c: &mut Connection, cand: &[(&str, i64)]| -> BTreeSet<String> {
        let temp = uuid();
        let keys: Vec<String> = cand.iter().map(|(s, _)| format!("skill:{s}")).collect();
        let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
        let ones = vec![1.0; keys.len()];
        let mut p = pipe();
        p.atomic();
        for (s, prof) in cand {
            p.cmd("ZADD")
                .arg(format!("idx:{temp}"))
                .arg(*prof)
                .arg(*s)
                .ignore();
        }
        // Unioned scores are proficiencies; compare counts instead by
        // intersecting each job's skills with the candidate's.
        let scores = zset_common(&mut p, "ZUNIONSTORE", 30, &keys, &ones, Some("MAX"));
        let _: () = p.query(c).unwrap();
        let jobs: Vec<String> = r!(c, "ZRANGE", format!("idx:{scores}"), 0, -1);
        let mut ok = BTreeSet::new();
        for job in jobs {
            let mut p = pipe();
            p.atomic();
            let sk = format!("skills:{job}");
            let res = zset_common(&mut p, "ZINTERSTORE", 60, &[&temp, &sk], &[1.0, -1.0], None);
            p.cmd("ZRANGE")
                .arg(format!("idx:{res}"))
                .arg(0)
                .arg(0)
                .arg("WITHSCORES");
            p.cmd("ZCARD").arg(format!("idx:{res}"));
            let (lowest, n): (Vec<(String, f64)>, usize) = p.query(c).unwrap();
            let needed: usize = r!(c, "ZCARD", format!("idx:{sk}"));
            if n == needed && lowest.first().is_some_and(|(_, s)| *s >= 0.0) {
                ok.insert(job);
            }
        }
        ok
    };
    let set = |v: &[&str]| -> BTreeSet<String> { v.iter().map(|s| s.to_string()).collect() };
    assert_eq!(find_prof(c, &[("java", 4), ("sql", 2)]), set(&["j1"]));
    assert_eq!(find_prof(c, &[("java", 5), ("sql", 1)]), set(&["j2"]));
    assert_eq!(find_prof(c, &[("java", 5), ("sql", 3)]), set(&["j1", "j2"]));
    assert_eq!(find_prof(c, &[("sql", 3)]), set(&[]));
}

// ---------------------------------------------------------------------------
// 002 chapter 8: social network

const HOME_TIMELINE_SIZE: i64 = 1000;
const POSTS_PER_PASS: usize = 1000;

fn create_user(c: &mut Connection, login: &str, name: &str, now: i64) -> Option<i64> {
    let llogin = login.to_lowercase();
    let lock_name = format!("user:{llogin}");
    let lock = acquire_lock(c, &lock_name, 1000)?;
    let existing: Option<String> = r!(c, "HGET", "users:", &llogin);
    if existing.is_some() {
        release_lock(c, &lock_name, &lock);
        return None;
    }
    let id: i64 = r!(c, "INCR", "user:id");
    let _: () = pipe()
        .atomic()
        .cmd("HSET")
        .arg("users:")
        .arg(&llogin)
        .arg(id)
        .ignore()
        .cmd("HMSET")
        .arg(format!("user:{id}"))
        .arg(&[
            ("login", login.to_string()),
            ("id", id.to_string()),
            ("name", name.to_string()),
            ("followers", "0".into()),
            ("following", "0".into()),
            ("posts", "0".into()),
            ("signup", now.to_string()),
        ])
        .ignore()
        .query(c)
        .unwrap();
    release_lock(c, &lock_name, &lock);
    Some(id)
}

fn create_status(c: &mut Connection, uid: i64, message: &str, now: i64) -> Option<i64> {
    let (login, id): (Option<String>, i64) = pipe()
        .atomic()
        .cmd("HGET")
        .arg(format!("user:{uid}"))
        .arg("login")
        .cmd("INCR")
        .arg("status:id")
        .query(c)
        .unwrap();
    let login = login?;
    let _: () = pipe()
        .atomic()
        .cmd("HMSET")
        .arg(format!("status:{id}"))
        .arg(&[
            ("message", message.to_string()),
            ("posted", now.to_string()),
            ("id", id.to_string()),
            ("uid", uid.to_string()),
            ("login", login),
        ])
        .ignore()
        .cmd("HINCRBY")
        .arg(format!("user:{uid}"))
        .arg("posts")
        .arg(1)
        .ignore()
        .query(c)
        .unwrap();
    Some(id)
}

fn post_status(c: &mut Connection, uid: i64, message: &str, now: i64) -> Option<i64> {
    let id = create_status(c, uid, message, now)?;
    let posted: Option<i64> = r!(c, "HGET", format!("status:{id}"), "posted");
    let posted = posted?;
    let _: i64 = r!(c, "ZADD", format!("profile:{uid}"), posted, id);
    syndicate_status(c, uid, id, posted, 0.0);
    Some(id)
}

fn syndicate_status(c: &mut Connection, uid: i64, post_id: i64, post_time: i64, start: f64) {
    let followers: Vec<(String, f64)> = r!(
        c,
        "ZRANGEBYSCORE",
        format!("followers:{uid}"),
        start,
        "inf",
        "WITHSCORES",
        "LIMIT",
        0,
        POSTS_PER_PASS
    );
    let mut p = pipe();
    p.atomic();
    for (f, _) in &followers {
        let home = format!("home:{f}");
        p.cmd("ZADD")
            .arg(&home)
            .arg(post_time)
            .arg(post_id)
            .ignore();
        p.cmd("ZRANGE").arg(&home).arg(0).arg(-1).ignore();
        p.cmd("ZREMRANGEBYRANK")
            .arg(&home)
            .arg(0)
            .arg(-HOME_TIMELINE_SIZE - 1)
            .ignore();
    }
    let _: () = p.query(c).unwrap();
    assert!(
        followers.len() < POSTS_PER_PASS,
        "no deferred syndication here"
    );
}

fn get_status_messages(
    c: &mut Connection,
    uid: i64,
    timeline: &str,
    page: i64,
    count: i64,
) -> Vec<HashMap<String, String>> {
    let ids: Vec<String> = r!(
        c,
        "ZREVRANGE",
        format!("{timeline}:{uid}"),
        (page - 1) * count,
        page * count - 1
    );
    let mut p = pipe();
    p.atomic();
    for id in &ids {
        p.cmd("HGETALL").arg(format!("status:{id}"));
    }
    let res: Vec<HashMap<String, String>> = p.query(c).unwrap();
    res.into_iter().filter(|s| !s.is_empty()).collect()
}

fn follow_user(c: &mut Connection, uid: i64, other: i64, now: i64) -> bool {
    let fkey1 = format!("following:{uid}");
    let fkey2 = format!("followers:{other}");
    let already: Option<f64> = r!(c, "ZSCORE", &fkey1, other);
    if already.is_some() {
        return false;
    }
    let (_, _, following, followers, statuses): (i64, i64, i64, i64, Vec<(String, f64)>) = pipe()
        .atomic()
        .cmd("ZADD")
        .arg(&fkey1)
        .arg(now)
        .arg(other)
        .cmd("ZADD")
        .arg(&fkey2)
        .arg(now)
        .arg(uid)
        .cmd("ZCARD")
        .arg(&fkey1)
        .cmd("ZCARD")
        .arg(&fkey2)
        .cmd("ZREVRANGE")
        .arg(format!("profile:{other}"))
        .arg(0)
        .arg(HOME_TIMELINE_SIZE - 1)
        .arg("WITHSCORES")
        .query(c)
        .unwrap();
    let mut p = pipe();
    p.atomic();
    p.cmd("HSET")
        .arg(format!("user:{uid}"))
        .arg("following")
        .arg(following)
        .ignore();
    p.cmd("HSET")
        .arg(format!("user:{other}"))
        .arg("followers")
        .arg(followers)
        .ignore();
    for (id, score) in &statuses {
        p.cmd("ZADD")
            .arg(format!("home:{uid}"))
            .arg(*score)
            .arg(id)
            .ignore();
    }
    p.cmd("ZREMRANGEBYRANK")
        .arg(format!("home:{uid}"))
        .arg(0)
        .arg(-HOME_TIMELINE_SIZE - 1)
        .ignore();
    let _: () = p.query(c).unwrap();
    true
}

fn unfollow_user(c: &mut Connection, uid: i64, other: i64) -> bool {
    let fkey1 = format!("following:{uid}");
    let fkey2 = format!("followers:{other}");
    let already: Option<f64> = r!(c, "ZSCORE", &fkey1, other);
    if already.is_none() {
        return false;
    }
    let (_, _, following, followers, statuses): (i64, i64, i64, i64, Vec<String>) = pipe()
        .atomic()
        .cmd("ZREM")
        .arg(&fkey1)
        .arg(other)
        .cmd("ZREM")
        .arg(&fkey2)
        .arg(uid)
        .cmd("ZCARD")
        .arg(&fkey1)
        .cmd("ZCARD")
        .arg(&fkey2)
        .cmd("ZREVRANGE")
        .arg(format!("profile:{other}"))
        .arg(0)
        .arg(HOME_TIMELINE_SIZE - 1)
        .query(c)
        .unwrap();
    let mut p = pipe();
    p.atomic();
    p.cmd("HSET")
        .arg(format!("user:{uid}"))
        .arg("following")
        .arg(following)
        .ignore();
    p.cmd("HSET")
        .arg(format!("user:{other}"))
        .arg("followers")
        .arg(followers)
        .ignore();
    if !statuses.is_empty() {
        p.cmd("ZREM")
            .arg(format!("home:{uid}"))
            .arg(&statuses)
            .ignore();
    }
    let _: () = p.query(c).unwrap();
    true
}

fn delete_status(c: &mut Connection, uid: i64, status_id: i64) -> bool {
    let key = format!("status:{status_id}");
    let Some(lock) = acquire_lock(c, &key, 1000) else {
        return false;
    };
    let owner: Option<String> = r!(c, "HGET", &key, "uid");
    let ok = owner == Some(uid.to_string());
    if ok {
        let _: () = pipe()
            .atomic()
            .cmd("DEL")
            .arg(&key)
            .ignore()
            .cmd("ZREM")
            .arg(format!("profile:{uid}"))
            .arg(status_id)
            .ignore()
            .cmd("ZREM")
            .arg(format!("home:{uid}"))
            .arg(status_id)
            .ignore()
            .cmd("HINCRBY")
            .arg(format!("user:{uid}"))
            .arg("posts")
            .arg(-1)
            .ignore()
            .query(c)
            .unwrap();
        // syndicateDeleteStatus()
        let followers: Vec<(String, f64)> = r!(
            c,
            "ZRANGEBYSCORE",
            format!("followers:{uid}"),
            0.0,
            "inf",
            "WITHSCORES",
            "LIMIT",
            0,
            POSTS_PER_PASS
        );
        let mut p = pipe();
        p.atomic();
        for (f, _) in &followers {
            p.cmd("ZREM")
                .arg(format!("home:{f}"))
                .arg(status_id)
                .ignore();
        }
        let _: () = p.query(c).unwrap();
    }
    release_lock(c, &key, &lock);
    ok
}

#[test]
fn seed002_ch8_social_network() {
    let s = Server::start(&[]);
    let mut c = s.redis();
    let c = &mut c;
    let t = 1_700_000_000i64;
    assert_eq!(create_user(c, "TestUser", "Test User", t), Some(1));
    assert_eq!(create_user(c, "TestUser2", "Test User2", t), Some(2));
    assert_eq!(create_user(c, "testuser", "Dup", t), None);
    assert_eq!(create_user(c, "third", "Third", t), Some(3));
    let u1: HashMap<String, String> = r!(c, "HGETALL", "user:1");
    assert_eq!(u1["login"], "TestUser");
    assert_eq!(u1["name"], "Test User");
    assert_eq!(u1["posts"], "0");
    assert_eq!(u1.len(), 7);
    let users: HashMap<String, i64> = r!(c, "HGETALL", "users:");
    assert_eq!(users.len(), 3);
    assert_eq!(users["testuser2"], 2);
    let locks: Vec<String> = r!(c, "KEYS", "lock:*");
    assert!(locks.is_empty());
    assert_eq!(create_status(c, 99, "nobody", t), None);

    assert!(follow_user(c, 1, 2, t + 1));
    assert!(!follow_user(c, 1, 2, t + 2));
    assert!(follow_user(c, 3, 2, t + 3));
    let f: Vec<(String, i64)> = r!(c, "ZRANGE", "followers:2", 0, -1, "WITHSCORES");
    assert_eq!(f, [("1".to_string(), t + 1), ("3".to_string(), t + 3)]);
    let n: String = r!(c, "HGET", "user:2", "followers");
    assert_eq!(n, "2");
    let n: String = r!(c, "HGET", "user:1", "following");
    assert_eq!(n, "1");

    let id1 = post_status(c, 2, "this is some message content", t + 10).unwrap();
    for i in 0..3 {
        post_status(c, 2, &format!("status {i}"), t + 20 + i).unwrap();
    }
    let p2: Vec<(String, i64)> = r!(c, "ZREVRANGE", "profile:2", 0, -1, "WITHSCORES");
    assert_eq!(p2.len(), 4);
    for uid in [1, 3] {
        let home: Vec<(String, i64)> =
            r!(c, "ZREVRANGE", format!("home:{uid}"), 0, -1, "WITHSCORES");
        assert_eq!(home, p2);
    }
    let page = get_status_messages(c, 1, "home", 1, 2);
    assert_eq!(page.len(), 2);
    assert_eq!(page[0]["message"], "status 2");
    assert_eq!(page[1]["message"], "status 1");
    assert_eq!(page[0]["login"], "TestUser2");
    let page = get_status_messages(c, 1, "home", 2, 2);
    assert_eq!(page[1]["message"], "this is some message content");
    assert_eq!(page[1]["id"], id1.to_string());
    let posts: String = r!(c, "HGET", "user:2", "posts");
    assert_eq!(posts, "4");

    // Unfollow empties the home timeline; following again refills it.
    assert!(unfollow_user(c, 1, 2));
    assert!(!unfollow_user(c, 1, 2));
    let n: i64 = r!(c, "ZCARD", "home:1");
    assert_eq!(n, 0);
    let (a, b): (String, String) = pipe()
        .cmd("HGET")
        .arg("user:1")
        .arg("following")
        .cmd("HGET")
        .arg("user:2")
        .arg("followers")
        .query(c)
        .unwrap();
    assert_eq!((a.as_str(), b.as_str()), ("0", "1"));
    assert!(follow_user(c, 1, 2, t + 100));
    let home: Vec<(String, i64)> = r!(c, "ZREVRANGE", "home:1", 0, -1, "WITHSCORES");
    assert_eq!(home, p2);

    // Deleting a status: only its author, everywhere.
    assert!(!delete_status(c, 1, id1));
    assert!(delete_status(c, 2, id1));
    for key in ["profile:2", "home:1", "home:3"] {
        let sc: Option<f64> = r!(c, "ZSCORE", key, id1);
        assert_eq!(sc, None, "{key}");
    }
    let page = get_status_messages(c, 3, "home", 1, 10);
    assert_eq!(page.len(), 3);
    let posts: String = r!(c, "HGET", "user:2", "posts");
    assert_eq!(posts, "3");
    // A dangling id in a timeline is filtered out (HGETALL gives {}).
    let _: i64 = r!(c, "ZADD", "home:3", t + 500, 999);
    let page = get_status_messages(c, 3, "home", 1, 10);
    assert_eq!(page.len(), 3);

    // The home timeline keeps the newest 1000.
    let mut p = pipe();
    for i in 0..1005 {
        p.cmd("ZADD")
            .arg("profile:3")
            .arg(t + 1000 + i)
            .arg(10_000 + i)
            .ignore();
    }
    let _: () = p.query(c).unwrap();
    assert!(follow_user(c, 1, 3, t + 3000));
    let n: i64 = r!(c, "ZCARD", "home:1");
    assert_eq!(n, HOME_TIMELINE_SIZE);
    let oldest: Vec<String> = r!(c, "ZRANGE", "home:1", 0, 0);
    assert_eq!(oldest, ["10005"]);
}

// ---------------------------------------------------------------------------
// 002 chapter 9: short structures and sharding

fn encoding(c: &mut Connection, key: &str) -> String {
    r!(c, "OBJECT", "ENCODING", key)
}

fn config_set(c: &mut Connection, name: &str, value: &str) {
    let _: () = r!(c, "CONFIG", "SET", name, value);
}

#[test]
fn seed002_ch9_short_structures() {
    let s = Server::start(&[]);
    let mut c = s.redis();
    let c = &mut c;
    config_set(c, "list-max-ziplist-size", "4");
    config_set(c, "hash-max-ziplist-entries", "512");
    config_set(c, "hash-max-ziplist-value", "64");
    config_set(c, "zset-max-ziplist-entries", "128");
    config_set(c, "zset-max-ziplist-value", "64");
    config_set(c, "set-max-intset-entries", "512");
    let got: Vec<String> = r!(c, "CONFIG", "GET", "hash-max-ziplist-entries");
    assert_eq!(got, ["hash-max-ziplist-entries", "512"]);
    let got: Vec<String> = r!(c, "CONFIG", "GET", "list-max-ziplist-size");
    assert_eq!(got, ["list-max-ziplist-size", "4"]);
    let got: Vec<String> = r!(c, "CONFIG", "GET", "zset-max-listpack-value");
    assert_eq!(got, ["zset-max-listpack-value", "64"]);

    // Lists are quicklists in 7.0 whatever the size.
    let _: i64 = r!(c, "RPUSH", "test", "a", "b", "c", "d");
    assert_eq!(encoding(c, "test"), "quicklist");
    let _: i64 = r!(c, "RPUSH", "test", "e", "f");
    assert_eq!(encoding(c, "test"), "quicklist");

    // Hashes: listpack up to 512 fields of at most 64 bytes.
    let mut p = pipe();
    for i in 0..512 {
        p.cmd("HSET").arg("h").arg(format!("f{i}")).arg(i).ignore();
    }
    let _: () = p.query(c).unwrap();
    assert_eq!(encoding(c, "h"), "listpack");
    let _: i64 = r!(c, "HSET", "h", "f512", "x");
    assert_eq!(encoding(c, "h"), "hashtable");
    let _: i64 = r!(c, "HSET", "h2", "f", "x".repeat(64));
    assert_eq!(encoding(c, "h2"), "listpack");
    let _: i64 = r!(c, "HSET", "h2", "g", "x".repeat(65));
    assert_eq!(encoding(c, "h2"), "hashtable");
    // Deleting back under the limit does not convert back.
    let _: i64 = r!(c, "HDEL", "h2", "g");
    assert_eq!(encoding(c, "h2"), "hashtable");

    // Sorted sets: member length vs zset-max-ziplist-value.
    let _: i64 = r!(c, "ZADD", "z", 1, "m".repeat(64));
    assert_eq!(encoding(c, "z"), "listpack");
    let _: i64 = r!(c, "ZADD", "z", 2, "m".repeat(65));
    assert_eq!(encoding(c, "z"), "skiplist");
    let mut p = pipe();
    for i in 0..128 {
        p.cmd("ZADD").arg("z2").arg(i).arg(i).ignore();
    }
    let _: () = p.query(c).unwrap();
    assert_eq!(encoding(c, "z2"), "listpack");
    let _: i64 = r!(c, "ZADD", "z2", 128, 128);
    assert_eq!(encoding(c, "z2"), "skiplist");

    // Sets: intset while all members are integers and at most 512.
    let members: Vec<i64> = (0..512).collect();
    let _: i64 = r!(c, "SADD", "s", &members);
    assert_eq!(encoding(c, "s"), "intset");
    let _: i64 = r!(c, "SADD", "s", 512);
    assert_eq!(encoding(c, "s"), "hashtable");
    let _: i64 = r!(c, "SADD", "s2", 1, -9223372036854775808i64);
    assert_eq!(encoding(c, "s2"), "intset");
    let _: i64 = r!(c, "SADD", "s2", "a");
    assert_eq!(encoding(c, "s2"), "hashtable");

    // Raising the limits keeps new keys short.
    config_set(c, "hash-max-ziplist-entries", "1024");
    config_set(c, "set-max-intset-entries", "1024");
    let mut p = pipe();
    for i in 0..1000 {
        p.cmd("HSET").arg("h3").arg(i).arg(i).ignore();
        p.cmd("SADD").arg("s3").arg(i).ignore();
    }
    let _: () = p.query(c).unwrap();
    assert_eq!(encoding(c, "h3"), "listpack");
    assert_eq!(encoding(c, "s3"), "intset");
    config_set(c, "set-max-intset-entries", "10");
    let _: i64 = r!(c, "SADD", "s3", 5000);
    assert_eq!(encoding(c, "s3"), "hashtable");
}

fn crc32(data: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in data {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0xEDB8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

fn shard_key(base: &str, key: &str, total_elements: i64, shard_size: i64) -> String {
    let shard_id = if !key.is_empty() && key.bytes().all(|b| b.is_ascii_digit()) {
        key.parse::<i64>().unwrap() / shard_size
    } else {
        let shards = 2 * total_elements / shard_size;
        (i64::from(crc32(key.as_bytes()) as i32) % shards).abs()
    };
    format!("{base}:{shard_id}")
}

#[test]
fn seed002_ch9_sharded_hashes_and_sets() {
    let s = Server::start(&[]);
    let mut c = s.redis();
    let c = &mut c;
    assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
    config_set(c, "hash-max-ziplist-entries", "1024");
    let (total, size) = (2000i64, 512i64);
    let mut p = pipe();
    for i in 0..total {
        let key = format!("item{i}");
        p.cmd("HSET")
            .arg(shard_key("shardhash", &key, total, size))
            .arg(&key)
            .arg(i)
            .ignore();
    }
    let _: () = p.query(c).unwrap();
    let keys: Vec<String> = r!(c, "KEYS", "shardhash:*");
    assert!(
        keys.len() > 1 && keys.len() as i64 <= 2 * total / size,
        "{keys:?}"
    );
    let mut sum = 0;
    for k in &keys {
        assert_eq!(encoding(c, k), "listpack", "{k}");
        let n: i64 = r!(c, "HLEN", k);
        sum += n;
    }
    assert_eq!(sum, total);
    let sk = shard_key("shardhash", "item77", total, size);
    let v: String = r!(c, "HGET", &sk, "item77");
    assert_eq!(v, "77");
    let v: i64 = r!(c, "HINCRBY", &sk, "item77", 3);
    assert_eq!(v, 80);
    let v: f64 = r!(c, "HINCRBYFLOAT", &sk, "item77", 0.5);
    assert_eq!(v, 80.5);
    let n: i64 = r!(c, "HDEL", &sk, "item77");
    assert_eq!(n, 1);
    // Numeric keys shard by division.
    assert_eq!(shard_key("b", "1023", total, size), "b:1");
    let _: i64 = r!(
        c,
        "HSET",
        shard_key("num", "1023", total, size),
        "1023",
        "x"
    );
    let v: Option<String> = r!(c, "HGET", "num:1", "1023");
    assert_eq!(v.as_deref(), Some("x"));

    // count_visit(): unique visitors in intset shards, the total via INCR.
    let key = "unique:2024-01-01";
    let expected = 1000;
    let mut sessions: Vec<String> = (0..300).map(|_| uuid()).collect();
    sessions.extend(sessions[..50].to_vec());
    let mut added = 0;
    for sid in &sessions {
        let hex: String = sid.replace('-', "")[..15].to_string();
        let id = i64::from_str_radix(&hex, 16).unwrap();
        let shard = shard_key(key, &format!("x{id}"), expected, 512);
        let n: i64 = r!(c, "SADD", &shard, id);
        if n == 1 {
            let _: i64 = r!(c, "INCR", key);
            added += 1;
        }
    }
    assert_eq!(added, 300);
    let count: i64 = r!(c, "GET", key);
    assert_eq!(count, 300);
    let shards: Vec<String> = r!(c, "KEYS", format!("{key}:*"));
    let mut members = 0;
    for sh in &shards {
        assert_eq!(encoding(c, sh), "intset", "{sh}");
        let n: i64 = r!(c, "SCARD", sh);
        members += n;
    }
    assert_eq!(members, 300);
}

// ---------------------------------------------------------------------
// The WATCH retry loops above under THREADS concurrent clients: no lost
// update, exact final counts.

const THREADS: usize = 10;

/// Runs `f(thread_index, connection)` on THREADS threads started together;
/// joins them all before reporting a failure.
fn run_threads<T: Send + 'static>(
    s: &Arc<Server>,
    f: impl Fn(usize, &mut Connection) -> T + Send + Sync + 'static,
) -> Vec<T> {
    let f = Arc::new(f);
    let barrier = Arc::new(Barrier::new(THREADS));
    let handles: Vec<_> = (0..THREADS)
        .map(|t| {
            let (s, f, barrier) = (s.clone(), f.clone(), barrier.clone());
            thread::spawn(move || {
                let mut c = s.redis();
                barrier.wait();
                f(t, &mut c)
            })
        })
        .collect();
    let results: Vec<_> = handles.into_iter().map(|h| h.join()).collect();
    assert!(results.iter().all(|r| r.is_ok()), "a client thread failed");
    results.into_iter().map(|r| r.unwrap()).collect()
}

#[test]
fn log_common_concurrent_rollover_loses_nothing() {
    let s = Arc::new(Server::start(&[]));
    let (h1, h2) = ("2024-01-01T10:00:00", "2024-01-01T11:00:00");
    let per = 30;
    // One write in the first hour before the threads, so the rollover
    // happens exactly once, when the first thread reaches the second hour.
    log_common(&mut s.redis(), "web", "m0", "info", h1);
    let attempts = run_threads(&s, move |_, c| {
        (0..per)
            .map(|i| {
                let hour = if i < per / 2 { h1 } else { h2 };
                log_common(c, "web", &format!("m{}", i % 3), "info", hour)
            })
            .sum::<usize>()
    });
    let mut c = s.redis();
    let c = &mut c;
    let mut totals: HashMap<String, i64> = HashMap::new();
    for key in ["common:web:info", "common:web:info:last"] {
        let v: Vec<(String, i64)> = r!(c, "ZRANGE", key, 0, -1, "WITHSCORES");
        for (m, n) in v {
            *totals.entry(m).or_default() += n;
        }
    }
    let n = (THREADS * per / 3) as i64;
    let want: HashMap<String, i64> = [("m0", n + 1), ("m1", n), ("m2", n)]
        .iter()
        .map(|(k, v)| (k.to_string(), *v))
        .collect();
    assert_eq!(totals, want);
    let pstart: String = r!(c, "GET", "common:web:info:pstart");
    assert_eq!(pstart, h1);
    let start: String = r!(c, "GET", "common:web:info:start");
    assert_eq!(start, h2);
    let len: i64 = r!(c, "LLEN", "recent:web:info");
    assert_eq!(len, 100);
    let total_attempts: usize = attempts.iter().sum();
    assert!(total_attempts >= THREADS * per);
    eprintln!(
        "logCommon: {} retries for {} writes",
        total_attempts - THREADS * per,
        THREADS * per
    );
}

#[test]
fn update_stats_concurrent_exact_aggregates() {
    let s = Arc::new(Server::start(&[]));
    let per = 20;
    let results = run_threads(&s, move |t, c| {
        (0..per)
            .map(|i| {
                let v = (t * per + i + 1) as f64;
                update_stats(c, "ProfilePage", "AccessTime", v, "2024-01-01T10:00:00").0
            })
            .collect::<Vec<_>>()
    });
    // Each transaction saw its own count: 1..=200, each exactly once.
    let counts: BTreeSet<i64> = results.iter().flatten().map(|r| r[0] as i64).collect();
    let n = (THREADS * per) as i64;
    assert_eq!(counts, (1..=n).collect());
    let mut c = s.redis();
    let c = &mut c;
    let stats: Vec<(String, f64)> = r!(
        c,
        "ZRANGE",
        "stats:ProfilePage:AccessTime",
        0,
        -1,
        "WITHSCORES"
    );
    let stats: HashMap<String, f64> = stats.into_iter().collect();
    assert_eq!(stats["count"], n as f64);
    assert_eq!(stats["min"], 1.0);
    assert_eq!(stats["max"], n as f64);
    assert_eq!(stats["sum"], (n * (n + 1) / 2) as f64);
    assert_eq!(stats["sumsq"], (n * (n + 1) * (2 * n + 1) / 6) as f64);
    // No temporary key left behind.
    let keys: i64 = r!(c, "DBSIZE");
    assert_eq!(keys, 2);
}

#[test]
fn autocomplete_on_prefix_concurrent() {
    let s = Arc::new(Server::start(&[]));
    let names: Vec<String> = (0..20).map(|i| format!("abc{i:02}")).collect();
    {
        let mut c = s.redis();
        let _: i64 = r!(&mut c, "ZADD", "members:g", 0, &names[0]);
        for n in &names[1..] {
            let _: i64 = r!(&mut c, "ZADD", "members:g", 0, n);
        }
    }
    let per = 20;
    let expected = names.clone();
    let attempts = run_threads(&s, move |t, c| {
        let mut attempts = 0;
        for i in 0..per {
            // joinGuild() of non-matching names: concurrent writes to the
            // watched zset.
            let _: i64 = r!(c, "ZADD", "members:g", 0, format!("t{t}x{i:02}"));
            let (items, a) = autocomplete_on_prefix(c, "g", "abc");
            attempts += a;
            // Other clients' markers may take slots in the window, never
            // show up in the result, never reorder it.
            assert!(!items.is_empty() && items.len() <= 10, "{items:?}");
            assert_eq!(items, expected[..items.len()]);
            let (items, a) = autocomplete_on_prefix(c, "g", &format!("t{t}x"));
            attempts += a;
            let mine: Vec<String> = (0..=i.min(9)).map(|k| format!("t{t}x{k:02}")).collect();
            assert_eq!(items, mine);
        }
        attempts
    });
    let mut c = s.redis();
    let all: Vec<String> = r!(&mut c, "ZRANGE", "members:g", 0, -1);
    assert_eq!(all.len(), 20 + THREADS * per, "markers left behind");
    assert!(all.iter().all(|m| !m.contains('{')));
    let total: usize = attempts.iter().sum();
    eprintln!(
        "autocompleteOnPrefix: {} retries for {} lookups",
        total - 2 * THREADS * per,
        2 * THREADS * per
    );
}

/// acquireSemaphoreWithLock(): the fair semaphore taken under a lock whose
/// release is a WATCH loop.
fn acquire_semaphore_with_lock(c: &mut Connection, sem: &str, limit: i64) -> Option<String> {
    let lock = acquire_lock(c, sem, 10_000)?;
    let got = acquire_fair_semaphore(c, sem, limit, 10_000, now_ms());
    assert!(release_lock(c, sem, &lock), "lost the lock");
    got
}

#[test]
fn fair_semaphore_never_over_acquired() {
    let s = Arc::new(Server::start(&[]));
    let limit = 3;
    let per = 20;
    let holders = Arc::new(AtomicUsize::new(0));
    let max_seen = Arc::new(AtomicUsize::new(0));
    let (h, m) = (holders.clone(), max_seen.clone());
    let acquired = run_threads(&s, move |_, c| {
        let mut mine = 0;
        for _ in 0..per {
            let Some(id) = acquire_semaphore_with_lock(c, "semaphore:remote", limit) else {
                thread::sleep(Duration::from_millis(1));
                continue;
            };
            mine += 1;
            let now = h.fetch_add(1, Ordering::SeqCst) + 1;
            m.fetch_max(now, Ordering::SeqCst);
            let _: i64 = r!(c, "INCR", "acquired:total");
            thread::sleep(Duration::from_millis(2));
            h.fetch_sub(1, Ordering::SeqCst);
            assert!(release_fair_semaphore(c, "semaphore:remote", &id));
        }
        mine
    });
    let total: i64 = acquired.iter().sum();
    let max = max_seen.load(Ordering::SeqCst);
    assert!(max <= limit as usize, "{max} holders at once");
    assert!(total > 0);
    let mut c = s.redis();
    let c = &mut c;
    let counted: i64 = r!(c, "GET", "acquired:total");
    assert_eq!(counted, total);
    let attempts: i64 = r!(c, "GET", "semaphore:remote:counter");
    assert_eq!(attempts, (THREADS * per) as i64);
    let left: i64 = r!(
        c,
        "EXISTS",
        "semaphore:remote",
        "semaphore:remote:owner",
        "lock:semaphore:remote"
    );
    assert_eq!(left, 0);
    eprintln!(
        "fair semaphore: {total} of {} attempts acquired, at most {max} holders",
        THREADS * per
    );
}
