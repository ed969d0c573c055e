// A segment trie over OpenAPI-style patterns ('/edge/management/v1/identities/{id}').
//
// Behaviour follows go-openapi's router as OpenZiti uses it (runtime/middleware/router.go):
// - the request path is cleaned like Go's `path.Clean` before lookup, so a trailing slash,
//   repeated slashes and `.`/`..` segments do not matter;
// - matching runs on the still-escaped path; parameter values are then percent-decoded
//   (`url.PathUnescape`, raw value kept when the escaping is invalid), so `%2F` can sit in an id;
// - a static segment wins over a parameter at the same position (with backtracking);
// - no route for the method but one for another method → 405 with the allowed methods;
//   no route at all → 404. HEAD is not mapped onto GET (OpenZiti answers 405 for it).
// Lookup cost is O(segments) map probes, independent of the number of routes.
import { decodePath } from './request.js';
import type { Handler } from './types.js';

/** Upper bounds that keep registration and lookup finite. */
export const MAX_ROUTES = 4096;
export const MAX_PATH_SEGMENTS = 64;

const PARAM_NAME = /^[A-Za-z_][A-Za-z0-9_.-]*$/;
const METHOD_TOKEN = /^[A-Z]+$/;

export interface RouteInfo<M> {
  method: string;
  pattern: string;
  meta: M | undefined;
}

export interface RouteFound<M> {
  status: 200;
  handler: Handler;
  /** Captured parameters; may be a shared frozen object when there are none. */
  params: Record<string, string>;
  meta?: M;
  /** The pattern as registered (useful for metrics labels). */
  pattern: string;
  /** The route's registration index (its place in routes()): where per-route figures are counted. */
  slot: number;
}
export interface RouteNotFound {
  status: 404;
}
export interface RouteMethodNotAllowed {
  status: 405;
  /** Methods registered for this path, sorted. */
  allow: readonly string[];
}
export type RouteMatch<M> = RouteFound<M> | RouteNotFound | RouteMethodNotAllowed;

interface Route<M> {
  method: string;
  pattern: string;
  handler: Handler;
  meta: M | undefined;
  /** Registration index. */
  slot: number;
  /** Parameter names in path order; parameter i sits at segment `paramSegments[i]`. */
  paramNames: readonly string[];
}

class TrieNode<M> {
  statics: Map<string, TrieNode<M>> | null = null;
  param: TrieNode<M> | null = null;
  routes: Map<string, Route<M>> | null = null;
  /** Segment indexes of the parameters on the way to this node. */
  paramSegments: readonly number[] = [];
  allow: readonly string[] = [];
}

const NOT_FOUND: RouteNotFound = Object.freeze({ status: 404 });

/**
 * Splits a path into segments the way `path.Clean` would leave them: empty and `.` segments are
 * dropped, `..` removes the previous one. Returns null when the path has too many segments.
 */
export function cleanSegments(path: string): string[] | null {
  const out: string[] = [];
  const n = path.length;
  let start = 0;
  let guard = 0;
  while (start <= n) {
    if (++guard > n + 2) throw new Error('cleanSegments: no progress');
    let end = path.indexOf('/', start);
    if (end === -1) end = n;
    if (end > start) {
      const seg = path.slice(start, end);
      if (seg === '..') out.pop();
      else if (seg !== '.') {
        if (out.length === MAX_PATH_SEGMENTS) return null;
        out.push(seg);
      }
    }
    start = end + 1;
  }
  return out;
}

function accepts<M>(node: TrieNode<M>, method: string | null): boolean {
  if (node.routes === null) return false;
  return method === null ? node.routes.size > 0 : node.routes.has(method);
}

/** Depth-first, static before parameter; `method === null` accepts any registered method. */
function find<M>(node: TrieNode<M>, segs: readonly string[], i: number, method: string | null): TrieNode<M> | null {
  if (i === segs.length) return accepts(node, method) ? node : null;
  const seg = segs[i]!;
  if (node.statics !== null) {
    const child = node.statics.get(seg);
    if (child !== undefined) {
      const found = find(child, segs, i + 1, method);
      if (found !== null) return found;
    }
  }
  return node.param === null ? null : find(node.param, segs, i + 1, method);
}

const NO_PARAMS: Record<string, string> = Object.freeze({}) as Record<string, string>;

export class Router<M = unknown> {
  private readonly root = new TrieNode<M>();
  private readonly registered: Route<M>[] = [];
  /**
   * Fast path for parameterless routes requested by their exact pattern (the common case):
   * method → pattern → a shared, frozen match.
   */
  private readonly exact = new Map<string, Map<string, RouteFound<M>>>();

  /** Registers `handler` for `method` on `pattern`; `{name}` segments are parameters. */
  add(method: string, pattern: string, handler: Handler, meta?: M): void {
    const m = method.toUpperCase();
    if (!METHOD_TOKEN.test(m)) throw new Error(`router: invalid method ${JSON.stringify(method)}`);
    if (typeof handler !== 'function') throw new TypeError(`router: handler for ${m} ${pattern} is not a function`);
    if (!pattern.startsWith('/')) throw new Error(`router: pattern must start with '/': ${pattern}`);
    if (this.registered.length >= MAX_ROUTES) throw new Error(`router: more than ${MAX_ROUTES} routes`);
    const segs = cleanSegments(pattern);
    if (segs === null) throw new Error(`router: pattern has more than ${MAX_PATH_SEGMENTS} segments: ${pattern}`);

    let node = this.root;
    const paramNames: string[] = [];
    const paramSegments: number[] = [];
    segs.forEach((seg, index) => {
      if (seg.startsWith('{') && seg.endsWith('}')) {
        const name = seg.slice(1, -1);
        if (!PARAM_NAME.test(name))
          throw new Error(`router: invalid parameter name ${JSON.stringify(name)} in ${pattern}`);
        if (paramNames.includes(name)) throw new Error(`router: duplicate parameter {${name}} in ${pattern}`);
        paramNames.push(name);
        paramSegments.push(index);
        if (node.param === null) node.param = new TrieNode<M>();
        node = node.param;
      } else {
        if (seg.includes('{') || seg.includes('}')) {
          throw new Error(`router: a parameter must be a whole segment: ${pattern}`);
        }
        if (node.statics === null) node.statics = new Map();
        let child = node.statics.get(seg);
        if (child === undefined) {
          child = new TrieNode<M>();
          node.statics.set(seg, child);
        }
        node = child;
      }
    });

    if (node.routes === null) node.routes = new Map();
    if (node.routes.has(m)) {
      const prev = node.routes.get(m)!;
      throw new Error(`router: ${m} ${pattern} conflicts with ${prev.method} ${prev.pattern}`);
    }
    node.paramSegments = paramSegments;
    const slot = this.registered.length;
    const route: Route<M> = { method: m, pattern, handler, meta, slot, paramNames };
    node.routes.set(m, route);
    node.allow = Object.freeze([...node.routes.keys()].sort());
    this.registered.push(route);
    if (paramNames.length === 0 && pattern === `/${segs.join('/')}`) {
      const found: RouteFound<M> = { status: 200, handler, params: NO_PARAMS, pattern, slot };
      if (meta !== undefined) found.meta = meta;
      let byPath = this.exact.get(m);
      if (byPath === undefined) this.exact.set(m, (byPath = new Map()));
      byPath.set(pattern, Object.freeze(found));
    }
  }

  /** Every registered route in registration order (for OpenAPI generation; index i is slot i). */
  routes(): RouteInfo<M>[] {
    return this.registered.map((r) => ({ method: r.method, pattern: r.pattern, meta: r.meta }));
  }

  /** Looks up an upper-case method and a still-escaped path (no query). */
  match(method: string, path: string): RouteMatch<M> {
    const hit = this.exact.get(method)?.get(path);
    if (hit !== undefined) return hit;
    const segs = cleanSegments(path);
    if (segs === null) return NOT_FOUND;
    const node = find(this.root, segs, 0, method);
    if (node !== null) {
      const route = node.routes!.get(method)!;
      const names = route.paramNames;
      const params: Record<string, string> = {};
      for (let i = 0; i < names.length; i++) {
        params[names[i]!] = decodePath(segs[node.paramSegments[i]!]!);
      }
      const found: RouteFound<M> = {
        status: 200,
        handler: route.handler,
        params,
        pattern: route.pattern,
        slot: route.slot,
      };
      if (route.meta !== undefined) found.meta = route.meta;
      return found;
    }
    const other = find(this.root, segs, 0, null);
    if (other !== null) return { status: 405, allow: other.allow };
    return NOT_FOUND;
  }
}
