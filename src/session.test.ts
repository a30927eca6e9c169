import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { Server } from '@modelcontextprotocol/sdk/server/index.js'
import {
  CallToolRequestSchema,
  CreateTaskResultSchema,
  GetTaskRequestSchema,
  GetTaskResultSchema,
  ListTasksRequestSchema,
  ListTasksResultSchema,
  ListToolsRequestSchema,
} from '@modelcontextprotocol/sdk/types.js'
import { inProcessUpstream, rules, serverPlan } from '../test/support/plans.ts'
import { Gateway } from './gateway.ts'
import { silentLogger } from './log.ts'
import { memoryPair } from './transports/memory.ts'

/** A low-level SDK server whose tool runs as a 2025-11-25 task when the caller asks for one. */
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
  const tasks = new Map<string, { taskId: string; status: string }>()
  let next = 1
  server.setRequestHandler(ListToolsRequestSchema, async () => ({
    tools: [{ name: 'slow', inputSchema: { type: 'object' } }],
  }))
  server.setRequestHandler(CallToolRequestSchema, async (request) => {
    if (!request.params.task) return { content: [{ type: 'text', text: 'done at once' }] }
    const taskId = `${name}-task-${next++}`
    const task = {
      taskId,
      status: 'working',
      createdAt: new Date().toISOString(),
      lastUpdatedAt: new Date().toISOString(),
      ttl: 60_000,
    }
    tasks.set(taskId, task)
    return { task }
  })
  server.setRequestHandler(GetTaskRequestSchema, async (request) => {
    const task = tasks.get(request.params.taskId)
    if (!task) throw new Error('no such task')
    return {
      ...task,
      createdAt: new Date().toISOString(),
      lastUpdatedAt: new Date().toISOString(),
      ttl: 60_000,
    }
  })
  server.setRequestHandler(ListTasksRequestSchema, async () => ({
    tasks: [...tasks.values()].map((t) => ({
      ...t,
      createdAt: new Date().toISOString(),
      lastUpdatedAt: new Date().toISOString(),
      ttl: 60_000,
    })),
  }))
  return server
}

async function connectClient(gateway: Gateway): Promise<Client> {
  const [clientSide, gatewaySide] = memoryPair()
  gateway.connect(gatewaySide, { kind: 'stdio', server: 'default' })
  await gatewaySide.start()
  const client = new Client({ name: 'tasks', version: '1.0.0' })
  await client.connect(clientSide as never)
  return client
}

describe('2025-11-25 tasks through a virtual server', () => {
  let gateway: Gateway
  before(async () => {
    gateway = new Gateway(
      {
        upstreams: [
          inProcessUpstream('a', () => taskServer('a')),
          inProcessUpstream('b', () => taskServer('b')),
        ],
        servers: [serverPlan('default', ['a', 'b'], rules('always'))],
        clientRequestTimeoutMs: 5_000,
      },
      silentLogger,
    )
    await gateway.start()
  })
  after(async () => {
    await gateway.stop()
  })

  test('advertises tasks, routes task requests to the upstream that created the task, and lists only the caller’s tasks', async () => {
    const client = await connectClient(gateway)
    const other = await connectClient(gateway)
    try {
      assert.deepEqual(client.getServerCapabilities()?.tasks, {
        list: {},
        cancel: {},
        requests: { tools: { call: {} } },
      })
      const created = await client.request(
        { method: 'tools/call', params: { name: 'b__slow', arguments: {}, task: { ttl: 60_000 } } },
        CreateTaskResultSchema,
      )
      assert.equal(created.task.taskId, 'b-task-1')
      const got = await client.request(
        { method: 'tasks/get', params: { taskId: created.task.taskId } },
        GetTaskResultSchema,
      )
      assert.equal(got.status, 'working')
      await other.request(
        { method: 'tools/call', params: { name: 'a__slow', arguments: {}, task: { ttl: 60_000 } } },
        CreateTaskResultSchema,
      )
      const listed = await client.request(
        { method: 'tasks/list', params: {} },
        ListTasksResultSchema,
      )
      assert.deepEqual(
        listed.tasks.map((t) => t.taskId),
        ['b-task-1'],
      )
      await assert.rejects(
        other.request({ method: 'tasks/get', params: { taskId: 'b-task-1' } }, GetTaskResultSchema),
        /Unknown task: b-task-1/,
      )
    } finally {
      await client.close()
      await other.close()
    }
  })
})
