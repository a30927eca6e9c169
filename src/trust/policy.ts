/**
 * What an operator decides per upstream about trust: how a first sight is treated, what a later
 * change does, what scan findings do, and whether a floating package version or inline code may be launched.
 */

export interface TrustPolicy {
  /** `trust`: pin what is first seen (trust on first use); `approve`: hold it for an operator. */
  readonly firstSight: 'trust' | 'approve'
  /** What a definition that departs from its pin does: hidden until approved, or only reported. */
  readonly onChange: 'quarantine' | 'warn'
  /** What high and critical scan findings do: only reported, or the item is hidden. */
  readonly scan: 'warn' | 'quarantine'
  /** Launch packages without an exact version (`@latest`, none). */
  readonly allowFloating: boolean
  /** Launch code no file holds (`node -e`, `python -c`), which `barbican.lock` cannot pin. */
  readonly allowInlineCode: boolean
  /**
   * npm packages whose install scripts may run when Barbican installs this upstream's npx
   * package (ADR 107): outside the sandbox, with Barbican's rights. Default: none.
   */
  readonly allowScripts?: readonly string[] | undefined
}

/** Trust on first use, quarantine changes, report findings, refuse floating versions. */
export const DEFAULT_TRUST_POLICY: TrustPolicy = Object.freeze({
  firstSight: 'trust',
  onChange: 'quarantine',
  scan: 'warn',
  allowFloating: false,
  allowInlineCode: false,
})

/** The actor recorded for pins made by trust on first use. */
export const FIRST_SIGHT = 'first-sight'
