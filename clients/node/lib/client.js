'use strict';
// LockClient: what Redisson's RedissonClient is to its locks. It owns the connections, the
// client uuid every owner id starts with, and the settings the locks share (watchdog, latch,
// how long to keep asking after a lost reply).

const { randomUUID } = require('node:crypto');
const { setTimeout: sleep } = require('node:timers/promises');
const { duplicate, keyPrefixOf, send, sendKeyed, nodeOf, sameServer, WaitPool, isCluster } = require('./connections');
const { isReplyError, notRun, LockError, LockStateUnknownError } = require('./errors');
const { ReplicaCache, waitCommand, INFO_SECTIONS, DEFAULT_SYNC_TIMEOUT } = require('./replicas');
const { latchKey } = require('./names');
const { MAX_TIMER_MS, checkMs, longTimeout, clearLong } = require('./timers');
const { Lock, FairLock, ReadWriteLock } = require('./locks');
const { Semaphore, PermitExpirableSemaphore, CountDownLatch } = require('./synchronizers');
const { RateLimiter } = require('./ratelimiter');

class LockClient {
  /**
   * @param redis an ioredis `Redis` or `Cluster`; it is only duplicated, never used itself.
   * @param options see index.d.ts (`LockClientOptions`).
   */
  constructor(redis, options = {}) {
    if (redis == null || typeof redis.duplicate !== 'function') {
      throw new TypeError('LockClient takes an ioredis Redis or Cluster instance: new LockClient(new Redis())');
    }
    /** The caller's client: duplicated, never used; `quit({ client: true })` closes it too. */
    this.redis = redis;
    this.id = options.id ?? randomUUID();
    this.watchdogTimeout = checkMs(options.watchdogTimeout ?? 30000, 'watchdogTimeout');
    this.renewInterval = checkMs(options.renewInterval ?? Math.max(1, Math.floor(this.watchdogTimeout / 3)), 'renewInterval');
    if (this.renewInterval >= this.watchdogTimeout) {
      // The lease would run out before its renewal.
      throw new RangeError('renewInterval must be shorter than watchdogTimeout');
    }
    this.latchMs = checkMs(options.latchMs ?? 60000, 'latchMs');
    this.resolveTimeout = checkMs(options.resolveTimeout ?? 10000, 'resolveTimeout');
    this.blockGrace = checkMs(options.blockGrace ?? 5000, 'blockGrace');
    if (this.latchMs <= this.resolveTimeout) {
      // A retried unlock must still find its latch: otherwise it would release a second hold.
      throw new RangeError('latchMs must be longer than resolveTimeout');
    }
    // Redisson's checkLockSyncedSlaves and slavesSyncTimeout: the ms each write of a lock or a
    // semaphore waits for the primary's replicas, or null (syncReplicas: false).
    const syncTimeout = checkMs(options.syncTimeout ?? DEFAULT_SYNC_TIMEOUT, 'syncTimeout');
    this.syncTimeout = options.syncReplicas === false ? null : syncTimeout;
    this.replicas = new ReplicaCache();
    this.prefix = keyPrefixOf(redis);
    this.cluster = isCluster(redis);
    /** A Sentinel-managed client: its connections follow the primary the sentinels name. */
    this.sentinel = !this.cluster && Array.isArray((redis.options || {}).sentinels) && redis.options.sentinels.length > 0;
    /** The socket-level timer of a write on a connection of the pool (the caller's commandTimeout). */
    if (options.commandTimeout !== undefined && checkMs(options.commandTimeout, 'commandTimeout') > MAX_TIMER_MS) {
      throw new RangeError(`commandTimeout must be at most ${MAX_TIMER_MS} ms (Node's timers)`);
    }
    this.commandTimeout = options.commandTimeout ?? (redis.options || {}).commandTimeout;
    const extra = options.commandTimeout === undefined ? {} : { commandTimeout: options.commandTimeout };
    this.conn = duplicate(redis, extra);
    this.conn.on('error', () => {}); // failures reach the caller through rejected commands
    this.waits = new WaitPool(redis, options.maxIdleWaitConnections ?? 8);
    this.threads = 0;
    this.closed = false;
    /** Whether unlock latches are deleted once answered (false once the server refused a DEL). */
    this.latchCleanup = true;
  }

  /** A reentrant lock (Redisson's RLock); `fenced: true` adds fencing tokens. */
  lock(name, options) {
    return new Lock(this, name, options);
  }

  /** A fair lock (Redisson's RedissonFairLock): granted in arrival order. */
  fairLock(name, options) {
    return new FairLock(this, name, options);
  }

  /** A read-write lock (Redisson's RReadWriteLock). */
  readWriteLock(name, options) {
    return new ReadWriteLock(this, name, options);
  }

  /** A semaphore (Redisson's RSemaphore). */
  semaphore(name) {
    return new Semaphore(this, name);
  }

  /** A semaphore whose permits have ids and leases (Redisson's RPermitExpirableSemaphore). */
  permitExpirableSemaphore(name, options) {
    return new PermitExpirableSemaphore(this, name, options);
  }

  /** A count-down latch (Redisson's RCountDownLatch). */
  countDownLatch(name) {
    return new CountDownLatch(this, name);
  }

  /** A rate limiter (Redisson's RRateLimiter); `clientId` picks a PER_CLIENT window (default: this client's id). */
  rateLimiter(name, options) {
    return new RateLimiter(this, name, options);
  }

  /** A new owner id, `<client uuid>:<n>`: Redisson's `<uuid>:<thread id>`. */
  nextOwner() {
    this.threads += 1;
    return `${this.id}:${this.threads}`;
  }

  /** The key a lock name maps to (the caller's ioredis key prefix applied). */
  key(name) {
    if (typeof name !== 'string' || name === '') throw new TypeError('a lock name must be a non-empty string');
    return this.prefix + name;
  }

  /** One command on the shared connection (never one that blocks). */
  call(name, key, args) {
    return send(this.conn, name, key, args.map(String));
  }

  /**
   * A write of a lock or a semaphore, followed on its connection by the wait for the replicas.
   * Where the node has replicas, on a pooled connection (a WAIT must not hold up the shared
   * one); where it has none (or had none at the last count), on the shared connection, with
   * INFO in front when the count is stale. Rejects as `call` does when the reply is lost
   * (after ending the request server-side on a pooled connection), and with a
   * NoSyncedReplicasError (carrying the reply) when no replica acknowledged.
   */
  async callSynced(name, key, args) {
    if (this.syncTimeout == null) return this.call(name, key, args);
    const node = nodeOf(this.conn, key);
    const last = node == null ? undefined : this.replicas.last(node);
    if (last && last.online > 0) {
      const { reply, lost } = await this.callWaiting(name, key, args, null, undefined, true);
      if (lost) throw lost;
      return reply;
    }
    const plan = this.syncPlan(this.conn, key);
    const reply = await send(this.conn, name, key, args.map(String));
    await plan.check(reply);
    return reply;
  }

  /** A plain command (EXISTS, PTTL, ...) on the shared connection. */
  plain(name, ...args) {
    return this.conn.call(name, ...args);
  }

  /**
   * A command that waits in the server up to `blockMs` (0: no limit; null: a command that does
   * not wait), on a pooled connection of its own. Resolves `{ reply }`, or `{ lost: err }` when
   * the reply is lost (the outcome is unknown): the connection is then closed and, on a
   * standalone server, its client killed from the shared connection (when that one is still
   * connected to the same server), so that nothing can be granted to it any more and what the
   * caller asks next on the shared connection is the final state. With `sync`, the wait for the
   * replicas follows the command on the same connection (see callSynced).
   *
   * `signal` (optional) ends the wait when it aborts: `CLIENT UNBLOCK <id> TIMEOUT` answers the
   * parked request at once (with its grant, if that came first), or, without a client id or the
   * permission, the connection is closed. The result then has `aborted: true`, with the reply
   * (which may be a grant to give back) or `lost`.
   */
  async callWaiting(name, key, args, blockMs, signal, sync = false) {
    const conn = await this.takeConnection();
    if (signal != null && signal.aborted) {
      this.waits.give(conn);
      return { aborted: true, lost: signal.reason };
    }
    const timer = blockMs == null ? this.commandTimeout : blockMs > 0 ? blockMs + this.blockGrace : undefined;
    let aborted = false;
    let answered = false;
    let unblocking = null;
    let noReply = null;
    const onAbort = () => {
      aborted = true;
      if (conn.lockmodId == null) {
        this.waits.drop(conn);
        return;
      }
      unblocking = this.unblock(conn, () => answered).then((unblocked) => {
        // Its reply (0, or a grant that came first) follows at once: the module answers a
        // grant racing the unblock with the grant, even on Redis 7.0 where the server alone
        // would drop it (issue 29). Bounded by blockGrace, for older modules.
        if (unblocked) noReply = longTimeout(() => this.waits.drop(conn), this.blockGrace);
      });
    };
    if (signal != null) signal.addEventListener('abort', onAbort, { once: true });
    // The INFO in front (a stale replica count), the command, the wait after it: one pipeline.
    const plan = sync && this.syncTimeout != null ? this.syncPlan(conn, key) : null;
    const server = conn.lockmodServer;
    const pending = send(conn, name, key, args.map(String), timer);
    const markAnswered = () => {
      answered = true;
    };
    pending.then(markAnswered, markAnswered);
    if (plan) plan.sendWait(false);
    try {
      const reply = await pending;
      if (signal != null) signal.removeEventListener('abort', onAbort);
      // The unblock must have run before the connection serves another wait.
      if (unblocking) await unblocking;
      clearLong(noReply);
      let unsynced = null;
      if (plan) {
        try {
          await plan.check(reply);
        } catch (err) {
          unsynced = err;
        }
      }
      if (plan && plan.broken) this.waits.drop(conn);
      else this.waits.give(conn);
      if (unsynced && !aborted) throw unsynced;
      if (unsynced) return { reply: unsynced.reply, aborted };
      return aborted ? { reply, aborted } : { reply };
    } catch (err) {
      if (signal != null) signal.removeEventListener('abort', onAbort);
      if (unblocking) await unblocking;
      clearLong(noReply);
      if (err instanceof LockError) throw err;
      if (isReplyError(err)) {
        // A node that is no longer the primary: this connection follows the new one no more.
        if (notRun(err)) this.waits.drop(conn);
        else this.waits.give(conn);
        throw err;
      }
      this.waits.drop(conn);
      if (conn.lockmodId != null && sameServer(this.conn, server)) {
        // Needs CLIENT KILL in the caller's ACL; without it the disconnect does the same, a
        // little later (a grant in that gap expires with its lease: nobody renews it). Only on
        // the server the wait went to: after a failover the shared connection is elsewhere.
        await this.conn.client('KILL', 'ID', String(conn.lockmodId)).catch(() => {});
      }
      return aborted ? { lost: err, aborted } : { lost: err };
    }
  }

  /**
   * `CLIENT UNBLOCK <id> TIMEOUT` of the wait on `conn`, from the shared connection, until the
   * server says it unblocked it (true) or `answered()` (its reply came first). A wait the
   * server has not parked yet (its command still unread: two connections are read in no fixed
   * order) is unblocked again a moment later, or the abort would be lost and the wait stay
   * parked for its whole time. Without the permission (or the shared connection), the
   * connection is closed instead, which takes the waiter out of the queue (false).
   */
  async unblock(conn, answered) {
    let pause = 1;
    while (!answered()) {
      let unblocked;
      try {
        unblocked = Number(await this.conn.client('UNBLOCK', String(conn.lockmodId), 'TIMEOUT'));
      } catch {
        this.waits.drop(conn);
        return false;
      }
      if (unblocked === 1) return true;
      if (answered()) return false;
      await sleep(pause);
      pause = Math.min(pause * 2, 50);
    }
    return false;
  }

  /**
   * Deletes an unlock's latch once the unlock's reply arrived and no other copy of it can run
   * (Redisson does the same): not waited for, its reply ignored. A server that refuses the DEL
   * (NOPERM) is not asked again: the latches then expire by themselves.
   */
  dropLatch(key, requestId) {
    if (!this.latchCleanup || this.closed) return;
    const latch = latchKey(key, requestId);
    send(this.conn, 'DEL', latch, []).catch((err) => {
      if (isReplyError(err) && String(err.message).startsWith('NOPERM')) this.latchCleanup = false;
    });
  }

  /**
   * The wait for the replicas of one write on `conn` (routed by `key`): sends INFO now when
   * the node's count is stale (call before sending the write); `sendWait()` after the write
   * pipelines the wait when the count is known (on a Cluster it follows the reply, so that a
   * redirected write is waited for on the node that ran it); `check(reply)` sends the wait if
   * it is still due and throws a NoSyncedReplicasError when no replica acknowledged.
   */
  syncPlan(conn, key) {
    const client = this;
    const t = this.syncTimeout;
    const timer = t + this.blockGrace;
    const node = nodeOf(conn, key);
    const entry = this.replicas.get(node);
    const info = entry ? null : sendKeyed(conn, 'INFO', key, INFO_SECTIONS).catch((e) => e);
    let wait = null;
    let waited = null;
    const sendWait = (late) => {
      const known = entry || null;
      if (!known || waited || (client.cluster && !late)) return;
      wait = waitCommand(known, t);
      if (wait) waited = sendKeyed(conn, wait[0], key, wait.slice(1), timer).catch((e) => e);
    };
    const plan = {
      broken: false,
      sendWait,
      async check(reply) {
        if (info) {
          const learned = client.replicas.learn(node, await info);
          if (!waited) {
            wait = waitCommand(learned, t);
            if (wait) waited = sendKeyed(conn, wait[0], key, wait.slice(1), timer).catch((e) => e);
          }
        } else if (!waited) {
          sendWait(true);
        }
        if (!wait) return;
        const answer = await waited;
        // A wait that timed out client-side still has its reply coming: not reused.
        if (answer instanceof Error) plan.broken = true;
        client.replicas.check(node, wait, answer, reply, t);
      },
    };
    return plan;
  }

  /**
   * A pooled connection. One that cannot be opened (a failover in progress, the server
   * restarting) is tried again for up to `resolveTimeout` ms: nothing was sent yet.
   */
  async takeConnection() {
    const start = Date.now();
    let delay = 25;
    for (;;) {
      try {
        return await this.waits.take();
      } catch (err) {
        if (isReplyError(err) || this.closed || Date.now() - start >= this.resolveTimeout) throw err;
        await sleep(delay);
        delay = Math.min(delay * 2, 500);
      }
    }
  }

  /**
   * Runs `fn` until it gets a reply: a lost reply (timeout, closed connection) is retried with
   * backoff for up to `resolveTimeout` ms. Only for what is safe to repeat: a query, a renewal,
   * an unlock with the same LATCH id.
   */
  async untilAnswered(what, fn) {
    const start = Date.now();
    let delay = 25;
    for (;;) {
      try {
        return await fn();
      } catch (err) {
        if (isReplyError(err) || err instanceof LockError) throw err;
        if (this.closed || Date.now() - start >= this.resolveTimeout) {
          throw new LockStateUnknownError(`${what}: no reply within ${this.resolveTimeout} ms`, { cause: err });
        }
        await sleep(delay);
        delay = Math.min(delay * 2, 500);
      }
    }
  }

  /**
   * Closes every connection of this client. The ioredis client it was made from is the
   * caller's and stays open, unless `{ client: true }`: then it is quit too, so that one call
   * closes everything (`new LockClient(new Redis())` keeps no other reference to it).
   */
  async quit(options = {}) {
    this.closed = true;
    this.waits.close();
    await quitOrDisconnect(this.conn);
    if (options.client) await quitOrDisconnect(this.redis);
  }

  /** Closes every connection at once, replies pending or not (`{ client: true }` as quit). */
  disconnect(options = {}) {
    this.closed = true;
    this.waits.close();
    this.conn.disconnect();
    if (options.client) this.redis.disconnect();
  }
}

async function quitOrDisconnect(conn) {
  try {
    await conn.quit();
  } catch {
    conn.disconnect();
  }
}

module.exports = { LockClient };
