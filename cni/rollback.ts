/**
 * An undo stack for ADD: each step that changes something pushes its undo; when a later
 * step throws, the undos run in reverse order so no half-built pod is left behind.
 *
 * @module
 */

/** Collects undo actions and runs them newest first. */
export class Rollback {
  #steps: { what: string; undo: () => unknown }[] = [];

  /** Records how to undo a step that just succeeded. */
  push(what: string, undo: () => unknown): void {
    this.#steps.push({ what, undo });
  }

  /** Forgets every step: the operation succeeded. */
  commit(): void {
    this.#steps = [];
  }

  /**
   * Runs every undo, newest first, even when some throw; returns the failures as
   * messages so the caller can log them next to the original error.
   */
  async unwind(): Promise<string[]> {
    const failures: string[] = [];
    while (this.#steps.length > 0) {
      const step = this.#steps.pop()!;
      try {
        await step.undo();
      } catch (e) {
        failures.push(`undo ${step.what}: ${(e as Error).message}`);
      }
    }
    return failures;
  }
}
