/**
 * The clean-up of an application as a stack: each part opened pushes how to close it, and
 * `dispose` closes them last-opened first (LIFO), as a failed start unwinds what it opened and a
 * stop takes the application down. A step that fails is reported and the next one still runs:
 * a store that will not close must not keep Redis open.
 */
export type Dispose = () => unknown

export class Disposers {
  readonly #steps: { readonly name: string; readonly run: Dispose }[] = []
  #disposing: Promise<void> | undefined

  /** Runs `run` at disposal, before everything pushed earlier. `name` is said if it fails. */
  push(name: string, run: Dispose): void {
    if (this.#disposing) throw new Error(`cannot add "${name}": the application is stopping`)
    this.#steps.push({ name, run })
  }

  /** What is still to close, last-opened first. */
  get names(): readonly string[] {
    return this.#steps.map((s) => s.name).reverse()
  }

  /**
   * Runs every step, last-pushed first, each after the previous one settled. A failure goes to
   * `onError` and the rest still run. Calling it again returns the same promise.
   */
  dispose(onError: (name: string, error: unknown) => void = () => {}): Promise<void> {
    this.#disposing ??= (async () => {
      for (let step = this.#steps.pop(); step !== undefined; step = this.#steps.pop()) {
        try {
          await step.run()
        } catch (error) {
          onError(step.name, error)
        }
      }
    })()
    return this.#disposing
  }
}
