//! Reading the module's replies (RESP2 or RESP3) without panicking on an unexpected shape: a
//! reply the library cannot read is an [`Error::Redis`] of kind `ParseError`, never a panic.

use redis::Value;

use crate::error::Error;

fn unexpected(what: &str, v: &Value) -> Error {
    Error::Redis(redis::RedisError::from((
        redis::ErrorKind::Parse,
        "unexpected reply",
        format!("expected {what}, got {v:?}"),
    )))
}

/// An integer reply (also a number sent as a string, as `GET` of a counter).
pub(crate) fn int(v: &Value) -> Result<i64, Error> {
    match v {
        Value::Int(i) => Ok(*i),
        Value::BulkString(b) => {
            std::str::from_utf8(b).ok().and_then(|s| s.parse().ok()).ok_or_else(|| unexpected("an integer", v))
        }
        Value::SimpleString(s) => s.parse().map_err(|_| unexpected("an integer", v)),
        _ => Err(unexpected("an integer", v)),
    }
}

/// An integer, or `None` for nil.
pub(crate) fn opt_int(v: &Value) -> Result<Option<i64>, Error> {
    match v {
        Value::Nil => Ok(None),
        other => int(other).map(Some),
    }
}

/// A string reply, or `None` for nil.
pub(crate) fn opt_text(v: &Value) -> Result<Option<String>, Error> {
    match v {
        Value::Nil => Ok(None),
        Value::BulkString(b) => Ok(Some(String::from_utf8_lossy(b).into_owned())),
        Value::SimpleString(s) => Ok(Some(s.clone())),
        Value::VerbatimString { text, .. } => Ok(Some(text.clone())),
        other => Err(unexpected("a string", other)),
    }
}

/// The items of an array reply (RESP3 sets too).
pub(crate) fn items(v: &Value) -> Result<&[Value], Error> {
    match v {
        Value::Array(a) | Value::Set(a) => Ok(a),
        other => Err(unexpected("an array", other)),
    }
}

/// A hash's fields and values (`HGETALL`: a flat array in RESP2, a map in RESP3).
pub(crate) fn pairs(v: &Value) -> Result<Vec<(String, String)>, Error> {
    let text = |i: &Value| opt_text(i)?.ok_or_else(|| unexpected("a string", i));
    match v {
        Value::Map(m) => m.iter().map(|(k, v)| Ok((text(k)?, text(v)?))).collect(),
        other => {
            let flat = items(other)?;
            if flat.len() % 2 != 0 {
                return Err(unexpected("field-value pairs", other));
            }
            flat.chunks(2).map(|kv| Ok((text(&kv[0])?, text(&kv[1])?))).collect()
        }
    }
}

/// A list of strings, or `None` for nil (permit ids).
pub(crate) fn opt_texts(v: &Value) -> Result<Option<Vec<String>>, Error> {
    if matches!(v, Value::Nil) {
        return Ok(None);
    }
    items(v)?.iter().map(|i| opt_text(i)?.ok_or_else(|| unexpected("a string", i))).collect::<Result<_, _>>().map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_are_read_from_every_shape_the_server_sends() {
        assert_eq!(int(&Value::Int(7)).ok(), Some(7));
        assert_eq!(int(&Value::BulkString(b"42".to_vec())).ok(), Some(42));
        assert!(int(&Value::Nil).is_err());
        assert_eq!(opt_int(&Value::Nil).ok(), Some(None));
    }

    #[test]
    fn an_unexpected_shape_is_an_error_not_a_panic() {
        assert!(items(&Value::Int(1)).is_err());
        assert!(opt_texts(&Value::Array(vec![Value::Int(1)])).is_err());
        assert!(pairs(&Value::Array(vec![Value::BulkString(b"odd".to_vec())])).is_err());
    }

    #[test]
    fn a_hash_is_read_from_a_flat_array_or_a_map() {
        let b = |s: &str| Value::BulkString(s.as_bytes().to_vec());
        let want = vec![("rate".to_string(), "10".to_string())];
        assert_eq!(pairs(&Value::Array(vec![b("rate"), b("10")])).ok(), Some(want.clone()));
        assert_eq!(pairs(&Value::Map(vec![(b("rate"), b("10"))])).ok(), Some(want));
        assert_eq!(pairs(&Value::Array(vec![])).ok(), Some(vec![]));
    }
}
