/**
 * How an exchange runs one of the tools the exposure adds (`run_code`, the tools-only
 * adapters; exposure-calls.ts): each step of the tool is an exchange of its own, through every
 * step from the checks on, as the same client; `run_code` counts against the caller's meta-tool
 * rate; and a 2026-07-28 client's `run_code` is a held call, its program paused between the
 * client's rounds (program-input.ts, ADR 083).
 */
import { RUN_CODE } from '../exposure/code-catalog.ts'
import type { ErrorReply, Result } from '../protocol/model.ts'
import { viewOf } from './calls.ts'
import { type Exchange, innerExchange } from './exchange-types.ts'
import { callExposureTool, type Dispatch } from './exposure-calls.ts'
import { heldProgramInput } from './program-input.ts'
import { viewRequest } from './tool-search-calls.ts'

/**
 * The run of the exposure tool `x` calls, for the audit policy to wrap; `runSteps` runs each of
 * its steps (steps.ts, passed in so that the steps and this module do not import each other).
 */
export function exposureToolRun(
  x: Exchange,
  runSteps: (inner: Exchange) => Promise<Result | ErrorReply>,
): () => Promise<Result | ErrorReply> {
  const { request, client, modern, signal } = x
  const { method } = request
  const server = client.deps.server
  // Each step of these tools is dispatched like the client's own request.
  const dispatch: Dispatch = (inner, params, innerSignal, clock) =>
    runSteps(
      innerExchange(
        x,
        {
          kind: 'request',
          id: request.id,
          method: inner,
          params,
          ...(request.envelope === undefined ? {} : { envelope: request.envelope }),
        },
        innerSignal,
        clock,
      ),
    )
  // run_code's functions are the caller's view: what a tools/list of theirs would show.
  const view = () => viewOf(x, viewRequest(request))
  const bridge = client.deps.bridge
  const { envelope } = request
  // A program buys up to code.maxCalls calls: run_code counts against the caller's rate.
  const admitted = async (): Promise<void> => {
    if (request.params?.name === RUN_CODE) {
      await client.metaTools.admit(client.info.server, client.identity, RUN_CODE)
    }
  }
  if (modern && bridge && envelope && request.params?.name === RUN_CODE) {
    // A 2026-07-28 client answers a program's questions (confirmations) by calling again:
    // run_code is a held call, its program paused between rounds (program-input.ts).
    return async () => {
      // Only a program's first round counts; its later rounds answer its questions.
      if (request.params?.requestState === undefined) await admitted()
      return await bridge.modernCall({
        identity: client.identity,
        method,
        params: request.params,
        clientCapabilities: envelope.clientCapabilities,
        signal,
        upstream: RUN_CODE,
        upstreamEra: 'legacy',
        send: (params, held, heldSignal) =>
          callExposureTool(
            server,
            view,
            params,
            dispatch,
            heldSignal,
            held && heldProgramInput(bridge, held),
          ),
      })
    }
  }
  return async () => {
    await admitted()
    return await callExposureTool(server, view, request.params, dispatch, signal)
  }
}
