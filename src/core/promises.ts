/**
 * Promises that are not awaited where they are made. Node ends the process on a rejection that
 * nothing has handled yet, so each such promise goes through one of these, which say why.
 */

/**
 * A promise its owner awaits later, or drops on purpose before awaiting (a job the count refuses
 * never sends its prepared escrow): its rejection is read there, not here. Returns the promise.
 */
export function awaitedLater<T>(promise: Promise<T>): Promise<T> {
  promise.catch(() => undefined);
  return promise;
}

/**
 * Lets work nobody waits for run on. A failure is logged (when there is a logger) with what
 * failed and `whySafe`, the reason the service can go on without it; it is never thrown.
 */
export function runInBackground(promise: Promise<unknown>, what: string, whySafe: string, logger?: { warn(details: object, message: string): void }): void {
  promise.catch((err: unknown) => logger?.warn({ err, whySafe }, `${what} failed`));
}
