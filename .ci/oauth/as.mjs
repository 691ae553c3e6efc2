// An OAuth 2.0 authorization server for CI: panva's oidc-provider (npm, pinned in
// .ci/peers/install.sh), configured for machine clients of one MCP server.
//
// Why a real AS rather than a token stub: the exporter's OAuth client has to meet what deployed
// authorization servers do — metadata at /.well-known/oauth-authorization-server (RFC 8414) and
// /.well-known/openid-configuration, client authentication by client_secret_basic and by
// private_key_jwt (replay-checked assertions), resource indicators (RFC 8707) that set the
// token's audience, opaque tokens that only introspection can read, and tokens that really expire.
//
// What it serves, all on http://127.0.0.1:PORT (the issuer):
//   - the client_credentials grant, for two pre-registered clients:
//       mcp-exporter-basic  client_secret_basic, secret read from --basic-secret-file
//       mcp-exporter-jwt    private_key_jwt (RS256), public key read from --jwt-public-key (PEM)
//     Both may ask for the scope mcp:tools.
//   - resource indicators: each --resource URL (repeatable) is a resource server; a token asked
//     for with `resource=URL` has audience URL, the scopes asked for that the resource allows, and
//     lives --ttl seconds. Any other resource is refused with invalid_target. A token asked for
//     without `resource` has no audience (the MCP server then refuses it).
//   - token introspection (RFC 7662) for one client, mcp-rs (client_secret_basic, secret from
//     --rs-secret-file): the resource server's own credentials; nobody else may introspect.
//
// Usage (stand-alone; the resource server is .ci/oauth/rs.py; .ci/oauth/serve.sh starts both):
//   NODE_PATH=<prefix>/node_modules node as.mjs --port PORT --resource http://127.0.0.1:RSPORT/mcp --ttl 6 \
//     --basic-secret-file F --rs-secret-file F --jwt-public-key F.pem
// Prints on stdout, one line each: `AS issuer=URL` once listening, then `AS token client_id=..
// aud=.. scope=.. expires_in=..` for every token issued and `AS refused client_id=.. error=..`
// for every token request turned down (CI counts these lines).
import { createPublicKey, generateKeyPairSync, randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { createRequire } from 'node:module';
import { parseArgs } from 'node:util';

// NODE_PATH=<prefix>/node_modules (the install of .ci/peers/install.sh) is honoured by require(),
// not by ESM import: resolve the package through require.resolve, then import it.
const { default: Provider, errors } = await import(createRequire(import.meta.url).resolve('oidc-provider'));

const { values: opt } = parseArgs({
  options: {
    port: { type: 'string' },
    resource: { type: 'string', multiple: true },
    ttl: { type: 'string', default: '6' },
    'basic-secret-file': { type: 'string' },
    'rs-secret-file': { type: 'string' },
    'jwt-public-key': { type: 'string' },
  },
});
for (const k of ['port', 'resource', 'basic-secret-file', 'rs-secret-file', 'jwt-public-key']) {
  if (!opt[k]) {
    console.error(`as.mjs: --${k} is required (see the usage at the top of the file)`);
    process.exit(2);
  }
}
const ttl = Number(opt.ttl);
if (!Number.isInteger(ttl) || ttl < 1) {
  console.error(`as.mjs: --ttl must be a whole number of seconds >= 1, not ${opt.ttl}`);
  process.exit(2);
}
const secret = (file) => readFileSync(file, 'utf8').replace(/\r?\n$/, '');
const resources = new Set(opt.resource);
const SCOPE = 'mcp:tools';

// The private_key_jwt client's public key, as the JWK its registration carries.
const clientJwk = createPublicKey(readFileSync(opt['jwt-public-key'])).export({ format: 'jwk' });
// The AS's own signing key (ID tokens, signed responses): none is used by the client_credentials
// grant with opaque tokens, but the provider wants one rather than its development key.
const signing = generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey.export({ format: 'jwk' });

const machineClient = { grant_types: ['client_credentials'], response_types: [], redirect_uris: [], scope: SCOPE };
const issuer = `http://127.0.0.1:${opt.port}`;
const provider = new Provider(issuer, {
  clients: [
    {
      ...machineClient,
      client_id: 'mcp-exporter-basic',
      client_secret: secret(opt['basic-secret-file']),
      token_endpoint_auth_method: 'client_secret_basic',
    },
    {
      ...machineClient,
      client_id: 'mcp-exporter-jwt',
      token_endpoint_auth_method: 'private_key_jwt',
      token_endpoint_auth_signing_alg: 'RS256',
      jwks: { keys: [clientJwk] },
    },
    {
      client_id: 'mcp-rs',
      client_secret: secret(opt['rs-secret-file']),
      token_endpoint_auth_method: 'client_secret_basic',
      grant_types: [],
      response_types: [],
      redirect_uris: [],
    },
  ],
  jwks: { keys: [{ ...signing, use: 'sig', alg: 'RS256', kid: 'as-signing' }] },
  cookies: { keys: [randomBytes(32).toString('hex')] },
  scopes: [SCOPE],
  ttl: { ClientCredentials: (_ctx, token) => token.resourceServer?.accessTokenTTL ?? ttl },
  features: {
    devInteractions: { enabled: false },
    clientCredentials: { enabled: true },
    introspection: {
      enabled: true,
      allowedPolicy: async (_ctx, client) => client.clientId === 'mcp-rs',
    },
    resourceIndicators: {
      enabled: true,
      defaultResource: async () => undefined,
      useGrantedResource: async () => false,
      getResourceServerInfo: async (_ctx, resourceIndicator) => {
        if (!resources.has(resourceIndicator)) {
          throw new errors.InvalidTarget(`unknown resource ${resourceIndicator}`);
        }
        return { scope: SCOPE, audience: resourceIndicator, accessTokenTTL: ttl, accessTokenFormat: 'opaque' };
      },
    },
  },
});

provider.on('grant.success', (ctx) => {
  const token = ctx.oidc.entities.ClientCredentials;
  if (!token) return;
  console.log(
    `AS token client_id=${ctx.oidc.client?.clientId} aud=${token.aud ?? 'none'} scope=${token.scope ?? 'none'}`
      + ` expires_in=${token.expiration}`,
  );
});
provider.on('grant.error', (ctx, err) => {
  console.log(`AS refused client_id=${ctx.oidc?.client?.clientId ?? 'unknown'} error=${err.error} (${err.error_description})`);
});
provider.on('server_error', (_ctx, err) => {
  console.error('AS server_error', err);
});

const server = createServer(provider.callback());
server.listen(Number(opt.port), '127.0.0.1', () => {
  console.log(`AS issuer=${issuer} token_ttl=${ttl}s resources=${[...resources].join(',')}`);
});
const stop = () => server.close(() => process.exit(0));
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
