// A real OpenID provider (the certified `oidc-provider` package, installed by scripts/peers.sh)
// for Toolshed's sign-in tests. It listens on 127.0.0.1:PORT with issuer http://127.0.0.1:PORT
// and signing keys made at start (so two instances never share a key), and prints one line,
// `READY <issuer>`, when it serves.
//
//   node scripts/oidc-provider.mjs PORT RESOURCE [CONNECT_REDIRECT]
//
// RESOURCE is the resource server (Toolshed) its access tokens are for: RFC 8707 resource
// indicators are on and every resource gets JWT access tokens (RFC 9068) with the scope
// `toolshed`, except for the client `opaque-client`, whose tokens are opaque (for
// introspection). Clients (all `client_secret_basic`, secret = "<id>-secret"):
//
//   alice-client, bob-client   client credentials; `groups` claim ["admins"] / ["devs"]
//   short-client               client credentials; tokens live 2 seconds
//   noscope-client             client credentials; may not have the `toolshed` scope
//   opaque-client              client credentials; opaque tokens
//   toolshed-rs                introspects tokens (Toolshed's own client)
//   toolshed-exchange          RFC 8693 token exchange (registered below with registerGrantType:
//                              oidc-provider has no such grant built in)
//   toolshed-connect           authorization code + refresh token, redirect URI CONNECT_REDIRECT:
//                              Toolshed's per-user connections; its access tokens live 3 seconds
//
// People sign in through the authorization-code flow (PKCE), with clients registered
// dynamically (RFC 7591), on the provider's own development login and consent pages: any login
// name with any password; their tokens carry `groups` too (alice: ["admins"], bob: ["devs"]).
//
// Node and the package come from $MCP_TOOLS (default /tmp/mcp-tools).
import { createRequire } from 'node:module';
import { pathToFileURL } from 'node:url';
import { randomUUID } from 'node:crypto';

const tools = process.env.MCP_TOOLS || '/tmp/mcp-tools';
const require = createRequire(`${tools}/package.json`);
const load = async (name) => import(pathToFileURL(require.resolve(name)).href);
const { default: Provider } = await load('oidc-provider');
const jose = await load('jose');

const [port, resource, connectRedirect] = process.argv.slice(2);
if (!port || !resource) {
  console.error('usage: oidc-provider.mjs PORT RESOURCE');
  process.exit(2);
}
const issuer = `http://127.0.0.1:${port}`;

const { privateKey } = await jose.generateKeyPair('RS256', { extractable: true });
const jwk = { ...(await jose.exportJWK(privateKey)), kid: randomUUID(), use: 'sig', alg: 'RS256' };

const GROUPS = {
  'alice-client': ['admins'], 'bob-client': ['devs'], alice: ['admins'], bob: ['devs'],
};
const client = (id, extra = {}) => ({
  client_id: id,
  client_secret: `${id}-secret`,
  grant_types: ['client_credentials'],
  redirect_uris: [],
  response_types: [],
  token_endpoint_auth_method: 'client_secret_basic',
  ...extra,
});

const provider = new Provider(issuer, {
  jwks: { keys: [jwk] },
  clients: [
    client('alice-client', { scope: 'toolshed' }),
    client('bob-client', { scope: 'toolshed' }),
    client('short-client', { scope: 'toolshed' }),
    client('noscope-client', { scope: 'other' }),
    client('opaque-client', { scope: 'toolshed' }),
    client('toolshed-rs'),
    client('toolshed-exchange', {
      grant_types: ['urn:ietf:params:oauth:grant-type:token-exchange'],
    }),
    client('toolshed-connect', {
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      redirect_uris: connectRedirect ? [connectRedirect] : [],
      scope: 'api',
    }),
  ],
  scopes: ['toolshed', 'other', 'api'],
  issueRefreshToken: async (_ctx, c) => c.grantTypeAllowed('refresh_token'),
  findAccount: async (_ctx, id) => ({ accountId: id, claims: async () => ({ sub: id }) }),
  features: {
    devInteractions: { enabled: true },
    registration: { enabled: true },
    clientCredentials: { enabled: true },
    introspection: { enabled: true, allowedPolicy: async () => true },
    resourceIndicators: {
      enabled: true,
      defaultResource: async () => resource,
      useGrantedResource: async () => true,
      getResourceServerInfo: async (_ctx, indicator, c) => ({
        scope: c.clientId === 'noscope-client' ? 'other' : 'toolshed other api',
        audience: indicator,
        accessTokenTTL: { 'short-client': 2, 'toolshed-connect': 3 }[c.clientId] ?? 600,
        accessTokenFormat: c.clientId === 'opaque-client' ? 'opaque' : 'jwt',
      }),
    },
  },
  extraTokenClaims: async (_ctx, token) => {
    const groups = GROUPS[token.accountId ?? token.clientId];
    return groups ? { groups } : undefined;
  },
});
// RFC 8693 token exchange, which oidc-provider does not implement: registered here with its
// registerGrantType. A client trades a user's access token from this provider (checked against
// this provider's own key, issuer and expiry) for a short-lived JWT for another audience with
// the same subject, signed with this provider's key.
const TOKEN_EXCHANGE = 'urn:ietf:params:oauth:grant-type:token-exchange';
const ACCESS_TOKEN_TYPE = 'urn:ietf:params:oauth:token-type:access_token';
const publicKey = await jose.importJWK({ kty: jwk.kty, n: jwk.n, e: jwk.e }, 'RS256');
provider.registerGrantType(TOKEN_EXCHANGE, async (ctx) => {
  const { subject_token: subject, subject_token_type: type, audience, resource, scope } = ctx.oidc.params;
  const fail = (error, description) => {
    ctx.status = 400;
    ctx.body = { error, error_description: description };
  };
  if (type !== ACCESS_TOKEN_TYPE) return fail('invalid_request', 'subject_token_type must be an access token');
  let claims;
  try {
    ({ payload: claims } = await jose.jwtVerify(subject, publicKey, { issuer }));
  } catch (e) {
    return fail('invalid_grant', `subject_token: ${e.code || e.message}`);
  }
  const aud = resource || audience;
  if (!aud) return fail('invalid_target', 'name the audience or resource');
  const signing = await jose.importJWK(jwk, 'RS256');
  const token = await new jose.SignJWT({ scope: scope || 'api', client_id: ctx.oidc.client.clientId, act: { sub: ctx.oidc.client.clientId } })
    .setProtectedHeader({ alg: 'RS256', kid: jwk.kid, typ: 'at+jwt' })
    .setIssuer(issuer)
    .setSubject(claims.sub)
    .setAudience(aud)
    .setIssuedAt()
    .setExpirationTime('60s')
    .setJti(randomUUID())
    .sign(signing);
  ctx.body = {
    access_token: token,
    issued_token_type: ACCESS_TOKEN_TYPE,
    token_type: 'Bearer',
    expires_in: 60,
  };
}, ['subject_token', 'subject_token_type', 'audience', 'resource', 'scope', 'requested_token_type', 'actor_token', 'actor_token_type']);

provider.on('server_error', (_ctx, err) => console.error('server_error', err));

provider.listen(Number(port), '127.0.0.1', () => console.log(`READY ${issuer}`));
