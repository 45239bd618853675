// The tests' authorization server: panva's oidc-provider (pinned in package-lock.json) on
// 127.0.0.1, issuing client-credentials access tokens as RFC 9068 JWTs for resource
// indicators (RFC 8707). Installed and copied beside its packages by scripts/oauth.sh.
//
// A TEST FIXTURE, never a deployment: besides the real provider it answers three test-only
// routes, one of which hands out its private signing keys so that a test can forge tokens the
// provider itself would never issue (wrong issuer, audience or typ, a future nbf) and check
// that they are refused for that reason alone.
//
//   GET  /test/keys    {"keys": [{kid, alg, der, public_pem}]}: the signing keys, private DER
//                      (PKCS#1 for RSA, PKCS#8 for EC and Ed25519) in base64
//   POST /test/rotate  a new RSA key, published first and signing every RS256 token from now
//                      on; the old one stays published. {"kid": new kid}
//   GET  /test/stats   {"metadata": n, "jwks": n}: requests for discovery and the key set
//
// Environment: OAUTH_RESOURCES, the resource indicators tokens may be asked for (comma
// separated; any other is invalid_target). Prints one JSON line, {"issuer": "http://127.0.0.1:PORT"},
// once it listens, and exits when its standard input closes (the test that started it ended).
//
// Clients (client_secret_basic, secret "<id>-secret", grant client_credentials only), each
// with the signature its tokens get:
//   client-a, client-b   RS256 (two callers: two identities)
//   client-es256         ES256
//   client-eddsa         EdDSA
//   client-short         RS256, tokens live 1 s (the expiry test)
// Scopes on every resource: agent:run agent:status. Tokens live 300 s.

import * as crypto from 'node:crypto';
import * as http from 'node:http';

import Provider, { errors } from 'oidc-provider';

const RESOURCES = (process.env.OAUTH_RESOURCES ?? '').split(',').filter(Boolean);
const SCOPES = 'agent:run agent:status';
const CLIENTS = {
  'client-a': { alg: 'RS256' },
  'client-b': { alg: 'RS256' },
  'client-es256': { alg: 'ES256' },
  'client-eddsa': { alg: 'EdDSA' },
  'client-short': { alg: 'RS256', ttl: 1 },
};

// Key ids carry a random part, so two providers never publish the same kid.
const run = crypto.randomBytes(4).toString('hex');
let rotations = 0;

function signingKey(type, alg, kid) {
  const options = type === 'rsa' ? { modulusLength: 2048 } : type === 'ec' ? { namedCurve: 'P-256' } : {};
  const { privateKey, publicKey } = crypto.generateKeyPairSync(type, options);
  const derType = type === 'rsa' ? 'pkcs1' : 'pkcs8';
  return {
    kid,
    alg,
    jwk: { ...privateKey.export({ format: 'jwk' }), kid, alg, use: 'sig' },
    der: privateKey.export({ type: derType, format: 'der' }).toString('base64'),
    public_pem: publicKey.export({ type: 'spki', format: 'pem' }),
  };
}

// Newest first: the first key of an alg signs (its kid is named explicitly below).
let keys = [
  signingKey('rsa', 'RS256', `rsa-${run}-0`),
  signingKey('ec', 'ES256', `ec-${run}`),
  signingKey('ed25519', 'EdDSA', `ed-${run}`),
];
const stats = { metadata: 0, jwks: 0 };

function signingKid(alg) {
  return keys.find((k) => k.alg === alg).kid;
}

// The provider's storage (grants, and tokens it keeps): in memory, as its own quick-start
// adapter, written out so that the provider knows it was chosen (and says no warning).
const stored = new Map();
class MemoryAdapter {
  constructor(model) {
    this.model = model;
  }

  key(id) {
    return `${this.model}:${id}`;
  }

  async upsert(id, payload) {
    stored.set(this.key(id), payload);
  }

  async find(id) {
    return stored.get(this.key(id));
  }

  async findByUid(uid) {
    return [...stored.values()].find((p) => p.uid === uid);
  }

  async findByUserCode(userCode) {
    return [...stored.values()].find((p) => p.userCode === userCode);
  }

  async consume(id) {
    const payload = stored.get(this.key(id));
    if (payload) payload.consumed = Math.floor(Date.now() / 1000);
  }

  async destroy(id) {
    stored.delete(this.key(id));
  }

  async revokeByGrantId(grantId) {
    for (const [key, payload] of stored) {
      if (payload.grantId === grantId) stored.delete(key);
    }
  }
}

function makeProvider(issuer) {
  const provider = new Provider(issuer, {
    clients: Object.keys(CLIENTS).map((id) => ({
      client_id: id,
      client_secret: `${id}-secret`,
      grant_types: ['client_credentials'],
      redirect_uris: [],
      response_types: [],
    })),
    adapter: MemoryAdapter,
    jwks: { keys: keys.map((k) => k.jwk) },
    cookies: { keys: ['test-fixture-cookie-key'] },
    features: {
      devInteractions: { enabled: false },
      clientCredentials: { enabled: true },
      resourceIndicators: {
        enabled: true,
        defaultResource: async () => undefined,
        useGrantedResource: async () => false,
        getResourceServerInfo: async (ctx, resource, client) => {
          if (!RESOURCES.includes(resource)) {
            throw new errors.InvalidTarget();
          }
          const { alg, ttl } = CLIENTS[client.clientId];
          return {
            scope: SCOPES,
            accessTokenFormat: 'jwt',
            accessTokenTTL: ttl ?? 300,
            jwt: { sign: { alg, kid: signingKid(alg) } },
          };
        },
      },
    },
  });
  // The provider logs through `debug` (off); a server error is worth a line on stderr.
  provider.on('server_error', (_ctx, err) => console.error('oidc-provider server_error:', err));
  return provider;
}

function json(res, status, body) {
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(JSON.stringify(body));
}

let current;
let handle;
function serve(provider) {
  current = provider;
  handle = provider.callback();
}

const server = http.createServer((req, res) => {
  const path = (req.url ?? '').split('?')[0];
  if (path === '/test/keys' && req.method === 'GET') {
    return json(res, 200, { keys: keys.map(({ kid, alg, der, public_pem }) => ({ kid, alg, der, public_pem })) });
  }
  if (path === '/test/stats' && req.method === 'GET') {
    return json(res, 200, stats);
  }
  if (path === '/test/rotate' && req.method === 'POST') {
    rotations += 1;
    keys = [signingKey('rsa', 'RS256', `rsa-${run}-${rotations}`), ...keys];
    serve(makeProvider(current.issuer));
    return json(res, 200, { kid: keys[0].kid });
  }
  if (path.startsWith('/.well-known/')) stats.metadata += 1;
  if (path === '/jwks') stats.jwks += 1;
  return handle(req, res);
});

server.listen(0, '127.0.0.1', () => {
  const issuer = `http://127.0.0.1:${server.address().port}`;
  serve(makeProvider(issuer));
  process.stdout.write(`${JSON.stringify({ issuer })}\n`);
});

process.stdin.resume();
process.stdin.on('end', () => process.exit(0));
