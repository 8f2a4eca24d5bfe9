//! The library's connections over TLS (docs/clients.md, "Connections and TLS"): redis-rs' TLS
//! backend turned on by the application (here by this crate's dev-dependencies: redis-rs'
//! `tokio-rustls-comp`, rustls' ring provider) and a `rediss://` address are all it takes; every
//! connection the library makes (requests, a cancellation's `CLIENT UNBLOCK`) is made from it.
//!
//! Of the servers of `make test` only Debian's Redis (SERVER=redis) is built with TLS, so this
//! test always starts that one, whatever SERVER says: it tests the client's transport, not a
//! server version. The certificate is made here with `openssl`, self-signed: the address says
//! `#insecure` (redis-rs' `tls-rustls-insecure`: no certificate check).

mod support;

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use redis_lockmod_client::{LockClient, Unlocked};
use support::{free_port, module_path, root, scratch_dir, wait_until};

/// Debian's redis-server, with TLS only, killed on drop.
struct TlsServer {
    port: u16,
    child: Child,
    dir: std::path::PathBuf,
}

impl TlsServer {
    fn start() -> TlsServer {
        let out = Command::new("bash").arg(root().join("scripts").join("server-bin.sh")).arg("redis").output().unwrap();
        let bin = String::from_utf8_lossy(&out.stdout).trim().to_string();
        assert!(!bin.is_empty(), "Debian's redis-server is not installed (scripts/install-deps.sh)");
        let dir = scratch_dir();
        let (cert, key) = (dir.join("server.crt"), dir.join("server.key"));
        let made = Command::new("openssl")
            .args(["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1", "-keyout"])
            .arg(&key)
            .arg("-out")
            .arg(&cert)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .expect("openssl is needed to make the test's certificate");
        assert!(made.success(), "openssl req failed");
        let port = free_port();
        let child = Command::new(&bin)
            .args(["--port", "0", "--tls-port", &port.to_string(), "--tls-auth-clients", "no"])
            .arg("--tls-cert-file")
            .arg(&cert)
            .arg("--tls-key-file")
            .arg(&key)
            .args(["--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir"])
            .arg(&dir)
            .arg("--logfile")
            .arg(dir.join("server.log"))
            .arg("--loadmodule")
            .arg(module_path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let s = TlsServer { port, child, dir };
        let deadline = Instant::now() + Duration::from_secs(10);
        while s.conn().is_err() {
            assert!(
                Instant::now() < deadline,
                "the TLS server did not start: {:?}",
                std::fs::read_to_string(s.dir.join("server.log"))
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        s
    }

    fn url(&self) -> String {
        format!("rediss://127.0.0.1:{}/#insecure", self.port)
    }

    fn conn(&self) -> redis::RedisResult<redis::Connection> {
        redis::Client::open(self.url())?.get_connection_with_timeout(Duration::from_secs(2))
    }
}

impl Drop for TlsServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rediss_address_is_all_the_library_needs_for_tls() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let s = tokio::task::spawn_blocking(TlsServer::start).await.unwrap();
    let locks = LockClient::new(redis::Client::open(s.url()).unwrap()).unwrap();
    let held = locks.lock("secure").acquire().await.unwrap();
    let mut c = s.conn().unwrap();
    let fields: Vec<String> = redis::cmd("HKEYS").arg("secure").query(&mut c).unwrap();
    assert_eq!(fields, vec![held.owner().to_string()], "granted over TLS");
    // A wait parked over TLS, cancelled: its CLIENT UNBLOCK goes over TLS too.
    let r = tokio::time::timeout(Duration::from_millis(200), locks.lock("secure").acquire()).await;
    assert!(r.is_err());
    assert_eq!(held.unlock().await.unwrap(), Unlocked::Last);
    let unblocks = redis::cmd("INFO").arg("commandstats").query::<String>(&mut c).unwrap();
    assert!(unblocks.contains("cmdstat_client|unblock:calls=1"), "{unblocks}");
    locks.close().await;
    let left: i64 = redis::cmd("DBSIZE").query(&mut c).unwrap();
    assert_eq!(left, 0, "the lock free, its latch deleted");
    // Closed by `close`; the server sees each close when it next reads that socket.
    wait_until(Duration::from_secs(10), "the library's connections closed", || {
        let clients: String = redis::cmd("CLIENT").arg("LIST").query(&mut c).unwrap();
        clients.lines().all(|l| !l.contains("cmd=lock.acquire"))
    });
}
