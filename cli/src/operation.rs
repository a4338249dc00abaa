//! Running a catalog command: flags to input, local validation, the call (with
//! waiting where the operation calls for it), then `--save-as`.

use clap::ArgMatches;
use secrecy::ExposeSecret;
use serde_json::{Map, Value};
use svc_contract::Operation;

use crate::config::{StoredSecret, api_key_account};
use crate::context::Context;
use crate::named::Requests;
use crate::outcome::{Failure, Output};
use crate::poll::Polling;
use crate::{caller, flags, named, render};

pub fn run(ctx: &mut Context, op: &'static Operation, matches: &ArgMatches) -> Result<Output, Failure> {
    let (input, requests) = input(op, matches)?;
    let input = Value::Object(input);
    let applying = input.get("dryRun") == Some(&Value::Bool(false));
    let mut envelope = match (Polling::of(op), requests.timeout) {
        (Some(Polling::Wait), Some(timeout)) => crate::poll::wait(ctx, op, &input, timeout)?,
        (Some(Polling::Run), Some(timeout)) if applying && !requests.no_wait => {
            crate::poll::run(ctx, op, &input, timeout)?
        }
        _ => caller::call_selecting(ctx, op, &input)?,
    };
    let mut human = String::new();
    if let Some(profile) = &requests.save_as {
        human = save_secret(ctx, profile, &mut envelope)?;
    }
    human.push_str(&render::data(&envelope));
    match op.op {
        svc_contract::OperationId::IdentityStatus => human.push_str(&crate::credentials::precedence_note(ctx)),
        svc_contract::OperationId::WidgetManifest => human.push_str(&render::embedding(&envelope)),
        _ => {}
    }
    // A run that ended badly is the server's answer, printed as is, but a script
    // must notice it: exit 4 like any other stable problem.
    let exit = if envelope.pointer("/data/status").and_then(Value::as_str) == Some("failed") { 4 } else { 0 };
    Ok(Output::Value { json: envelope, human, exit })
}

/// The operation's input from the command line, checked as the server checks it
/// (`svc_contract::validate`), with an idempotency key on every mutation.
pub fn input(op: &Operation, matches: &ArgMatches) -> Result<(Map<String, Value>, Requests), Failure> {
    let flags = flags::property_flags(op);
    let (mut input, files) = flags::collect(&flags, matches)?;
    let requests = named::apply(op, &flags, matches, &mut input, &files)?;
    svc_contract::validate::check(op, &Value::Object(input.clone())).map_err(Failure::local)?;
    if op.mutating && !input.contains_key("idempotencyKey") {
        input.insert("idempotencyKey".into(), Value::String(idempotency_key()?));
    }
    Ok((input, requests))
}

/// A fresh key for this invocation: `svc-` and 26 random base32 characters.
fn idempotency_key() -> Result<String, Failure> {
    const ALPHABET: &[u8; 32] = b"0123456789abcdefghjkmnpqrstvwxyz";
    let mut bytes = [0u8; 26];
    getrandom::fill(&mut bytes).map_err(|e| Failure::transport(format!("No randomness available: {e}")))?;
    let key: String = bytes.iter().map(|b| ALPHABET[usize::from(b % 32)] as char).collect();
    Ok(format!("svc-{key}"))
}

/// `--save-as NAME`: the new secret goes to the credential store under profile
/// NAME, and the printed answer carries `"secret": null`.
fn save_secret(ctx: &mut Context, name: &str, envelope: &mut Value) -> Result<String, Failure> {
    let Some(data) = envelope.get_mut("data").and_then(Value::as_object_mut) else {
        return Ok(String::new());
    };
    let key_id = data.get("apiKey").and_then(|k| k["id"].as_str()).unwrap_or("?").to_owned();
    let secret = match data.get_mut("secret").map(Value::take) {
        Some(Value::String(secret)) => secrecy::SecretString::from(secret),
        _ => {
            return Err(Failure::local(svc_contract::Problem::invalid(
                "secret_not_returned",
                format!(
                    "The server returned no secret for key {key_id} (a replay of an earlier call), so nothing was saved; create or rotate again with a new idempotency key."
                ),
            )));
        }
    };
    let location = ctx.secrets.save(&api_key_account(name), secret.expose_secret()).map_err(|_| {
        Failure::transport(format!(
            "Key {key_id} was created but its secret could not be stored; revoke it and try again."
        ))
    })?;
    let api_key = data.get("apiKey").cloned().unwrap_or_default();
    let endpoint = ctx.endpoint()?;
    let dir = ctx.config_dir()?;
    let profile = ctx.config.profile_mut(name);
    profile.endpoint = Some(endpoint);
    profile.workspace = api_key["workspaceId"].as_str().map(str::to_owned);
    profile.api_key = Some(StoredSecret { location, key_prefix: api_key["keyPrefix"].as_str().map(str::to_owned) });
    ctx.config.save(&dir)?;
    Ok(format!("Saved the new key in profile {name} ({}); use it with --profile {name}.\n", location.as_str()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn idempotency_keys_are_fresh_and_in_bounds() {
        let (a, b) = (idempotency_key().unwrap(), idempotency_key().unwrap());
        assert_ne!(a, b);
        assert!((8..=200).contains(&a.len()));
    }
}
