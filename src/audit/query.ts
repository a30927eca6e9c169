/**
 * Whether a record's hashed body agrees with a query's tenant, subject, target and outcome. Every
 * backend filters its candidates with it: the SQL columns are only an index, the body is the
 * truth a record is returned on.
 */
import type { AuditQuery } from './audit-store.ts'
import { type AuditRecord, searchableOf, tenantOf } from './record.ts'

export function bodyAgrees(r: AuditRecord, q: AuditQuery): boolean {
  if (q.tenant !== undefined && tenantOf(r) !== q.tenant) return false
  if (q.subject === undefined && q.target === undefined && q.outcome === undefined) return true
  const s = searchableOf(r)
  return (
    (q.subject === undefined || s.subject === q.subject) &&
    (q.target === undefined || s.target === q.target) &&
    (q.outcome === undefined || s.outcome === q.outcome)
  )
}
