// Type declarations of redis-lockmod (the library is plain JavaScript: index.js, lib/).
// Guide: docs/clients.md in the repository.

import type { Cluster, Redis } from 'ioredis';

/**
 * Times are integers of ms up to Number.MAX_SAFE_INTEGER (else a RangeError, before anything
 * is sent); timers of any length work (Node's setTimeout alone stops at 24.8 days).
 */
export interface LockClientOptions {
  /** The uuid every owner id starts with (default: a random one, as Redisson's client id). */
  id?: string;
  /** Lease of a hold acquired without `lease`, kept alive by the watchdog (default 30000 ms). */
  watchdogTimeout?: number;
  /** How often the watchdog renews, below watchdogTimeout (default watchdogTimeout / 3). */
  renewInterval?: number;
  /** Lifetime of each unlock's LATCH; must exceed resolveTimeout (default 60000 ms). */
  latchMs?: number;
  /** How long a lost reply is settled for (asking the server, or re-sending an unlock with its latch) before LockStateUnknownError (default 10000 ms). */
  resolveTimeout?: number;
  /** Extra time the library waits past a BLOCK wait for the server's reply (default 5000 ms). */
  blockGrace?: number;
  /** commandTimeout of the library's shared connection, at most 2^31 - 1 ms (default: the caller client's). */
  commandTimeout?: number;
  /** Idle connections kept for BLOCK waits and synced writes (default 8). */
  maxIdleWaitConnections?: number;
  /**
   * Redisson's checkLockSyncedSlaves: every grant, renewal and unlock of a lock (and every
   * change of a semaphore) waits for the primary's replicas (WAIT, or WAITAOF with an AOF) and
   * rejects with NoSyncedReplicasError when none acknowledged (default true).
   */
  syncReplicas?: boolean;
  /** Redisson's slavesSyncTimeout: how long each write waits for the replicas (default 1000 ms). */
  syncTimeout?: number;
}

export interface CloseOptions {
  /** Also close the ioredis client the LockClient was made from (default false). */
  client?: boolean;
}

export interface LockOptions {
  /**
   * Redisson's reentrance (default false): the lock object is one holder, one owner id, and
   * every acquire through it re-enters, whoever calls it; the read and write locks of a
   * ReadWriteLock share it (a writer may also read, and downgrade). Without it each acquire is
   * a holder of its own, so callers sharing the object exclude each other.
   */
  reentrant?: boolean;
  /** An explicit owner id: the object is then one holder (reentrant). Default `<client uuid>:<n>`, a new n per hold. */
  owner?: string;
  /** Default lease in ms of every acquire; without one, the watchdog keeps the lock. */
  lease?: number;
  /** Reply fencing tokens (`token`) on every grant. */
  fenced?: boolean;
  /** Called once when the lock is lost while held (the signal aborts as well). */
  onLost?: (err: LockLostError) => void;
}

export interface FairLockOptions extends LockOptions {
  /** Redisson's threadWaitTime, the same for every client of the lock (default 300000 ms). */
  wait?: number;
}

export interface AcquireOptions {
  /**
   * Ms to wait for the lock (an integer): undefined, Infinity or past Number.MAX_SAFE_INTEGER
   * waits without limit, 0 tries once; NaN, a fraction or a negative number is a RangeError.
   */
  timeout?: number;
  /** Lease in ms of this hold; without one (here or on the lock), the watchdog keeps it. */
  lease?: number;
  /**
   * Stops the wait when aborted: the call rejects with `signal.reason`, after the parked
   * request was ended (CLIENT UNBLOCK ... TIMEOUT) and a grant that raced the abort given back.
   */
  signal?: AbortSignal;
}

/**
 * What every lock object offers. An object may be shared by concurrent callers: each acquire
 * is a holder of its own (they exclude each other), unless the lock is `reentrant`.
 */
export interface LockLike {
  readonly name: string;
  /** The owner id of the current hold (else of the next acquire); reentrant: its one owner id. */
  readonly owner: string;
  /** Whether every acquire through this object re-enters one holder (`reentrant: true` or `owner`). */
  readonly reentrant: boolean;
  /** Aborts with a LockLostError when the current hold is lost; null before the first grant. */
  readonly signal: AbortSignal | null;
  /** The fencing token of the latest grant (locks created with `fenced: true`), else null. */
  readonly token: number | null;
  /** Resolves true when granted, false when `timeout` ran out. */
  acquire(options?: AcquireOptions): Promise<boolean>;
  /** Releases one hold (the oldest this object has; reentrant: of its holder). Rejects with LockNotHeldError or LockLostError. */
  release(): Promise<void>;
  /** The current hold's count on the server (Redisson's getHoldCount); 0 when this object holds nothing. */
  holdCount(): Promise<number>;
  /** Whether this object holds it (Redisson's isHeldByCurrentThread). */
  isHeld(): Promise<boolean>;
  /** Whether anyone holds it (in this mode, for the read and write locks). */
  isLocked(): Promise<boolean>;
  /** The lock's remaining time to live in ms (-2: free, -1: no expiry). */
  remainingMs(): Promise<number>;
  /** Frees it whoever holds it; true if it was held. */
  forceUnlock(): Promise<boolean>;
}

export class Lock implements LockLike {
  constructor(client: LockClient, name: string, options?: LockOptions);
  readonly name: string;
  readonly owner: string;
  readonly reentrant: boolean;
  readonly signal: AbortSignal | null;
  readonly token: number | null;
  acquire(options?: AcquireOptions): Promise<boolean>;
  release(): Promise<void>;
  holdCount(): Promise<number>;
  isHeld(): Promise<boolean>;
  isLocked(): Promise<boolean>;
  remainingMs(): Promise<number>;
  forceUnlock(): Promise<boolean>;
}

export class FairLock extends Lock {
  constructor(client: LockClient, name: string, options?: FairLockOptions);
  readonly wait: number;
}

/** The read side of a ReadWriteLock (no fencing tokens: `token` stays null). */
export class ReadLock extends Lock {
  private constructor();
}

/** The write side of a ReadWriteLock. */
export class WriteLock extends Lock {
  private constructor();
}

export class ReadWriteLock {
  /** `fenced` applies to the write lock; `reentrant` (or `owner`) makes both sides one holder. */
  constructor(client: LockClient, name: string, options?: LockOptions);
  readonly name: string;
  /** The one owner id of both sides when reentrant, else null (each acquire takes its own). */
  readonly owner: string | null;
  readLock(): ReadLock;
  writeLock(): WriteLock;
}

export interface SemaphoreAcquireOptions {
  /** Permits to take (default 1). */
  permits?: number;
  /** Ms to wait in the server (an integer): undefined, Infinity or past Number.MAX_SAFE_INTEGER waits without limit, 0 tries once. */
  timeout?: number;
  /**
   * Stops the wait when aborted: the call rejects with `signal.reason`, and permits granted
   * meanwhile are given back (the parked request is ended with CLIENT UNBLOCK ... TIMEOUT).
   */
  signal?: AbortSignal;
}

export interface PermitAcquireOptions extends SemaphoreAcquireOptions {
  /** Lease in ms of each permit (default: the semaphore's `lease`; none: never expires). */
  lease?: number;
}

export interface AwaitOptions {
  /** Ms to wait in the server (an integer): undefined, Infinity or past Number.MAX_SAFE_INTEGER waits without limit, 0 checks once. */
  timeout?: number;
  /** Stops the wait when aborted: the call rejects with `signal.reason`. */
  signal?: AbortSignal;
}

export interface PermitExpirableSemaphoreOptions {
  /** Default lease in ms of every acquire (without one, a permit never expires, as Redisson's acquire()). */
  lease?: number;
}

/** Redisson's RSemaphore (SEMAPHORE.*): permits taken and given back by anyone, FIFO waits. */
export class Semaphore {
  constructor(client: LockClient, name: string);
  readonly name: string;
  /** Sets the permits if the semaphore does not exist (`lease`: ms until the key expires). */
  trySetPermits(permits: number, options?: { lease?: number }): Promise<boolean>;
  /** True when taken, false when `timeout` ran out; rejects with `signal.reason` on abort. */
  acquire(options?: SemaphoreAcquireOptions): Promise<boolean>;
  /** Gives permits back (default 1); resolves the permits now available. */
  release(permits?: number): Promise<number>;
  /** Adds `delta` permits (negative: removes them). */
  addPermits(delta: number): Promise<void>;
  /** Takes every available permit; resolves how many. */
  drainPermits(): Promise<number>;
  /** The permits available now (0 when it does not exist). */
  availablePermits(): Promise<number>;
}

/** Redisson's RPermitExpirableSemaphore (PSEMAPHORE.*): permits with ids and leases. */
export class PermitExpirableSemaphore {
  constructor(client: LockClient, name: string, options?: PermitExpirableSemaphoreOptions);
  readonly name: string;
  readonly lease: number | undefined;
  trySetPermits(permits: number): Promise<boolean>;
  /** Sets the total (available plus taken), as Redisson's setPermits. */
  setPermits(permits: number): Promise<void>;
  /** The permit ids (32 hex digits each), or null when `timeout` ran out. */
  acquire(options?: PermitAcquireOptions): Promise<string[] | null>;
  /** Releases all of `ids` or none (one unknown, released or expired): true if released. */
  tryRelease(ids: string | readonly string[]): Promise<boolean>;
  /** As tryRelease; rejects with LockNotHeldError when nothing was released. */
  release(ids: string | readonly string[]): Promise<void>;
  /** Sets a held permit's lease to `lease` ms from now (0: never expires); false if it is gone. */
  updateLease(id: string, lease: number): Promise<boolean>;
  availablePermits(): Promise<number>;
  acquiredPermits(): Promise<number>;
}

/** Redisson's RCountDownLatch (COUNTDOWN.*): every waiter is woken when the count reaches 0. */
export class CountDownLatch {
  constructor(client: LockClient, name: string);
  readonly name: string;
  trySetCount(count: number): Promise<boolean>;
  /** Resolves the count left (0: the latch is open, its key deleted). */
  countDown(): Promise<number>;
  count(): Promise<number>;
  /** Redisson's await: true once the count is 0 (or no latch), false when `timeout` ran out. */
  await(options?: AwaitOptions): Promise<boolean>;
}

/** Redisson's RateType: one window for every client, or one per client id. */
export type RateType = 'OVERALL' | 'PER_CLIENT';
export const RateType: { readonly OVERALL: 'OVERALL'; readonly PER_CLIENT: 'PER_CLIENT' };

export interface RateLimiterOptions {
  /** The id of this client's PER_CLIENT window (default: the LockClient's id; a Redisson client's instance id shares its window). */
  clientId?: string;
}

export interface RateOptions {
  /** Ms the limiter's keys live after their last use (at least the interval; default: forever). */
  keepAlive?: number;
}

export interface SetRateOptions extends RateOptions {
  /** Keep the grants in the window (they count against the new rate); default: start afresh. */
  keepState?: boolean;
  /** Only if the limiter is set (Redisson's updateRate); resolves false otherwise. */
  xx?: boolean;
}

/** The settings in the limiter's hash. */
export interface RateLimiterConfig {
  type: RateType;
  rate: number;
  /** ms */
  interval: number;
  /** ms, 0: none */
  keepAlive: number;
}

/** Redisson's RRateLimiter (RATELIMITER.*): at most `rate` permits in any window of `interval` ms. */
export class RateLimiter {
  constructor(client: LockClient, name: string, options?: RateLimiterOptions);
  readonly name: string;
  readonly clientId: string;
  /** Sets the rate if the limiter has none yet; true if set. */
  trySetRate(type: RateType, rate: number, interval: number, options?: RateOptions): Promise<boolean>;
  /** Sets the rate whatever it was (Redisson's setRate(RateLimiterArgs)); false only with `xx` and no limiter. */
  setRate(type: RateType, rate: number, interval: number, options?: SetRateOptions): Promise<boolean>;
  /** True when taken, false when `timeout` ran out; rejects with `signal.reason` on abort (a racing grant is given back). */
  acquire(options?: SemaphoreAcquireOptions): Promise<boolean>;
  /** Takes the permits (default 1) if they fit now; never waits. */
  tryAcquire(permits?: number): Promise<boolean>;
  /** Gives permits back (default 1); resolves the permits available after it. */
  release(permits?: number): Promise<number>;
  /** The permits that fit in the window now (0 to the rate). */
  availablePermits(): Promise<number>;
  /** The limiter's settings, or null when it has none. */
  getConfig(): Promise<RateLimiterConfig | null>;
}

export class LockClient {
  /** `redis` is only duplicated (the library's connections never resend a command). */
  constructor(redis: Redis | Cluster, options?: LockClientOptions);
  readonly id: string;
  lock(name: string, options?: LockOptions): Lock;
  fairLock(name: string, options?: FairLockOptions): FairLock;
  readWriteLock(name: string, options?: LockOptions): ReadWriteLock;
  semaphore(name: string): Semaphore;
  permitExpirableSemaphore(name: string, options?: PermitExpirableSemaphoreOptions): PermitExpirableSemaphore;
  countDownLatch(name: string): CountDownLatch;
  rateLimiter(name: string, options?: RateLimiterOptions): RateLimiter;
  /** The ioredis client this LockClient was made from (duplicated, never used itself). */
  readonly redis: Redis | Cluster;
  /**
   * Closes the library's connections; the caller's client too with `{ client: true }` (one
   * call that closes everything, e.g. after `new LockClient(new Redis())`).
   */
  quit(options?: CloseOptions): Promise<void>;
  /** Closes every connection at once, replies pending or not (`{ client: true }` as quit). */
  disconnect(options?: CloseOptions): void;
}

/**
 * Acquires `lock`, runs `fn(signal)`, releases the lock (also when `fn` throws). Rejects with
 * LockTimeoutError if not acquired within `timeout`, LockLostError if the lock was lost while
 * `fn` ran.
 */
export function using<T>(lock: LockLike, fn: (signal: AbortSignal) => Promise<T> | T, options?: AcquireOptions): Promise<T>;
/**
 * Holds `permits` (default 1) of `semaphore` for `fn`, released after it (also when it throws).
 * Rejects with LockTimeoutError if not acquired within `timeout`. The signal never aborts: a
 * semaphore's permits do not expire.
 */
export function using<T>(
  semaphore: Semaphore,
  fn: (signal: AbortSignal) => Promise<T> | T,
  options?: SemaphoreAcquireOptions,
): Promise<T>;
/**
 * Holds permits of `semaphore` for `fn(signal, ids)`, released after it. The signal aborts with
 * a LockLostError when a permit's lease runs out first (updateLease moves it), and then the
 * release rejects with it.
 */
export function using<T>(
  semaphore: PermitExpirableSemaphore,
  fn: (signal: AbortSignal, ids: string[]) => Promise<T> | T,
  options?: PermitAcquireOptions,
): Promise<T>;

export class LockError extends Error {
  readonly code: string;
}
export class LockNotHeldError extends LockError {
  readonly code: 'ELOCKNOTHELD';
}
export class LockLostError extends LockError {
  readonly code: 'ELOCKLOST';
}
export class LockTimeoutError extends LockError {
  readonly code: 'ELOCKTIMEOUT';
}
export class LockStateUnknownError extends LockError {
  readonly code: 'ELOCKUNKNOWN';
}
/**
 * No replica acknowledged a write within syncTimeout. A grant was given back before this is
 * thrown; any other change stays applied on the primary.
 */
export class NoSyncedReplicasError extends LockError {
  readonly code: 'ELOCKNOSYNC';
  /** The write's reply (what the call would have resolved from). */
  readonly reply: unknown;
  /** How many replicas the primary had. */
  readonly replicas: number;
  /** How many acknowledged: 0. */
  readonly synced: number;
}

/** The fencing counter's key for a lock name: `redisson_lock_token:{name}`. */
export function tokenKey(name: string): string;

export const version: string;
