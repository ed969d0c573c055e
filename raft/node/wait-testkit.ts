/** Test support (not used in production): waits for behaviour with a bound instead of asserting durations. */
export async function waitFor(cond: () => boolean, timeout_ms: number, what: string, step_ms = 5): Promise<void> {
  const deadline = Date.now() + timeout_ms;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, step_ms));
  }
}
