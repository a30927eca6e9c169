/**
 * A tool-calling client of each era, authenticated with an API key: the official SDK v1 in a
 * 2025-11-25 session, and SDK v2 pinned to 2026-07-28. For tests that run the same steps in both.
 */
import assert from 'node:assert/strict'
import {
  Client as ClientV2,
  StreamableHTTPClientTransport as StreamableHTTPClientTransportV2,
} from '@modelcontextprotocol/client'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'

export interface ToolClient {
  listTools(): Promise<{ tools: { name: string; description?: string | undefined }[] }>
  callTool(params: { name: string; arguments?: Record<string, unknown> }): Promise<unknown>
  close(): Promise<void>
}

export const LEGACY_ERA = 'legacy (SDK v1, 2025-11-25)'

/** By era name, a connect function; `name` is the client's name in `initialize`. */
export function toolClientsByEra(
  name: string,
): Record<string, (url: URL, key: string) => Promise<ToolClient>> {
  return {
    [LEGACY_ERA]: async (url, key) => {
      const client = new Client({ name, version: '1.0.0' })
      await client.connect(
        new StreamableHTTPClientTransport(url, {
          requestInit: { headers: { authorization: `Bearer ${key}` } },
        }),
      )
      return client as unknown as ToolClient
    },
    'modern (SDK v2, 2026-07-28)': async (url, key) => {
      const client = new ClientV2(
        { name, version: '1.0.0' },
        { versionNegotiation: { mode: { pin: '2026-07-28' } } },
      )
      await client.connect(
        new StreamableHTTPClientTransportV2(url, {
          requestInit: { headers: { authorization: `Bearer ${key}` } },
        }),
      )
      assert.equal(client.getNegotiatedProtocolVersion(), '2026-07-28')
      return client as unknown as ToolClient
    },
  }
}
