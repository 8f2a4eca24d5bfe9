//! The one-command requests built on [`Transport::call`]: a read, sent again while its reply
//! is lost, and a change, sent once (a lost reply is [`Error::StateUnknown`]); each with or
//! without the replica sync.

use std::time::Duration;

use redis::{Cmd, Value};

use super::{command_name, CallError, Request, Synced, Transport};
use crate::error::Error;

/// Times a read that changes nothing is sent when its reply is lost.
const READ_ATTEMPTS: usize = 3;

impl Transport {
    /// One command that changes nothing: sent again (up to 3 times) while its reply is lost.
    pub async fn read(&self, key: &str, cmd: Cmd, timeout: Duration) -> Result<Value, Error> {
        self.read_synced(key, cmd, timeout, None).await.map(|(v, _)| v)
    }

    /// As [`read`](Self::read), for a change that is safe to repeat (`PSEMAPHORE.UPDATELEASE`),
    /// with the replica sync.
    pub async fn read_synced(
        &self,
        key: &str,
        cmd: Cmd,
        timeout: Duration,
        sync: Option<Duration>,
    ) -> Result<(Value, Option<Synced>), Error> {
        let cmds = [cmd];
        let mut last = String::new();
        for _ in 0..READ_ATTEMPTS {
            match self.call(Request { key, cmds: &cmds, timeout: Some(timeout), cancel: None, sync }).await {
                Ok(mut r) => return Ok((r.values.pop().unwrap_or(Value::Nil), r.synced)),
                Err(CallError::Failed(e)) => return Err(e),
                Err(CallError::Lost(l)) => last = l.cause,
            }
        }
        Err(Error::unknown(&command_name(&cmds[0]), key, last))
    }

    /// One command that changes something: sent once; a lost reply is [`Error::StateUnknown`].
    pub async fn once(&self, key: &str, cmd: Cmd, timeout: Duration) -> Result<Value, Error> {
        self.once_synced(key, cmd, timeout, None).await.map(|(v, _)| v)
    }

    /// As [`once`](Self::once), with the replica sync.
    pub async fn once_synced(
        &self,
        key: &str,
        cmd: Cmd,
        timeout: Duration,
        sync: Option<Duration>,
    ) -> Result<(Value, Option<Synced>), Error> {
        let cmds = [cmd];
        match self.call(Request { key, cmds: &cmds, timeout: Some(timeout), cancel: None, sync }).await {
            Ok(mut r) => Ok((r.values.pop().unwrap_or(Value::Nil), r.synced)),
            Err(CallError::Failed(e)) => Err(e),
            Err(CallError::Lost(l)) => Err(Error::unknown(&command_name(&cmds[0]), key, l.cause)),
        }
    }
}
