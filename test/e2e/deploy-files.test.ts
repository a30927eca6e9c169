/**
 * docs/deploy.md's files stay true: the configuration they ship loads, listens beyond loopback
 * with inbound auth, and the Kubernetes manifests probe the endpoints the gateway serves.
 */
import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, test } from 'node:test'
import { parseAllDocuments } from 'yaml'
import { hasInboundAuth } from '../../src/auth/bind-policy.ts'
import { loadConfig } from '../../src/config/load.ts'

const deploy = join(import.meta.dirname, '../../deploy')

describe('deploy/', () => {
  test('the compose configuration loads and has inbound auth', async () => {
    const loaded = await loadConfig({ path: join(deploy, 'barbican.yaml'), env: {} })
    assert.ok(loaded)
    assert.equal(loaded.config.listen.host, '0.0.0.0')
    assert.ok(hasInboundAuth(loaded.config.auth))
  })

  test('the Kubernetes manifests: probes, no affinity, PDB, HPA, secrets from the environment', () => {
    const docs = parseAllDocuments(readFileSync(join(deploy, 'kubernetes/barbican.yaml'), 'utf8'))
    const byKind = new Map(docs.map((d) => [d.get('kind') as string, d.toJS()]))
    assert.deepEqual([...byKind.keys()].sort(), [
      'ConfigMap',
      'Deployment',
      'HorizontalPodAutoscaler',
      'PodDisruptionBudget',
      'Service',
    ])
    const container = byKind.get('Deployment').spec.template.spec.containers[0]
    assert.equal(container.livenessProbe.httpGet.path, '/healthz')
    assert.equal(container.readinessProbe.httpGet.path, '/readyz')
    const env = new Map(container.env.map((e: { name: string }) => [e.name, e]))
    for (const name of [
      'BARBICAN_POSTGRES_URL',
      'BARBICAN_REDIS_URL',
      'BARBICAN_STATE_KEY',
      'BARBICAN_AUDIT_KEY',
    ])
      assert.ok((env.get(name) as { valueFrom?: unknown })?.valueFrom, `${name} from a Secret`)
    assert.equal(byKind.get('Service').spec.sessionAffinity, 'None')
    assert.equal(byKind.get('HorizontalPodAutoscaler').spec.metrics[0].resource.name, 'cpu')
    assert.equal(byKind.get('PodDisruptionBudget').spec.maxUnavailable, 1)
  })
})
