//! One lock shared at once by a Rust, a Python (clients/python) and a Node (clients/node)
//! holder: mutual exclusion under contention, and hand-off in arrival order; and one
//! `PER_CLIENT` rate-limiter window shared by client id, its waiters served in arrival order.
//! The Python and Node holders are real processes on the repository's libraries (`.venv`,
//! `make python-env`; clients/node with its `npm ci`); a missing one fails the test.

mod support;

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use redis_lockmod_client::{LockClient, RateType};
use support::{node_lib, python, Server};

const PYTHON: &str = r#"
import os, sys, time, redis
from redis_lockmod import Lock
r = redis.Redis(port=int(os.environ["PORT"]))
mode, me, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
lock = Lock(r, "shared")
for _ in range(n):
    with lock:
        if mode == "order":
            r.rpush("order", me)
        if not r.set("cs:owner", me, nx=True):
            r.incr("cs:violations")
        time.sleep(0.002)
        r.delete("cs:owner")
        r.incr("cs:count")
"#;

const NODE: &str = r#"
const lib = process.env.LOCKMOD_NODE;
const Redis = require(require.resolve('ioredis', { paths: [lib] }));
const { LockClient, using } = require(lib);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
(async () => {
  const redis = new Redis({ port: Number(process.env.PORT) });
  const locks = new LockClient(redis);
  const [mode, me, n] = process.argv.slice(-3);
  const lock = locks.lock('shared');
  for (let i = 0; i < Number(n); i++) {
    await using(lock, async () => {
      if (mode === 'order') await redis.rpush('order', me);
      if ((await redis.set('cs:owner', me, 'NX')) !== 'OK') await redis.incr('cs:violations');
      await sleep(2);
      await redis.del('cs:owner');
      await redis.incr('cs:count');
    });
  }
  await locks.quit({ client: true });
})().catch((e) => { console.error(e); process.exit(1); });
"#;

/// `take n`: prints 1 if `n` permits fit now (else 0); `wait n`: waits for them, then pushes
/// its name on `rate-order`. The window is `CLIENT_ID`'s.
const PYTHON_RATE: &str = r#"
import os, sys, redis
from redis_lockmod import RateLimiter
r = redis.Redis(port=int(os.environ["PORT"]))
limiter = RateLimiter(r, "xrate", client_id=os.environ["CLIENT_ID"])
mode, n = sys.argv[1], int(sys.argv[2])
if mode == "take":
    print(int(limiter.try_acquire(n)))
else:
    assert limiter.acquire(n, timeout=20)
    r.rpush("rate-order", "python")
"#;

const NODE_RATE: &str = r#"
const lib = process.env.LOCKMOD_NODE;
const Redis = require(require.resolve('ioredis', { paths: [lib] }));
const { LockClient } = require(lib);
(async () => {
  const redis = new Redis({ port: Number(process.env.PORT) });
  const locks = new LockClient(redis);
  const [mode, n] = process.argv.slice(-2);
  const limiter = locks.rateLimiter('xrate', { clientId: process.env.CLIENT_ID });
  if (mode === 'take') {
    console.log(Number(await limiter.tryAcquire(Number(n))));
  } else {
    if (!(await limiter.acquire({ permits: Number(n), timeout: 20000 }))) throw new Error('not granted');
    await redis.rpush('rate-order', 'node');
  }
  await locks.quit({ client: true });
})().catch((e) => { console.error(e); process.exit(1); });
"#;

fn spawn_python(s: &Server, mode: &str, me: &str, n: usize) -> Child {
    Command::new(python())
        .args(["-c", PYTHON, mode, me, &n.to_string()])
        .env("PORT", s.port.to_string())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("cannot start python")
}

fn spawn_node(s: &Server, mode: &str, me: &str, n: usize) -> Child {
    Command::new("node")
        .args(["-e", NODE, mode, me, &n.to_string()])
        .env("PORT", s.port.to_string())
        .env("LOCKMOD_NODE", node_lib())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("cannot start node")
}

fn finish(child: Child, who: &str) -> String {
    let out = child.wait_with_output().expect("wait");
    assert!(out.status.success(), "{who} failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// The rate-limiter script of `lang` (`python` or `node`) on `CLIENT_ID` = `id`.
fn spawn_rate(s: &Server, lang: &str, id: &str, mode: &str, n: u64) -> Child {
    let mut c = match lang {
        "python" => {
            let mut c = Command::new(python());
            c.args(["-c", PYTHON_RATE]);
            c
        }
        _ => {
            let mut c = Command::new("node");
            c.args(["-e", NODE_RATE]).env("LOCKMOD_NODE", node_lib());
            c
        }
    };
    c.args([mode, &n.to_string()])
        .env("PORT", s.port.to_string())
        .env("CLIENT_ID", id)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {lang}: {e}"))
}

async fn run_rate(s: &Server, lang: &'static str, id: &str, mode: &str, n: u64) -> String {
    let child = spawn_rate(s, lang, id, mode, n);
    tokio::task::spawn_blocking(move || finish(child, lang)).await.unwrap()
}

async fn rust_holder(locks: LockClient, mode: &'static str, me: &'static str, n: usize, s: redis::Client) {
    let mut c = s.get_multiplexed_async_connection().await.unwrap();
    let lock = locks.lock("shared");
    for _ in 0..n {
        let g = lock.acquire().await.unwrap();
        if mode == "order" {
            let _: i64 = redis::cmd("RPUSH").arg("order").arg(me).query_async(&mut c).await.unwrap();
        }
        let set: Option<String> =
            redis::cmd("SET").arg("cs:owner").arg(me).arg("NX").query_async(&mut c).await.unwrap();
        if set.is_none() {
            let _: i64 = redis::cmd("INCR").arg("cs:violations").query_async(&mut c).await.unwrap();
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
        let _: i64 = redis::cmd("DEL").arg("cs:owner").query_async(&mut c).await.unwrap();
        let _: i64 = redis::cmd("INCR").arg("cs:count").query_async(&mut c).await.unwrap();
        g.unlock().await.unwrap();
    }
}

/// Waits for the Python and Node processes and the Rust task; each must end well.
async fn finish_all(py: Child, js: Child, rs: tokio::task::JoinHandle<()>) {
    tokio::task::spawn_blocking(move || {
        finish(py, "python");
        finish(js, "node");
    })
    .await
    .unwrap();
    rs.await.unwrap();
}

fn int(s: &Server, key: &str) -> i64 {
    let v: Option<i64> = redis::cmd("GET").arg(key).query(&mut s.conn()).unwrap();
    v.unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rust_python_and_node_holders_exclude_each_other_and_are_served_in_arrival_order() {
    let s = Server::start();
    let locks = LockClient::new(s.client()).unwrap();

    // Arrival order: Rust holds; Python, Node and another Rust holder arrive in that order and
    // park in the server; they are granted in that order.
    let first = locks.lock("shared").acquire().await.unwrap();
    let py = spawn_python(&s, "order", "python", 1);
    s.wait_blocked(1);
    let js = spawn_node(&s, "order", "node", 1);
    s.wait_blocked(2);
    let rs = tokio::spawn(rust_holder(locks.clone(), "order", "rust", 1, s.client()));
    s.wait_blocked(3);
    first.unlock().await.unwrap();
    finish_all(py, js, rs).await;
    let order: Vec<String> = redis::cmd("LRANGE").arg("order").arg(0).arg(-1).query(&mut s.conn()).unwrap();
    assert_eq!(order, vec!["python", "node", "rust"]);
    assert_eq!(int(&s, "cs:violations"), 0);

    // Contention: the three at once, many times each.
    redis::cmd("DEL").arg("cs:count").exec(&mut s.conn()).unwrap();
    const N: usize = 40;
    let py = spawn_python(&s, "contend", "python", N);
    let js = spawn_node(&s, "contend", "node", N);
    let rs = tokio::spawn(rust_holder(locks.clone(), "contend", "rust", N, s.client()));
    finish_all(py, js, rs).await;
    assert_eq!(int(&s, "cs:count"), 3 * N as i64, "every critical section ran");
    assert_eq!(int(&s, "cs:violations"), 0, "never two holders at once");
    assert_eq!(support::pttl(&mut s.conn(), "shared"), -2, "free at the end");
    let handoffs = support::info_field(&mut s.conn(), "lockmod", "lockmod_handoffs");
    assert!(handoffs > 0, "contended: some grants were hand-offs from BLOCK ({handoffs})");
    locks.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_per_client_window_is_shared_with_python_and_node_rate_limiters_by_client_id() {
    let s = Server::start();
    let locks = LockClient::new(s.client()).unwrap();
    let limiter = locks.rate_limiter("xrate");
    let id = limiter.client_id().to_string();
    assert!(limiter.try_set_rate(RateType::PerClient, 5, Duration::from_secs(3600), None).await.unwrap());
    assert!(limiter.try_acquire(2, Duration::ZERO).await.unwrap());
    // A Python and a Node client given this client's id take from the same window.
    assert_eq!(run_rate(&s, "python", &id, "take", 2).await, "1");
    assert_eq!(run_rate(&s, "node", &id, "take", 1).await, "1");
    assert_eq!(run_rate(&s, "node", &id, "take", 1).await, "0", "the window is full");
    assert_eq!(limiter.available_permits().await.unwrap(), 0);
    let members: Vec<Vec<u8>> =
        redis::cmd("ZRANGE").arg(format!("{{xrate}}:permits:{id}")).arg(0).arg(-1).query(&mut s.conn()).unwrap();
    let total: u32 = members.iter().map(|m| u32::from_le_bytes(m[m.len() - 4..].try_into().unwrap())).sum();
    assert_eq!(total, 5, "one zset for the three libraries");
    assert_eq!(locks.rate_limiter("xrate").with_client_id("other").available_permits().await.unwrap(), 5);

    // Python waits for 2, then Node for 1: served in that order as permits come back.
    let py = spawn_rate(&s, "python", &id, "wait", 2);
    s.wait_blocked(1);
    let js = spawn_rate(&s, "node", &id, "wait", 1);
    s.wait_blocked(2);
    limiter.release(1).await.unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(s.blocked(), 2, "1 permit does not overtake the waiter for 2");
    limiter.release(1).await.unwrap();
    tokio::task::spawn_blocking(move || finish(py, "python")).await.unwrap();
    assert_eq!(s.blocked(), 1, "the head was served; Node still waits");
    limiter.release(1).await.unwrap();
    tokio::task::spawn_blocking(move || finish(js, "node")).await.unwrap();
    let order: Vec<String> = redis::cmd("LRANGE").arg("rate-order").arg(0).arg(-1).query(&mut s.conn()).unwrap();
    assert_eq!(order, vec!["python", "node"]);
    assert_eq!(limiter.available_permits().await.unwrap(), 0);
    locks.close().await;
}
