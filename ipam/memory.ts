/**
 * Keeps the daemon small between bursts of work. V8 grows its heap during start-up (the AWS
 * SDK's models, the first EC2 answers) and during churn, and gives pages back only after a
 * full collection it schedules on its own; a node agent should sit at its floor instead.
 * When the runtime exposes `gc` (V8 flag `--expose-gc`, baked into the compiled executable),
 * the daemon asks for a full collection at quiet moments: after start-up reconciliation and
 * after each check against IMDS or re-sync with EC2. Without the flag this does nothing.
 *
 * @module
 */

/** Runs a full garbage collection if the runtime exposes one; returns whether it did. */
export function collectGarbage(): boolean {
  const gc = (globalThis as { gc?: () => void }).gc;
  if (typeof gc !== "function") return false;
  gc();
  return true;
}
