// A small OpenID Provider for the tests (issue #54): the certified `oidc-provider` package
// (npm, major 8: the one that supports Node 20; `.ci/run` installs it) on a loopback ephemeral port, with one
// confidential client, users in groups and a `groups` claim in the ID token. Its built-in
// development login and consent forms are what a test posts, as a browser would.
//
// Environment: OIDC_PROVIDER_MODULES (the node_modules folder holding oidc-provider), CLIENT_ID, CLIENT_SECRET, REDIRECT_URI, POST_LOGOUT_REDIRECT_URI.
// Prints one JSON line on stdout once listening: {"issuer": "http://127.0.0.1:PORT"}.
//
// Test controls (not part of any real provider), under /test/:
//   POST /test/mode?tamper=NAME  re-signs the ID token of every later token answer with the
//     provider's own key after changing it: `expired` (exp and iat an hour and two ago),
//     `wrong_audience`, `wrong_issuer`, `unknown_kid` (a key the provider never publishes),
//     `rotate` (a second key, published in the key set from now on, signs from now on),
//     `none` (back to normal).
//   POST /test/mode?slow_ms=N    every provider answer waits N ms first.
//   POST /test/groups?user=U&groups=a,b  sets U's groups (a person moved in the directory).
//   GET  /test/stats             {"requests": N}: provider requests served so far.
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

// ES modules ignore NODE_PATH: the packages are imported from the folder npm installed them in.
const modules = process.env.OIDC_PROVIDER_MODULES;
if (!modules) { console.error('OIDC_PROVIDER_MODULES (a node_modules folder) is required'); process.exit(2); }
const entry = (file) => pathToFileURL(path.join(modules, file)).href;
const { default: Provider } = await import(entry('oidc-provider/lib/index.js'));
// jose 5 (what oidc-provider 8 depends on) and jose 6 keep their ES module entry in different places.
const josePath = ['jose/dist/node/esm/index.js', 'jose/dist/webapi/index.js']
  .find((f) => fs.existsSync(path.join(modules, f)));
const jose = await import(entry(josePath));

const USERS = {
  vera: ['sre-reviewers', 'staff'],
  ravi: ['sre-oncall', 'staff'],
  olga: ['marketing'],
};

const env = (k) => {
  const v = process.env[k];
  if (!v) { console.error(`${k} is required`); process.exit(2); }
  return v;
};

async function key(kid) {
  const { privateKey } = await jose.generateKeyPair('RS256', { extractable: true });
  const jwk = await jose.exportJWK(privateKey);
  return { ...jwk, kid, alg: 'RS256', use: 'sig' };
}

const publicOf = ({ kid, kty, n, e, alg, use }) => ({ kid, kty, n, e, alg, use });

const [k1, k2, stranger] = await Promise.all([key('k1'), key('k2'), key('stranger')]);

let tamper = 'none';
let slowMs = 0;
let requests = 0;

const server = http.createServer();
await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
const issuer = `http://127.0.0.1:${server.address().port}`;

const provider = new Provider(issuer, {
  clients: [{
    client_id: env('CLIENT_ID'),
    client_secret: env('CLIENT_SECRET'),
    redirect_uris: [env('REDIRECT_URI')],
    post_logout_redirect_uris: [env('POST_LOGOUT_REDIRECT_URI')],
    grant_types: ['authorization_code'],
    response_types: ['code'],
    token_endpoint_auth_method: 'client_secret_basic',
  }],
  jwks: { keys: [k1] },
  cookies: { keys: ['incidentmind-test-cookie-key'] },
  pkce: { required: () => true },
  scopes: ['openid', 'profile', 'email', 'groups'],
  claims: {
    openid: ['sub'],
    profile: ['preferred_username', 'name'],
    email: ['email', 'email_verified'],
    groups: ['groups'],
  },
  // The claims of the granted scopes go in the ID token itself, as most providers' groups do.
  conformIdTokenClaims: false,
  features: { devInteractions: { enabled: true }, rpInitiatedLogout: { enabled: true } },
  async findAccount(_ctx, id) {
    return {
      accountId: id,
      async claims() {
        return {
          sub: id,
          preferred_username: id,
          name: id,
          email: `${id}@example.test`,
          email_verified: true,
          groups: USERS[id] ?? [],
        };
      },
    };
  },
});

async function resign(idToken) {
  const claims = jose.decodeJwt(idToken);
  const now = Math.floor(Date.now() / 1000);
  let signer = k1;
  switch (tamper) {
    case 'expired': claims.iat = now - 7200; claims.exp = now - 3600; break;
    case 'wrong_audience': claims.aud = 'some-other-application'; break;
    case 'wrong_issuer': claims.iss = 'http://127.0.0.1:9/not-the-issuer'; break;
    case 'unknown_kid': signer = stranger; break;
    case 'rotate': signer = k2; break;
    default: return idToken;
  }
  return new jose.SignJWT(claims)
    .setProtectedHeader({ alg: 'RS256', kid: signer.kid, typ: 'JWT' })
    .sign(await jose.importJWK(signer, 'RS256'));
}

provider.use(async (ctx, next) => {
  await next();
  if (ctx.path === '/token' && ctx.status === 200 && ctx.body && ctx.body.id_token) {
    ctx.body = { ...ctx.body, id_token: await resign(ctx.body.id_token) };
  }
  if (ctx.path === '/jwks' && tamper === 'rotate') {
    ctx.body = { keys: [publicOf(k1), publicOf(k2)] };
  }
});

const handle = provider.callback();
server.on('request', async (req, res) => {
  const url = new URL(req.url, issuer);
  if (url.pathname === '/test/mode' && req.method === 'POST') {
    if (url.searchParams.has('tamper')) tamper = url.searchParams.get('tamper');
    if (url.searchParams.has('slow_ms')) slowMs = Number(url.searchParams.get('slow_ms')) || 0;
    res.writeHead(204).end();
    return;
  }
  if (url.pathname === '/test/groups' && req.method === 'POST') {
    const groups = url.searchParams.get('groups') ?? '';
    USERS[url.searchParams.get('user')] = groups.split(',').filter((g) => g);
    res.writeHead(204).end();
    return;
  }
  if (url.pathname === '/test/stats') {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ requests }));
    return;
  }
  requests += 1;
  if (slowMs > 0) await new Promise((r) => setTimeout(r, slowMs));
  handle(req, res);
});

process.stdout.write(`${JSON.stringify({ issuer })}\n`);
process.on('SIGTERM', () => process.exit(0));
