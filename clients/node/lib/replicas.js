'use strict';
// Replicas synced, as Redisson's checkLockSyncedSlaves (docs/clients.md, "Replicas synced"):
// which wait follows a write of a lock or a semaphore, and how its reply is read. The LockClient
// sends it on the write's own connection (WAIT covers what that connection wrote, and the grant
// of a request parked there with BLOCK, which the server counts as the connection's: issue 29).
//
// The replica count of a node is the number of replicas `INFO replication` lists as online,
// kept for INFO_TTL ms: when it is stale, INFO goes in front of the write in the same pipeline,
// so no call pays a round trip for it. With no replica nothing is waited for (as Redisson: not
// even WAITAOF for the local AOF alone). With an AOF, on a server that has WAITAOF (Redis 7.2
// and later, every Valkey), the wait is `WAITAOF 1 <replicas> <ms>`, else `WAIT <replicas> <ms>`.

const { NoSyncedReplicasError } = require('./errors');

/** How long (ms) a node's replica count is trusted. */
const INFO_TTL = 1000;
/** The INFO sections read: the version (WAITAOF), the replicas, the AOF. */
const INFO_SECTIONS = ['server', 'replication', 'persistence'];
/** Redisson's slavesSyncTimeout. */
const DEFAULT_SYNC_TIMEOUT = 1000;

/** { online, aof, waitaof } from the text of INFO server replication persistence. */
function parseInfo(text) {
  let online = 0;
  const fields = {};
  for (const line of String(text).split(/\r?\n/)) {
    const i = line.indexOf(':');
    if (i < 0) continue;
    const key = line.slice(0, i);
    const value = line.slice(i + 1).trim();
    // A replica counts once online: one still loading its first copy acknowledges nothing.
    if (/^slave\d+$/.test(key)) online += value.includes('state=online') ? 1 : 0;
    else fields[key] = value;
  }
  // WAITAOF came with Redis 7.2; Valkey forked from 7.2.4 and reports that as redis_version.
  const [major, minor] = (fields.redis_version || '0.0').split('.').map(Number);
  return { online, aof: fields.aof_enabled === '1', waitaof: major > 7 || (major === 7 && minor >= 2) };
}

/** The wait for `entry`'s replicas (command and arguments), or null when there are none. */
function waitCommand(entry, timeoutMs) {
  if (entry.online === 0) return null;
  if (entry.aof && entry.waitaof) return ['WAITAOF', 1, entry.online, timeoutMs];
  return ['WAIT', entry.online, timeoutMs];
}

/** How many replicas acknowledged, from the reply of `wait` (WAITAOF: [local, replicas]). */
function syncedCount(wait, reply) {
  return Number(wait[0] === 'WAITAOF' ? reply[1] : reply);
}

/** The replica counts of the nodes one LockClient talks to, by node address. */
class ReplicaCache {
  constructor() {
    this.nodes = new Map();
  }

  /** The node's entry while fresh, else undefined. */
  get(node) {
    const entry = this.nodes.get(node);
    return entry && entry.until > Date.now() ? entry : undefined;
  }

  /** Records INFO's reply (an Error when refused: no counting, so nothing is waited for). */
  learn(node, info) {
    const entry = info instanceof Error ? { online: 0, aof: false, waitaof: false } : parseInfo(info);
    entry.until = Date.now() + INFO_TTL;
    if (this.nodes.size > 64) this.nodes.clear(); // a bound: nodes are few, an entry one INFO away
    this.nodes.set(node, entry);
    return entry;
  }

  /** The node's last entry, fresh or not (whether it had replicas at the last count). */
  last(node) {
    return this.nodes.get(node);
  }

  /** Counts the node's replicas again next time (its last entry stays as a hint). */
  drop(node) {
    const entry = this.nodes.get(node);
    if (entry) entry.until = 0;
  }

  /**
   * The wait `wait` after a write was answered `reply` (an Error: refused or lost): throws a
   * NoSyncedReplicasError carrying the write's reply `result` when no replica acknowledged.
   */
  check(node, wait, reply, result, timeoutMs) {
    const replicas = Number(wait[wait.length - 2]);
    if (reply instanceof Error) {
      this.drop(node);
      throw new NoSyncedReplicasError(`${wait[0]} after the write failed (${reply.message}); its replicas are unknown`, {
        reply: result,
        replicas,
        cause: reply,
      });
    }
    const n = syncedCount(wait, reply);
    // A replica came or went (or lags): count them again next time, as Redisson does.
    if (n !== replicas) this.drop(node);
    if (n === 0) {
      throw new NoSyncedReplicasError(
        `none of the ${replicas} replica(s) acknowledged the write within ${timeoutMs} ms ` +
          '(raise syncTimeout, or syncReplicas: false to not wait)',
        { reply: result, replicas },
      );
    }
  }
}

module.exports = { ReplicaCache, parseInfo, waitCommand, syncedCount, INFO_SECTIONS, INFO_TTL, DEFAULT_SYNC_TIMEOUT };
