// A real store with one method replaced, for fault injection and for watching calls: every other
// method is the store's own, bound to it.

export function intercept<T extends object, K extends keyof T>(target: T, method: K, replacement: T[K]): T {
  return new Proxy(target, {
    get(store, key, receiver) {
      if (key === method) return replacement;
      const value: unknown = Reflect.get(store, key, receiver);
      return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(store) : value;
    },
  });
}
