/**
 * Barbican's own `_meta` namespace (`dev.barbican/…`, see context.ts) is Barbican's to write: an
 * upstream trusts `_meta["dev.barbican/context"]` to say who a call is for. Whatever a client
 * sends under that prefix is removed as the message enters, before any policy, route or
 * upstream sees it, with or without an `auth:` section, for requests, notifications and the
 * client's answers to upstream requests alike.
 */
import { isPlainObject, type JsonObject, type JsonRpcMessage } from '../protocol/jsonrpc.ts'
import { META_PREFIX } from './context.ts'

/** `message` without Barbican-namespaced `_meta` keys; the same object when it has none. */
export function withoutBarbicanMeta(message: JsonRpcMessage): JsonRpcMessage {
  if ('params' in message && isPlainObject(message.params)) {
    const params = cleaned(message.params)
    return params === message.params ? message : { ...message, params }
  }
  if ('result' in message && isPlainObject(message.result)) {
    const result = cleaned(message.result)
    return result === message.result ? message : { ...message, result }
  }
  return message
}

/** `holder` with its `_meta` cleaned, or `holder` itself when nothing needed removing. */
function cleaned(holder: JsonObject): JsonObject {
  const meta = holder._meta
  if (!isPlainObject(meta)) return holder
  let kept: JsonObject | undefined
  for (const key in meta) {
    if (!Object.hasOwn(meta, key) || !key.startsWith(META_PREFIX)) continue
    kept ??= { ...meta }
    delete kept[key]
  }
  return kept === undefined ? holder : { ...holder, _meta: kept }
}
