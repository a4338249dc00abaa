// A real OpenID Connect provider for the CLI's sign-in tests, on a free loopback
// port: Authorization Code with PKCE, refresh tokens, discovery, JWKS, and JWT
// access tokens for the API's audience (resource indicators).
//
// The browser step is automatic: the first interaction signs in OIDC_ACCOUNT, the
// second grants what was asked. A test still has to carry the cookies and follow
// the redirects, as a browser would.
//
// Environment: OIDC_AUDIENCE (default https://api.svc.test), OIDC_CLIENT_ID
// (default svc-cli), OIDC_ACCOUNT (default alice), OIDC_ACCESS_TOKEN_TTL in
// seconds (default 3600).
//
// For the web application's tests: OIDC_ACCOUNTS (comma-separated: each new
// browser session signs in the next one; the last one repeats), and a
// confidential web client OIDC_WEB_CLIENT_ID / OIDC_WEB_CLIENT_SECRET with
// redirect URI OIDC_WEB_REDIRECT_URI. As oidc-provider does by default in the
// code flow, the ID token carries only `sub`: email and name come from the
// UserInfo endpoint.
//
// Prints one JSON line on stdout when listening, {"issuer": "http://127.0.0.1:PORT"},
// then one per issued grant, {"event": "grant", "grantType": "..."}.

import crypto from 'node:crypto';
import http from 'node:http';

import Provider, { errors } from 'oidc-provider';

const audience = process.env.OIDC_AUDIENCE ?? 'https://api.svc.test';
const clientId = process.env.OIDC_CLIENT_ID ?? 'svc-cli';
const account = process.env.OIDC_ACCOUNT ?? 'alice';
const accessTokenTtl = Number(process.env.OIDC_ACCESS_TOKEN_TTL ?? 3600);
const accounts = (process.env.OIDC_ACCOUNTS ?? account).split(',');
let nextAccount = 0;
const webClientId = process.env.OIDC_WEB_CLIENT_ID;
const webClients = webClientId
  ? [
      {
        client_id: webClientId,
        client_secret: process.env.OIDC_WEB_CLIENT_SECRET,
        application_type: 'web',
        token_endpoint_auth_method: 'client_secret_basic',
        redirect_uris: [process.env.OIDC_WEB_REDIRECT_URI],
        grant_types: ['authorization_code'],
        response_types: ['code'],
      },
    ]
  : [];

const server = http.createServer();
await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
const issuer = `http://127.0.0.1:${server.address().port}`;

const { privateKey } = crypto.generateKeyPairSync('rsa', { modulusLength: 2048 });
const signingKey = { ...privateKey.export({ format: 'jwk' }), kid: 'test-rs256', alg: 'RS256', use: 'sig' };

const provider = new Provider(issuer, {
  clients: [
    {
      client_id: clientId,
      application_type: 'native',
      token_endpoint_auth_method: 'none',
      // Native clients may use any port on the loopback address (RFC 8252 §7.3).
      redirect_uris: ['http://127.0.0.1/callback'],
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
    },
    ...webClients,
  ],
  jwks: { keys: [signingKey] },
  cookies: { keys: [crypto.randomBytes(32).toString('hex')] },
  scopes: ['openid', 'offline_access', 'profile', 'email'],
  claims: { openid: ['sub'], email: ['email', 'email_verified'], profile: ['name'] },
  findAccount: async (_ctx, sub) => ({
    accountId: sub,
    claims: async () => ({ sub, email: `${sub}@example.test`, email_verified: true, name: sub }),
  }),
  interactions: { url: (_ctx, interaction) => `/interaction/${interaction.uid}` },
  ttl: {
    AccessToken: accessTokenTtl,
    AuthorizationCode: 60,
    IdToken: 3600,
    RefreshToken: 24 * 3600,
    Grant: 24 * 3600,
    Interaction: 600,
    Session: 24 * 3600,
  },
  features: {
    devInteractions: { enabled: false },
    revocation: { enabled: true },
    resourceIndicators: {
      enabled: true,
      defaultResource: () => audience,
      useGrantedResource: () => true,
      getResourceServerInfo: (_ctx, resource) => {
        if (resource !== audience) {
          throw new errors.InvalidTarget();
        }
        return { scope: 'api', audience, accessTokenFormat: 'jwt', accessTokenTTL: accessTokenTtl, jwt: { sign: { alg: 'RS256' } } };
      },
    },
  },
});

provider.on('grant.success', (ctx) => {
  console.log(JSON.stringify({ event: 'grant', grantType: ctx.oidc.params.grant_type }));
});

async function interaction(req, res) {
  const details = await provider.interactionDetails(req, res);
  if (details.prompt.name === 'login') {
    await provider.interactionFinished(req, res, { login: { accountId: accounts[Math.min(nextAccount++, accounts.length - 1)] } }, { mergeWithLastSubmission: false });
    return;
  }
  const grant = details.grantId
    ? await provider.Grant.find(details.grantId)
    : new provider.Grant({ accountId: details.session.accountId, clientId: details.params.client_id });
  const { missingOIDCScope, missingOIDCClaims, missingResourceScopes } = details.prompt.details;
  if (missingOIDCScope) grant.addOIDCScope(missingOIDCScope.join(' '));
  if (missingOIDCClaims) grant.addOIDCClaims(missingOIDCClaims);
  for (const [indicator, scopes] of Object.entries(missingResourceScopes ?? {})) {
    grant.addResourceScope(indicator, scopes.join(' '));
  }
  const grantId = await grant.save();
  await provider.interactionFinished(req, res, { consent: { grantId } }, { mergeWithLastSubmission: true });
}

const callback = provider.callback();
server.on('request', (req, res) => {
  if (req.url.startsWith('/interaction/')) {
    interaction(req, res).catch((error) => {
      res.statusCode = 500;
      res.end(String(error));
    });
  } else {
    callback(req, res);
  }
});

console.log(JSON.stringify({ issuer }));
