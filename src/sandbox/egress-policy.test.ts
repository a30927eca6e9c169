import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import { egressEntryProblem } from '../config/egress-allow.ts'
import { EgressPolicy } from './egress-policy.ts'

describe('egress allow entries', () => {
  test('names, wildcards, addresses and ranges, with optional ports, are read', () => {
    for (const entry of [
      'api.example.com',
      'api.example.com:8443',
      '*.example.com',
      '*.example.com:*',
      '10.1.2.3',
      '10.1.2.3:5432',
      '10.0.0.0/8',
      '[::1]:8080',
      'fd00::/8',
    ]) {
      assert.equal(egressEntryProblem(entry), undefined, entry)
    }
  })

  test('malformed entries name the problem', () => {
    assert.match(egressEntryProblem('example.com:0') ?? '', /port must be 1-65535/)
    assert.match(egressEntryProblem('example.com:http') ?? '', /port must be/)
    assert.match(egressEntryProblem('*.com') ?? '', /at least two labels/)
    assert.match(egressEntryProblem('bad host.example.com') ?? '', /expected a host name/)
    assert.match(egressEntryProblem('10.0.0.0/40') ?? '', /prefix/)
  })
})

describe('the egress policy', () => {
  const policy = new EgressPolicy([
    'api.example.com',
    '*.cdn.example.net:*',
    '127.0.0.1:8080',
    '10.20.0.0/16:5432',
  ])

  test('admits listed names on their ports (80 and 443 without one)', () => {
    assert.equal(policy.refusesDestination('api.example.com', 443), undefined)
    assert.equal(policy.refusesDestination('API.example.com.', 80), undefined)
    assert.match(policy.refusesDestination('api.example.com', 22) ?? '', /not in sandbox/)
    assert.equal(policy.refusesDestination('a.b.cdn.example.net', 9999), undefined)
    // A wildcard covers subdomains only.
    assert.match(policy.refusesDestination('cdn.example.net', 443) ?? '', /not in/)
    assert.match(policy.refusesDestination('evilapi.example.com', 443) ?? '', /not in/)
  })

  test('admits listed addresses and ranges on their ports only', () => {
    assert.equal(policy.refusesDestination('127.0.0.1', 8080), undefined)
    assert.match(policy.refusesDestination('127.0.0.1', 8081) ?? '', /not in/)
    assert.equal(policy.refusesDestination('10.20.3.4', 5432), undefined)
    assert.match(policy.refusesDestination('10.21.3.4', 5432) ?? '', /not in/)
  })

  test('judges DNS answers: special addresses only when the address itself is listed', () => {
    assert.equal(policy.refusesAddress('api.example.com', '93.184.216.34', 443), undefined)
    // The IPv6 forms that embed an IPv4 address (compatible, NAT64, 6to4) are judged by it.
    const addresses = ['127.0.0.1', '10.0.0.1', '169.254.169.254', '::1', 'fd00:ec2::254']
    addresses.push('::127.0.0.1', '64:ff9b::7f00:1', '2002:7f00:1::1', '64:ff9b::a00:1')
    for (const address of addresses) {
      assert.match(
        policy.refusesAddress('api.example.com', address, 443) ?? '',
        /a (loopback|private|link-local) address/,
        address,
      )
    }
    assert.equal(policy.refusesAddress('db.internal', '10.20.9.9', 5432), undefined)
    assert.equal(policy.refusesAddress('local', '::ffff:127.0.0.1', 8080), undefined)
    assert.match(policy.refusesAddress('local', '127.0.0.1', 9090) ?? '', /loopback/)
  })
})
