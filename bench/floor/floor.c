/* The floor: the least a native command can cost on this server for the effects of
 * LOCK.ACQUIRE, LOCK.UNLOCK and RWLOCK.RLOCK (issue 17). Each FLOOR.* command makes the same
 * keyspace writes, fires the same keyspace events and replicates the same commands (with the
 * same absolute times) as its lockmod counterpart on the paths the benchmark runs, and nothing
 * else: no argument checks beyond what a crash would need, no bookkeeping, no BLOCK.
 *
 * Built by the benchmark driver with the system C compiler against the redismodule.h of the
 * redis-module crate: cc -O2 -shared -fPIC -I<dir> floor.c -o libfloor.so */
#include <stdio.h>
#include <string.h>
#include "redismodule.h"

#define RW (REDISMODULE_READ | REDISMODULE_WRITE)

/* Redisson's naming: `{name}` unless the name already has a `{`. */
static RedisModuleString *derived(RedisModuleCtx *ctx, const char *pre, RedisModuleString *key, const char *suf) {
    size_t len;
    const char *k = RedisModule_StringPtrLen(key, &len);
    int tagged = memchr(k, '{', len) != NULL;
    return RedisModule_CreateStringPrintf(ctx, tagged ? "%s%.*s%s" : "%s{%.*s}%s", pre, (int)len, k, suf);
}

/* The module's clock: the cached time where the server has one (7.2+), else a fresh read. */
static long long now_ms(void) {
    if (RedisModule_CachedMicroseconds) return RedisModule_CachedMicroseconds() / 1000;
    return RedisModule_Milliseconds();
}

/* FLOOR.ACQUIRE key owner lease: HINCRBY owner 1 + PEXPIREAT, or the PTTL if held by another. */
static int Acquire(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    long long lease, n = 0;
    if (argc != 4 || RedisModule_StringToLongLong(argv[3], &lease) != REDISMODULE_OK) return RedisModule_WrongArity(ctx);
    RedisModuleKey *k = RedisModule_OpenKey(ctx, argv[1], RW);
    if (RedisModule_KeyType(k) == REDISMODULE_KEYTYPE_HASH) {
        RedisModuleString *cur = NULL;
        RedisModule_HashGet(k, REDISMODULE_HASH_NONE, argv[2], &cur, NULL);
        if (cur == NULL) {
            long long ttl = RedisModule_GetExpire(k);
            RedisModule_CloseKey(k);
            return RedisModule_ReplyWithLongLong(ctx, ttl);
        }
        RedisModule_StringToLongLong(cur, &n);
        RedisModule_FreeString(ctx, cur);
    }
    RedisModuleString *v = RedisModule_CreateStringFromLongLong(ctx, n + 1);
    RedisModule_HashSet(k, REDISMODULE_HASH_NONE, argv[2], v, NULL);
    RedisModule_NotifyKeyspaceEvent(ctx, REDISMODULE_NOTIFY_HASH, "hincrby", argv[1]);
    RedisModule_Replicate(ctx, "HINCRBY", "ssc", argv[1], argv[2], "1");
    long long at = now_ms() + lease;
    RedisModule_SetAbsExpire(k, at);
    RedisModule_NotifyKeyspaceEvent(ctx, REDISMODULE_NOTIFY_GENERIC, "expire", argv[1]);
    RedisModule_Replicate(ctx, "PEXPIREAT", "sl", argv[1], at);
    RedisModule_FreeString(ctx, v);
    RedisModule_CloseKey(k);
    return RedisModule_ReplyWithNull(ctx);
}

/* FLOOR.ACQUIREKIND key owner lease: FLOOR.ACQUIRE plus the one read LOCK.ACQUIRE makes
 * beyond the writes on a free name (issue 16's "one name, one kind": a free name with a live
 * fair waiter is not taken past it): whether the name's fair queue exists. Not the floor of
 * the target; a reference that shows what that read costs. */
static int AcquireKind(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    if (argc != 4) return RedisModule_WrongArity(ctx);
    /* The name built with copies, not a printf (which alone costs more than the lookup). */
    static const char pre[] = "redisson_lock_queue:";
    size_t len, n = sizeof pre - 1;
    const char *k = RedisModule_StringPtrLen(argv[1], &len);
    char buf[512];
    if (len > sizeof buf - n - 2) return RedisModule_ReplyWithError(ctx, "ERR the floor takes short names only");
    int tagged = memchr(k, '{', len) != NULL;
    memcpy(buf, pre, n);
    if (!tagged) buf[n++] = '{';
    memcpy(buf + n, k, len);
    n += len;
    if (!tagged) buf[n++] = '}';
    RedisModuleString *queue = RedisModule_CreateString(ctx, buf, n);
    int queued = RedisModule_KeyExists(ctx, queue);
    RedisModule_FreeString(ctx, queue);
    if (queued) return RedisModule_ReplyWithError(ctx, "ERR the floor takes names without a fair queue only");
    return Acquire(ctx, argv, argc);
}

/* FLOOR.UNLOCK key owner lease: to zero, HINCRBY owner -1, DEL and PUBLISH 0 on the lock
 * channel; else HINCRBY owner -1 and PEXPIREAT. Nil when the owner holds nothing. */
static int Unlock(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    long long lease, n = 0;
    if (argc != 4 || RedisModule_StringToLongLong(argv[3], &lease) != REDISMODULE_OK) return RedisModule_WrongArity(ctx);
    RedisModuleKey *k = RedisModule_OpenKey(ctx, argv[1], RW);
    RedisModuleString *cur = NULL;
    if (RedisModule_KeyType(k) == REDISMODULE_KEYTYPE_HASH)
        RedisModule_HashGet(k, REDISMODULE_HASH_NONE, argv[2], &cur, NULL);
    if (cur == NULL) {
        RedisModule_CloseKey(k);
        return RedisModule_ReplyWithNull(ctx);
    }
    RedisModule_StringToLongLong(cur, &n);
    RedisModule_FreeString(ctx, cur);
    if (n > 1) {
        RedisModuleString *v = RedisModule_CreateStringFromLongLong(ctx, n - 1);
        RedisModule_HashSet(k, REDISMODULE_HASH_NONE, argv[2], v, NULL);
        RedisModule_FreeString(ctx, v);
        RedisModule_NotifyKeyspaceEvent(ctx, REDISMODULE_NOTIFY_HASH, "hincrby", argv[1]);
        RedisModule_Replicate(ctx, "HINCRBY", "ssc", argv[1], argv[2], "-1");
        long long at = now_ms() + lease;
        RedisModule_SetAbsExpire(k, at);
        RedisModule_NotifyKeyspaceEvent(ctx, REDISMODULE_NOTIFY_GENERIC, "expire", argv[1]);
        RedisModule_Replicate(ctx, "PEXPIREAT", "sl", argv[1], at);
        RedisModule_CloseKey(k);
        return RedisModule_ReplyWithLongLong(ctx, 0);
    }
    RedisModule_NotifyKeyspaceEvent(ctx, REDISMODULE_NOTIFY_HASH, "hincrby", argv[1]);
    RedisModule_Replicate(ctx, "HINCRBY", "ssc", argv[1], argv[2], "-1");
    RedisModule_DeleteKey(k);
    RedisModule_CloseKey(k);
    RedisModule_NotifyKeyspaceEvent(ctx, REDISMODULE_NOTIFY_GENERIC, "del", argv[1]);
    RedisModule_Replicate(ctx, "DEL", "s", argv[1]);
    RedisModuleString *channel = derived(ctx, "redisson_lock__channel:", argv[1], "");
    RedisModuleString *zero = RedisModule_CreateString(ctx, "0", 1);
    RedisModule_PublishMessage(ctx, channel, zero);
    RedisModule_Replicate(ctx, "PUBLISH", "ss", channel, zero);
    RedisModule_FreeString(ctx, channel);
    RedisModule_FreeString(ctx, zero);
    return RedisModule_ReplyWithLongLong(ctx, 1);
}

/* FLOOR.RLOCK key owner lease on a free lock: HSET mode read, HSET owner 1, the hold's
 * timeout key SET 1 PXAT, PEXPIREAT on the lock. (The benchmark runs it on free locks.) */
static int RLock(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    long long lease;
    if (argc != 4 || RedisModule_StringToLongLong(argv[3], &lease) != REDISMODULE_OK) return RedisModule_WrongArity(ctx);
    RedisModuleKey *k = RedisModule_OpenKey(ctx, argv[1], RW);
    if (RedisModule_KeyType(k) != REDISMODULE_KEYTYPE_EMPTY) {
        RedisModule_CloseKey(k);
        return RedisModule_ReplyWithError(ctx, "ERR the floor takes free locks only");
    }
    RedisModuleString *mode = RedisModule_CreateString(ctx, "mode", 4);
    RedisModuleString *read = RedisModule_CreateString(ctx, "read", 4);
    RedisModuleString *one = RedisModule_CreateString(ctx, "1", 1);
    RedisModule_HashSet(k, REDISMODULE_HASH_NONE, mode, read, NULL);
    RedisModule_NotifyKeyspaceEvent(ctx, REDISMODULE_NOTIFY_HASH, "hset", argv[1]);
    RedisModule_Replicate(ctx, "HSET", "sss", argv[1], mode, read);
    RedisModule_HashSet(k, REDISMODULE_HASH_NONE, argv[2], one, NULL);
    RedisModule_NotifyKeyspaceEvent(ctx, REDISMODULE_NOTIFY_HASH, "hset", argv[1]);
    RedisModule_Replicate(ctx, "HSET", "sss", argv[1], argv[2], one);
    long long at = now_ms() + lease;
    size_t olen;
    const char *owner = RedisModule_StringPtrLen(argv[2], &olen);
    char suffix[600];
    snprintf(suffix, sizeof suffix, ":%.*s:rwlock_timeout:1", (int)(olen > 500 ? 500 : olen), owner);
    RedisModuleString *t = derived(ctx, "", argv[1], suffix);
    RedisModuleKey *tk = RedisModule_OpenKey(ctx, t, RW);
    RedisModule_StringSet(tk, one);
    RedisModule_SetAbsExpire(tk, at);
    RedisModule_CloseKey(tk);
    RedisModule_NotifyKeyspaceEvent(ctx, REDISMODULE_NOTIFY_STRING, "set", t);
    RedisModule_NotifyKeyspaceEvent(ctx, REDISMODULE_NOTIFY_GENERIC, "expire", t);
    RedisModule_Replicate(ctx, "SET", "sscl", t, one, "PXAT", at);
    RedisModule_SetAbsExpire(k, at);
    RedisModule_NotifyKeyspaceEvent(ctx, REDISMODULE_NOTIFY_GENERIC, "expire", argv[1]);
    RedisModule_Replicate(ctx, "PEXPIREAT", "sl", argv[1], at);
    RedisModule_CloseKey(k);
    RedisModule_FreeString(ctx, t);
    RedisModule_FreeString(ctx, mode);
    RedisModule_FreeString(ctx, read);
    RedisModule_FreeString(ctx, one);
    return RedisModule_ReplyWithNull(ctx);
}

int RedisModule_OnLoad(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    (void)argv;
    (void)argc;
    if (RedisModule_Init(ctx, "floor", 1, REDISMODULE_APIVER_1) != REDISMODULE_OK) return REDISMODULE_ERR;
    if (RedisModule_CreateCommand(ctx, "floor.acquire", Acquire, "write deny-oom fast", 1, 1, 1) != REDISMODULE_OK ||
        RedisModule_CreateCommand(ctx, "floor.acquirekind", AcquireKind, "write deny-oom fast", 1, 1, 1) != REDISMODULE_OK ||
        RedisModule_CreateCommand(ctx, "floor.unlock", Unlock, "write fast", 1, 1, 1) != REDISMODULE_OK ||
        RedisModule_CreateCommand(ctx, "floor.rlock", RLock, "write deny-oom fast", 1, 1, 1) != REDISMODULE_OK)
        return REDISMODULE_ERR;
    return REDISMODULE_OK;
}
