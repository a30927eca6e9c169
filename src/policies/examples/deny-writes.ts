/**
 * An example policy, kept as code so that tsc checks it and a test runs it: it refuses every
 * tool whose upstream name starts with `write_`. To install a policy like it, add its name to
 * ORDER in ../chain.ts at the place it should run, and build it where the gateway plan builds
 * the others (gateway/plan.ts).
 */
import { BarbicanError } from '../../common/errors.ts'
import type { Policy } from '../policy.ts'

export const denyWrites: Policy = {
  name: 'deny-writes',
  async handle(call, next) {
    if (call.route.kind === 'unicast' && call.route.original.startsWith('write_')) {
      throw new BarbicanError('ERR_POLICY_DENIED', 'Writes are disabled')
    }
    return await next(call)
  },
}
