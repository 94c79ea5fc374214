// The embedded stores answer synchronously; their port methods return promises.

/** Runs synchronous store work so that a throw becomes a rejection, as callers of a port expect. */
export function settle<T>(work: () => T): Promise<T> {
  return new Promise((resolve) => {
    resolve(work());
  });
}
