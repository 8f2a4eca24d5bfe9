//! The module API functions `api!` calls, and the load-time check that the server exports them.

use redis_module::raw;

#[cold]
pub(crate) fn api_missing(name: &str) -> ! {
    // Unreachable from client input or the keyspace: whether a pointer is set depends only on
    // the server binary, and `missing_apis` (checked in OnLoad, before any command or callback
    // is registered) refuses to load the module on a server lacking any API `src/ffi` calls.
    // Were it reached anyway, every entry point runs under `catch_unwind`: an error reply or a
    // log line, never an unwind into Redis.
    panic!("the server does not export {name}")
}

/// Declares the module API functions `api!` may call: their names, and the load-time check.
macro_rules! needed_apis {
    ($($name:ident),* $(,)?) => {
        /// Every module API function called through `api!` (a unit test keeps this complete).
        pub const NEEDED_APIS: &[&str] = &[$(stringify!($name)),*];

        /// Names of the module API functions this module needs but the server does not export.
        pub fn missing_apis() -> Vec<&'static str> {
            let mut missing = Vec::new();
            // SAFETY: read-only access to pointers Redis wrote during RedisModule_Init.
            $( if unsafe { raw::$name }.is_none() { missing.push(stringify!($name)); } )*
            missing
        }
    };
}

needed_apis!(
    // ACL checks of derived keys and channels (ffi/acl.rs).
    RedisModule_GetClientUserNameById,
    RedisModule_GetCurrentUserName,
    RedisModule_GetModuleUserFromUserName,
    RedisModule_FreeModuleUser,
    RedisModule_ACLCheckKeyPermissions,
    RedisModule_ACLCheckChannelPermissions,
    RedisModule_ACLAddLogEntry,
    RedisModule_CallReplyType,
    RedisModule_CallReplyLength,
    RedisModule_GetClientInfoById,
    // The rest.
    RedisModule_OpenKey,
    RedisModule_KeyExists,
    RedisModule_CloseKey,
    RedisModule_KeyType,
    RedisModule_HashGet,
    RedisModule_HashSet,
    RedisModule_GetAbsExpire,
    RedisModule_SetAbsExpire,
    RedisModule_DeleteKey,
    RedisModule_UnlinkKey,
    RedisModule_Replicate,
    RedisModule_PublishMessage,
    RedisModule_CreateString,
    RedisModule_FreeString,
    RedisModule_StringPtrLen,
    RedisModule_StringToLongLong,
    RedisModule_ReplyWithNull,
    RedisModule_ReplyWithLongLong,
    RedisModule_ReplyWithError,
    RedisModule_ReplyWithArray,
    RedisModule_ReplyWithMap,
    RedisModule_ReplyWithStringBuffer,
    RedisModule_ReplyWithSimpleString,
    RedisModule_NotifyKeyspaceEvent,
    RedisModule_Milliseconds,
    RedisModule_ValueLength,
    RedisModule_ScanKey,
    RedisModule_ScanCursorCreate,
    RedisModule_ScanCursorDestroy,
    RedisModule_Scan,
    RedisModule_StringDMA,
    RedisModule_StringSet,
    RedisModule_StringTruncate,
    RedisModule_ListPush,
    RedisModule_ListPop,
    RedisModule_ListGet,
    RedisModule_ListDelete,
    RedisModule_ZsetAdd,
    RedisModule_ZsetRem,
    RedisModule_ZsetScore,
    RedisModule_ZsetFirstInScoreRange,
    RedisModule_ZsetRangeCurrentElement,
    RedisModule_ZsetRangeNext,
    RedisModule_ZsetRangeEndReached,
    RedisModule_ZsetRangeStop,
    // The rate limiter's newest grants (keys_collections.rs `zset_walk_rev`).
    RedisModule_ZsetLastInScoreRange,
    RedisModule_ZsetRangePrev,
    RedisModule_GetContextFlags,
    RedisModule_CreateCommand,
    RedisModule_Log,
    RedisModule_BlockClient,
    RedisModule_CommandFilterArgGet,
    RedisModule_CommandFilterArgsCount,
    RedisModule_CreateTimer,
    RedisModule_GetBlockedClientPrivateData,
    RedisModule_GetServerVersion,
    RedisModule_EventLoopAddOneShot,
    RedisModule_GetClientId,
    RedisModule_GetCommand,
    RedisModule_GetSelectedDb,
    RedisModule_LoadConfigs,
    RedisModule_RegisterCommandFilter,
    RedisModule_RegisterEnumConfig,
    RedisModule_RegisterStringConfig,
    RedisModule_SelectDb,
    RedisModule_DbSize,
    RedisModule_SetCommandInfo,
    RedisModule_SetDisconnectCallback,
    RedisModule_StopTimer,
    RedisModule_SubscribeToKeyspaceEvents,
    RedisModule_SubscribeToServerEvent,
    RedisModule_UnblockClient,
    RedisModule_AvoidReplicaTraffic,
    RedisModule_SetModuleOptions,
    RedisModule_SignalModifiedKey,
    RedisModule_GetKeyNameFromModuleKey,
    RedisModule_LatencyAddSample,
    RedisModule_Call,
    RedisModule_CallReplyArrayElement,
    RedisModule_CallReplyStringPtr,
    RedisModule_FreeCallReply,
    // The tax on other traffic (events.rs, server.rs).
    RedisModule_GetDetachedThreadSafeContext,
    RedisModule_InfoAddFieldCString,
    // The script cache (script_cache.rs).
    RedisModule_CallReplyInteger,
    // Permit ids of the expirable semaphore (random.rs).
    RedisModule_GetRandomBytes,
    // GCRA's period, read as the server reads a float (args.rs).
    RedisModule_StringToDouble,
);

// Test code only (compiled under cfg(test)): an unwrap, expect or panic here is a failed test,
// never reachable from the loaded module.
#[cfg(test)]
mod tests {
    use std::path::Path;

    /// Collects the `RedisModule_*` names every `api!(...)` under `dir` calls.
    fn called(dir: &Path, out: &mut Vec<String>) {
        for entry in std::fs::read_dir(dir).expect("src dir").flatten() {
            let path = entry.path();
            if path.is_dir() {
                called(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let text = std::fs::read_to_string(&path).expect("source file");
                for part in text.split("api!(").skip(1) {
                    let name: String = part.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
                    if name.starts_with("RedisModule_") {
                        out.push(name);
                    }
                }
            }
        }
    }

    /// `api_missing` may panic only if the load-time check missed a function: it must not.
    #[test]
    fn the_load_time_check_covers_every_api_called() {
        let mut names = Vec::new();
        called(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"), &mut names);
        assert!(names.len() > 20, "found only {names:?}");
        let unchecked: Vec<&String> = names.iter().filter(|n| !super::NEEDED_APIS.contains(&n.as_str())).collect();
        assert!(unchecked.is_empty(), "called through api! but not checked at load: {unchecked:?}");
    }
}
