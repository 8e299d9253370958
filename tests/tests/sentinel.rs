//! Failover under the real Redis Sentinel (`redis-server --sentinel`,
//! 7.0.15): three sentinels watch a cinnabar master with two cinnabar
//! replicas; when the master dies they promote one replica, point the
//! other at it, and the data written before the failure is on both.
//! Sentinel makes a role change last with CONFIG REWRITE, so `replicaof`
//! must be read from and written back to the config file.

use cinnabar_tests::{free_port, is_real_redis, server_bin, tool, Server, TempDir};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A sentinel process, killed on drop.
struct Sentinel {
    port: u16,
    child: Child,
}

impl Drop for Sentinel {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn sentinel(bin: &std::path::Path, dir: &TempDir, n: usize, master_port: u16) -> Sentinel {
    let port = free_port();
    let conf = dir.path().join(format!("sentinel-{n}.conf"));
    std::fs::write(
        &conf,
        format!(
            "port {port}\nbind 127.0.0.1\ndir {}\n\
             sentinel monitor mymaster 127.0.0.1 {master_port} 2\n\
             sentinel down-after-milliseconds mymaster 1000\n\
             sentinel failover-timeout mymaster 10000\n",
            dir.dir()
        ),
    )
    .unwrap();
    let child = Command::new(bin)
        .arg(&conf)
        .arg("--sentinel")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start redis-server --sentinel");
    Sentinel { port, child }
}

fn cli(port: u16, args: &[&str]) -> String {
    let out = Command::new("redis-cli")
        .arg("-p")
        .arg(port.to_string())
        .args(args)
        .output()
        .expect("redis-cli");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

fn wait_for(what: &str, secs: u64, mut ok: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while !ok() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The value of `field` in a SENTINEL MASTER reply (field and value on
/// alternate lines in redis-cli's output).
fn field(reply: &str, field: &str) -> String {
    let lines: Vec<&str> = reply.lines().collect();
    lines
        .chunks(2)
        .find(|c| c[0] == field)
        .and_then(|c| c.get(1))
        .map(|v| v.to_string())
        .unwrap_or_default()
}

#[test]
fn sentinel_promotes_a_replica_when_the_master_dies() {
    let Some(bin) = tool("redis-server") else {
        eprintln!("redis-server not installed: skipped");
        return;
    };
    if is_real_redis() {
        return;
    }
    let master = Server::start(&[]);
    let replicas = [Server::start(&[]), Server::start(&[])];
    let mport = master.port.to_string();
    for r in &replicas {
        assert_eq!(cli(r.port, &["REPLICAOF", "127.0.0.1", &mport]), "OK");
    }
    for i in 0..100 {
        cli(master.port, &["SET", &format!("k{i}"), &format!("v{i}")]);
    }
    let dir = TempDir::new("sentinel");
    let sentinels: Vec<Sentinel> = (0..3)
        .map(|n| sentinel(&bin, &dir, n, master.port))
        .collect();
    let s0 = sentinels[0].port;
    wait_for(
        "the sentinels to find the replicas and each other",
        30,
        || {
            let m = cli(s0, &["SENTINEL", "MASTER", "mymaster"]);
            field(&m, "num-slaves") == "2" && field(&m, "num-other-sentinels") == "2"
        },
    );
    for r in &replicas {
        wait_for("the replicas to catch up", 10, || {
            cli(r.port, &["DBSIZE"]) == "100"
        });
    }

    drop(master);
    let mut promoted = 0;
    wait_for("the failover", 60, || {
        let addr = cli(s0, &["SENTINEL", "GET-MASTER-ADDR-BY-NAME", "mymaster"]);
        promoted = addr
            .lines()
            .nth(1)
            .and_then(|p| p.parse().ok())
            .filter(|p: &u16| *p != mport.parse::<u16>().unwrap())
            .unwrap_or(0);
        promoted != 0
    });
    let (new, other) = if replicas[0].port == promoted {
        (&replicas[0], &replicas[1])
    } else {
        (&replicas[1], &replicas[0])
    };
    assert_eq!(new.port, promoted);
    wait_for("the promoted replica to be a master", 10, || {
        cli(new.port, &["ROLE"]).starts_with("master")
    });
    assert_eq!(cli(new.port, &["SET", "after", "1"]), "OK");
    let want = format!("slave\n127.0.0.1\n{promoted}\nconnected");
    wait_for("the other replica to follow the new master", 30, || {
        cli(other.port, &["ROLE"]).starts_with(&want) && cli(other.port, &["GET", "after"]) == "1"
    });
    assert_eq!(cli(other.port, &["GET", "k99"]), "v99");
    assert_eq!(cli(new.port, &["DBSIZE"]), "101");
}

#[test]
fn replicaof_is_read_from_and_rewritten_to_the_config_file() {
    if is_real_redis() {
        return;
    }
    let master = Server::start(&[]);
    let dir = TempDir::new("role-conf");
    let port = free_port();
    let conf = dir.path().join("redis.conf");
    std::fs::write(
        &conf,
        format!(
            "port {port}\nsave \"\"\nreplicaof 127.0.0.1 {}\n",
            master.port
        ),
    )
    .unwrap();
    let child = Command::new(server_bin())
        .arg(&conf)
        .current_dir(dir.path())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let _guard = Sentinel { port, child };
    let following = format!("slave\n127.0.0.1\n{}\nconnected", master.port);
    wait_for("the replica to connect", 10, || {
        cli(port, &["ROLE"]).starts_with(&following)
    });
    let get = |c| cli(port, &["CONFIG", "GET", c]);
    assert_eq!(
        get("replicaof"),
        format!("replicaof\n127.0.0.1 {}", master.port)
    );
    assert_eq!(cli(port, &["REPLICAOF", "NO", "ONE"]), "OK");
    assert_eq!(get("replicaof"), "replicaof");
    assert_eq!(cli(port, &["CONFIG", "REWRITE"]), "OK");
    let text = std::fs::read_to_string(&conf).unwrap();
    assert!(!text.contains("replicaof"), "{text}");
    assert!(text.contains(&format!("dir {}", dir.dir())), "{text}");
    assert_eq!(
        cli(port, &["REPLICAOF", "127.0.0.1", &master.port.to_string()]),
        "OK"
    );
    assert_eq!(cli(port, &["CONFIG", "REWRITE"]), "OK");
    let text = std::fs::read_to_string(&conf).unwrap();
    assert!(
        text.contains(&format!("\nreplicaof 127.0.0.1 {}\n", master.port)),
        "{text}"
    );
}
