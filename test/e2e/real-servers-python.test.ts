/**
 * A server written with the official MCP Python SDK, launched as its README says (`python
 * server.py`, here the `bin/python` of the virtualenv the SDK is installed in), configured in a
 * Claude Desktop file with the folder it writes to as its argument (issue 29 point 7). The
 * evidence is the file its tool wrote, read outside Barbican.
 *
 * Without bubblewrap no mechanism can confine a Python program: it is refused, naming the line
 * that runs it anyway, unless the operator set `sandbox.fallback: unconfined` (issue 29 point 4).
 */
import assert from 'node:assert/strict'
import { appendFileSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import {
  connect,
  importConfig,
  logLines,
  MECHANISMS,
  pythonWithMcp,
  serve,
  workspace,
  writeClaudeConfig,
} from '../support/real-servers.ts'

/** The SDK README's server, with one tool that writes a note into the folder it was given. */
const SERVER = `import sys
from pathlib import Path

from mcp.server import MCPServer

NOTES = Path(sys.argv[1])
mcp = MCPServer("notes")


@mcp.tool()
def save_note(name: str, text: str) -> str:
    """Save a note as NAME.txt in the notes folder."""
    (NOTES / f"{name}.txt").write_text(text)
    return f"saved {name}"


if __name__ == "__main__":
    mcp.run()
`

for (const mechanism of MECHANISMS) {
  describe(`a Python SDK server from its virtualenv, under ${mechanism}`, () => {
    let project: ReturnType<typeof workspace>
    let notes: string
    let file: string

    before(async () => {
      const python = pythonWithMcp()
      project = workspace(`python-${mechanism}`)
      notes = join(project.dir, 'notes')
      mkdirSync(notes)
      const server = join(project.dir, 'server.py')
      writeFileSync(server, SERVER)
      writeClaudeConfig(project.dir, { notes: { command: python, args: [server, notes] } })
      file = (await importConfig(project.dir)).file
    })

    after(() => project.remove())

    async function saveNote(name: string): Promise<string> {
      const gateway = await serve(file, mechanism)
      try {
        const client = await connect(gateway)
        const answer = await client.call('save_note', { name, text: `from ${mechanism}` })
        await client.close()
        return answer
      } finally {
        await gateway.stop()
      }
    }

    if (mechanism === 'bubblewrap') {
      test('its tool writes into the folder it was given', async () => {
        assert.match(await saveNote('first'), /saved first/)
        assert.equal(readFileSync(join(notes, 'first.txt'), 'utf8'), `from ${mechanism}`)
      })
      return
    }

    test('is refused by default, naming the line that runs it unconfined', async () => {
      const gateway = await serve(file, mechanism)
      try {
        const refusal = logLines(gateway, /"upstream":"notes"/).join('\n')
        assert.match(refusal, /fallback: unconfined/, gateway.log())
        const client = await connect(gateway)
        await assert.rejects(client.call('save_note', { name: 'refused', text: 'x' }))
        await client.close()
      } finally {
        await gateway.stop()
      }
      assert.equal(existsSync(join(notes, 'refused.txt')), false)
    })

    test('runs, marked unconfined, once sandbox.fallback says unconfined', async () => {
      appendFileSync(file, 'sandbox:\n  fallback: unconfined\n')
      const gateway = await serve(file, mechanism)
      try {
        const client = await connect(gateway)
        assert.match(await client.call('save_note', { name: 'second', text: 'x' }), /saved/)
        await client.close()
        assert.match(logLines(gateway, /"upstream":"notes"/).join('\n'), /unconfined/)
      } finally {
        await gateway.stop()
      }
      assert.equal(readFileSync(join(notes, 'second.txt'), 'utf8'), 'x')
    })
  })
}
