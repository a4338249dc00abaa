//! The client-only commands besides login: `version`, `profile list|select`,
//! `workspace select`. Their `--json` output is a plain object (there is no server
//! envelope to print).

use std::time::Duration;

use serde_json::{Value, json};
use svc_contract::{CONTRACT_VERSION, OperationId, catalog};

use crate::config::{Profile, check_profile_name};
use crate::context::Context;
use crate::http::CLIENT_VERSION;
use crate::outcome::{Failure, Output};

/// The npm package name and Node range the spec gives for this client.
const PACKAGE: &str = "svc-partner";
const NODE_RANGE: &str = ">=20";
/// How long `svc version` waits for the server before reporting it unreachable.
const VERSION_TIMEOUT: Duration = Duration::from_secs(3);

/// `svc version`: exit 0 in every case; `server` and `compatible` are null when the
/// endpoint cannot be reached (or none is configured).
pub fn version(ctx: &Context) -> Output {
    let server = ctx.endpoint().ok().and_then(|endpoint| {
        let answer = ctx.http.get_quick(&format!("{endpoint}/api/public/client-config"), VERSION_TIMEOUT).ok()?;
        let success = answer.is_success();
        let body = answer.body;
        success.then(|| {
            json!({
                "contract": body["contract"],
                "catalogDigest": body["catalogDigest"],
                "supportedClientRange": body["supportedClientRange"],
            })
        })
    });
    let compatible = server.as_ref().map(|s| {
        s["contract"] == CONTRACT_VERSION
            && s["supportedClientRange"].as_str().is_some_and(|range| satisfies(CLIENT_VERSION, range))
    });
    let json = json!({
        "client": { "package": PACKAGE, "version": CLIENT_VERSION },
        "contract": CONTRACT_VERSION,
        "catalogDigest": catalog::catalog_digest(),
        "node": NODE_RANGE,
        "server": server,
        "compatible": compatible,
    });
    let mut human = format!("svc {CLIENT_VERSION} ({PACKAGE}), contract {CONTRACT_VERSION}\n");
    match (&json["server"], compatible) {
        (Value::Object(server), Some(ok)) => human.push_str(&format!(
            "server: contract {}, supports clients {} — {}\n",
            server["contract"].as_str().unwrap_or("?"),
            server["supportedClientRange"].as_str().unwrap_or("?"),
            if ok { "compatible" } else { "NOT compatible" }
        )),
        _ => human.push_str("server: not reachable\n"),
    }
    Output::new(json, human)
}

/// Whether `version` is in a caret range such as `^0.1.2` (or an exact version).
fn satisfies(version: &str, range: &str) -> bool {
    let parse = |v: &str| -> Option<[u64; 3]> {
        let mut parts = v.trim().split('.').map(|p| p.parse::<u64>().ok());
        Some([parts.next()??, parts.next()??, parts.next()??])
    };
    let (Some(have), Some(want)) = (parse(version), parse(range.trim().trim_start_matches(['^', '=']))) else {
        return false;
    };
    if !range.trim().starts_with('^') {
        return have == want;
    }
    // Caret: the leftmost non-zero part is fixed, the rest may grow.
    let fixed = want.iter().position(|p| *p != 0).unwrap_or(2);
    have >= want && have[..=fixed] == want[..=fixed]
}

/// `svc profile list`.
pub fn profile_list(ctx: &Context) -> Output {
    let current = ctx.config.current.clone();
    let rows: Vec<Value> = ctx.config.profiles.iter().map(|(name, profile)| profile_json(name, profile)).collect();
    let mut human = String::new();
    for (name, profile) in &ctx.config.profiles {
        let marker = if current.as_deref() == Some(name.as_str()) { "*" } else { " " };
        human.push_str(&format!(
            "{marker} {name}  {}  {}  {}\n",
            profile.endpoint.as_deref().unwrap_or("-"),
            profile.workspace.as_deref().unwrap_or("-"),
            credential_kind(profile).unwrap_or("no credential")
        ));
    }
    if human.is_empty() {
        human = "No profiles yet: `svc auth login` or `--save-as` creates one.\n".into();
    }
    Output::new(json!({ "current": current, "profiles": rows }), human)
}

fn credential_kind(profile: &Profile) -> Option<&'static str> {
    if profile.api_key.is_some() {
        Some("api_key")
    } else if profile.session.is_some() {
        Some("user_session")
    } else {
        None
    }
}

fn profile_json(name: &str, profile: &Profile) -> Value {
    let stored = profile.api_key.as_ref().or(profile.session.as_ref());
    json!({
        "name": name,
        "endpoint": profile.endpoint,
        "workspace": profile.workspace,
        "credential": credential_kind(profile),
        "secretLocation": stored.map(|s| s.location.as_str()),
        "keyPrefix": profile.api_key.as_ref().and_then(|k| k.key_prefix.clone()),
    })
}

/// `svc profile select --name NAME`: makes NAME current, creating it (with
/// `--endpoint`, if given) when it does not exist yet.
pub fn profile_select(ctx: &mut Context, name: &str) -> Result<Output, Failure> {
    check_profile_name(name)?;
    let dir = ctx.config_dir()?;
    let created = !ctx.config.profiles.contains_key(name);
    let endpoint = ctx.globals.endpoint.clone();
    let profile = ctx.config.profile_mut(name);
    if let Some(endpoint) = endpoint {
        profile.endpoint = Some(endpoint.trim_end_matches('/').to_owned());
    }
    let row = profile_json(name, profile);
    ctx.config.current = Some(name.to_owned());
    ctx.config.save(&dir)?;
    let verb = if created { "Created and selected" } else { "Selected" };
    Ok(Output::new(json!({ "current": name, "profile": row }), format!("{verb} profile {name}.\n")))
}

/// `svc workspace select --workspace WS`: checks that WS can be selected (as
/// identity.status sees it) and stores its id in the profile. An empty value
/// clears the selection.
pub fn workspace_select(ctx: &mut Context) -> Result<Output, Failure> {
    let Some(asked) = ctx.globals.workspace.clone() else {
        return Err(Failure::usage("Name the Workspace: svc workspace select --workspace <id or slug>."));
    };
    if asked.is_empty() {
        ctx.update_profile(|profile| profile.workspace = None)?;
        let json = json!({ "profile": ctx.profile_name, "workspace": null });
        return Ok(Output::new(json, format!("Profile {} has no Workspace selected now.\n", ctx.profile_name)));
    }
    let status = OperationId::IdentityStatus.operation();
    let envelope = crate::caller::call_in(ctx, status, &json!({}), Some(&asked))?;
    let workspace = envelope["data"]["workspace"].clone();
    let Some(id) = workspace["id"].as_str().map(str::to_owned) else {
        return Err(Failure::usage(format!("{asked:?} names no Workspace you can select.")));
    };
    ctx.update_profile(|profile| profile.workspace = Some(id.clone()))?;
    let name = workspace["name"].as_str().unwrap_or(&id).to_owned();
    let json = json!({ "profile": ctx.profile_name, "workspace": workspace });
    Ok(Output::new(json, format!("Selected Workspace {name} ({id}) in profile {}.\n", ctx.profile_name)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn caret_ranges() {
        assert!(satisfies("0.1.2", "^0.1.2"));
        assert!(satisfies("0.1.9", "^0.1.2"));
        assert!(!satisfies("0.2.0", "^0.1.2"));
        assert!(!satisfies("0.1.1", "^0.1.2"));
        assert!(satisfies("1.4.0", "^1.2.3"));
        assert!(!satisfies("2.0.0", "^1.2.3"));
        assert!(satisfies("0.0.3", "^0.0.3") && !satisfies("0.0.4", "^0.0.3"));
        assert!(satisfies("0.1.2", "0.1.2") && !satisfies("0.1.3", "0.1.2"));
        assert!(!satisfies("0.1.2", "garbage"));
    }
}
