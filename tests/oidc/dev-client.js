// A standard OAuth client (the `openid-client` package) against the API's
// development identity provider (`svc-api serve --dev-idp`): discovery,
// Authorization Code with S256 PKCE, the access token on the API, a refresh, and
// two refusals (a wrong verifier, a spent code).
//
// The browser step is a plain GET of the authorization URL: the development
// issuer signs its one User in without a page and redirects at once.
//
// Environment: DEV_ISSUER (the issuer URL), DEV_CLIENT_ID (default svc-cli),
// SVC_URL (the API's base URL). Prints one JSON object on stdout.

import * as client from 'openid-client';

const issuer = new URL(process.env.DEV_ISSUER);
const clientId = process.env.DEV_CLIENT_ID ?? 'svc-cli';
const api = process.env.SVC_URL;
const redirectUri = 'http://127.0.0.1:53682/callback';

const config = await client.discovery(issuer, clientId, undefined, client.None(), {
  execute: [client.allowInsecureRequests],
});

// One browser round: the authorization URL, answered by a redirect to the client.
async function signIn(verifier) {
  const state = client.randomState();
  const nonce = client.randomNonce();
  const url = client.buildAuthorizationUrl(config, {
    redirect_uri: redirectUri,
    scope: 'openid email profile offline_access',
    code_challenge: await client.calculatePKCECodeChallenge(verifier),
    code_challenge_method: 'S256',
    state,
    nonce,
  });
  const answer = await fetch(url, { redirect: 'manual' });
  if (answer.status !== 302) {
    throw new Error(`authorize answered ${answer.status}: ${await answer.text()}`);
  }
  return { callback: new URL(answer.headers.get('location')), state, nonce };
}

async function identity(accessToken) {
  const answer = await client.fetchProtectedResource(
    config,
    accessToken,
    new URL(`${api}/api/public/operations/identity/status`),
    'POST',
    '{}',
    new Headers({ 'content-type': 'application/json' }),
  );
  return { status: answer.status, body: await answer.json() };
}

async function refusal(promise) {
  try {
    await promise;
    return null;
  } catch (error) {
    return error.error ?? error.code ?? String(error);
  }
}

const verifier = client.randomPKCECodeVerifier();
const round = await signIn(verifier);
const tokens = await client.authorizationCodeGrant(config, round.callback, {
  pkceCodeVerifier: verifier,
  expectedState: round.state,
  expectedNonce: round.nonce,
  idTokenExpected: true,
});
const first = await identity(tokens.access_token);
const refreshed = await client.refreshTokenGrant(config, tokens.refresh_token);
const second = await identity(refreshed.access_token);
const reusedRefresh = await refusal(client.refreshTokenGrant(config, tokens.refresh_token));

// A wrong verifier is refused, and the code is spent by the attempt.
const other = await signIn(client.randomPKCECodeVerifier());
const wrongVerifier = await refusal(
  client.authorizationCodeGrant(config, other.callback, {
    pkceCodeVerifier: client.randomPKCECodeVerifier(),
    expectedState: other.state,
  }),
);
const spentCode = await refusal(
  client.authorizationCodeGrant(config, round.callback, {
    pkceCodeVerifier: verifier,
    expectedState: round.state,
  }),
);

console.log(
  JSON.stringify({
    issuer: config.serverMetadata().issuer,
    idToken: tokens.claims(),
    scope: tokens.scope,
    identity: first,
    refreshedIdentity: second,
    refreshRotated: refreshed.refresh_token !== tokens.refresh_token,
    reusedRefresh,
    wrongVerifier,
    spentCode,
  }),
);
