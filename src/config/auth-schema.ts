/**
 * The `auth:` section of the native configuration and the per-upstream `credentials:` key, as
 * zod schemas; src/config/schema.ts mounts them, and src/auth/ consumes what they produce.
 * Absent `auth:` means no inbound authentication, which Barbican accepts on loopback binds only.
 */
import { z } from 'zod'

/** Algorithms an operator may allow for JWT access tokens; all asymmetric. */
export const ASYMMETRIC_ALGORITHMS = [
  'RS256',
  'RS384',
  'RS512',
  'PS256',
  'PS384',
  'PS512',
  'ES256',
  'ES384',
  'ES512',
  'EdDSA',
  'Ed25519',
] as const

function doc<T extends z.ZodType>(schema: T, title: string, description: string): T {
  return schema.meta({ title, description })
}

const httpsOrLoopbackUrl = z.url({ protocol: /^https?$/ })
const strings = z.array(z.string().min(1))

const jwt = z.strictObject({
  issuer: doc(
    httpsOrLoopbackUrl,
    'Issuer',
    'The authorization server whose JWT access tokens are accepted; the `iss` claim must equal it.',
  ),
  jwksUri: doc(
    httpsOrLoopbackUrl.optional(),
    'JWKS URI',
    "Where the issuer's signing keys are. Default: discovered from the issuer's metadata.",
  ),
  algorithms: doc(
    z.array(z.enum(ASYMMETRIC_ALGORITHMS)).min(1).default(['RS256', 'PS256', 'ES256', 'EdDSA']),
    'Algorithms',
    'Signature algorithms accepted (asymmetric only; `none` and HMAC are never accepted). ' +
      'Default: RS256, PS256, ES256, EdDSA.',
  ),
  clockToleranceSeconds: doc(
    z.int().min(0).max(300).default(30),
    'Clock tolerance (s)',
    'Leeway on `exp` and `nbf`. Default: 30.',
  ),
  tenantClaim: doc(
    z.string().min(1).default('tenant'),
    'Tenant claim',
    'Claim naming the caller’s tenant. Default: tenant.',
  ),
})

const introspection = z.strictObject({
  endpoint: doc(httpsOrLoopbackUrl, 'Endpoint', 'RFC 7662 introspection endpoint.'),
  clientId: doc(z.string().min(1), 'Client id', "Barbican's client id at the issuer."),
  clientSecret: doc(
    z.string().min(1),
    'Client secret',
    `Write "\${VAR}" to read it from the environment.`,
  ),
  issuer: doc(
    httpsOrLoopbackUrl.optional(),
    'Issuer',
    'When set, answers naming another `iss` are refused.',
  ),
  cacheSeconds: doc(
    z.int().min(0).max(600).default(30),
    'Cache (s)',
    'How long an answer is reused (never past the token’s `exp`). Default: 30.',
  ),
  tenantClaim: doc(
    z.string().min(1).default('tenant'),
    'Tenant claim',
    'Field of the answer naming the tenant. Default: tenant.',
  ),
})

const apiKey = z.strictObject({
  id: doc(z.string().min(1), 'Key id', 'Name of the key, used in logs and to revoke it.'),
  hash: doc(
    z.string().regex(/^sha256:[0-9a-fA-F]{64}$/),
    'Hash',
    'sha256:<hex> of the key; Barbican never stores keys themselves.',
  ),
  subject: doc(z.string().min(1), 'Subject', 'The user or workload the key acts as.'),
  tenant: doc(z.string().min(1).optional(), 'Tenant', 'Tenant of the subject.'),
  scopes: doc(strings.default([]), 'Scopes', 'Scopes the key grants. Default: none.'),
})

/** One rule of `auth.permissions` (also of a tenant's own `permissions`). */
export const permission = z.strictObject({
  subjects: doc(strings.optional(), 'Subjects', 'Identity subjects this rule applies to.'),
  scopes: doc(strings.optional(), 'Scopes', 'The rule applies when the caller holds all of these.'),
  claims: doc(
    z.record(z.string(), z.union([z.string(), z.number(), z.boolean()])).optional(),
    'Claims',
    'The rule applies when every listed claim has the given value.',
  ),
  tenants: doc(strings.optional(), 'Tenants', 'The rule applies to callers of these tenants.'),
  servers: doc(strings.default(['*']), 'Servers', 'Virtual servers (globs). Default: all.'),
  tools: doc(
    strings.optional(),
    'Tools',
    'Tool names as clients see them (globs). A rule naming none of tools, prompts and ' +
      'resources grants them all; one naming some grants none of the others.',
  ),
  prompts: doc(
    strings.optional(),
    'Prompts',
    'Prompt names as clients see them (globs); also what ref/prompt completions may name.',
  ),
  resources: doc(
    strings.optional(),
    'Resources',
    'Resource URIs as clients see them, normalised (globs: * within a segment, ** across); ' +
      'also resource templates, subscriptions and ref/resource completions.',
  ),
})

/** The `auth:` section. */
export const authSchema = z.strictObject({
  publicUrl: doc(
    httpsOrLoopbackUrl.optional(),
    'Public URL',
    'Base URL clients use to reach Barbican (e.g. https://gw.example.com); each virtual ' +
      "server's resource URI, the audience its tokens must carry, is this plus /mcp[/NAME]. " +
      'Default: http://<listen address>.',
  ),
  scopes: doc(
    strings.default([]),
    'Required scopes',
    'Scopes every token must carry (403 insufficient_scope otherwise).',
  ),
  serverScopes: doc(
    z.record(z.string(), strings).default({}),
    'Scopes per server',
    'Extra scopes a virtual server requires, by server name (step-up: a token without them ' +
      'gets 403 insufficient_scope naming every scope needed). Default: none.',
  ),
  authorizationServers: doc(
    z.array(httpsOrLoopbackUrl).optional(),
    'Authorization servers',
    'Issuers listed in the protected resource metadata. Default: jwt.issuer / introspection.issuer.',
  ),
  jwt: doc(
    jwt.optional(),
    'JWT access tokens',
    'Verify JWT access tokens against the issuer’s JWKS.',
  ),
  introspection: doc(
    introspection.optional(),
    'Token introspection',
    'Check opaque tokens by RFC 7662.',
  ),
  apiKeys: doc(
    z
      .strictObject({
        keys: doc(z.array(apiKey).default([]), 'Keys', 'Keys listed in the config.'),
        file: doc(
          z.string().min(1).optional(),
          'Keys file',
          'JSON file {"keys": [...]} (relative to the config file) re-read when it changes: ' +
            'removing a key revokes it at once.',
        ),
      })
      .optional(),
    'API keys',
    'Keys sent as "Authorization: Bearer bk_…", stored as hashes.',
  ),
  permissions: doc(
    z.array(permission).optional(),
    'Permissions',
    'Which identities may use which virtual servers and tools. Absent: every authenticated caller may use everything.',
  ),
  stdio: doc(
    z
      .strictObject({
        subject: doc(z.string().min(1), 'Subject', 'The user stdio callers act as.'),
        tenant: doc(z.string().min(1).optional(), 'Tenant', 'Their tenant.'),
        scopes: doc(strings.default([]), 'Scopes', 'Their scopes. Default: none.'),
      })
      .optional(),
    'stdio identity',
    'Who `barbican stdio` acts for (stdio has no tokens; the launching host vouches).',
  ),
  assertion: doc(
    z
      .strictObject({
        ttlSeconds: doc(
          z.int().min(5).max(3600).default(60),
          'Lifetime (s)',
          'How long an assertion is valid. Default: 60.',
        ),
        privateKeyPem: doc(
          z.string().min(1).optional(),
          'Signing key',
          `PKCS#8 PEM EC P-256 key ("\${VAR}"); default: a key generated at start.`,
        ),
      })
      .default({ ttlSeconds: 60 }),
    'On-behalf-of assertion',
    'The short-lived JWT Barbican attaches to every upstream request.',
  ),
  tokens: doc(
    z
      .union([
        z.strictObject({
          sqlite: doc(
            z.string().min(1),
            'SQLite file',
            'Where linked upstream tokens are kept (sealed), relative to the config file.',
          ),
        }),
        z.strictObject({
          postgres: doc(
            z.string().regex(/^postgres(ql)?:\/\/[^/]/, 'expected postgres://HOST/DATABASE'),
            'PostgreSQL URL',
            'Where linked upstream tokens are kept (sealed), shared by every replica.',
          ),
          migrate: doc(z.boolean().default(true), 'Migrate', 'Bring the schema up to date first.'),
        }),
      ])
      .optional(),
    'Linked tokens',
    'Persist linked upstream accounts across restarts (needs BARBICAN_SECRET_KEY to read them ' +
      'back). Default: in memory, or the PostgreSQL store when one is configured.',
  ),
  network: doc(
    z
      .strictObject({
        allow: doc(strings.default([]), 'Allow', 'Host names, IP addresses or CIDR ranges.'),
      })
      .default({ allow: [] }),
    'Outbound network',
    'Hosts, IPs or CIDRs that discovery and token fetches may reach although private or loopback.',
  ),
})

export type AuthConfig = z.output<typeof authSchema>

const mode = <T extends string>(value: T) =>
  doc(z.literal(value), 'Mode', `Credential mode: ${value}.`)
const clientId = doc(z.string().min(1), 'Client id', "Barbican's client id at the issuer.")
const clientSecret = doc(
  z.string().min(1),
  'Client secret',
  `Barbican's client secret ("\${VAR}"), kept encrypted in memory.`,
)
const tokenEndpoint = doc(httpsOrLoopbackUrl, 'Token endpoint', "The issuer's token endpoint.")
const upstreamScopes = doc(strings.default([]), 'Scopes', 'Scopes to request. Default: none.')
const resource = doc(
  httpsOrLoopbackUrl.optional(),
  'Resource',
  'RFC 8707 resource indicator. Default: the upstream URL.',
)

const oauthCredentials = z.strictObject({
  mode: mode('oauth'),
  issuer: doc(
    httpsOrLoopbackUrl.optional(),
    'Issuer',
    "Upstream's authorization server. Default: discovered from the upstream's protected resource metadata.",
  ),
  clientId: doc(
    z.string().min(1).optional(),
    'Client id',
    "Barbican's client id registered at the issuer. Default: its client metadata document URL " +
      'where the issuer supports them (https publicUrl), else a dynamic registration (RFC 7591).',
  ),
  clientSecret: clientSecret.optional(),
  scopes: upstreamScopes,
  resource,
})

/** An upstream's `credentials:`: what Barbican itself presents to that upstream. */
export const credentialsSchema = z.discriminatedUnion('mode', [
  z.strictObject({ mode: mode('none') }),
  z.strictObject({
    mode: mode('static'),
    headers: doc(
      z.record(z.string(), z.string()).default({}),
      'Headers',
      'Secret HTTP headers, kept encrypted in memory.',
    ),
    env: doc(
      z.record(z.string(), z.string()).default({}),
      'Environment',
      'Secret environment variables for a stdio upstream, kept encrypted in memory.',
    ),
  }),
  oauthCredentials,
  z.strictObject({
    mode: mode('client-credentials'),
    tokenEndpoint,
    clientId,
    clientSecret,
    scopes: upstreamScopes,
    resource,
  }),
  z.strictObject({
    mode: mode('token-exchange'),
    tokenEndpoint,
    clientId,
    clientSecret,
    scopes: upstreamScopes,
    resource,
  }),
])

export type CredentialsConfig = z.output<typeof credentialsSchema>
