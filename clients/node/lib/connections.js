'use strict';
// The connections a LockClient owns. Every lock command goes over a duplicate of the caller's
// ioredis client (standalone or Cluster) whose options guarantee ioredis never sends a command
// twice: a resent LOCK.ACQUIRE can grant a second hold nobody knows about, a resent unlock can
// release one too many. Waits (`BLOCK`) get connections of their own, from a small pool, so a
// parked request never delays another command and a client-side timeout can drop exactly the
// connection it concerns.

const { commandTimer } = require('./timers');

// Options of every connection of ours. Whatever the caller's client does, ours: never retries
// a command after a reconnect (maxRetriesPerRequest 0 rejects it at once, and nothing is
// resent), applies no key prefix of its own (LockClient applies the caller's prefix to lock
// names itself, the same for the module's commands and the plain ones), replies numbers.
const SAFE = {
  maxRetriesPerRequest: 0,
  autoResendUnfulfilledCommands: false,
  keyPrefix: '',
  stringNumbers: false,
  readOnly: false,
  // ioredis 6's client-side answer (nil) to a blocking command it knows; never ours.
  blockingTimeout: undefined,
  enableAutoPipelining: false,
};

// A connection that waits in the server: no timer may cut the wait short (the server's own
// BLOCK timeout ends it; the library arms a longer per-command timer of its own).
const WAITING = { commandTimeout: undefined, socketTimeout: undefined };

function isCluster(redis) {
  return redis != null && redis.isCluster === true;
}

/** The caller's key prefix (applied to lock names by the library). */
function keyPrefixOf(redis) {
  const o = redis.options || {};
  const p = isCluster(redis) ? o.keyPrefix || (o.redisOptions || {}).keyPrefix : o.keyPrefix;
  return typeof p === 'string' ? p : '';
}

/** A duplicate of `redis` with SAFE options plus `extra`. */
function duplicate(redis, extra) {
  if (isCluster(redis)) {
    const o = redis.options || {};
    return redis.duplicate([], {
      keyPrefix: '',
      enableAutoPipelining: false,
      // A command whose connection closed may have run: the cluster client must not send it
      // again to another node (MOVED, ASK and TRYAGAIN say it did not run: those stay).
      retryDelayOnFailover: 0,
      redisOptions: { ...(o.redisOptions || {}), ...SAFE, ...extra },
    });
  }
  return redis.duplicate({ ...SAFE, ...extra });
}

/**
 * The ioredis Command class of `conn`'s own ioredis copy. The library does not require
 * ioredis itself (a linked install, `npm install ./clients/node`, could not resolve it from
 * the package's directory): it lets `conn.call` build a command and keeps its class, without
 * sending anything.
 */
function commandClass(conn) {
  if (!conn.lockmodCommand) {
    let cls = null;
    const probe = Object.create(conn, {
      sendCommand: {
        value(cmd) {
          cls = cmd.constructor;
          return Promise.resolve(null);
        },
      },
    });
    conn.call.call(probe, 'PING');
    if (typeof cls !== 'function') throw new Error('unsupported ioredis version: no Command class');
    conn.lockmodCommand = cls;
  }
  return conn.lockmodCommand;
}

/**
 * Sends `name ...args` on `conn`, routed (on a Cluster) to the node of `key`, which is not an
 * argument: INFO and the replicas' wait after a write to that key.
 */
function sendKeyed(conn, name, key, args, timeoutMs) {
  const Command = commandClass(conn);
  const cmd = new Command(name, args.map(String), { replyEncoding: 'utf8' });
  cmd.keys = [key];
  const timer = commandTimer(timeoutMs); // past Node's timer limit: none, as for no limit
  if (timer != null) cmd.setTimeout(timer);
  return conn.sendCommand(cmd);
}

/** `host:port` of the server a standalone connection is connected to now, or null. */
function serverOf(conn) {
  const s = conn.stream;
  return s && s.remoteAddress ? `${s.remoteAddress}:${s.remotePort}` : null;
}

/** True when `conn` is connected, now, to `server` (a serverOf value). */
function sameServer(conn, server) {
  return server != null && conn.status === 'ready' && serverOf(conn) === server;
}

/** The node that serves `key` on `conn`: its primary's `host:port` (Cluster) or the server. */
function nodeOf(conn, key) {
  if (!isCluster(conn)) return serverOf(conn);
  const probe = new (commandClass(conn))('INFO', []);
  probe.keys = [key];
  const slot = probe.getSlot();
  const nodes = conn.slots[slot];
  return nodes && nodes.length ? nodes[0] : `slot:${slot}`;
}

/**
 * Sends `name key ...args` on `conn`. The module's commands are unknown to ioredis, so the key
 * is named explicitly: a Cluster client routes the command by its slot instead of to a random
 * node. `timeoutMs` arms ioredis' per-command timer.
 */
function send(conn, name, key, args, timeoutMs) {
  const Command = commandClass(conn);
  const cmd = new Command(name, [key, ...args], { replyEncoding: 'utf8' });
  cmd.keys = [key];
  const timer = commandTimer(timeoutMs); // past Node's timer limit: none, as for no limit
  if (timer != null) cmd.setTimeout(timer);
  return conn.sendCommand(cmd);
}

/** Pooled connections for `BLOCK` waits: one per concurrent wait, a few kept idle. */
class WaitPool {
  constructor(source, maxIdle) {
    this.source = source;
    this.maxIdle = maxIdle;
    this.idle = [];
    this.busy = new Set();
    this.closed = false;
  }

  /** A connection ready for one wait. Rejects only before anything is sent. */
  async take() {
    if (this.closed) throw new Error('LockClient is closed');
    let conn = this.idle.pop();
    while (conn && conn.status !== 'ready') {
      conn.disconnect();
      conn = this.idle.pop();
    }
    if (!conn) conn = await this.open();
    this.busy.add(conn);
    return conn;
  }

  async open() {
    // Standalone: never reconnected (a connection that broke is dropped, and a new one made,
    // through the Sentinel when there is one): its client id and server stay its own.
    const conn = duplicate(this.source, isCluster(this.source) ? WAITING : { ...WAITING, retryStrategy: () => null });
    conn.on('error', () => {}); // reported through the rejected command instead
    try {
      // Standalone: its client id lets a lost wait be ended server-side (CLIENT KILL ID)
      // before the library asks what was granted. A Cluster's node is only known per command.
      // An ACL without CLIENT ID only loses that: the disconnect still ends a lost wait.
      conn.lockmodId = isCluster(conn) ? null : await conn.client('ID').catch(noIdOnReplyError);
      conn.lockmodServer = isCluster(conn) ? null : serverOf(conn);
      if (isCluster(conn)) await waitReady(conn);
    } catch (err) {
      conn.disconnect();
      throw err;
    }
    return conn;
  }

  /** Back to the pool after a wait that ended with a reply. */
  give(conn) {
    this.busy.delete(conn);
    if (!this.closed && this.idle.length < this.maxIdle && conn.status === 'ready') this.idle.push(conn);
    else conn.disconnect();
  }

  /** Closes a connection whose wait ended without a reply: it is never reused. */
  drop(conn) {
    this.busy.delete(conn);
    conn.disconnect();
  }

  close() {
    this.closed = true;
    for (const c of [...this.idle, ...this.busy]) c.disconnect();
    this.idle = [];
    this.busy.clear();
  }
}

function noIdOnReplyError(err) {
  if (err != null && err.name === 'ReplyError') return null;
  throw err;
}

/** Resolves once a fresh Cluster connection is ready (bounded by its connectTimeout). */
function waitReady(conn) {
  if (conn.status === 'ready') return Promise.resolve();
  const ms = (conn.options.redisOptions || {}).connectTimeout || 10000;
  return new Promise((resolve, reject) => {
    const done = (err) => {
      clearTimeout(timer);
      conn.off('ready', onReady);
      conn.off('end', onEnd);
      if (err) reject(err);
      else resolve();
    };
    const onReady = () => done();
    const onEnd = () => done(new Error('connection closed before it was ready'));
    const timer = setTimeout(() => done(new Error(`cluster not ready within ${ms} ms`)), ms);
    conn.once('ready', onReady);
    conn.once('end', onEnd);
  });
}

module.exports = {
  SAFE,
  isCluster,
  keyPrefixOf,
  duplicate,
  send,
  sendKeyed,
  serverOf,
  sameServer,
  nodeOf,
  WaitPool,
  waitReady,
};
