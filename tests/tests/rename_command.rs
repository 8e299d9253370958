//! `rename-command` as Redis 7.0.15 has it (config file and command line
//! only): clients, MULTI and scripts call a command by its new name only,
//! a command renamed to "" is gone; COMMAND LIST, ACL and CLIENT LIST keep
//! the name Redis knows it by; CONFIG REWRITE keeps the lines. Replies and
//! start-up errors recorded from redis-server 7.0.15.

use cinnabar_tests::*;

/// `--rename-command old` then `new`: redis-server reads that as the line
/// `rename-command old "new"` (the harness passes one word per option).
fn renamed(extra: &[(&str, &str)]) -> Server {
    let mut opts = vec![
        ("rename-command flushdb", "badger"),
        ("rename-command get", ""),
    ];
    opts.extend_from_slice(extra);
    Server::start(&opts)
}

fn names(f: &RespFrame) -> Vec<String> {
    match f {
        RespFrame::Array(v) => v.iter().map(text).collect(),
        f => panic!("{f:?}"),
    }
}

#[test]
fn clients_call_the_new_name() {
    let s = renamed(&[]);
    let mut c = s.raw();
    assert_eq!(
        c.cmd(&["FLUSHDB"]),
        err("ERR unknown command 'FLUSHDB', with args beginning with: ")
    );
    assert_eq!(
        c.cmd(&["get", "x"]),
        err("ERR unknown command 'get', with args beginning with: 'x' ")
    );
    assert_eq!(c.cmd(&["SET", "x", "1"]), ok());
    assert_eq!(c.cmd(&["BaDgEr"]), ok());
    assert_eq!(c.cmd(&["DBSIZE"]), int(0));

    // MULTI queues by the new name.
    assert_eq!(c.cmd(&["MULTI"]), ok());
    assert_eq!(c.cmd(&["badger"]), simple("QUEUED"));
    assert_eq!(c.cmd(&["EXEC"]), RespFrame::Array(vec![ok()]));
    assert_eq!(c.cmd(&["MULTI"]), ok());
    assert_eq!(
        c.cmd(&["flushdb"]),
        err("ERR unknown command 'flushdb', with args beginning with: ")
    );
    assert_eq!(
        c.cmd(&["EXEC"]),
        err("EXECABORT Transaction discarded because of previous errors.")
    );

    // So do scripts.
    assert_eq!(c.cmd(&["EVAL", "return redis.call('badger')", "0"]), ok());
    assert_eq!(
        c.cmd(&["EVAL", "return redis.pcall('flushdb')", "0"]),
        err("ERR Unknown Redis command called from script")
    );
}

#[test]
fn command_introspection() {
    let plain = Server::start(&[]);
    let s = renamed(&[]);
    let mut c = s.raw();
    // INFO, DOCS and GETKEYS take the new name and show the old one.
    match c.cmd(&["COMMAND", "INFO", "badger", "flushdb", "get"]) {
        RespFrame::Array(v) => {
            assert_eq!(v.len(), 3);
            match &v[0] {
                RespFrame::Array(info) => assert_eq!(info[0], bulk("flushdb")),
                f => panic!("{f:?}"),
            }
            assert_eq!(v[1..], [nil(), nil()]);
        }
        f => panic!("{f:?}"),
    }
    match c.cmd(&["COMMAND", "DOCS", "flushdb", "badger"]) {
        RespFrame::Array(v) => assert_eq!(v[0], bulk("flushdb")),
        f => panic!("{f:?}"),
    }
    assert_eq!(
        c.cmd(&["COMMAND", "GETKEYS", "flushdb", "x"]),
        err("ERR Invalid command specified")
    );
    assert_eq!(
        c.cmd(&["COMMAND", "GETKEYS", "badger", "x"]),
        err("ERR The command has no key arguments")
    );
    // LIST and COUNT: the removed command is gone, the renamed one is
    // listed by its old name.
    let count = |c: &mut RawClient| match c.cmd(&["COMMAND", "COUNT"]) {
        RespFrame::Integer(n) => n,
        f => panic!("{f:?}"),
    };
    assert_eq!(count(&mut c), count(&mut plain.raw()) - 1);
    let list = names(&c.cmd(&["COMMAND", "LIST"]));
    assert!(list.iter().any(|n| n == "flushdb"));
    assert!(!list.iter().any(|n| n == "badger" || n == "get"));
    assert_eq!(
        names(&plain.raw().cmd(&["COMMAND", "LIST"])).len(),
        list.len() + 1
    );
    assert_eq!(
        names(&c.cmd(&["COMMAND", "LIST", "FILTERBY", "PATTERN", "flush*"])),
        ["flushall", "flushdb"]
    );
    match c.cmd(&["COMMAND"]) {
        RespFrame::Array(v) => assert_eq!(v.len(), list.len() - sub_count(&list)),
        f => panic!("{f:?}"),
    }
    let stats = text(&c.cmd(&["INFO", "commandstats"]));
    assert!(!stats.contains("cmdstat_flushdb"), "{stats}");
    assert_eq!(c.cmd(&["BADGER"]), ok());
    let stats = text(&c.cmd(&["INFO", "commandstats"]));
    assert!(stats.contains("cmdstat_flushdb:calls=1,"), "{stats}");
}

fn sub_count(list: &[String]) -> usize {
    list.iter().filter(|n| n.contains('|')).count()
}

/// ACL rules and what ACL reports name commands as Redis knows them;
/// DRYRUN takes a command line as a client sends it.
#[test]
fn acl_keeps_the_old_names() {
    let s = renamed(&[]);
    let mut c = s.raw();
    assert_eq!(
        c.cmd(&["ACL", "SETUSER", "u1", "on", "nopass", "+flushdb", "+get"]),
        ok()
    );
    assert_eq!(
        c.cmd(&["ACL", "SETUSER", "u2", "on", "nopass", "+badger"]),
        err("ERR Error in ACL SETUSER modifier '+badger': Unknown command or category name in ACL")
    );
    assert_eq!(
        c.cmd(&["ACL", "SETUSER", "u3", "on", "nopass", "+ping"]),
        ok()
    );
    assert_eq!(c.cmd(&["ACL", "DRYRUN", "u1", "badger"]), ok());
    assert_eq!(
        c.cmd(&["ACL", "DRYRUN", "u1", "flushdb"]),
        err("ERR Command 'flushdb' not found")
    );
    assert_eq!(
        c.cmd(&["ACL", "DRYRUN", "u3", "badger"]),
        bulk("This user has no permissions to run the 'flushdb' command")
    );
    assert!(names(&c.cmd(&["ACL", "CAT", "string"])).contains(&"get".to_string()));
    let mut u = s.raw();
    let id = text(&u.cmd(&["CLIENT", "ID"]));
    assert_eq!(u.cmd(&["AUTH", "u3", "x"]), ok());
    assert_eq!(
        u.cmd(&["badger"]),
        err("NOPERM this user has no permissions to run the 'flushdb' command")
    );
    assert_eq!(u.cmd(&["AUTH", "u1", "x"]), ok());
    assert_eq!(u.cmd(&["badger"]), ok());
    let line = text(&c.cmd(&["CLIENT", "LIST", "ID", &id]));
    assert!(line.contains(" cmd=flushdb "), "{line}");
}

/// Renames apply in order; the errors are Redis's start-up errors.
#[test]
fn start_up_errors() {
    // The arguments start at line 4 of what redis-server reads.
    for (args, line, why) in [
        (
            vec!["--rename-command", "nosuch", "foo"],
            "4\n>>> 'rename-command \"nosuch\" \"foo\"'",
            "No such command in rename-command",
        ),
        (
            vec!["--rename-command", "flushdb", "GET"],
            "4\n>>> 'rename-command \"flushdb\" \"GET\"'",
            "Target command name already exists",
        ),
        (
            vec!["--rename-command", "flushdb"],
            "4\n>>> 'rename-command \"flushdb\"'",
            "Bad directive or wrong number of arguments",
        ),
        (
            vec![
                "--rename-command",
                "flushdb",
                "",
                "--rename-command",
                "flushdb",
                "x",
            ],
            "5\n>>> 'rename-command \"flushdb\" \"x\"'",
            "No such command in rename-command",
        ),
    ] {
        let out = std::process::Command::new(server_bin())
            .args(["--port", &free_port().to_string(), "--save", ""])
            .args(&args)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        let text = String::from_utf8_lossy(&out.stderr).into_owned()
            + &String::from_utf8_lossy(&out.stdout);
        assert!(
            text.contains(&format!(
                "*** FATAL CONFIG FILE ERROR (Redis 7.0.15) ***\nReading the configuration file, at line {line}\n{why}\n"
            )),
            "{args:?}: {text}"
        );
    }
    // A chain of renames, and a name too long for the usual lookup.
    let long = "x".repeat(40);
    let s = Server::start(&[
        ("rename-command flushdb", "badger"),
        ("rename-command badger", "FlushDB"),
        ("rename-command set", &long),
    ]);
    let mut c = s.raw();
    assert_eq!(c.cmd(&["FLUSHDB"]), ok());
    assert_eq!(c.cmd(&[long.to_uppercase().as_str(), "k", "v"]), ok());
    assert_eq!(
        c.cmd(&["badger"]),
        err("ERR unknown command 'badger', with args beginning with: ")
    );
}

/// CONFIG REWRITE keeps the file's `rename-command` lines, so the server
/// restarted from the file has the same names.
#[test]
fn config_rewrite_keeps_the_renames() {
    let dir = TempDir::new("rename");
    let port = free_port();
    let conf = dir.path().join("redis.conf");
    std::fs::write(
        &conf,
        format!(
            "port {port}\nbind 127.0.0.1\nsave \"\"\ndir {}\nrename-command flushdb badger\n",
            dir.dir()
        ),
    )
    .unwrap();
    for round in 0..2 {
        let mut child = std::process::Command::new(server_bin())
            .arg(&conf)
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap();
        wait_for("the server to listen", || {
            RawClient::try_connect(port).is_ok()
        });
        let mut c = RawClient::connect(port);
        assert_eq!(
            c.cmd(&["FLUSHDB"]),
            err("ERR unknown command 'FLUSHDB', with args beginning with: ")
        );
        assert_eq!(c.cmd(&["BADGER"]), ok(), "round {round}");
        assert_eq!(c.cmd(&["CONFIG", "REWRITE"]), ok());
        c.send_cmd(&["SHUTDOWN", "NOSAVE"]);
        c.expect_closed();
        child.wait().unwrap();
    }
    let text = std::fs::read_to_string(&conf).unwrap();
    assert_eq!(
        text.matches("rename-command flushdb badger\n").count(),
        1,
        "{text}"
    );
}
