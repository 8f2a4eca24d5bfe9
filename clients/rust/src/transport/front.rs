//! What goes in front of a request in its pipeline, and how its replies are taken off again:
//! the unlock latches to delete (`DEL`), the replica count when stale (`INFO`), and `ASKING`
//! (right before the commands: any other command in between would clear it).
//!
//! An unlock's latch (`redisson_unlock_latch:{name}:<id>`, crate::protocol) is only needed
//! while the unlock may be sent again; once its reply came on its first send nothing can send
//! it again, so it is deleted, as Redisson deletes its own. Not with a round trip of its own:
//! the `DEL` rides in front of the next request to the same node (in a busy client, the next
//! acquire or unlock), and the transport's `flush_latch_dels` sends what is left at `close`. A
//! `DEL` whose reply is lost or refused (an ACL without `DEL`, a slot that moved) changes
//! nothing: that latch expires by itself.

use redis::{Cmd, Pipeline, Value};

use super::replicas;

/// The commands in front of a request's own.
#[derive(Debug, Clone, Copy)]
pub(super) struct Front {
    /// `DEL`s of unlock latches.
    pub dels: usize,
    /// `INFO` (the replica count is stale).
    pub info: bool,
    /// `ASKING` (an `ASK` redirection).
    pub asking: bool,
}

impl Front {
    /// How many replies come before the request's own.
    pub fn len(&self) -> usize {
        self.dels + usize::from(self.info) + usize::from(self.asking)
    }

    /// The whole pipeline: the front, the commands, the replica wait.
    pub fn pipeline(&self, dels: &[String], cmds: &[Cmd], wait: Option<&Cmd>) -> Pipeline {
        let mut pipe = redis::pipe();
        for key in dels {
            pipe.cmd("DEL").arg(key);
        }
        if self.info {
            pipe.add_command(replicas::info_cmd());
        }
        if self.asking {
            pipe.cmd("ASKING");
        }
        for c in cmds.iter().chain(wait) {
            pipe.add_command(c.clone());
        }
        pipe
    }

    /// Takes the front's replies off `values`; returns `INFO`'s, if sent.
    pub fn strip(&self, values: &mut Vec<Value>) -> Option<Value> {
        let n = self.len().min(values.len());
        let mut front = values.drain(..n);
        let _dels = front.by_ref().take(self.dels).count();
        let info = if self.info { front.next() } else { None };
        drop(front);
        info
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_front_goes_first_asking_right_before_the_commands_and_comes_off_again() {
        let front = Front { dels: 2, info: true, asking: true };
        let cmds = [redis::cmd("LOCK.ACQUIRE").arg("n").clone()];
        let pipe = front.pipeline(&["d1".into(), "d2".into()], &cmds, Some(&redis::cmd("WAIT")));
        let name = |c: &Cmd| match c.args_iter().next() {
            Some(redis::Arg::Simple(b)) => String::from_utf8_lossy(b).into_owned(),
            _ => String::new(),
        };
        let names: Vec<String> = pipe.cmd_iter().map(name).collect();
        assert_eq!(names, ["DEL", "DEL", "INFO", "ASKING", "LOCK.ACQUIRE", "WAIT"]);
        let mut values = vec![
            Value::Int(1),
            redis::parse_redis_value(b"-NOPERM no DEL\r\n").unwrap(),
            Value::SimpleString("info".into()),
            Value::Okay,
            Value::Nil,
            Value::Int(0),
        ];
        assert_eq!(front.strip(&mut values), Some(Value::SimpleString("info".into())));
        assert_eq!(values, vec![Value::Nil, Value::Int(0)], "a refused DEL is not the request's error");
    }
}
