//! Caliper's smallbank chaincode (`hyperledger/caliper-benchmarks`, `src/fabric/scenario/smallbank/go`), whose
//! transactions fill the fixture ledger: accounts are JSON objects
//! `{"CustomId":"<id>","CustomName":"<name>","SavingsBalance":<int>,"CheckingBalance":<int>}` under the key
//! `332514<id>` (the first six hex digits of SHA-512("smallbank") followed by the id).
//!
//! | function | arguments | effect |
//! |---|---|---|
//! | `create_account` | id, name, checking, savings | writes the account (no read) |
//! | `deposit_checking` | amount, id | checking += amount |
//! | `write_check` | amount, id | checking -= amount |
//! | `transact_savings` | amount, id | savings += amount |
//! | `send_payment` | amount, dest, source | source.checking -= amount, dest.checking += amount |
//! | `amalgamate` | dest, source | dest.checking += source.savings, source.savings = 0 |
//! | `query` | id | returns the stored account bytes (empty if absent) |
//!
//! As in the Go original: amounts that do not parse count as 0; arithmetic wraps like Go's 64-bit `int`; a missing or
//! unreadable account fails with `{"error":Could not find specified account <id>}` (status 500).

use bytes::Bytes;

use crate::gojson::{atoi, push_string};
use crate::{error, function_and_parameters, success, Chaincode, Response, TxContext};

/// Caliper's key prefix: the first 6 hex digits of SHA-512("smallbank").
pub const SMALLBANK_PREFIX: &str = "332514";

/// The state key of account `id`: `332514<id>` (`id` as given, lossy UTF-8).
pub fn account_key(id: &[u8]) -> String {
    format!("{SMALLBANK_PREFIX}{}", String::from_utf8_lossy(id))
}

/// The smallbank chaincode; see the module docs.
#[derive(Debug, Clone, Copy, Default)]
pub struct Smallbank;

#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Account {
    custom_id: Bytes,
    custom_name: Bytes,
    savings: i64,
    checking: i64,
}

impl Account {
    /// Go's `json.Marshal(&Account{...})`.
    fn to_json(&self) -> String {
        let mut s = String::with_capacity(96);
        s.push_str("{\"CustomId\":");
        push_string(&mut s, &self.custom_id);
        s.push_str(",\"CustomName\":");
        push_string(&mut s, &self.custom_name);
        s.push_str(&format!(",\"SavingsBalance\":{},\"CheckingBalance\":{}}}", self.savings, self.checking));
        s
    }

    /// Go's `json.Unmarshal(bytes, &Account{})`: field names match case-insensitively, `null` leaves a field
    /// unchanged, a JSON `null` document gives the zero account, numbers must be integers that fit.
    fn from_json(bytes: &[u8]) -> Option<Account> {
        let v: serde_json::Value = serde_json::from_slice(bytes).ok()?;
        let mut a = Account::default();
        let obj = match v {
            serde_json::Value::Null => return Some(a),
            serde_json::Value::Object(o) => o,
            _ => return None,
        };
        for (k, v) in obj {
            if v.is_null() {
                continue;
            }
            match k.to_ascii_lowercase().as_str() {
                "customid" => a.custom_id = Bytes::from(v.as_str()?.to_owned()),
                "customname" => a.custom_name = Bytes::from(v.as_str()?.to_owned()),
                "savingsbalance" => a.savings = v.as_i64()?,
                "checkingbalance" => a.checking = v.as_i64()?,
                _ => {}
            }
        }
        Some(a)
    }
}

fn wrong_args(function: &str) -> Response {
    error_msg(&format!("Wrong arguments of function {function}"))
}

/// The Caliper chaincode's error shape: `{"error":<message>}` (not valid JSON, kept as is).
fn error_msg(msg: &str) -> Response {
    error(format!("{{\"error\":{msg}}}"))
}

fn not_found(id: &[u8]) -> Response {
    error_msg(&format!("Could not find specified account {}", String::from_utf8_lossy(id)))
}

fn load(ctx: &mut TxContext<'_>, id: &[u8]) -> Option<Account> {
    let bytes = ctx.get_state(&account_key(id))?;
    Account::from_json(&bytes)
}

fn save(ctx: &mut TxContext<'_>, a: &Account) -> Result<(), Response> {
    ctx.put_state(&account_key(&a.custom_id), a.to_json()).map_err(|e| error_msg(&format!("System exception:{e}")))
}

impl Chaincode for Smallbank {
    fn invoke(&self, ctx: &mut TxContext<'_>, args: &[Bytes]) -> Response {
        let (function, args) = function_and_parameters(args);
        let result = match function.as_str() {
            "create_account" => create_account(ctx, args),
            "deposit_checking" => {
                update_one(ctx, args, "deposit_checking", |a, amount| a.checking = a.checking.wrapping_add(amount))
            }
            "write_check" => {
                update_one(ctx, args, "write_check", |a, amount| a.checking = a.checking.wrapping_sub(amount))
            }
            "transact_savings" => {
                update_one(ctx, args, "transaction_savings", |a, amount| a.savings = a.savings.wrapping_add(amount))
            }
            "send_payment" => send_payment(ctx, args),
            "amalgamate" => amalgamate(ctx, args),
            "query" => query(ctx, args),
            other => Err(error_msg(&format!("Unknown function: {other}"))),
        };
        result.unwrap_or_else(|r| r)
    }
}

fn create_account(ctx: &mut TxContext<'_>, args: &[Bytes]) -> Result<Response, Response> {
    let [id, name, checking, savings] = args else {
        return Err(wrong_args("create_account"));
    };
    let checking = atoi(checking).ok_or_else(|| error_msg("Wrong arguments of function"))?;
    let savings = atoi(savings).ok_or_else(|| error_msg("Wrong arguments of function"))?;
    let a = Account { custom_id: id.clone(), custom_name: name.clone(), savings, checking };
    save(ctx, &a)?;
    Ok(success(Bytes::new()))
}

/// `deposit_checking`, `write_check`, `transact_savings`: `[amount, id]`, one account changed.
fn update_one(
    ctx: &mut TxContext<'_>,
    args: &[Bytes],
    name: &str,
    apply: impl FnOnce(&mut Account, i64),
) -> Result<Response, Response> {
    let [amount, id] = args else {
        return Err(wrong_args(name));
    };
    let mut a = load(ctx, id).ok_or_else(|| not_found(id))?;
    apply(&mut a, atoi(amount).unwrap_or(0));
    save(ctx, &a)?;
    Ok(success(Bytes::new()))
}

fn send_payment(ctx: &mut TxContext<'_>, args: &[Bytes]) -> Result<Response, Response> {
    let [amount, dest_id, source_id] = args else {
        return Err(wrong_args("send_payment"));
    };
    let dest = load(ctx, dest_id);
    let source = load(ctx, source_id);
    let mut dest = dest.ok_or_else(|| not_found(dest_id))?;
    let mut source = source.ok_or_else(|| not_found(source_id))?;
    let amount = atoi(amount).unwrap_or(0);
    source.checking = source.checking.wrapping_sub(amount);
    dest.checking = dest.checking.wrapping_add(amount);
    // Source first, then destination: when both are the same account the destination's write is the one kept.
    save(ctx, &source).map_err(|_| error_msg("Failed to put state"))?;
    save(ctx, &dest).map_err(|_| error_msg("Failed to put state"))?;
    Ok(success(Bytes::new()))
}

fn amalgamate(ctx: &mut TxContext<'_>, args: &[Bytes]) -> Result<Response, Response> {
    let [dest_id, source_id] = args else {
        return Err(wrong_args("amalgamate"));
    };
    let dest = load(ctx, dest_id);
    let source = load(ctx, source_id);
    let mut dest = dest.ok_or_else(|| not_found(dest_id))?;
    let mut source = source.ok_or_else(|| not_found(source_id))?;
    dest.checking = dest.checking.wrapping_add(source.savings);
    source.savings = 0;
    save(ctx, &source).map_err(|_| error_msg("Failed to put state"))?;
    save(ctx, &dest).map_err(|_| error_msg("Failed to put state"))?;
    Ok(success(Bytes::new()))
}

fn query(ctx: &mut TxContext<'_>, args: &[Bytes]) -> Result<Response, Response> {
    let Some(id) = args.first() else {
        return Err(wrong_args("query"));
    };
    Ok(success(ctx.get_state(&account_key(id)).unwrap_or_default()))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn account_json_round_trips_in_go_field_order() {
        let a = Account {
            custom_id: Bytes::from_static(b"cli1"),
            custom_name: Bytes::from_static(b"alice"),
            savings: 2000,
            checking: -3,
        };
        let json = a.to_json();
        assert_eq!(json, r#"{"CustomId":"cli1","CustomName":"alice","SavingsBalance":2000,"CheckingBalance":-3}"#);
        assert_eq!(Account::from_json(json.as_bytes()), Some(a));
    }

    #[test]
    fn account_decoding_follows_go_rules() {
        let a = Account::from_json(br#"{"customid":"x","CHECKINGBALANCE":5,"Other":1,"SavingsBalance":null}"#);
        assert_eq!(a.map(|a| (a.custom_id, a.checking, a.savings)), Some((Bytes::from_static(b"x"), 5, 0)));
        assert_eq!(Account::from_json(b"null"), Some(Account::default()));
        assert_eq!(Account::from_json(b""), None);
        assert_eq!(Account::from_json(br#"{"SavingsBalance":1.5}"#), None);
        assert_eq!(Account::from_json(b"[1]"), None);
    }
}
