//! ACL users that golden files cannot show: the aclfile (ACL LOAD/SAVE),
//! users changed or deleted while their clients are connected, and
//! permission checks across connections. Replies taken from Redis 7.0.15.

use cinnabar_tests::*;

#[test]
fn aclfile_load_and_save() {
    let dir = TempDir::new("aclfile");
    let file = dir.path().join("users.acl");
    std::fs::write(&file, "user alice on >pa ~* +@all\nuser bob off\n").unwrap();
    let path = file.to_str().unwrap();
    let s = Server::start(&[("aclfile", path)]);
    let mut c = s.raw();
    assert_eq!(
        c.cmd(&["ACL", "LIST"]),
        RespFrame::Array(vec![
            bulk("user alice on #9513229d435978263d82902c59d4e0fb86c941a9bf09b605cd8a6643f40149a8 ~* resetchannels +@all"),
            bulk("user bob off resetchannels -@all"),
            bulk("user default on nopass ~* &* +@all"),
        ])
    );
    assert_eq!(
        c.cmd(&["ACL", "SETUSER", "carol", "on", ">c", "~c*", "+get"]),
        ok()
    );
    assert_eq!(c.cmd(&["ACL", "SAVE"]), ok());
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        "user alice on #9513229d435978263d82902c59d4e0fb86c941a9bf09b605cd8a6643f40149a8 ~* resetchannels +@all\n\
         user bob off resetchannels -@all\n\
         user carol on #2e7d2c03a9507ae265ecf5b5356885a53393a2029d241394997265a1a25aefc6 ~c* resetchannels -@all +get\n\
         user default on nopass ~* &* +@all\n"
    );
    let mut alice = s.raw();
    assert_eq!(alice.cmd(&["AUTH", "alice", "pa"]), ok());
    std::fs::write(&file, "user alice on >pa ~* +@all\nuser bob foo\n").unwrap();
    assert_eq!(
        c.cmd(&["ACL", "LOAD"]),
        err(&format!("ERR {path}:2: Syntax error. WARNING: ACL errors detected, no change to the previously active ACL rules was performed"))
    );
    std::fs::write(&file, "user alice on\nuser alice off\n").unwrap();
    assert_eq!(
        c.cmd(&["ACL", "LOAD"]),
        err("ERR WARNING: Duplicate user 'alice' found on line 2. WARNING: ACL errors detected, no change to the previously active ACL rules was performed")
    );
    std::fs::write(&file, "foo alice on\n").unwrap();
    assert_eq!(
        c.cmd(&["ACL", "LOAD"]),
        err(&format!("ERR {path}:1 should start with user keyword followed by the username. WARNING: ACL errors detected, no change to the previously active ACL rules was performed"))
    );
    assert_eq!(alice.cmd(&["ACL", "WHOAMI"]), bulk("alice"));
    // A successful load disconnects the other users' clients, not default's.
    std::fs::write(&file, "user alice on >pb ~* +@all\n").unwrap();
    assert_eq!(c.cmd(&["ACL", "LOAD"]), ok());
    assert!(alice.try_read().is_err() || alice.cmd(&["PING"]) != simple("PONG"));
    assert_eq!(c.cmd(&["ACL", "WHOAMI"]), bulk("default"));
    assert_eq!(
        c.cmd(&["ACL", "USERS"]),
        RespFrame::Array(vec![bulk("alice"), bulk("default")])
    );
}

#[test]
fn without_aclfile_load_and_save_are_refused() {
    let s = Server::start(&[]);
    let mut c = s.raw();
    let e = err("ERR This Redis instance is not configured to use an ACL file. You may want to specify users via the ACL SETUSER command and then issue a CONFIG REWRITE (assuming you have a Redis configuration file set) in order to store users in the Redis configuration.");
    assert_eq!(c.cmd(&["ACL", "LOAD"]), e);
    assert_eq!(c.cmd(&["ACL", "SAVE"]), e);
}

#[test]
fn changed_and_deleted_users_take_effect_at_once() {
    let s = Server::start(&[]);
    let mut admin = s.raw();
    assert_eq!(
        admin.cmd(&["ACL", "SETUSER", "m1", "on", "nopass", "~*", "+@all"]),
        ok()
    );
    let mut m1 = s.raw();
    assert_eq!(m1.cmd(&["AUTH", "m1", "x"]), ok());
    m1.send(b"MULTI\r\nGET k\r\nSET k v\r\nPING\r\n");
    for _ in 0..4 {
        m1.read();
    }
    assert_eq!(
        admin.cmd(&["ACL", "SETUSER", "m1", "-get", "resetkeys", "~k*"]),
        ok()
    );
    assert_eq!(
        m1.cmd(&["EXEC"]),
        RespFrame::Array(vec![
            err("NOPERM ACLs rules changed between the moment the transaction was accumulated and the EXEC call. This command is no longer allowed for the following reason: no permission to execute the command or subcommand"),
            ok(),
            simple("PONG"),
        ])
    );
    assert_eq!(
        m1.cmd(&["SET", "z", "v"]),
        err("NOPERM this user has no permissions to access one of the keys used as arguments")
    );
    assert_eq!(
        admin.cmd(&["CLIENT", "KILL", "USER", "nouser"]),
        err("ERR No such user 'nouser'")
    );
    assert_eq!(admin.cmd(&["ACL", "DELUSER", "m1"]), int(1));
    assert!(m1.try_read().is_err());
}

#[test]
fn requirepass_is_the_default_users_password() {
    let s = Server::start(&[("requirepass", "secret")]);
    let mut c = s.raw();
    assert_eq!(c.cmd(&["AUTH", "secret"]), ok());
    assert_eq!(
        c.cmd(&["ACL", "LIST"]),
        RespFrame::Array(vec![bulk("user default on #2bb80d537b1da3e38bd30361aa855686bde0eacd7162fef6a25fe97bf527a25b ~* &* +@all")])
    );
    assert_eq!(c.cmd(&["CONFIG", "SET", "requirepass", ""]), ok());
    assert_eq!(
        c.cmd(&["ACL", "LIST"]),
        RespFrame::Array(vec![bulk("user default on nopass ~* &* +@all")])
    );
}
