//! The process title (`proc-title-template`) as Linux shows it: the exact
//! bytes of /proc/<pid>/cmdline, at start-up and after CONFIG SET.

use cinnabar_tests::{free_port, ok, server_bin, RawClient, Server};

/// cmdline's bytes while the title is `title`: the original argument area
/// NUL-padded, or the title and its NUL when it outgrew that area; a title
/// shorter than argv[0] leaves a '.' where argv[0] ended. At most 255 bytes
/// of the title show.
fn expected(start_port: u16, title: &str) -> Vec<u8> {
    let argv0 = server_bin().display().to_string();
    let args = ["--port", &start_port.to_string(), "--bind", "127.0.0.1"];
    let area =
        argv0.len() + 1 + args.iter().map(|a| a.len() + 1).sum::<usize>() + "--save\0\0".len();
    let mut v = title.as_bytes()[..title.len().min(255)].to_vec();
    if v.len() < area {
        v.resize(area, 0);
        if title.len() < argv0.len() {
            v[argv0.len()] = b'.';
        }
    } else {
        v.push(0);
    }
    v
}

fn cmdline(s: &Server) -> Vec<u8> {
    std::fs::read(format!("/proc/{}/cmdline", s.pid())).expect("read cmdline")
}

fn shown(b: &[u8]) -> String {
    String::from_utf8_lossy(b).replace('\0', "|")
}

fn assert_title(s: &Server, title: &str) {
    let (got, want) = (cmdline(s), expected(s.port, title));
    assert_eq!(shown(&got), shown(&want));
}

fn set_template(c: &mut RawClient, t: &str) {
    assert_eq!(c.cmd(&["CONFIG", "SET", "proc-title-template", t]), ok());
}

#[test]
fn default_title_is_argv0_and_listen_address() {
    let s = Server::start(&[]);
    let bin = server_bin().display().to_string();
    assert_title(&s, &format!("{bin} 127.0.0.1:{}", s.port));
}

#[test]
fn config_set_template_rewrites_the_title() {
    let s = Server::start(&[]);
    let bin = server_bin().display().to_string();
    let p = s.port;
    set_template(
        &mut s.raw(),
        "TEST {title} {listen-addr} {port} {tls-port} {unixsocket} {config-file}",
    );
    // No unix socket and no config file: an empty word, then "-".
    assert_title(&s, &format!("TEST {bin} 127.0.0.1:{p} {p} 0  -"));
    // Spaces around are trimmed; a title shorter than argv[0] leaves a '.'.
    set_template(&mut s.raw(), "  <{server-mode}>  ");
    assert_title(&s, "<>");
    // A template that would give nothing but argv[0] is refused.
    for t in ["{title}", "{unixsocket} {server-mode}", "{nope}"] {
        let r = s.raw().cmd(&["CONFIG", "SET", "proc-title-template", t]);
        assert_eq!(r, cinnabar_tests::err("ERR CONFIG SET failed (possibly related to argument 'proc-title-template') - template format is invalid or contains unknown variables"), "{t}");
    }
    assert_title(&s, "<>");
}

#[test]
fn the_title_follows_config_set_port_and_bind() {
    let s = Server::start(&[]);
    let bin = server_bin().display().to_string();
    let new = free_port();
    let mut c = s.raw();
    assert_eq!(c.cmd(&["CONFIG", "SET", "port", &new.to_string()]), ok());
    let mut c = RawClient::connect(new);
    assert_eq!(c.cmd(&["CONFIG", "SET", "bind", "-127.0.0.1 ::1"]), ok());
    // The padding stays that of the arguments the server started with.
    let want = expected(s.port, &format!("{bin} -127.0.0.1:{new}"));
    assert_eq!(shown(&cmdline(&s)), shown(&want));
}

#[test]
fn a_long_title_spills_over_the_environment() {
    let s = Server::start(&[]);
    let bin = server_bin().display().to_string();
    let long = "x".repeat(300);
    set_template(&mut s.raw(), &format!("{{title}} {long}"));
    assert_title(&s, &format!("{bin} {long}"));
    assert_eq!(s.raw().cmd(&["PING"]), cinnabar_tests::simple("PONG"));
}

/// `set-proc-title no`: the command line stays as the server was started.
#[test]
fn set_proc_title_no_leaves_the_command_line() {
    let s = Server::start(&[("set-proc-title", "no")]);
    let port = s.port.to_string();
    let bin = server_bin().display().to_string();
    let args = [
        bin.as_str(),
        "--port",
        &port,
        "--bind",
        "127.0.0.1",
        "--save",
        "",
        "--set-proc-title",
        "no",
    ];
    let want: Vec<u8> = args
        .iter()
        .flat_map(|a| [a.as_bytes(), b"\0"].concat())
        .collect();
    assert_eq!(shown(&cmdline(&s)), shown(&want));
}
