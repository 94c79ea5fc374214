// 405 Method Not Allowed, with `Allow`, for a path the API has with other methods (RFC 9110), as
// the OpenAPI document states paths: a concrete path (`/r/count`) is matched before a templated one
// that also fits it (`/r/{idOrCode}`). Fastify routes per method, so `DELETE /r/count` would reach
// the record route with idOrCode "count": a request whose path parameter spells a concrete sibling
// path is answered 405 instead, and a record whose code spells one is reached by its id there.

import type { FastifyInstance, FastifyRequest } from 'fastify';

type Path = { pattern: RegExp; literals: number; methods: Set<string> };

export type RouteTable = {
  /** The methods of the path a URL names; none when the API has no such path. */
  methodsOf(url: string): string[];
  /** Whether a routed request's path parameter is a concrete sibling path's name. */
  shadowed(request: FastifyRequest): boolean;
};

/** A table of every route registered after this call. */
export function routeTable(app: FastifyInstance): RouteTable {
  const paths = new Map<string, Path>();
  /** The literal segments that follow each route prefix (`/api/v1/r` → count, search, …). */
  const literalsAfter = new Map<string, Set<string>>();
  app.addHook('onRoute', (route) => {
    const url = route.url.replace(/\/$/, '');
    const segments = url.split('/');
    // One path whatever its parameters are named (`/jobs/:id` and `/jobs/:idOrCode`).
    const key = segments.map((segment) => (segment.startsWith(':') ? ':' : segment)).join('/');
    let path = paths.get(key);
    if (path === undefined) {
      const pattern = segments
        .map((segment) => (segment.startsWith(':') ? '[^/]+' : segment.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')))
        .join('/');
      path = { pattern: new RegExp(`^${pattern}/?$`), literals: segments.filter((s) => !s.startsWith(':')).length, methods: new Set() };
      paths.set(key, path);
      segments.forEach((segment, i) => {
        if (i === 0 || segment.startsWith(':')) return;
        const prefix = segments.slice(0, i).join('/');
        literalsAfter.set(prefix, (literalsAfter.get(prefix) ?? new Set()).add(segment));
      });
    }
    for (const method of [route.method].flat()) path.methods.add(method);
  });
  const methodsOf = (url: string): string[] => {
    const target = url.split('?', 1)[0] ?? '';
    let best: Path | undefined;
    for (const path of paths.values()) if (path.pattern.test(target) && path.literals > (best?.literals ?? -1)) best = path;
    return [...(best?.methods ?? [])].sort();
  };
  const shadowed = (request: FastifyRequest): boolean => {
    const template = request.routeOptions.url;
    if (template?.includes(':') !== true) return false;
    const segments = template.split('/');
    const actual = (request.url.split('?', 1)[0] ?? '').split('/');
    return segments.some((segment, i) => {
      if (!segment.startsWith(':')) return false;
      const value = actual[i];
      return value !== undefined && literalsAfter.get(segments.slice(0, i).join('/'))?.has(value) === true;
    });
  };
  return { methodsOf, shadowed };
}
