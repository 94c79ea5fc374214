// Read-write locks by name, in this process: what keeps two checks that read before they write
// from interleaving (a reference added while what it names is deleted; two parents set at once
// closing a cycle). Many holders may share a name, or one may hold it alone; waiters are served in
// order. Several names are taken in sorted order, so two takers cannot wait on each other.

type Slot = { readers: number; writer: boolean; queue: { exclusive: boolean; grant: () => void }[] };

export type LockRequest = { readonly name: string; readonly exclusive: boolean };

export class KeyedLocks {
  readonly #slots = new Map<string, Slot>();

  /** Takes every named lock (a name asked for both ways is taken alone); resolves to the release. */
  async acquire(requests: readonly LockRequest[]): Promise<() => void> {
    const merged = new Map<string, boolean>();
    for (const r of requests) merged.set(r.name, (merged.get(r.name) ?? false) || r.exclusive);
    const names = [...merged.keys()].sort();
    const held: LockRequest[] = [];
    for (const name of names) {
      const exclusive = merged.get(name) === true;
      await this.#take(name, exclusive);
      held.push({ name, exclusive });
    }
    let released = false;
    return () => {
      if (released) return;
      released = true;
      for (const h of held.reverse()) this.#give(h.name, h.exclusive);
    };
  }

  #take(name: string, exclusive: boolean): Promise<void> {
    let slot = this.#slots.get(name);
    if (slot === undefined) {
      slot = { readers: 0, writer: false, queue: [] };
      this.#slots.set(name, slot);
    }
    if (slot.queue.length === 0 && !slot.writer && (!exclusive || slot.readers === 0)) {
      if (exclusive) slot.writer = true;
      else slot.readers += 1;
      return Promise.resolve();
    }
    const waiting = slot;
    return new Promise((grant) => waiting.queue.push({ exclusive, grant }));
  }

  #give(name: string, exclusive: boolean): void {
    const slot = this.#slots.get(name);
    if (slot === undefined) return;
    if (exclusive) slot.writer = false;
    else slot.readers -= 1;
    for (let next = slot.queue[0]; next !== undefined && !slot.writer && (!next.exclusive || slot.readers === 0); next = slot.queue[0]) {
      slot.queue.shift();
      if (next.exclusive) slot.writer = true;
      else slot.readers += 1;
      next.grant();
      if (next.exclusive) break;
    }
    if (!slot.writer && slot.readers === 0 && slot.queue.length === 0) this.#slots.delete(name);
  }
}
