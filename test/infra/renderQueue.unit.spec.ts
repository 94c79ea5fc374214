// The render queue's shares: a caller has at most `jobs` renders waiting or running (429 beyond)
// and runs on all slots but one, so another caller's render passes the capped one and starts on the
// slot left free; renders naming no caller are not counted.

import { describe, expect, it } from 'vitest';
import { RenderQueue } from '../../infra/renderQueue.ts';

/** A render that runs until released, recording when it started. */
function gate(log: string[], name: string) {
  const { promise: done, resolve: release } = Promise.withResolvers<undefined>();
  return {
    render: async () => {
      log.push(name);
      await done;
      return name;
    },
    release: () => {
      release(undefined);
    },
  };
}

// Any error will do: the queue throws what `refused` makes (a code of its own, so none of the catalogue's).
const refused = (retryAfterSeconds: number) => Object.assign(new Error('too many'), { code: 'TEST.TOO_MANY', retryAfterSeconds });
const settle = () => new Promise((resolve) => setImmediate(resolve));

describe('render queue shares', () => {
  it('lets another caller pass a capped one, refuses a caller past its share, and starts the capped render when its own ends', async () => {
    const queue = new RenderQueue({ slots: 2, queueLimit: 4, what: 'test', shares: { jobs: 2, refused } });
    const log: string[] = [];
    const [a1, a2, b1] = [gate(log, 'a1'), gate(log, 'a2'), gate(log, 'b1')];
    const runs = [queue.run(a1.render, 'a'), queue.run(a2.render, 'a')];
    await settle();
    // One slot is all a caller may take: a2 waits though the other slot is free.
    expect([log, queue.running, queue.waiting]).toEqual([['a1'], 1, 1]);
    await expect(queue.run(() => Promise.resolve('a3'), 'a')).rejects.toMatchObject({ code: 'TEST.TOO_MANY', retryAfterSeconds: 1 });
    runs.push(queue.run(b1.render, 'b'));
    await settle();
    expect(log).toEqual(['a1', 'b1']);
    b1.release();
    await settle();
    // b's slot frees; a is still at its cap, so a2 keeps waiting.
    expect([log, queue.running, queue.waiting]).toEqual([['a1', 'b1'], 1, 1]);
    a1.release();
    await settle();
    expect(log).toEqual(['a1', 'b1', 'a2']);
    a2.release();
    expect(await Promise.all(runs)).toEqual(['a1', 'a2', 'b1']);
    expect([queue.running, queue.waiting]).toEqual([0, 0]);
    // Its renders ended: the caller has its whole share again.
    expect(await Promise.all([queue.run(() => Promise.resolve('x'), 'a'), queue.run(() => Promise.resolve('y'), 'a')])).toEqual(['x', 'y']);
  });

  it('counts no caller for renders that name none, refuses past the queue with 503, and keeps no count of a render refused', async () => {
    const queue = new RenderQueue({ slots: 1, queueLimit: 1, what: 'test', shares: { jobs: 1, refused } });
    const log: string[] = [];
    const [first, second] = [gate(log, 'first'), gate(log, 'second')];
    const runs = [queue.run(first.render), queue.run(second.render)];
    await expect(queue.run(() => Promise.resolve('third'))).rejects.toMatchObject({
      code: 'FORMATTER.RENDERER_BUSY',
      status: 'SERVICE_UNAVAILABLE',
    });
    await expect(queue.run(() => Promise.resolve('keyed'), 'k')).rejects.toMatchObject({ code: 'FORMATTER.RENDERER_BUSY' });
    first.release();
    second.release();
    expect(await Promise.all(runs)).toEqual(['first', 'second']);
    // The render refused as busy left nothing counted to its caller.
    expect(await queue.run(() => Promise.resolve('keyed'), 'k')).toBe('keyed');
  });
});
