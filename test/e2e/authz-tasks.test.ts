/**
 * A 2025-11-25 task is judged by the tool whose call created it: a caller whose rights shrink
 * within its session (a refreshed token with fewer scopes) can no longer get, collect or cancel
 * the task of a tool it may no longer call, while `tasks/list` still shows it its own tasks.
 */
import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { Server } from '@modelcontextprotocol/sdk/server/index.js'
import {
  CallToolRequestSchema,
  CancelTaskRequestSchema,
  CreateTaskResultSchema,
  GetTaskPayloadRequestSchema,
  GetTaskRequestSchema,
  GetTaskResultSchema,
  ListTasksRequestSchema,
  ListTasksResultSchema,
  ListToolsRequestSchema,
} from '@modelcontextprotocol/sdk/types.js'
import type { Identity } from '../../src/auth/identity.ts'
import { Gateway } from '../../src/gateway/gateway.ts'
import { authorize } from '../../src/policies/authorize.ts'
import { silentLogger } from '../../src/telemetry/log.ts'
import { memoryPair } from '../../src/transports/memory.ts'
import { inProcessUpstream, rules, serverPlan } from '../support/plans.ts'

/** A low-level SDK server whose tool `slow` runs as a task when asked. */
function taskServer(name: string): Server {
  const server = new Server(
    { name, version: '1.0.0' },
    {
      capabilities: {
        tools: {},
        tasks: { list: {}, cancel: {}, requests: { tools: { call: {} } } },
      },
    },
  )
  const now = () => new Date().toISOString()
  const tasks = new Map<string, { taskId: string; status: 'working' }>()
  const full = (t: { taskId: string; status: 'working' }) => ({
    ...t,
    createdAt: now(),
    lastUpdatedAt: now(),
    ttl: 60_000,
  })
  server.setRequestHandler(ListToolsRequestSchema, async () => ({
    tools: [{ name: 'slow', inputSchema: { type: 'object' } }],
  }))
  server.setRequestHandler(CallToolRequestSchema, async () => {
    const task = { taskId: `${name}-task-${tasks.size + 1}`, status: 'working' as const }
    tasks.set(task.taskId, task)
    return { task: full(task) }
  })
  server.setRequestHandler(GetTaskRequestSchema, async (r) => full(tasks.get(r.params.taskId)!))
  server.setRequestHandler(GetTaskPayloadRequestSchema, async () => ({ content: [] }))
  server.setRequestHandler(CancelTaskRequestSchema, async (r) => full(tasks.get(r.params.taskId)!))
  server.setRequestHandler(ListTasksRequestSchema, async () => ({
    tasks: [...tasks.values()].map(full),
  }))
  return server
}

describe('tasks are judged by the tool that created them', () => {
  let gateway: Gateway
  let client: Client
  const writer: Identity = { subject: 'alice', scopes: ['write'], method: 'api-key' }
  const reader: Identity = { subject: 'alice', scopes: [], method: 'api-key' }
  /** Who the next message is from, as a transport that re-checks credentials would say. */
  let current = writer

  before(async () => {
    gateway = new Gateway(
      {
        upstreams: [inProcessUpstream('b', () => taskServer('b'))],
        servers: [serverPlan('default', ['b'], rules('never'))],
        clientRequestTimeoutMs: 5_000,
        policies: [
          authorize([
            { scopes: ['write'], servers: ['*'], tools: ['slow'] },
            { subjects: ['alice'], servers: ['*'], tools: ['other'] },
          ]),
        ],
      },
      silentLogger,
    )
    await gateway.start()
    const [clientSide, gatewaySide] = memoryPair()
    gateway.connect(gatewaySide, { kind: 'stdio', server: 'default', identity: writer })
    const receive = gatewaySide.onmessage!
    gatewaySide.onmessage = (message, info) => receive(message, { ...info, identity: current })
    await gatewaySide.start()
    client = new Client({ name: 'tasks', version: '1.0.0' })
    await client.connect(clientSide as never)
  })

  after(async () => {
    await client?.close()
    await gateway?.stop()
  })

  test('a task of a tool the caller may no longer call is refused; its own list stays', async () => {
    const created = await client.request(
      { method: 'tools/call', params: { name: 'slow', arguments: {}, task: { ttl: 60_000 } } },
      CreateTaskResultSchema,
    )
    const taskId = created.task.taskId
    const got = await client.request(
      { method: 'tasks/get', params: { taskId } },
      GetTaskResultSchema,
    )
    assert.equal(got.status, 'working')

    current = reader
    for (const method of ['tasks/get', 'tasks/result', 'tasks/cancel']) {
      await assert.rejects(
        client.request({ method, params: { taskId } }, GetTaskResultSchema),
        { code: -32001, message: /may not call the tool "slow"/ },
        method,
      )
    }
    const listed = await client.request({ method: 'tasks/list', params: {} }, ListTasksResultSchema)
    assert.deepEqual(
      listed.tasks.map((t) => t.taskId),
      [taskId],
    )
  })
})
