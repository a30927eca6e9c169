/** The codec registry: one stateless codec per revision, built on first use. */
import type { Codec } from './codec.ts'
import { legacyCodec } from './legacy-codec.ts'
import { modernCodec } from './modern-codec.ts'
import { eraOf, type Revision } from './revisions.ts'

const CODECS = new Map<Revision, Codec>()

export function codecFor(revision: Revision): Codec {
  let codec = CODECS.get(revision)
  if (!codec) {
    codec = eraOf(revision) === 'modern' ? modernCodec(revision) : legacyCodec(revision)
    CODECS.set(revision, codec)
  }
  return codec
}
