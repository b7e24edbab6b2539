//! The `kv` chaincode: a plain key/value store.
//!
//! | function | arguments | reads | writes | payload |
//! |---|---|---|---|---|
//! | `put` | key, value | — | key = value (blind); chaincode event `put` whose payload is the key | — |
//! | `get` | key | key | — | the value (empty if absent) |
//! | `delete` | key | — | delete key (blind) | — |
//! | `range` | start, end | range [start, end) | — | `[{"key":"k","value":"v"},...]` |
//!
//! Wrong argument counts, unknown functions, non-UTF-8 or empty keys fail with status 500.

use bytes::Bytes;

use crate::transfer::range_json;
use crate::{error, function_and_parameters, success, Chaincode, Response, TxContext};

/// The key/value chaincode; see the module docs.
#[derive(Debug, Clone, Copy, Default)]
pub struct Kv;

fn key_arg(arg: &Bytes) -> Result<&str, Response> {
    std::str::from_utf8(arg).map_err(|_| error("key is not valid UTF-8"))
}

impl Chaincode for Kv {
    fn invoke(&self, ctx: &mut TxContext<'_>, args: &[Bytes]) -> Response {
        let (function, args) = function_and_parameters(args);
        let result: Result<Bytes, Response> = match (function.as_str(), args) {
            ("put", [key, value]) => key_arg(key).and_then(|k| {
                ctx.put_state(k, value.clone()).map_err(|e| error(e.to_string()))?;
                ctx.set_event("put", Bytes::copy_from_slice(k.as_bytes())).map_err(|e| error(e.to_string()))?;
                Ok(Bytes::new())
            }),
            ("get", [key]) => key_arg(key).map(|k| ctx.get_state(k).unwrap_or_default()),
            ("delete", [key]) => {
                key_arg(key).and_then(|k| ctx.del_state(k).map_err(|e| error(e.to_string()))).map(|()| Bytes::new())
            }
            ("range", [start, end]) => key_arg(start).and_then(|s| {
                let e = key_arg(end)?;
                let entries = ctx.get_state_by_range(s, e).map_err(|err| error(err.to_string()))?;
                Ok(Bytes::from(range_json(&entries)))
            }),
            ("put" | "get" | "delete" | "range", _) => Err(error(format!("wrong number of arguments for {function}"))),
            (other, _) => Err(error(format!("unknown function '{other}'"))),
        };
        match result {
            Ok(payload) => success(payload),
            Err(r) => r,
        }
    }
}
