//! `svc auth login` and `svc auth logout` (contract §14).
//!
//! Login is OAuth 2.0 Authorization Code with S256 PKCE (RFC 7636) and a loopback
//! redirect on 127.0.0.1 with a random port (RFC 8252), against the issuer and
//! client id the server publishes in `client-config`; the provider's endpoints come
//! from its discovery document. The `state` must come back unchanged. The session
//! (access and refresh token) goes to the credential store.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant};

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::config::session_account;
use crate::context::Context;
use crate::credentials::{Session, SessionOrigin, Source, TokenAnswer, load_session, save_session};
use crate::outcome::{Failure, Output};

/// How long the browser step may take.
const SIGN_IN_TIMEOUT: Duration = Duration::from_secs(300);

/// The OAuth settings the server publishes.
struct OauthConfig {
    issuer: String,
    client_id: String,
    scopes: Vec<String>,
}

/// The provider's endpoints (OpenID Connect Discovery).
struct ProviderEndpoints {
    authorization: String,
    token: String,
    revocation: Option<String>,
}

pub fn login(ctx: &mut Context, open_browser: bool) -> Result<Output, Failure> {
    let endpoint = ctx.endpoint()?;
    let oauth = oauth_config(ctx, &endpoint)?;
    let provider = discover(ctx, &oauth.issuer)?;

    let verifier = random_token(32)?;
    let challenge = URL_SAFE_NO_PAD.encode(Sha256::digest(verifier.as_bytes()));
    let state = random_token(16)?;
    let listener = TcpListener::bind("127.0.0.1:0")
        .map_err(|e| Failure::transport(format!("Cannot listen on 127.0.0.1 for the sign-in redirect: {e}")))?;
    let port = listener.local_addr().map_err(|e| Failure::transport(format!("No loopback port: {e}")))?.port();
    let redirect_uri = format!("http://127.0.0.1:{port}/callback");

    let scope = oauth.scopes.join(" ");
    let mut query = form_urlencoded::Serializer::new(String::new());
    query
        .append_pair("response_type", "code")
        .append_pair("client_id", &oauth.client_id)
        .append_pair("redirect_uri", &redirect_uri)
        .append_pair("scope", &scope)
        .append_pair("state", &state)
        .append_pair("code_challenge", &challenge)
        .append_pair("code_challenge_method", "S256");
    // OpenID Connect grants a refresh token (`offline_access`) only with consent.
    if oauth.scopes.iter().any(|s| s == "offline_access") {
        query.append_pair("prompt", "consent");
    }
    let separator = if provider.authorization.contains('?') { '&' } else { '?' };
    let url = format!("{}{separator}{}", provider.authorization, query.finish());

    let launched = if open_browser { launch_browser(&url) } else { Launch::NotAsked };
    match launched {
        Launch::Opened => eprintln!("Opened a browser to sign in. If it did not open, visit:\n{url}"),
        Launch::NotAsked => eprintln!("Open this address in a browser to sign in:\n{url}"),
        Launch::NoDisplay | Launch::Failed => {
            let why = if launched == Launch::NoDisplay {
                "No display was found (DISPLAY and WAYLAND_DISPLAY are unset), so no browser was opened."
            } else {
                "No browser could be opened."
            };
            eprintln!(
                "{why}\nOpen this address in a browser on this machine (from another machine, forward the port \
                 first: ssh -L {port}:127.0.0.1:{port} THIS-HOST):\n{url}"
            );
        }
    }
    eprintln!("Waiting for the sign-in to complete...");
    let code = receive_code(listener, &state)?;

    let answer = ctx.http.post_form(
        &provider.token,
        &[
            ("grant_type", "authorization_code"),
            ("code", &code),
            ("redirect_uri", &redirect_uri),
            ("client_id", &oauth.client_id),
            ("code_verifier", &verifier),
        ],
    )?;
    if !answer.is_success() {
        let error = answer.body["error"].as_str().unwrap_or("unknown_error").to_owned();
        return Err(Failure::local(
            svc_contract::Problem::new(
                svc_contract::ProblemCode::AuthenticationRequired,
                "The identity provider did not issue tokens for this sign-in.",
            )
            .with_detail("reason", "token_exchange_failed")
            .with_detail("providerError", error),
        ));
    }
    let tokens: TokenAnswer = serde_json::from_value(answer.body)
        .map_err(|_| Failure::transport("The identity provider answered without an access token."))?;
    let session = Session::from_answer(
        tokens,
        None,
        SessionOrigin {
            issuer: oauth.issuer,
            client_id: oauth.client_id,
            token_endpoint: provider.token,
            revocation_endpoint: provider.revocation,
        },
    );
    if ctx.profile().ok().and_then(|p| p.endpoint).as_deref() != Some(endpoint.as_str()) {
        ctx.update_profile(|profile| profile.endpoint = Some(endpoint))?;
    }
    let location = save_session(ctx, &session)?;
    // The answer shows the session just made, whatever would come first later,
    // renewed first if its access token already expires (a very short
    // lifetime, a skewed clock), as for any other command.
    let status = svc_contract::OperationId::IdentityStatus.operation();
    let signed_in = crate::credentials::session_credential(ctx, session, location)?;
    let workspace = ctx.workspace()?;
    let envelope = crate::caller::call_as(ctx, status, &json!({}), workspace.as_deref(), &signed_in)?;
    if let Some(warning) = shadowed_warning(ctx)? {
        eprintln!("{warning}");
    }
    let human = format!("Signed in.\n{}", crate::render::data(&envelope));
    Ok(Output::new(envelope, human))
}

/// A warning when another credential comes before the new session (contract
/// §14: `SVC_API_KEY`, then the profile's API key): the next commands would not
/// use the session, and nothing else would say so.
fn shadowed_warning(ctx: &Context) -> Result<Option<String>, Failure> {
    let sources = crate::credentials::sources(ctx)?;
    let fix = match sources.first() {
        Some(Source::Environment) => "unset SVC_API_KEY to use the session",
        Some(Source::ProfileApiKey(_)) => "sign in under another profile (--profile NAME) to use the session",
        _ => return Ok(None),
    };
    let first = sources.first().map(Source::describe).unwrap_or_default();
    Ok(Some(format!(
        "Warning: signed in, but commands will keep using {first}, which comes before this session; {fix}."
    )))
}

pub fn logout(ctx: &mut Context) -> Result<Output, Failure> {
    let profile = ctx.profile()?;
    let Some(stored) = profile.session else {
        let json = json!({ "profile": ctx.profile_name, "signedOut": false });
        return Ok(Output::new(json, format!("Profile {} has no session.\n", ctx.profile_name)));
    };
    if let Ok(session) = load_session(ctx, stored.location) {
        revoke(ctx, &session);
    }
    ctx.secrets.delete(stored.location, &session_account(&ctx.profile_name))?;
    ctx.update_profile(|profile| profile.session = None)?;
    let json = json!({ "profile": ctx.profile_name, "signedOut": true });
    Ok(Output::new(json, format!("Signed out of profile {}.\n", ctx.profile_name)))
}

/// Asks the provider to forget the refresh token (RFC 7009); best effort, since
/// the local copy is deleted either way.
fn revoke(ctx: &Context, session: &Session) {
    if let (Some(url), Some(token)) = (&session.revocation_endpoint, &session.refresh_token) {
        let _ = ctx.http.post_form(
            url,
            &[("token", token), ("token_type_hint", "refresh_token"), ("client_id", &session.client_id)],
        );
    }
}

fn oauth_config(ctx: &Context, endpoint: &str) -> Result<OauthConfig, Failure> {
    let answer = ctx.http.get(&format!("{endpoint}/api/public/client-config"))?;
    let oauth = &answer.body["oauth"];
    let text = |key: &str| oauth[key].as_str().filter(|v| !v.is_empty()).map(str::to_owned);
    match (text("issuer"), text("clientId")) {
        (Some(issuer), Some(client_id)) => {
            let scopes = oauth["scopes"].as_array().into_iter().flatten().filter_map(Value::as_str).map(str::to_owned);
            Ok(OauthConfig { issuer, client_id, scopes: scopes.collect() })
        }
        _ => Err(Failure::authentication(
            "sign_in_unavailable",
            format!("{endpoint} does not offer sign-in (no OAuth issuer and client id); use a Workspace API key."),
        )),
    }
}

fn discover(ctx: &Context, issuer: &str) -> Result<ProviderEndpoints, Failure> {
    let answer = ctx.http.get(&format!("{}/.well-known/openid-configuration", issuer.trim_end_matches('/')))?;
    let document = &answer.body;
    let text = |key: &str| document[key].as_str().map(str::to_owned);
    // The document must be the issuer's own (OpenID Connect Discovery §4.3).
    if text("issuer").as_deref() != Some(issuer) {
        return Err(Failure::transport(format!("The discovery document of {issuer} names another issuer.")));
    }
    let methods = document["code_challenge_methods_supported"].as_array();
    if methods.is_some_and(|m| !m.iter().any(|m| m == "S256")) {
        return Err(Failure::transport(format!("{issuer} does not support S256 PKCE.")));
    }
    match (text("authorization_endpoint"), text("token_endpoint")) {
        (Some(authorization), Some(token)) => {
            Ok(ProviderEndpoints { authorization, token, revocation: text("revocation_endpoint") })
        }
        _ => Err(Failure::transport(format!("The discovery document of {issuer} lacks its endpoints."))),
    }
}

/// `bytes` random bytes, base64url without padding.
fn random_token(bytes: usize) -> Result<String, Failure> {
    let mut buffer = vec![0u8; bytes];
    getrandom::fill(&mut buffer).map_err(|e| Failure::transport(format!("No randomness available: {e}")))?;
    Ok(URL_SAFE_NO_PAD.encode(buffer))
}

/// What became of the attempt to open a browser.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Launch {
    Opened,
    /// `--no-browser`.
    NotAsked,
    /// A Linux or BSD session without a graphical display (SSH, a container).
    NoDisplay,
    /// The opener is missing or reported failure.
    Failed,
}

/// How long an opener that has not exited yet may still report failure; one
/// still running after it is taken to have opened the page (some run the
/// browser in the foreground).
const OPENER_GRACE: Duration = Duration::from_secs(2);

fn launch_browser(url: &str) -> Launch {
    #[cfg(target_os = "macos")]
    let mut command = std::process::Command::new("open");
    #[cfg(target_os = "windows")]
    let mut command = {
        let mut c = std::process::Command::new("rundll32");
        c.arg("url.dll,FileProtocolHandler");
        c
    };
    #[cfg(not(any(target_os = "macos", target_os = "windows")))]
    let mut command = {
        let display = |name: &str| std::env::var_os(name).is_some_and(|v| !v.is_empty());
        if !display("DISPLAY") && !display("WAYLAND_DISPLAY") {
            return Launch::NoDisplay;
        }
        std::process::Command::new("xdg-open")
    };
    let child = command
        .arg(url)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn();
    let Ok(mut child) = child else {
        return Launch::Failed;
    };
    let deadline = Instant::now() + OPENER_GRACE;
    while Instant::now() < deadline {
        match child.try_wait() {
            Ok(Some(status)) if status.success() => return Launch::Opened,
            Ok(Some(_)) | Err(_) => return Launch::Failed,
            Ok(None) => std::thread::sleep(Duration::from_millis(50)),
        }
    }
    Launch::Opened
}

/// Waits for the browser to come back to the loopback address with the code.
fn receive_code(listener: TcpListener, state: &str) -> Result<String, Failure> {
    listener.set_nonblocking(true).map_err(|e| Failure::transport(format!("Loopback listener: {e}")))?;
    let deadline = Instant::now() + SIGN_IN_TIMEOUT;
    loop {
        match listener.accept() {
            Ok((stream, _)) => {
                if let Some(result) = callback(stream, state) {
                    return result;
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                if Instant::now() > deadline {
                    return Err(Failure::authentication("sign_in_timeout", "The sign-in was not completed in time."));
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            Err(e) => return Err(Failure::transport(format!("Loopback listener: {e}"))),
        }
    }
}

/// Handles one request to the loopback address: `None` when it was not the
/// redirect (a favicon, say), else the code or why there is none.
fn callback(mut stream: TcpStream, expected_state: &str) -> Option<Result<String, Failure>> {
    let _ = stream.set_nonblocking(false);
    let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
    let mut head = Vec::new();
    let mut buffer = [0u8; 2048];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 16 * 1024 {
        match stream.read(&mut buffer) {
            Ok(0) | Err(_) => break,
            Ok(n) => head.extend_from_slice(&buffer[..n]),
        }
    }
    let head = String::from_utf8_lossy(&head);
    let target = head.split_whitespace().nth(1).unwrap_or_default();
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    if path != "/callback" {
        respond(&mut stream, "404 Not Found", "Not found.");
        return None;
    }
    let mut code = None;
    let mut state = None;
    let mut error = None;
    for (key, value) in form_urlencoded::parse(query.as_bytes()) {
        match key.as_ref() {
            "code" => code = Some(value.into_owned()),
            "state" => state = Some(value.into_owned()),
            "error" => error = Some(value.into_owned()),
            _ => {}
        }
    }
    let result = if state.as_deref() != Some(expected_state) {
        Err(Failure::authentication(
            "state_mismatch",
            "The sign-in answer did not carry this sign-in's state; nothing was stored.",
        ))
    } else if let Some(error) = error {
        Err(Failure::local(
            svc_contract::Problem::new(
                svc_contract::ProblemCode::AuthenticationRequired,
                "The identity provider refused the sign-in.",
            )
            .with_detail("reason", "sign_in_refused")
            .with_detail("providerError", error),
        ))
    } else {
        code.ok_or_else(|| Failure::authentication("sign_in_refused", "The sign-in answer carried no code."))
    };
    match &result {
        Ok(_) => respond(&mut stream, "200 OK", "Signed in to svc. You can close this window."),
        Err(_) => respond(&mut stream, "400 Bad Request", "Sign-in failed; see the terminal."),
    }
    Some(result)
}

fn respond(stream: &mut TcpStream, status: &str, message: &str) {
    let body = format!("<!doctype html><meta charset=\"utf-8\"><title>svc</title><p>{message}</p>\n");
    let _ = write!(
        stream,
        "HTTP/1.1 {status}\r\ncontent-type: text/html; charset=utf-8\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = stream.flush();
}
