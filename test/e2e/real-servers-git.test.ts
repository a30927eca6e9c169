/**
 * A server that spawns child processes (issue 29 point 7): @cyanheads/git-mcp-server runs `git`
 * for every tool. Configured as its README says (env `GIT_BASE_DIR`, `LOGS_DIR`, the author and
 * commit signing), with a repository under the base folder. The evidence is the commit in the
 * repository on disk, read with `git log` outside Barbican.
 *
 * Under bubblewrap `git` runs inside the same sandbox, as the server's uid; the base folder is a
 * write grant from `GIT_BASE_DIR`. The Node.js permission model cannot confine a child process
 * (it would run with Barbican's rights), so under the fallback the server starts but its first
 * `git` is refused, and the error says what runs it (ADR 108).
 */
import assert from 'node:assert/strict'
import { execFileSync } from 'node:child_process'
import { mkdirSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import {
  type ClaudeEntry,
  connect,
  type Gateway,
  importConfig,
  logLines,
  MECHANISMS,
  serve,
  workspace,
  writeClaudeConfig,
} from '../support/real-servers.ts'

// Not a devDependency: Barbican installs it into its package cache from the registry.
const SPEC = '@cyanheads/git-mcp-server@2.15.3'

function git(repo: string, ...args: string[]): string {
  return execFileSync('git', ['-C', repo, ...args], { encoding: 'utf8' })
}

/** The README's entry, with the base folder and logs under `base`. */
function entry(base: string): ClaudeEntry {
  return {
    command: 'npx',
    args: [SPEC],
    env: {
      MCP_TRANSPORT_TYPE: 'stdio',
      MCP_LOG_LEVEL: 'info',
      GIT_BASE_DIR: `${base}/`,
      LOGS_DIR: join(base, 'logs/git-mcp-server/'),
      GIT_USERNAME: 'Real Servers',
      GIT_EMAIL: 'real-servers@example.com',
      GIT_SIGN_COMMITS: 'true',
    },
  }
}

for (const mechanism of MECHANISMS) {
  describe(`git-mcp-server as its README says, under ${mechanism}`, () => {
    let project: ReturnType<typeof workspace>
    let base: string
    let repo: string
    let file: string

    before(async () => {
      project = workspace(`git-${mechanism}`)
      base = join(project.dir, 'Developer')
      repo = join(base, 'notes')
      mkdirSync(repo, { recursive: true })
      git(repo, 'init', '-q', '-b', 'main')
      writeFileSync(join(repo, 'README.md'), '# notes\n')
      git(repo, 'add', 'README.md')
      git(repo, '-c', 'user.name=Setup', '-c', 'user.email=s@example.com', 'commit', '-qm', 'init')
      writeClaudeConfig(project.dir, { git: entry(base) })
      file = (await importConfig(project.dir)).file
    })

    after(() => project.remove())

    /** Writes `name`, asks the server to commit it, and returns the call's error if it failed. */
    async function commit(name: string, message: string): Promise<Gateway> {
      writeFileSync(join(repo, name), `written for ${mechanism}\n`)
      const gateway = await serve(file, mechanism)
      try {
        const client = await connect(gateway)
        try {
          await client.call('git_commit', { path: repo, message, filesToStage: [name] })
        } finally {
          await client.close()
        }
      } finally {
        await gateway.stop()
      }
      return gateway
    }

    function head(): string {
      return git(repo, 'log', '-1', '--format=%s|%an|%ae').trim()
    }

    if (mechanism === 'bubblewrap') {
      test('git, its child, commits the file into the repository on disk', async () => {
        const message = `feat: note from ${mechanism}`
        await commit('note.txt', message)
        assert.equal(head(), `${message}|Real Servers|real-servers@example.com`)
        assert.equal(git(repo, 'show', '--format=', '--name-only', 'HEAD').trim(), 'note.txt')
      })
      return
    }

    test('cannot run confined, and its failure names what runs it', async () => {
      const gateway = await serve(file, mechanism)
      try {
        const said = logLines(gateway, /"upstream":"git"/).join('\n')
        assert.match(said, /never allows child processes, worker threads/, gateway.log())
        assert.match(said, /sandbox: none/)
      } finally {
        await gateway.stop()
      }
      assert.match(head(), /^init\|/)
    })

    test('commits, unconfined, once its entry says sandbox: none', async () => {
      // Unconfined, npx itself installs the package; with no terminal to ask, only with -y.
      const unconfined = { ...entry(base), sandbox: 'none' as const }
      writeClaudeConfig(project.dir, { git: { ...unconfined, args: ['-y', SPEC] } })
      rmSync(file)
      file = (await importConfig(project.dir)).file
      const message = `feat: note from ${mechanism}, unconfined`
      await commit('unconfined.txt', message)
      assert.equal(head(), `${message}|Real Servers|real-servers@example.com`)
    })
  })
}
