//! A parked client that checks it gets exactly one reply per acquire: each acquire is sent
//! with a `PING` right behind it on the same connection, so a missing reply shows as the
//! `PONG` read in the acquire's place, and an extra one as something else where the `PONG`
//! should be.

use std::time::Duration;

use super::{Server, Value};

/// What an acquire was answered.
#[derive(Clone, Debug, PartialEq)]
pub enum Answer {
    /// A reply (a grant or a refusal).
    Reply(Value),
    /// An error reply, as its line (`UNBLOCKED client unblocked via CLIENT UNBLOCK`).
    Error(String),
    /// The connection was closed (the client was killed).
    Gone,
}

/// A connection that sends acquires with a `PING` behind each.
pub struct Pinged {
    pub conn: redis::Connection,
    /// Its `CLIENT ID`.
    pub id: i64,
    /// The connection was seen closed.
    gone: bool,
}

impl Pinged {
    pub fn connect(s: &Server) -> Pinged {
        let mut conn = s.conn();
        conn.set_read_timeout(Some(Duration::from_secs(30))).expect("timeout");
        let id: i64 = redis::cmd("CLIENT").arg("ID").query(&mut conn).expect("CLIENT ID");
        Pinged { conn, id, gone: false }
    }

    /// Whether the connection is still open, as far as it has been read.
    pub fn alive(&self) -> bool {
        !self.gone
    }

    /// Sends `args` and a `PING`, reading nothing. A connection already closed by the server
    /// (killed) is noted, and the acquire is then answered [`Answer::Gone`].
    pub fn send(&mut self, args: &[&str]) {
        let mut bytes = redis::cmd(args[0]).arg(&args[1..]).get_packed_command();
        bytes.extend(redis::cmd("PING").get_packed_command());
        if self.conn.send_packed_command(&bytes).is_err() {
            self.gone = true;
        }
    }

    /// The answer to the acquire sent last, after checking that the `PING` behind it is
    /// answered right after it: exactly one reply per acquire.
    pub fn answer(&mut self) -> Answer {
        let first = self.answer_or_gone();
        assert!(first == Answer::Gone || self.alive(), "the connection closed right after the acquire's reply");
        first
    }

    /// The answer to the acquire sent last, on a connection that may be killed meanwhile: a
    /// reply followed by the `PING`'s, or by the closed connection (killed after its reply),
    /// or the closed connection alone. Still exactly one reply for the acquire.
    pub fn answer_or_gone(&mut self) -> Answer {
        let first = self.next();
        if first == Answer::Gone {
            return Answer::Gone;
        }
        assert_ne!(first, Answer::Reply(Value::SimpleString("PONG".into())), "the acquire got no reply");
        let second = self.next();
        if second != Answer::Gone {
            assert_eq!(
                second,
                Answer::Reply(Value::SimpleString("PONG".into())),
                "the acquire got more than one reply"
            );
        }
        first
    }

    fn next(&mut self) -> Answer {
        if self.gone {
            return Answer::Gone;
        }
        match self.conn.recv_response() {
            Ok(Value::ServerError(e)) => Answer::Error(super::error_line(e.into())),
            Ok(v) => Answer::Reply(v),
            Err(e) if e.is_timeout() => panic!("no reply within 30 s"),
            Err(e) if e.is_io_error() || e.is_connection_dropped() => {
                self.gone = true;
                Answer::Gone
            }
            Err(e) => Answer::Error(super::error_line(e)),
        }
    }
}
