'use strict';
// Test harness: a real redis-server (or valkey-server) with the module, on a free 127.0.0.1
// port, as tests/common/mod.rs starts them. The binary is $REDIS_SERVER, else the one $SERVER
// names (redis, redis8 or valkey) as scripts/server-bin.sh finds it; the module is
// $LOCKMOD_MODULE, else the repository's debug build. Anything missing fails loudly: a skipped
// suite would prove nothing. `stop()` kills exactly the process it started.

const { spawn, execFileSync } = require('node:child_process');
const fs = require('node:fs');
const net = require('node:net');
const os = require('node:os');
const path = require('node:path');
const { setTimeout: sleep } = require('node:timers/promises');
const test = require('node:test');
const Redis = require('ioredis');
const { LockClient } = require('../..');

const ROOT = path.resolve(__dirname, '../../../..');

function serverBinary() {
  if (process.env.REDIS_SERVER) return process.env.REDIS_SERVER;
  const which = process.env.SERVER || 'redis';
  const bin = execFileSync('bash', [path.join(ROOT, 'scripts/server-bin.sh'), which]).toString().trim();
  if (!bin) throw new Error(`SERVER=${which} is not installed: run scripts/install-deps.sh`);
  return bin;
}

function modulePath() {
  const so = process.env.LOCKMOD_MODULE || path.join(ROOT, 'target/debug/libredis_lockmod.so');
  if (!fs.existsSync(so)) throw new Error(`no module at ${so}: run cargo build --lib (or set LOCKMOD_MODULE)`);
  return so;
}

function freePort() {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });
}

/** Starts one server; extra args are appended (e.g. ['--cluster-enabled', 'yes']). */
async function startServer(extra = []) {
  const bin = serverBinary();
  const so = modulePath();
  let lastErr;
  for (let attempt = 0; attempt < 5; attempt++) {
    const port = await freePort();
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lockmod-node-'));
    const args = ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'];
    args.push('--repl-diskless-sync-delay', '0');
    args.push('--daemonize', 'no', '--enable-debug-command', 'yes', '--enable-module-command', 'yes');
    args.push('--dir', dir, '--logfile', path.join(dir, 'server.log'), '--loadmodule', so, ...extra);
    const child = spawn(bin, args, { stdio: 'ignore' });
    let exited = false;
    child.once('exit', () => {
      exited = true;
    });
    child.once('error', (e) => {
      lastErr = e;
      exited = true;
    });
    const server = { port, dir, child, stop: () => stopChild(child, dir), signal: (sig) => child.kill(sig) };
    for (let i = 0; i < 200 && !exited; i++) {
      if (await answers(port, child.pid)) return server;
      await sleep(25);
    }
    await server.stop();
    const log = path.join(dir, 'server.log');
    lastErr = lastErr || new Error(`${bin} on ${port} did not start: ${fs.existsSync(log) ? fs.readFileSync(log, 'utf8').slice(-400) : ''}`);
  }
  throw lastErr;
}

// True once the server on `port` answers and is process `pid`: tests run side by side, and a
// port found free may be taken by another test's server before this one binds it (this one
// then exits, and the next attempt takes another port).
async function answers(port, pid) {
  const r = new Redis({ port, host: '127.0.0.1', lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
  r.on('error', () => {});
  try {
    await r.connect();
    // Then it must be done loading: INFO answers while it loads, PING does not.
    return (await r.info('server')).split('\r\n').includes(`process_id:${pid}`) && (await r.ping()) === 'PONG';
  } catch {
    return false;
  } finally {
    r.disconnect();
  }
}

async function stopChild(child, dir) {
  if (child.exitCode === null && child.signalCode === null) {
    const gone = new Promise((resolve) => child.once('exit', resolve));
    child.kill('SIGKILL');
    await gone;
  }
  if (dir) fs.rmSync(dir, { recursive: true, force: true });
}

/** Starts a replica of `primary` (module loaded), resolved once it is in sync. */
async function startReplica(primary, extra = []) {
  const replica = await startServer(['--replicaof', '127.0.0.1', String(primary.port), ...extra]);
  const c = raw(replica.port);
  const p = raw(primary.port);
  try {
    await until(async () => /master_link_status:up/.test(await c.info('replication')), 'the replica in sync');
    // The primary lists a new replica online, and streams to it, only after the replica's
    // first acknowledgement, sent from its once-a-second cron: until then a client counting
    // replicas sees none, and a WAIT waits up to a second. So this waits until the replica
    // acknowledged a write of this connection's: FUNCTION FLUSH (no function is loaded here)
    // replicates and touches no key; a WAIT after no write would return at once.
    await until(async () => {
      await p.call('FUNCTION', 'FLUSH');
      return Number(await p.call('WAIT', '1', '100')) >= 1;
    }, 'the primary streaming to the replica');
  } finally {
    c.disconnect();
    p.disconnect();
  }
  return replica;
}

/**
 * Three sentinels (the server binary with --sentinel) watching `primary` as `name`, down after
 * 1 s, resolved once each knows the other two and `replicas` replicas. `stop()` kills them.
 */
async function startSentinels(primary, name = 'lockmod', replicas = 1) {
  const bin = serverBinary();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lockmod-node-sentinel-'));
  const children = [];
  const ports = [];
  const stop = async () => {
    for (const c of children) await stopChild(c, null);
    fs.rmSync(dir, { recursive: true, force: true });
  };
  try {
    for (let i = 0; i < 3; i++) {
      const port = await freePort();
      const conf = path.join(dir, `sentinel-${i}.conf`);
      fs.writeFileSync(
        conf,
        [
          `port ${port}`,
          'bind 127.0.0.1',
          `dir ${dir}`,
          `logfile ${path.join(dir, `sentinel-${i}.log`)}`,
          `sentinel monitor ${name} 127.0.0.1 ${primary.port} 2`,
          `sentinel down-after-milliseconds ${name} 1000`,
          `sentinel failover-timeout ${name} 5000`,
          `sentinel parallel-syncs ${name} 1`,
          '',
        ].join('\n'),
      );
      children.push(spawn(bin, [conf, '--sentinel'], { stdio: 'ignore' }));
      ports.push(port);
    }
    await until(
      async () => {
        for (const port of ports) {
          const s = new Redis({ port, host: '127.0.0.1', lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
          s.on('error', () => {});
          try {
            await s.connect();
            const fields = await s.call('SENTINEL', 'MASTER', name);
            const info = {};
            for (let j = 0; j < fields.length; j += 2) info[fields[j]] = fields[j + 1];
            if (Number(info['num-other-sentinels']) !== 2 || Number(info['num-slaves']) !== replicas) return false;
          } catch {
            return false;
          } finally {
            s.disconnect();
          }
        }
        return true;
      },
      'three sentinels that know each other and the replica',
      30000,
    );
  } catch (err) {
    await stop();
    throw err;
  }
  const primaryPort = async () => {
    const s = new Redis({ port: ports[0], host: '127.0.0.1', maxRetriesPerRequest: 0 });
    s.on('error', () => {});
    try {
      return Number((await s.call('SENTINEL', 'GET-MASTER-ADDR-BY-NAME', name))[1]);
    } finally {
      s.disconnect();
    }
  };
  return { name, ports, sentinels: ports.map((port) => ({ host: '127.0.0.1', port })), primaryPort, stop };
}

/** A plain ioredis client for the test's own checks (keyspace, raw commands). */
function raw(port) {
  const r = new Redis({ port, host: '127.0.0.1' });
  r.on('error', () => {});
  return r;
}

/** Polls `fn` until it returns a truthy value (bounded: fails after `ms`). */
async function until(fn, what, ms = 10000) {
  const end = Date.now() + ms;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > end) throw new Error(`gave up waiting for ${what}`);
    await sleep(10);
  }
}

/** Calls of `command` the server has run so far (INFO commandstats). */
async function calls(r, command) {
  const info = await r.info('commandstats');
  const name = command.toLowerCase().replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  const m = info.match(new RegExp(`^cmdstat_${name}:calls=(\\d+)`, 'm'));
  return m ? Number(m[1]) : 0;
}

/** Clients parked with BLOCK right now (INFO lockmod). */
async function parked(r) {
  const m = (await r.info('lockmod')).match(/blocked_now:(\d+)/);
  if (!m) throw new Error('INFO lockmod has no blocked_now');
  return Number(m[1]);
}

/**
 * The usual setup of a test file: registers before/after hooks that start one server, open a
 * raw connection `r` to it and a LockClient on `r` (with `clientOptions`), and close them all
 * again. `ready` runs in the before hook with `{ server, r, client, raw }`, where `raw()` opens
 * another connection that the after hook closes too.
 */
function withServer(ready, clientOptions) {
  const conns = [];
  let server;
  let client;
  test.before(async () => {
    server = await startServer();
    const more = () => {
      const c = raw(server.port);
      conns.push(c);
      return c;
    };
    const r = more();
    client = new LockClient(r, clientOptions);
    ready({ server, r, client, raw: more });
  });
  test.after(async () => {
    if (client) await client.quit();
    for (const c of conns) c.disconnect();
    if (server) await server.stop();
  });
}

module.exports = {
  startServer,
  startReplica,
  startSentinels,
  withServer,
  raw,
  until,
  calls,
  parked,
  serverBinary,
  modulePath,
  ROOT,
};
