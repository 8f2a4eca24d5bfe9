//! A TCP proxy the tests can cut: a replica replicates through it, so that when the test
//! cuts it, the primary's later writes never reach the replica (a network partition), and
//! the replica cannot reconnect until the test heals it.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// A proxy from a local port to `127.0.0.1:target`, stopped on drop.
pub struct Proxy {
    pub port: u16,
    cut: Arc<AtomicBool>,
    stop: Arc<AtomicBool>,
    /// Both ends of every connection made, to shut them down on a cut.
    open: Arc<Mutex<Vec<TcpStream>>>,
    accept: Option<JoinHandle<()>>,
}

impl Proxy {
    pub fn start(target: u16) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").expect("proxy bind");
        let port = listener.local_addr().expect("proxy addr").port();
        listener.set_nonblocking(true).expect("nonblocking");
        let (cut, stop) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicBool::new(false)));
        let open: Arc<Mutex<Vec<TcpStream>>> = Arc::new(Mutex::new(Vec::new()));
        let (c, s, o) = (cut.clone(), stop.clone(), open.clone());
        let accept = std::thread::spawn(move || {
            while !s.load(Ordering::SeqCst) {
                match listener.accept() {
                    Ok((client, _)) => {
                        // Cut: a new connection is closed at once, as a partition would refuse it.
                        if c.load(Ordering::SeqCst) {
                            drop(client);
                            continue;
                        }
                        let Ok(server) = TcpStream::connect(("127.0.0.1", target)) else { continue };
                        let _ = client.set_nonblocking(false);
                        let mut open = o.lock().expect("lock");
                        for end in [&client, &server] {
                            if let Ok(e) = end.try_clone() {
                                open.push(e);
                            }
                        }
                        drop(open);
                        pump(&client, &server, c.clone());
                        pump(&server, &client, c.clone());
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(5)),
                }
            }
        });
        Proxy { port, cut, stop, open, accept: Some(accept) }
    }

    /// Cuts every connection and refuses new ones: nothing crosses any more.
    pub fn cut(&self) {
        self.cut.store(true, Ordering::SeqCst);
        for s in self.open.lock().expect("lock").drain(..) {
            let _ = s.shutdown(Shutdown::Both);
        }
    }

    /// Lets connections through again.
    pub fn heal(&self) {
        self.cut.store(false, Ordering::SeqCst);
    }
}

/// Copies `from` to `to` in a thread until either end closes or the proxy is cut.
fn pump(from: &TcpStream, to: &TcpStream, cut: Arc<AtomicBool>) {
    let (Ok(mut from), Ok(mut to)) = (from.try_clone(), to.try_clone()) else { return };
    std::thread::spawn(move || {
        let mut buf = [0u8; 16 * 1024];
        loop {
            let n = match from.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            // A cut drops whatever was in flight.
            if cut.load(Ordering::SeqCst) || to.write_all(&buf[..n]).is_err() {
                break;
            }
        }
        let _ = to.shutdown(Shutdown::Both);
        let _ = from.shutdown(Shutdown::Both);
    });
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        self.cut();
        if let Some(t) = self.accept.take() {
            let _ = t.join();
        }
    }
}

/// A replica of `primary` (module loaded, `extra` arguments) that replicates through `proxy`,
/// once the primary streams to it. It is made a replica by `REPLICAOF` after it started, so
/// that [`super::Server::restart`] brings it back as a primary (of what it persisted).
pub fn replica_through(primary: &super::Server, proxy: &Proxy, extra: &[&str]) -> super::Server {
    use std::time::Instant;
    let r = super::Server::start_with(true, extra);
    let mut c = r.conn();
    super::ok(&mut c, &["REPLICAOF", "127.0.0.1", &proxy.port.to_string()]);
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let info: String = redis::cmd("INFO").arg("replication").query(&mut c).expect("INFO");
        if info.contains("master_link_status:up") {
            break;
        }
        assert!(Instant::now() < deadline, "the replica did not sync through the proxy: {info}");
        std::thread::sleep(Duration::from_millis(50));
    }
    // As `Server::replica`: ready once it acknowledged a write of the primary's.
    let mut pc = primary.conn();
    loop {
        let _: redis::Value = redis::cmd("FUNCTION").arg("FLUSH").query(&mut pc).expect("FUNCTION FLUSH");
        let acked: i64 = redis::cmd("WAIT").arg(1).arg(100).query(&mut pc).expect("WAIT");
        if acked >= 1 {
            return r;
        }
        assert!(Instant::now() < deadline, "the primary did not stream to its replica");
    }
}
