//! Lua scripting: EVAL/EVALSHA/SCRIPT/FUNCTION replies and errors as Redis
//! 7.0.15 gives them (texts taken from the real server), the sandbox, busy
//! scripts (-BUSY, SCRIPT KILL, UNKILLABLE, SHUTDOWN NOSAVE) and the seeds'
//! red-envelope scripts under concurrency.
//!
//! The red-envelope scripts need `cjson` and the list and hash commands:
//! they fail with a clear message (never skip) until those have landed.

use cinnabar_tests::RespFrame as Frame;
use cinnabar_tests::*;
use std::collections::HashSet;
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

fn arr(v: Vec<Frame>) -> Frame {
    Frame::Array(v)
}

#[test]
fn conversions_lua_to_resp2() {
    let s = Server::start(&[]);
    let mut c = s.raw();
    let ev = |c: &mut RawClient, body: &str| c.cmd(&["EVAL", body, "0"]);
    assert_eq!(
        ev(&mut c, "return {1,2,3,'x',nil,4}"),
        arr(vec![int(1), int(2), int(3), bulk("x")])
    );
    assert_eq!(
        ev(&mut c, "return {1,{2,{3}},false,true}"),
        arr(vec![
            int(1),
            arr(vec![int(2), arr(vec![int(3)])]),
            nil(),
            int(1)
        ])
    );
    assert_eq!(ev(&mut c, "return 3.99"), int(3));
    assert_eq!(ev(&mut c, "return -3.99"), int(-3));
    assert_eq!(ev(&mut c, "return 1e20"), int(i64::MIN));
    assert_eq!(ev(&mut c, "return nil"), nil());
    assert_eq!(ev(&mut c, "return {ok='fine'}"), simple("fine"));
    assert_eq!(ev(&mut c, "return {err='My bad'}"), err("My bad"));
    assert_eq!(ev(&mut c, "return {ok=1}"), arr(vec![]));
    assert_eq!(ev(&mut c, "return {double=1.5}"), bulk("1.5"));
    assert_eq!(
        ev(&mut c, "return {map={a=1}}"),
        arr(vec![bulk("a"), int(1)])
    );
    assert_eq!(ev(&mut c, "redis.setresp(3) return true"), int(1));
    assert_eq!(ev(&mut c, "redis.setresp(3) return false"), int(0));
    assert_eq!(ev(&mut c, "return redis.error_reply('x')"), err("ERR x"));
    assert_eq!(ev(&mut c, "return redis.error_reply('MY x')"), err("MY x"));
    assert_eq!(ev(&mut c, "return redis.error_reply('-x')"), err("ERR x"));
    assert_eq!(
        ev(&mut c, "return redis.status_reply('FINE')"),
        simple("FINE")
    );
    assert_eq!(
        c.cmd(&[
            "EVAL",
            "return {KEYS[1],ARGV[1],#KEYS,#ARGV}",
            "1",
            "k",
            "a"
        ]),
        arr(vec![bulk("k"), bulk("a"), int(1), int(1)])
    );
    // Redis → Lua: status as {ok=}, null as false, errors as {err=} via pcall.
    assert_eq!(ev(&mut c, "return redis.call('ping').ok"), bulk("PONG"));
    assert_eq!(
        ev(&mut c, "return redis.call('get','nokey') == false"),
        int(1)
    );
    assert_eq!(c.cmd(&["SET", "s", "a"]), ok());
    assert_eq!(
        ev(&mut c, "return redis.pcall('incr','s')"),
        err("ERR value is not an integer or out of range")
    );
    assert_eq!(
        ev(
            &mut c,
            "redis.call('set','n',0.1) return redis.call('get','n')"
        ),
        bulk("0.10000000000000001")
    );
    assert_eq!(
        ev(&mut c, "return redis.sha1hex('')"),
        bulk("da39a3ee5e6b4b0d3255bfef95601890afd80709")
    );
    assert_eq!(ev(&mut c, "return redis.REDIS_VERSION"), bulk("7.0.15"));
    assert_eq!(ev(&mut c, "return redis.replicate_commands()"), int(1));
}

#[test]
fn conversions_resp3() {
    let s = Server::start(&[]);
    let mut c = s.raw();
    let _ = c.cmd(&["HELLO", "3"]);
    let ev = |c: &mut RawClient, body: &str| c.cmd(&["EVAL", body, "0"]);
    assert_eq!(ev(&mut c, "return nil"), Frame::Null);
    assert_eq!(
        ev(&mut c, "redis.setresp(3) return true"),
        Frame::Boolean(true)
    );
    assert_eq!(ev(&mut c, "return {double=1.5}"), Frame::Double(1.5));
    assert_eq!(
        ev(&mut c, "return {set={a=true}}"),
        Frame::Set(vec![bulk("a")])
    );
    assert_eq!(
        ev(&mut c, "return {big_number='123'}"),
        Frame::BigNumber("123".into())
    );
    assert_eq!(
        ev(
            &mut c,
            "redis.setresp(3) return type(redis.call('get','nokey'))"
        ),
        bulk("nil")
    );
}

fn script_err(c: &mut RawClient, body: &str) -> String {
    match c.cmd(&["EVAL", body, "0"]) {
        Frame::Error(e) => String::from_utf8_lossy(&e).into_owned(),
        other => panic!("expected an error for {body:?}, got {other:?}"),
    }
}

#[test]
fn errors_and_sandbox() {
    let s = Server::start(&[]);
    let mut c = s.raw();
    assert_eq!(
        script_err(&mut c, "return x"),
        "ERR user_script:1: Script attempted to access nonexistent global variable 'x' script: 03c387736bb5cc009ff35151572cee04677aa374, on @user_script:1."
    );
    assert_eq!(
        script_err(&mut c, "x=1"),
        "ERR user_script:1: Attempt to modify a readonly table script: 7caf6056913504f0508c65faf2dc3f94ff65bcfd, on @user_script:1."
    );
    assert_eq!(
        script_err(&mut c, "return redis.call(\"nosuch\")"),
        "ERR Unknown Redis command called from script script: 2218effcac8108416909801acfb39c080a85adfa, on @user_script:1."
    );
    assert_eq!(
        script_err(&mut c, "error({err=\"boom\"})"),
        "boom script: bd3a82afbbd971a48dc7593f7cb13f08ae5c57ee, on @user_script:1."
    );
    assert_eq!(
        script_err(&mut c, "return 1 +"),
        "ERR Error compiling script (new function): user_script:1: unexpected symbol near '<eof>'"
    );
    let e = script_err(
        &mut c,
        "local function f()\n return redis.call('get')\nend\n\nf()",
    );
    assert!(
        e.starts_with("ERR Wrong number of args calling Redis command from script script: ")
            && e.ends_with(", on @user_script:2."),
        "{e}"
    );
    let e = script_err(&mut c, "return redis.call('eval','return 1','0')");
    assert!(
        e.starts_with("ERR This Redis command is not allowed from script"),
        "{e}"
    );
    let e = script_err(&mut c, "string.len = nil");
    assert!(
        e.starts_with("ERR user_script:1: Attempt to modify a readonly table"),
        "{e}"
    );
    for g in [
        "os", "io", "print", "loadfile", "dofile", "require", "package", "debug",
    ] {
        let e = script_err(&mut c, &format!("return {g}"));
        assert!(
            e.contains(&format!("nonexistent global variable '{g}'")),
            "{g}: {e}"
        );
    }
    assert_eq!(
        c.cmd(&["EVAL", "return 1", "2", "a"]),
        err("ERR Number of keys can't be greater than number of args")
    );
    assert_eq!(
        c.cmd(&["EVAL", "return 1", "-1"]),
        err("ERR Number of keys can't be negative")
    );
    // Lua's pcall catches a redis.call error as its message.
    assert_eq!(c.cmd(&["SET", "s", "a"]), ok());
    assert_eq!(
        c.cmd(&[
            "EVAL",
            "local ok, e = pcall(redis.call, 'incr', 's') return e",
            "0"
        ]),
        bulk("ERR value is not an integer or out of range")
    );
    // Read-only scripts.
    let e = match c.cmd(&["EVAL_RO", "return redis.call('set','a','b')", "0"]) {
        Frame::Error(e) => String::from_utf8_lossy(&e).into_owned(),
        f => panic!("{f:?}"),
    };
    assert!(e.starts_with("ERR Write commands are not allowed from read-only scripts. script: "));
    assert_eq!(
        c.cmd(&[
            "EVAL",
            "#!lua flags=no-writes\nreturn redis.pcall('set','a','b')",
            "0"
        ]),
        err("ERR Write commands are not allowed from read-only scripts.")
    );
    assert_eq!(
        c.cmd(&["EVAL_RO", "#!lua\nreturn 1", "0"]),
        err("ERR Can not execute a script with write flag using *_ro command.")
    );
    assert_eq!(
        c.cmd(&["EVAL", "#!lua flags=bad\nreturn 1", "0"]),
        err("ERR Unexpected flag in script shebang: bad")
    );
    // SELECT inside a script changes only the script's database.
    assert_eq!(
        c.cmd(&[
            "EVAL",
            "redis.call('select',1) redis.call('set','sel','1') return 1",
            "0"
        ]),
        int(1)
    );
    assert_eq!(c.cmd(&["EXISTS", "sel"]), int(0));
    assert_eq!(c.cmd(&["PING"]), simple("PONG"));
}

#[test]
fn evalsha_and_script_commands() {
    let s = Server::start(&[]);
    let mut c = s.raw();
    let sha = "e0e1f9fabfc9d4800c877a703b823ac0578ff8db";
    assert_eq!(
        c.cmd(&["EVALSHA", sha, "0"]),
        err("NOSCRIPT No matching script. Please use EVAL.")
    );
    assert_eq!(c.cmd(&["SCRIPT", "LOAD", "return 1"]), bulk(sha));
    assert_eq!(
        c.cmd(&["SCRIPT", "EXISTS", sha, "nope"]),
        arr(vec![int(1), int(0)])
    );
    assert_eq!(c.cmd(&["EVALSHA", sha, "0"]), int(1));
    assert_eq!(c.cmd(&["EVALSHA", &sha.to_uppercase(), "0"]), int(1));
    assert_eq!(c.cmd(&["EVALSHA_RO", sha, "0"]), int(1));
    assert_eq!(
        c.cmd(&["SCRIPT", "FLUSH", "x"]),
        err("ERR SCRIPT FLUSH only support SYNC|ASYNC option")
    );
    assert_eq!(c.cmd(&["SCRIPT", "FLUSH", "ASYNC"]), ok());
    assert_eq!(c.cmd(&["SCRIPT", "EXISTS", sha]), arr(vec![int(0)]));
    assert_eq!(
        c.cmd(&["SCRIPT", "KILL"]),
        err("NOTBUSY No scripts in execution right now.")
    );
    assert!(matches!(c.cmd(&["SCRIPT", "HELP"]), Frame::Array(v) if v.len() == 17));
}

#[test]
fn functions_basics() {
    let s = Server::start(&[]);
    let mut c = s.raw();
    let lib = "#!lua name=lib\nredis.register_function('f', function(k, a) return {k, a} end)\nredis.register_function{function_name='g', callback=function() return 1 end, flags={'no-writes'}, description='desc'}";
    assert_eq!(
        c.cmd(&["FUNCTION", "LOAD", "return 1"]),
        err("ERR Missing library metadata")
    );
    assert_eq!(c.cmd(&["FUNCTION", "LOAD", lib]), bulk("lib"));
    assert_eq!(
        c.cmd(&["FUNCTION", "LOAD", lib]),
        err("ERR Library 'lib' already exists")
    );
    assert_eq!(c.cmd(&["FUNCTION", "LOAD", "REPLACE", lib]), bulk("lib"));
    assert_eq!(
        c.cmd(&[
            "FUNCTION",
            "LOAD",
            "#!lua name=l2\nredis.register_function('f', function() end)"
        ]),
        err("ERR Function f already exists")
    );
    assert_eq!(
        c.cmd(&["FUNCTION", "LOAD", "#!lua name=l2\nredis.call('ping')"]),
        err("ERR Error registering functions: ERR user_function:2: Script attempted to access nonexistent global variable 'call'")
    );
    assert_eq!(
        c.cmd(&["FCALL", "f", "1", "k", "a"]),
        arr(vec![arr(vec![bulk("k")]), arr(vec![bulk("a")])])
    );
    assert_eq!(c.cmd(&["FCALL_RO", "g", "0"]), int(1));
    assert_eq!(
        c.cmd(&["FCALL_RO", "f", "0"]),
        err("ERR Can not execute a script with write flag using *_ro command.")
    );
    assert_eq!(
        c.cmd(&["FCALL", "nosuch", "0"]),
        err("ERR Function not found")
    );
    match c.cmd(&["FUNCTION", "LIST", "WITHCODE"]) {
        Frame::Array(libs) => assert_eq!(libs.len(), 1),
        f => panic!("{f:?}"),
    }
    let dump = match c.cmd(&["FUNCTION", "DUMP"]) {
        Frame::Bulk(b) => b,
        f => panic!("{f:?}"),
    };
    assert_eq!(c.cmd(&["FUNCTION", "FLUSH"]), ok());
    assert_eq!(c.cmd(&["FCALL", "g", "0"]), err("ERR Function not found"));
    let restore: [&[u8]; 3] = [b"FUNCTION", b"RESTORE", &dump[..]];
    assert_eq!(c.cmd(&restore), ok());
    assert_eq!(c.cmd(&["FCALL", "g", "0"]), int(1));
    assert_eq!(c.cmd(&["FUNCTION", "DELETE", "lib"]), ok());
    assert_eq!(
        c.cmd(&["FUNCTION", "DELETE", "lib"]),
        err("ERR Library not found")
    );
}

const BUSY: &str =
    "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.";

/// Waits until another client gets -BUSY (the script passed the threshold).
fn wait_busy(s: &Server) -> RawClient {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let mut o = s.raw();
        match o.cmd(&["PING"]) {
            Frame::Error(e) if e == BUSY.as_bytes() => return o,
            Frame::Simple(_) if Instant::now() < deadline => {
                thread::sleep(Duration::from_millis(20))
            }
            f => panic!("expected -BUSY, got {f:?}"),
        }
    }
}

#[test]
fn runaway_script_busy_then_script_kill() {
    let s = Server::start(&[("busy-reply-threshold", "200")]);
    let mut a = s.raw();
    a.send_cmd(&["EVAL", "while true do end", "0"]);
    let mut b = wait_busy(&s);
    assert_eq!(b.cmd(&["GET", "x"]), err(BUSY));
    assert_eq!(b.cmd(&["FUNCTION", "KILL"]), err(BUSY));
    assert_eq!(b.cmd(&["SCRIPT", "KILL"]), ok());
    assert_eq!(
        a.read(),
        err("ERR Script killed by user with SCRIPT KILL... script: 694a5fe1ddb97a4c6a1bf299d9537c7d3d0f84e7, on @user_script:1.")
    );
    assert_eq!(b.cmd(&["SET", "k", "v"]), ok());
    assert_eq!(a.cmd(&["GET", "k"]), bulk("v"));
    assert_eq!(
        b.cmd(&["SCRIPT", "KILL"]),
        err("NOTBUSY No scripts in execution right now.")
    );
    // A runaway function is killed with FUNCTION KILL.
    let lib = "#!lua name=spin\nredis.register_function('spin', function() while true do end end)";
    assert_eq!(a.cmd(&["FUNCTION", "LOAD", lib]), bulk("spin"));
    a.send_cmd(&["FCALL", "spin", "0"]);
    thread::sleep(Duration::from_millis(400));
    assert_eq!(
        b.cmd(&["SCRIPT", "KILL"]),
        err("BUSY Redis is busy running a script. You can only call FUNCTION KILL or SHUTDOWN NOSAVE.")
    );
    assert_eq!(b.cmd(&["FUNCTION", "KILL"]), ok());
    assert_eq!(
        a.read(),
        err("ERR Script killed by user with SCRIPT KILL... script: spin, on @user_function:2.")
    );
    assert_eq!(b.cmd(&["PING"]), simple("PONG"));
}

/// FUNCTION STATS is answered while a function is busy (it shows the
/// running function), refused while an EVAL is: a runaway function can be
/// inspected, then killed.
#[test]
fn function_stats_while_a_function_is_busy() {
    let s = Server::start(&[("busy-reply-threshold", "100")]);
    let mut a = s.raw();
    let lib = "#!lua name=spin\nredis.register_function('spin', function() while true do end end)";
    assert_eq!(a.cmd(&["FUNCTION", "LOAD", lib]), bulk("spin"));
    a.send_cmd(&["FCALL", "Spin", "0"]);
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut b = s.raw();
    while b.cmd(&["PING"]) == simple("PONG") {
        assert!(Instant::now() < deadline, "the function never got busy");
        thread::sleep(Duration::from_millis(20));
    }
    let Frame::Array(stats) = b.cmd(&["FUNCTION", "STATS"]) else {
        panic!("FUNCTION STATS while busy is not an array");
    };
    assert_eq!(stats[0], bulk("running_script"));
    let Frame::Array(run) = &stats[1] else {
        panic!("no running script: {stats:?}");
    };
    assert_eq!(
        run[..5],
        [
            bulk("name"),
            bulk("spin"),
            bulk("command"),
            arr(vec![bulk("FCALL"), bulk("Spin"), bulk("0")]),
            bulk("duration_ms"),
        ]
    );
    assert!(matches!(run[5], Frame::Integer(ms) if ms >= 100));
    assert_eq!(
        stats[2..],
        [
            bulk("engines"),
            arr(vec![
                bulk("LUA"),
                arr(vec![
                    bulk("libraries_count"),
                    int(1),
                    bulk("functions_count"),
                    int(1)
                ])
            ])
        ]
    );
    assert_eq!(b.cmd(&["FUNCTION", "KILL"]), ok());
    assert!(matches!(a.read(), Frame::Error(_)));
    // During an EVAL it is refused, as in Redis.
    a.send_cmd(&["EVAL", "while true do end", "0"]);
    let mut b = wait_busy(&s);
    assert_eq!(b.cmd(&["FUNCTION", "STATS"]), err(BUSY));
    assert_eq!(b.cmd(&["SCRIPT", "KILL"]), ok());
    assert!(matches!(a.read(), Frame::Error(_)));
    assert_eq!(b.cmd(&["PING"]), simple("PONG"));
}

/// The commands Redis allows while a script is busy (HELLO, WATCH, MULTI,
/// ...) run before it ends, so a script can see their effect; a client
/// its writes unblocked is still served only after it.
#[test]
fn commands_allowed_while_busy_run_while_the_script_waits() {
    let s = Server::start(&[
        ("busy-reply-threshold", "100"),
        ("enable-debug-command", "yes"),
    ]);
    let mut a = s.raw();
    let mut popper = s.raw();
    let mut other = s.raw();
    // Connected before: a connection accepted while busy has no client
    // record until the script ends, and is answered -BUSY meanwhile.
    let mut b = s.raw();
    assert_eq!(a.cmd(&["DEBUG", "SET-DISABLE-DENY-SCRIPTS", "1"]), ok());
    popper.send_cmd(&["BLPOP", "x", "0"]);
    thread::sleep(Duration::from_millis(100));
    a.send_cmd(&[
        "EVAL",
        "redis.call('lpush', KEYS[1], 'y')
         while not string.find(redis.call('client', 'list'), 'abortscript') do end
         redis.call('lpush', KEYS[1], 'z')
         return 'done'",
        "1",
        "x",
    ]);
    let deadline = Instant::now() + Duration::from_secs(10);
    while b.cmd(&["PING"]) == simple("PONG") {
        assert!(Instant::now() < deadline, "the script never got busy");
        thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(b.cmd(&["MULTI"]), ok());
    assert_eq!(b.cmd(&["GET", "x"]), err(BUSY));
    assert_eq!(
        b.cmd(&["WATCH", "x"]),
        err("ERR WATCH inside MULTI is not allowed")
    );
    assert_eq!(b.cmd(&["DISCARD"]), ok());
    // SHUTDOWN waits for the script unless NOSAVE; ABORT runs.
    assert_eq!(b.cmd(&["SHUTDOWN"]), err(BUSY));
    assert_eq!(b.cmd(&["SHUTDOWN", "SAVE"]), err(BUSY));
    assert_eq!(
        b.cmd(&["SHUTDOWN", "ABORT"]),
        err("ERR No shutdown in progress.")
    );
    assert_eq!(b.cmd(&["RESET"]), simple("RESET"));
    let Frame::Array(hello) = other.cmd(&["HELLO", "2", "SETNAME", "abortscript"]) else {
        panic!("HELLO while busy did not answer");
    };
    assert_eq!(hello[..2], [bulk("server"), bulk("redis")]);
    assert_eq!(a.read(), bulk("done"));
    assert_eq!(popper.read(), arr(vec![bulk("x"), bulk("z")]));
    assert_eq!(other.cmd(&["CLIENT", "GETNAME"]), bulk("abortscript"));
}

/// Functions on a replica that lost its master with
/// `replica-serve-stale-data no`: only those flagged `allow-stale` run,
/// and they may call only the commands flagged `stale`.
#[test]
fn functions_on_a_stale_replica() {
    let s = Server::start(&[]);
    let mut c = s.raw();
    let lib = "#!lua name=stale
        redis.register_function{function_name='f1', callback=function() return 'hello' end, flags={'no-writes'}}
        redis.register_function{function_name='f2', callback=function() return 'hello' end, flags={'allow-stale', 'no-writes'}}
        redis.register_function{function_name='f3', callback=function() return redis.call('get', 'x') end, flags={'allow-stale', 'no-writes'}}
        redis.register_function{function_name='f4', callback=function() return redis.call('info', 'server') end, flags={'allow-stale', 'no-writes'}}";
    assert_eq!(c.cmd(&["FUNCTION", "LOAD", lib]), bulk("stale"));
    assert_eq!(
        c.cmd(&["CONFIG", "SET", "replica-serve-stale-data", "no"]),
        ok()
    );
    assert_eq!(c.cmd(&["REPLICAOF", "127.0.0.1", "1"]), ok());
    let masterdown =
        err("MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'.");
    assert_eq!(c.cmd(&["FCALL", "f1", "0"]), masterdown);
    assert_eq!(c.cmd(&["FCALL", "f2", "0"]), bulk("hello"));
    assert_eq!(
        c.cmd(&["FCALL", "f3", "0"]),
        err("ERR Can not execute the command on a stale replica script: f3, on @user_function:4.")
    );
    assert!(text(&c.cmd(&["FCALL", "f4", "0"])).contains("redis_version"));
    // EVAL: a script without a shebang never runs stale.
    assert_eq!(c.cmd(&["EVAL", "return 1", "0"]), masterdown);
    assert_eq!(
        c.cmd(&["EVAL", "#!lua flags=no-writes,allow-stale\nreturn 1", "0"]),
        int(1)
    );
    assert_eq!(c.cmd(&["REPLICAOF", "NO", "ONE"]), ok());
    assert_eq!(c.cmd(&["FCALL", "f1", "0"]), bulk("hello"));
}

#[test]
fn script_that_wrote_is_unkillable_and_shutdown_nosave_exits() {
    let mut s = Server::start(&[("busy-reply-threshold", "200")]);
    let mut a = s.raw();
    a.send_cmd(&["EVAL", "redis.call('set','w','1') while true do end", "0"]);
    let mut b = wait_busy(&s);
    assert_eq!(
        b.cmd(&["SCRIPT", "KILL"]),
        err("UNKILLABLE Sorry the script already executed write commands against the dataset. You can either wait the script termination or kill the server in a hard way using the SHUTDOWN NOSAVE command.")
    );
    b.send_cmd(&["SHUTDOWN", "NOSAVE"]);
    let deadline = Instant::now() + Duration::from_secs(10);
    while s.alive() {
        assert!(Instant::now() < deadline, "server still running");
        thread::sleep(Duration::from_millis(20));
    }
}

fn need_cjson(c: &mut RawClient) {
    assert_eq!(
        c.cmd(&["EVAL", "return type(cjson)", "0"]),
        bulk("table"),
        "cjson is missing from the Lua globals (it comes with scripting/src/libs)"
    );
}

/// Seed 003: `redis-cli -a 123456 --eval RedBagBatchGrab.lua keys , arg`.
/// The article's script reads the undefined global `customerId`; Redis
/// 7.0.15 answers every call with this error (recorded from it).
#[test]
fn seed003_redis_cli_eval() {
    let s = Server::start(&[("requirepass", "123456")]);
    let dir = &s.dir;
    let script = "--抢红包雨lua脚本\nlocal REDBAG_LIMIT_KEY = KEYS[1]\nlocal REDBAG_INFO_KEY = KEYS[2]\nlocal REDBAG_USER_KEY = KEYS[3]\n\nlocal userId = ARGV[1]\n\n-- 抢了超过3个，返回没抢到\nlocal grabCount = redis.call('hincrby', REDBAG_LIMIT_KEY, customerId, 1)\nif(grabCount > 3) then\n    return \"-1\"\nend\n\n-- pop一个红包数据\nlocal amount = redis.call('lpop', REDBAG_INFO_KEY)\n\n-- 没抢到返回0\nif(amount == nil) then\n    return \"-2\"\nend\n\n-- 放入结果Set\nredis.call('zadd', REDBAG_USER_KEY, amount, userId..\"-\"..grabCount);\n\nreturn amount\n";
    let orig = dir.join("RedBagBatchGrab.lua");
    std::fs::write(&orig, script).unwrap();
    let fixed = dir.join("fixed.lua");
    std::fs::write(&fixed, script.replace("customerId", "userId")).unwrap();
    let keys = [
        "RedBagBatch:7758521:Limit",
        "RedBagBatch:7758521",
        "RedBagBatch:7758521:Users",
    ];
    let eval = |file: &std::path::Path, user: &str| {
        let f = file.to_string_lossy().into_owned();
        let mut args = vec!["-a", "123456", "--no-auth-warning", "--eval", &f];
        args.extend(keys);
        args.extend([",", user]);
        s.cli_out(&args)
    };
    assert_eq!(
        eval(&orig, "u1"),
        "ERR user_script:9: Script attempted to access nonexistent global variable 'customerId' script: 5716f4160581f69e856e4d218e4fcdb3481a3b24, on @user_script:9."
    );
    // With the variable fixed, the article's transcript (needs lists and
    // hashes): at most 3 grabs per user, amounts popped in order.
    let push = s.cli_out(&[
        "-a",
        "123456",
        "--no-auth-warning",
        "lpush",
        "RedBagBatch:7758521",
        "1",
        "3",
        "10",
        "6",
        "8",
        "7",
        "2",
        "5",
        "4",
        "9",
    ]);
    assert_eq!(push, "10", "LPUSH (list commands) is needed for the rest");
    let got: Vec<String> = [
        "u1", "u2", "u3", "u4", "u5", "u1", "u2", "u1", "u1", "u2", "u2", "u3",
    ]
    .iter()
    .map(|u| eval(&fixed, u))
    .collect();
    assert_eq!(
        got,
        ["9", "4", "5", "2", "7", "8", "6", "10", "-1", "3", "-1", "1"]
    );
}

const SEED001: &str = "if redis.call('hexists', KEYS[3], KEYS[4]) ~= 0 then\nreturn '1';\nelse\nlocal hb = redis.call('rpop', KEYS[1]);\nif hb then\nlocal x = cjson.decode(hb);\nx['userId'] = KEYS[4];\nlocal re = cjson.encode(x);\nredis.call('hset', KEYS[3], KEYS[4], '1');\nredis.call('lpush', KEYS[2], re);\nreturn re;\nelse\nreturn '0';end\nend\nreturn nil";

/// Seed 001: 5 envelopes, 100 users grabbing at once (a barrier, one
/// connection each): exactly 5 winners, 95 "0", a repeat user gets "1".
#[test]
fn seed001_hundred_users_five_envelopes() {
    let s = Server::start(&[("requirepass", "123456")]);
    let mut c = s.raw_auth();
    need_cjson(&mut c);
    for i in 0..5 {
        let v = format!("{{\"hbId\":{i},\"amount\":{}}}", 100 + i);
        assert_eq!(c.cmd(&["LPUSH", "hb:pool:111111", &v]), int(i + 1));
    }
    let port = s.port;
    let barrier = Arc::new(Barrier::new(100));
    let handles: Vec<_> = (0..100)
        .map(|i| {
            let barrier = barrier.clone();
            thread::spawn(move || {
                let mut c = RawClient::connect(port);
                assert_eq!(c.cmd(&["AUTH", "123456"]), ok());
                let user = format!("10789943979593441{i:02}");
                barrier.wait();
                let r = c.cmd(&[
                    "EVAL",
                    SEED001,
                    "4",
                    "hb:pool:111111",
                    "hb:detailList:111111",
                    "hb:rd:111111",
                    &user,
                ]);
                (user, r)
            })
        })
        .collect();
    let mut winners = Vec::new();
    let mut empty = 0;
    for h in handles {
        let (user, r) = h.join().unwrap();
        match r {
            Frame::Bulk(b) if &b[..] == b"0" => empty += 1,
            Frame::Bulk(b) => {
                let s = String::from_utf8_lossy(&b).into_owned();
                assert!(s.contains(&format!("\"userId\":\"{user}\"")), "{s}");
                winners.push(user);
            }
            f => panic!("{f:?}"),
        }
    }
    assert_eq!(winners.len(), 5);
    assert_eq!(empty, 95);
    assert_eq!(c.cmd(&["LLEN", "hb:detailList:111111"]), int(5));
    assert_eq!(c.cmd(&["EXISTS", "hb:pool:111111"]), int(0));
    let again = c.cmd(&[
        "EVAL",
        SEED001,
        "4",
        "hb:pool:111111",
        "hb:detailList:111111",
        "hb:rd:111111",
        &winners[0],
    ]);
    assert_eq!(again, bulk("1"));
}

const SEED004: &str = "if redis.call('hexists', KEYS[3], KEYS[4]) ~= 0 then\nreturn nil\nelse\nlocal hongBao = redis.call('rpop', KEYS[1]);\nif hongBao then\nlocal x = cjson.decode(hongBao);\nx['userId'] = KEYS[4];\nlocal re = cjson.encode(x);\nredis.call('hset', KEYS[3], KEYS[4], KEYS[4]);\nredis.call('lpush', KEYS[2], re);\nreturn re;\nend\nend\nreturn nil";

/// Seed 004 (and 000's TestEval): 20 clients grab from a pool with EVAL
/// until it is empty; consumed + remaining = total and no user wins twice.
/// The article uses 100,000 envelopes; 4,000 keep a debug build fast.
#[test]
fn seed004_twenty_clients_drain_pool() {
    const TOTAL: usize = 4_000;
    const THREADS: usize = 20;
    let s = Server::start(&[]);
    let mut c = s.raw();
    need_cjson(&mut c);
    for chunk in (0..TOTAL).collect::<Vec<_>>().chunks(500) {
        let mut args = vec!["LPUSH".to_string(), "hongBaoList".into()];
        args.extend(
            chunk
                .iter()
                .map(|j| format!("{{\"id\":{j},\"money\":{j}}}")),
        );
        assert!(matches!(c.cmd(&args), Frame::Integer(_)));
    }
    let port = s.port;
    let handles: Vec<_> = (0..THREADS)
        .map(|t| {
            thread::spawn(move || {
                let mut c = RawClient::connect(port);
                let sha = match c.cmd(&["SCRIPT", "LOAD", SEED004]) {
                    Frame::Bulk(b) => String::from_utf8_lossy(&b).into_owned(),
                    f => panic!("{f:?}"),
                };
                let mut j = TOTAL / THREADS * t;
                let mut got = 0usize;
                loop {
                    let r = c.cmd(&[
                        "EVALSHA",
                        &sha,
                        "4",
                        "hongBaoList",
                        "hongBaoConsumedList",
                        "hongBaoConsumedMap",
                        &j.to_string(),
                    ]);
                    j += 1;
                    match r {
                        Frame::Bulk(_) => got += 1,
                        Frame::Null => {
                            if c.cmd(&["LLEN", "hongBaoList"]) == int(0) {
                                break;
                            }
                        }
                        f => panic!("{f:?}"),
                    }
                }
                got
            })
        })
        .collect();
    let won: usize = handles.into_iter().map(|h| h.join().unwrap()).sum();
    assert_eq!(won, TOTAL);
    assert_eq!(c.cmd(&["LLEN", "hongBaoList"]), int(0));
    assert_eq!(c.cmd(&["LLEN", "hongBaoConsumedList"]), int(TOTAL as i64));
    assert_eq!(c.cmd(&["HLEN", "hongBaoConsumedMap"]), int(TOTAL as i64));
    let all = match c.cmd(&["LRANGE", "hongBaoConsumedList", "0", "-1"]) {
        Frame::Array(v) => v,
        f => panic!("{f:?}"),
    };
    let mut users = HashSet::new();
    let mut ids = HashSet::new();
    for f in all {
        let Frame::Bulk(b) = f else { panic!() };
        let s = String::from_utf8_lossy(&b).into_owned();
        let user = s
            .split("\"userId\":\"")
            .nth(1)
            .and_then(|r| r.split('"').next());
        assert!(users.insert(user.expect("userId").to_string()), "{s}");
        let id = s
            .split("\"id\":")
            .nth(1)
            .and_then(|r| r.split([',', '}']).next());
        assert!(ids.insert(id.expect("id").to_string()), "{s}");
    }
}

/// INFO text of a section, as lines.
fn info_lines(c: &mut RawClient, section: &str) -> Vec<String> {
    match c.cmd(&["INFO", section]) {
        Frame::Bulk(b) => String::from_utf8_lossy(&b)
            .lines()
            .map(str::to_string)
            .collect(),
        f => panic!("INFO {section}: {f:?}"),
    }
}

/// Error accounting of scripts, recorded from Redis 7.0.15: a command's
/// error counts once where it arose (also when a script passes it on or
/// returns pcall's table), an error the script makes counts on its own, a
/// script whose reply holds an error is a failed call, and a command the
/// script may not run is a rejected call of that command.
#[test]
fn script_errors_in_errorstats_and_commandstats_as_redis() {
    let cases = [
        (
            "return redis.call('incr','s')",
            "errorstat_ERR:count=1",
            "cmdstat_eval 1 0 1,cmdstat_incr 1 0 1,cmdstat_info 1 0 0",
        ),
        (
            "return redis.pcall('incr','s')",
            "errorstat_ERR:count=1",
            "cmdstat_eval 1 0 1,cmdstat_incr 1 0 1,cmdstat_info 1 0 0",
        ),
        (
            "redis.pcall('lpush','s','a') return 1",
            "errorstat_WRONGTYPE:count=1",
            "cmdstat_eval 1 0 0,cmdstat_info 1 0 0,cmdstat_lpush 1 0 1",
        ),
        (
            "return {err='MY custom'}",
            "errorstat_MY:count=1",
            "cmdstat_eval 1 0 1,cmdstat_info 1 0 0",
        ),
        (
            "error('x')",
            "errorstat_ERR:count=1",
            "cmdstat_eval 1 0 1,cmdstat_info 1 0 0",
        ),
        (
            "return redis.call('incr')",
            "errorstat_ERR:count=1",
            "cmdstat_eval 1 0 1,cmdstat_incr 0 1 0,cmdstat_info 1 0 0",
        ),
        (
            "redis.pcall('nocmd') return 1",
            "errorstat_ERR:count=1",
            "cmdstat_eval 1 0 0,cmdstat_info 1 0 0",
        ),
        (
            "return {1, redis.pcall('incr','s')}",
            "errorstat_ERR:count=1",
            "cmdstat_eval 1 0 1,cmdstat_incr 1 0 1,cmdstat_info 1 0 0",
        ),
        (
            "return {1, {err='NESTED x'}}",
            "errorstat_NESTED:count=1",
            "cmdstat_eval 1 0 1,cmdstat_info 1 0 0",
        ),
        (
            "redis.pcall('multi') return 1",
            "errorstat_ERR:count=1",
            "cmdstat_eval 1 0 0,cmdstat_info 1 0 0,cmdstat_multi 0 1 0",
        ),
    ];
    let s = Server::start(&[]);
    let mut c = s.raw();
    c.cmd(&["SET", "s", "abc"]);
    for (script, errors, cmds) in cases {
        c.cmd(&["CONFIG", "RESETSTAT"]);
        c.cmd(&["EVAL", script, "0"]);
        let errs: Vec<String> = info_lines(&mut c, "errorstats")
            .into_iter()
            .filter(|l| l.starts_with("errorstat_"))
            .collect();
        // name calls rejected failed, as in the table above.
        let stats: Vec<String> = info_lines(&mut c, "commandstats")
            .into_iter()
            .filter(|l| l.starts_with("cmdstat_") && !l.contains("resetstat"))
            .map(|l| {
                let (name, rest) = l.split_once(':').unwrap();
                let field = |k: &str| {
                    rest.split(',')
                        .find_map(|f| f.strip_prefix(k))
                        .unwrap()
                        .to_string()
                };
                let (calls, rej, failed) = (
                    field("calls="),
                    field("rejected_calls="),
                    field("failed_calls="),
                );
                format!("{name} {calls} {rej} {failed}")
            })
            .collect();
        assert_eq!(errs.join(" "), errors, "{script}");
        assert_eq!(stats.join(","), cmds, "{script}");
    }
}
