//! The `transfer` chaincode: FastFabric's workload (each transaction reads two accounts and writes both) with the
//! functions of the fixture ledger's `transfer` chaincode. Balances are stored as decimal strings.
//!
//! | function | arguments | reads | writes | payload |
//! |---|---|---|---|---|
//! | `open` | key, amount | key | key = amount | — |
//! | `transfer` | from, to, amount | from, to | from -= amount, to += amount | — |
//! | `put` | key, value | — | key = value (blind) | — |
//! | `query` | key | key | — | the value (empty if absent) |
//! | `delete` | key | key | delete key | — |
//! | `range` | start, end | range [start, end) | — | `[{"key":"k","value":"v"},...]` |
//!
//! Failures (status 500): wrong argument count, `open` of an existing account, `transfer` from or to a missing
//! account, a balance or amount that is not an integer, a transfer larger than the source balance, `delete` of a
//! missing account. The fixture shows only successful calls, so these refusals are Ferrofabric's choice.

use bytes::Bytes;

use crate::gojson::{atoi, push_string};
use crate::{error, function_and_parameters, success, Chaincode, Response, TxContext};

/// The transfer chaincode; see the module docs.
#[derive(Debug, Clone, Copy, Default)]
pub struct Transfer;

fn key_arg(arg: &Bytes) -> Result<&str, Response> {
    std::str::from_utf8(arg).map_err(|_| error("key is not valid UTF-8"))
}

fn amount_arg(arg: &Bytes) -> Result<i64, Response> {
    atoi(arg).ok_or_else(|| error(format!("invalid amount '{}'", String::from_utf8_lossy(arg))))
}

fn balance(ctx: &mut TxContext<'_>, key: &str) -> Result<i64, Response> {
    let v = ctx.get_state(key).ok_or_else(|| error(format!("account {key} not found")))?;
    atoi(&v).ok_or_else(|| error(format!("account {key} does not hold a balance")))
}

fn put(ctx: &mut TxContext<'_>, key: &str, value: impl Into<Bytes>) -> Result<(), Response> {
    ctx.put_state(key, value).map_err(|e| error(e.to_string()))
}

impl Chaincode for Transfer {
    fn invoke(&self, ctx: &mut TxContext<'_>, args: &[Bytes]) -> Response {
        let (function, args) = function_and_parameters(args);
        let result = match (function.as_str(), args) {
            ("open", [key, amount]) => open(ctx, key, amount),
            ("transfer", [from, to, amount]) => transfer(ctx, from, to, amount),
            ("put", [key, value]) => key_arg(key).and_then(|k| put(ctx, k, value.clone())).map(|()| Bytes::new()),
            ("query", [key]) => key_arg(key).map(|k| ctx.get_state(k).unwrap_or_default()),
            ("delete", [key]) => delete(ctx, key),
            ("range", [start, end]) => range(ctx, start, end),
            ("open" | "transfer" | "put" | "query" | "delete" | "range", _) => {
                Err(error(format!("wrong number of arguments for {function}")))
            }
            (other, _) => Err(error(format!("unknown function '{other}'"))),
        };
        match result {
            Ok(payload) => success(payload),
            Err(r) => r,
        }
    }
}

fn open(ctx: &mut TxContext<'_>, key: &Bytes, amount: &Bytes) -> Result<Bytes, Response> {
    let key = key_arg(key)?;
    if ctx.get_state(key).is_some() {
        return Err(error(format!("account {key} already exists")));
    }
    let amount = amount_arg(amount)?;
    put(ctx, key, amount.to_string())?;
    Ok(Bytes::new())
}

fn transfer(ctx: &mut TxContext<'_>, from: &Bytes, to: &Bytes, amount: &Bytes) -> Result<Bytes, Response> {
    let (from, to) = (key_arg(from)?, key_arg(to)?);
    let from_balance = balance(ctx, from)?;
    let to_balance = balance(ctx, to)?;
    let amount = amount_arg(amount)?;
    if amount > from_balance {
        return Err(error(format!("insufficient funds in account {from}: {from_balance} < {amount}")));
    }
    put(ctx, from, from_balance.wrapping_sub(amount).to_string())?;
    put(ctx, to, to_balance.wrapping_add(amount).to_string())?;
    Ok(Bytes::new())
}

fn delete(ctx: &mut TxContext<'_>, key: &Bytes) -> Result<Bytes, Response> {
    let key = key_arg(key)?;
    if ctx.get_state(key).is_none() {
        return Err(error(format!("account {key} not found")));
    }
    ctx.del_state(key).map_err(|e| error(e.to_string()))?;
    Ok(Bytes::new())
}

/// `[{"key":"...","value":"..."},...]` as Go's `json.Marshal` writes a slice of `{Key string "key"; Value string
/// "value"}` (an empty range gives `[]`).
pub(crate) fn range_json(entries: &[(String, Bytes)]) -> String {
    let mut s = String::from("[");
    for (i, (k, v)) in entries.iter().enumerate() {
        if i > 0 {
            s.push(',');
        }
        s.push_str("{\"key\":");
        push_string(&mut s, k.as_bytes());
        s.push_str(",\"value\":");
        push_string(&mut s, v);
        s.push('}');
    }
    s.push(']');
    s
}

fn range(ctx: &mut TxContext<'_>, start: &Bytes, end: &Bytes) -> Result<Bytes, Response> {
    let (start, end) = (key_arg(start)?, key_arg(end)?);
    let entries = ctx.get_state_by_range(start, end).map_err(|e| error(e.to_string()))?;
    Ok(Bytes::from(range_json(&entries)))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn range_payload_matches_the_fixture_shape() {
        let entries = vec![("k016".to_string(), Bytes::from_static(b"17000")), ("k017".into(), Bytes::from("18000"))];
        assert_eq!(range_json(&entries), r#"[{"key":"k016","value":"17000"},{"key":"k017","value":"18000"}]"#);
        assert_eq!(range_json(&[]), "[]");
    }
}
