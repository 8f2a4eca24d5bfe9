// Compiled by test/types.test.js with `tsc --noEmit --strict`: the declarations in index.d.ts
// describe the API as the tests use it, and reject misuse (each @ts-expect-error must error).
import Redis, { Cluster } from 'ioredis';
import {
  LockClient,
  Lock,
  FairLock,
  ReadLock,
  WriteLock,
  Semaphore,
  PermitExpirableSemaphore,
  CountDownLatch,
  RateLimiter,
  RateLimiterConfig,
  RateType,
  LockLostError,
  LockNotHeldError,
  LockStateUnknownError,
  NoSyncedReplicasError,
  using,
  tokenKey,
  version,
} from 'redis-lockmod';

async function main(): Promise<void> {
  const client = new LockClient(new Redis(), { watchdogTimeout: 30000, latchMs: 60000, syncReplicas: true, syncTimeout: 1000 });
  const unsynced = (e: unknown): number | undefined =>
    e instanceof NoSyncedReplicasError && e.code === 'ELOCKNOSYNC' ? e.replicas + e.synced : undefined;
  void unsynced;
  const onCluster = new LockClient(new Cluster([{ host: '127.0.0.1', port: 7000 }]));
  const lock: Lock = client.lock('orders', { fenced: true, onLost: (e: LockLostError) => e.code });
  const ok: boolean = await lock.acquire({ timeout: 5000, lease: 10000 });
  const token: number | null = lock.token;
  const holds: number = await lock.holdCount();
  const held: boolean = await lock.isHeld();
  const ttl: number = await lock.remainingMs();
  const forced: boolean = await lock.forceUnlock();
  await lock.release();
  const fair: FairLock = client.fairLock('queue', { wait: 5000 });
  const shared: boolean = client.lock('orders').reentrant || client.lock('orders', { reentrant: true }).reentrant;
  const abortable: boolean = await lock.acquire({ timeout: 5000, signal: AbortSignal.timeout(1000) });
  const rwOwner: string | null = client.readWriteLock('doc').owner;
  void [shared, abortable, rwOwner];
  const rw = client.readWriteLock('doc');
  const r: ReadLock = rw.readLock();
  const w: WriteLock = rw.writeLock();
  const n: number = await using(w, async (signal: AbortSignal) => (signal.aborted ? 0 : 1), { timeout: 100 });
  const s: string = await using(fair, () => 'sync result is fine');
  const lost: LockLostError | LockNotHeldError | LockStateUnknownError | null = null;
  const key: string = tokenKey('orders');
  const v: string = version;
  // @ts-expect-error: timeout is a number of ms
  await lock.acquire({ timeout: '5s' });
  // @ts-expect-error: a lock needs a name
  client.lock();
  // @ts-expect-error: LockClient takes an ioredis client, not options
  new LockClient({ host: 'localhost' });
  // @ts-expect-error: a Lock takes a LockClient, not the ioredis client
  new Lock(new Redis(), 'orders');
  const mine: Redis | Cluster = client.redis;
  const sem: Semaphore = client.semaphore('pool');
  const set: boolean = await sem.trySetPermits(3, { lease: 60000 });
  const took: boolean = await sem.acquire({ permits: 2, timeout: 1000, signal: AbortSignal.timeout(5000) });
  const left: number = await sem.release(2);
  await sem.addPermits(-1);
  const drained: number = (await sem.drainPermits()) + (await sem.availablePermits());
  const inSem: number = await using(sem, async (signal: AbortSignal) => (signal.aborted ? 0 : 1), { permits: 2 });
  const psem: PermitExpirableSemaphore = client.permitExpirableSemaphore('jobs', { lease: 60000 });
  const ids: string[] | null = await psem.acquire({ permits: 2, lease: 1000, timeout: 0 });
  if (ids) {
    const updated: boolean = await psem.updateLease(ids[0], 5000);
    const released: boolean = await psem.tryRelease(ids);
    await psem.release(ids[0]);
    void [updated, released];
  }
  const first: string = await using(psem, async (signal: AbortSignal, held: string[]) => held[0], { lease: 100 });
  const latch: CountDownLatch = client.countDownLatch('ready');
  const opened: boolean = (await latch.trySetCount(2)) && (await latch.await({ timeout: 100 }));
  const countLeft: number = (await latch.countDown()) + (await latch.count());
  // @ts-expect-error: permits is a number
  await sem.acquire({ permits: '2' });
  // @ts-expect-error: a semaphore takes a LockClient
  new Semaphore(new Redis(), 'pool');
  // @ts-expect-error: ids are strings
  await psem.release(7);
  const limiter: RateLimiter = client.rateLimiter('api', { clientId: 'java-instance-id' });
  const rateSet: boolean = await limiter.trySetRate(RateType.OVERALL, 10, 1000, { keepAlive: 60000 });
  const updated: boolean = await limiter.setRate('PER_CLIENT', 5, 1000, { keepState: true, xx: true });
  const granted: boolean = (await limiter.acquire({ permits: 2, timeout: 500, signal: AbortSignal.timeout(1000) })) && (await limiter.tryAcquire(1));
  const permitsNow: number = (await limiter.release(1)) + (await limiter.availablePermits());
  const config: RateLimiterConfig | null = await limiter.getConfig();
  const perClient: RateType | undefined = config?.type;
  const ownWindow: string = new RateLimiter(client, 'api').clientId;
  // @ts-expect-error: a rate type is OVERALL or PER_CLIENT
  await limiter.trySetRate('ALL', 10, 1000);
  // @ts-expect-error: the interval is a number of ms
  await limiter.setRate('OVERALL', 10, '1s');
  void [rateSet, updated, granted, permitsNow, perClient, ownWindow];
  void [ok, token, holds, held, ttl, forced, r, n, s, lost, key, v, onCluster, mine];
  void [set, took, left, drained, inSem, first, opened, countLeft, new PermitExpirableSemaphore(client, 'p'), new CountDownLatch(client, 'c')];
  onCluster.disconnect({ client: true });
  await client.quit({ client: true });
  await client.quit();
}

void main;
