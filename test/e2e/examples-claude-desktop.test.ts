/**
 * `barbican check` passes on examples/claude-desktop as written, every folder granted
 * (test/e2e/examples.test.ts says why; one example a file: each check starts real servers).
 */
import { describe } from 'node:test'
import { checkPasses } from '../support/examples.ts'

describe('the example configurations, as written', () => {
  checkPasses('examples/claude-desktop')
})
