import { addId, type IdSet, idSetOf, indexValues, removeId } from './collection.js';
import type { Change, DerivedIndex, PublishedState } from './derived.js';
import { ShardedMap, ShardedSet } from './sharded.js';
import { SortedIds } from './sorted-ids.js';
import { assert, type Row } from './types.js';

/** A policy's role list, parsed: `#all`, `@id` entries and `#attr` entries, with its semantic. */
export interface ParsedRoles {
  all: boolean;
  ids: string[];
  attrs: string[];
  anyOf: boolean;
}

/** Parses role entries; entries that are neither `#…` nor `@…` match nothing (the API rejects them earlier). */
export function parseRoles(roles: unknown, semantic: unknown): ParsedRoles {
  const out: ParsedRoles = { all: false, ids: [], attrs: [], anyOf: String(semantic ?? '').toLowerCase() === 'anyof' };
  for (const r of Array.isArray(roles) ? roles : []) {
    if (typeof r !== 'string') continue;
    if (r === '#all') out.all = true;
    else if (r.startsWith('#') && r.length > 1) out.attrs.push(r.slice(1));
    else if (r.startsWith('@') && r.length > 1) out.ids.push(r.slice(1));
  }
  return out;
}

/**
 * OpenZiti's `evaluatePolicyAgainstEntity` (REFERENCE §5): listed by `@id`, or `#all`, or AllOf with at least one
 * `#attr` and every one held, or AnyOf with at least one `#attr` and one of them held.
 */
export function rolesMatch(p: ParsedRoles, id: string, attrs: ReadonlySet<unknown>): boolean {
  if (p.all || p.ids.includes(id)) return true;
  if (p.attrs.length === 0) return false;
  return p.anyOf ? p.attrs.some((a) => attrs.has(a)) : p.attrs.every((a) => attrs.has(a));
}

/** `E`: the entity names (the application's, or any string). */
export interface RoleIndexSpec<E extends string = string> {
  /** Name of the derived index (e.g. `service-policies.identities`). */
  name: string;
  /** The policies: entity, role list field and (optional) semantic field (absent/empty: AllOf). */
  policy: { entity: E; rolesField: string; semanticField?: string };
  /** The matched entities and their role attribute field (must be indexed). */
  target: { entity: E; attributesField: string };
}

/** Bounds the ids a single policy recompute may visit (the largest collection Keel is built for, with margin). */
const MAX_MATCHED = 10_000_000;

/**
 * Policy → matched entities, and entity → matching policies, for one policy role field against one entity type's
 * role attributes. Maintained incrementally:
 * - a policy change recomputes that policy alone, from the target's attribute index (`#attr` sets intersected for
 *   AllOf, united for AnyOf), and moves only the ids whose membership changed;
 * - a target change re-evaluates only the policies that mention one of its old or new attributes, its id, or `#all`.
 * Memory: two maps of id sets (one entry per matching pair in each direction) and the policies' parsed roles.
 */
export class RoleIndex<E extends string = string> implements DerivedIndex {
  readonly name: string;
  readonly sources: readonly string[];
  /** policy id → ids of matched targets (a policy holding `#all` matches every target: sets grow with them) */
  private readonly matched = new Map<string, IdSet>();
  /** target id → ids of policies matching it (one key per matched target: sharded, see sharded.ts) */
  private readonly matching = new ShardedMap<string, IdSet>();
  private readonly parsed = new Map<string, ParsedRoles>();
  /** attribute → policies naming `#attribute` */
  private readonly byAttr = new Map<string, IdSet>();
  /** target id → policies naming `@id` */
  private readonly byId = new Map<string, IdSet>();
  /** policies holding `#all` */
  private readonly allPolicies = new Set<string>();
  /** (policy, target) evaluations made for target changes since start: shows the work a change costs. */
  evaluations = 0;

  constructor(readonly spec: RoleIndexSpec<E>) {
    assert(spec.policy.entity !== spec.target.entity, `${spec.name}: policy and target are the same entity`);
    this.name = spec.name;
    this.sources = [spec.policy.entity, spec.target.entity];
  }

  /** Targets a policy matches (empty for an unknown policy). Read-only view: do not mutate. */
  targetsOf(policyId: string): ReadonlySet<string> {
    return this.matched.get(policyId) ?? EMPTY;
  }

  /** Policies matching a target (empty for an unknown target). Read-only view: do not mutate. */
  policiesOf(targetId: string): ReadonlySet<string> {
    return this.matching.get(targetId) ?? EMPTY;
  }

  /** Number of stored (policy, target) pairs: for memory checks. */
  get pairCount(): number {
    let n = 0;
    for (const set of this.matched.values()) n += set.size;
    return n;
  }

  diff(fresh: DerivedIndex, limit: number): string[] {
    assert(fresh instanceof RoleIndex && fresh.name === this.name, `${this.name}: diff against another index`);
    const out: string[] = [];
    const compare = (what: string, held: ReadonlyMap<string, IdSet>, want: ReadonlyMap<string, IdSet>) => {
      for (const key of new Set([...held.keys(), ...want.keys()])) {
        const a = held.get(key) ?? EMPTY;
        const b = want.get(key) ?? EMPTY;
        for (const id of a)
          if (!b.has(id) && out.length < limit) out.push(`${this.name}: ${what} ${key} holds ${id} wrongly`);
        for (const id of b) if (!a.has(id) && out.length < limit) out.push(`${this.name}: ${what} ${key} lacks ${id}`);
      }
    };
    compare('policy', this.matched, fresh.matched);
    compare('target', this.matching, fresh.matching);
    return out;
  }

  rebuild(state: PublishedState): void {
    for (const m of [this.matched, this.matching, this.parsed, this.byAttr, this.byId]) m.clear();
    this.allPolicies.clear();
    const targets = state.collection(this.spec.target.entity);
    assert(targets.isIndexed(this.spec.target.attributesField), `${this.name}: target attributes are not indexed`);
    for (const row of state.collection(this.spec.policy.entity).scan()) this.setPolicy(row, state);
  }

  update(changes: readonly Change[], state: PublishedState): void {
    // Policies first (each recomputed against the already published targets), then targets (re-evaluated against
    // the policies' current roles): every pair a change can affect is evaluated against the final state.
    for (const c of changes) {
      if (c.entity !== this.spec.policy.entity) continue;
      if (c.after) this.setPolicy(c.after, state);
      else this.removePolicy(c.id);
    }
    for (const c of changes) {
      if (c.entity !== this.spec.target.entity) continue;
      if (c.after) this.setTarget(c.before, c.after);
      else this.removeTarget(c.id);
    }
  }

  private setPolicy(row: Row, state: PublishedState): void {
    const old = this.parsed.get(row.id);
    const p = parseRoles(
      row[this.spec.policy.rolesField],
      this.spec.policy.semanticField ? row[this.spec.policy.semanticField] : undefined,
    );
    // a change that leaves the roles alone (a rename, tags) changes no match
    if (old && sameRoles(old, p)) return;
    if (old) this.unregister(row.id, old);
    this.parsed.set(row.id, p);
    if (p.all) this.allPolicies.add(row.id);
    for (const id of p.ids) addId(id, this.byId, row.id);
    for (const a of p.attrs) addId(a, this.byAttr, row.id);

    const next = this.computeTargets(p, state);
    const prev = this.matched.get(row.id);
    if (prev) {
      for (const t of prev) if (!next.has(t)) removeId(t, this.matching, row.id);
    }
    for (const t of next) if (!prev?.has(t)) addId(t, this.matching, row.id);
    if (next.size > 0) this.matched.set(row.id, idSetOf(next));
    else this.matched.delete(row.id);
  }

  private computeTargets(p: ParsedRoles, state: PublishedState): Set<string> {
    const c = state.collection(this.spec.target.entity);
    const out = new Set<string>();
    if (p.all) {
      for (const row of c.scan()) out.add(row.id);
      return out;
    }
    for (const id of p.ids) if (c.get(id)) out.add(id);
    if (p.attrs.length === 0) return out;
    const field = this.spec.target.attributesField;
    // an attribute no row holds looks up as an empty array, not a set
    const sets = p.attrs.map((a): ReadonlySet<string> => {
      const ids = c.lookup(field, a);
      return ids instanceof Set || ids instanceof ShardedSet || ids instanceof SortedIds ? ids : new Set(ids ?? EMPTY);
    });
    if (p.anyOf) {
      for (const set of sets) for (const id of set) out.add(id);
    } else {
      const [smallest, ...rest] = sets.sort((a, b) => a.size - b.size);
      for (const id of smallest!) if (rest.every((set) => set.has(id))) out.add(id);
    }
    assert(out.size <= MAX_MATCHED, `${this.name}: ${out.size} matches exceed ${MAX_MATCHED}`);
    return out;
  }

  private removePolicy(id: string): void {
    const p = this.parsed.get(id);
    if (p) this.unregister(id, p);
    this.parsed.delete(id);
    for (const t of this.matched.get(id) ?? EMPTY) removeId(t, this.matching, id);
    this.matched.delete(id);
  }

  private unregister(id: string, p: ParsedRoles): void {
    this.allPolicies.delete(id);
    for (const t of p.ids) removeId(t, this.byId, id);
    for (const a of p.attrs) removeId(a, this.byAttr, id);
  }

  private setTarget(before: Row | undefined, after: Row): void {
    const field = this.spec.target.attributesField;
    const oldAttrs = indexValues(before, field);
    const newAttrs = indexValues(after, field);
    // the new attributes as a set: made once, for an update's comparison and the evaluations (a create makes it
    // only if some policy may concern the target)
    let attrs: ReadonlySet<unknown> | undefined;
    if (before) {
      attrs = new Set(newAttrs);
      // an update that leaves the attributes alone changes no match
      if (sameMembers(oldAttrs, attrs)) return;
    }
    // no policy can match the target or stop matching it (the common create: no policy names its attributes)
    if (!this.mayConcern(after.id, oldAttrs, newAttrs)) return;
    attrs ??= new Set(newAttrs);
    const candidates = new Set<string>(this.allPolicies);
    for (const p of this.byId.get(after.id) ?? EMPTY) candidates.add(p);
    for (const a of oldAttrs) for (const p of this.byAttr.get(a as string) ?? EMPTY) candidates.add(p);
    for (const a of newAttrs) for (const p of this.byAttr.get(a as string) ?? EMPTY) candidates.add(p);
    this.evaluations += candidates.size;
    for (const pid of candidates) {
      const p = this.parsed.get(pid)!;
      if (rolesMatch(p, after.id, attrs)) {
        addId(pid, this.matched, after.id);
        addId(after.id, this.matching, pid);
      } else {
        removeId(pid, this.matched, after.id);
        removeId(after.id, this.matching, pid);
      }
    }
  }

  /** Whether some policy holds `#all`, names the target by `@id`, or names one of its old or new attributes. */
  private mayConcern(id: string, oldAttrs: readonly unknown[], newAttrs: readonly unknown[]): boolean {
    if (this.allPolicies.size > 0 || this.byId.has(id)) return true;
    for (let i = 0; i < oldAttrs.length; i++) if (this.byAttr.has(oldAttrs[i] as string)) return true;
    for (let i = 0; i < newAttrs.length; i++) if (this.byAttr.has(newAttrs[i] as string)) return true;
    return false;
  }

  private removeTarget(id: string): void {
    for (const pid of this.matching.get(id) ?? EMPTY) removeId(pid, this.matched, id);
    this.matching.delete(id);
  }
}

const EMPTY: ReadonlySet<string> = new Set();

/** Whether the old attribute list `a` holds the same values as the new ones, `bs` (the check of an update). */
function sameMembers(a: readonly unknown[], bs: ReadonlySet<unknown>): boolean {
  if (a.length !== bs.size) return false;
  for (let i = 0; i < a.length; i++) if (!bs.has(a[i])) return false;
  return true;
}

function sameRoles(a: ParsedRoles, b: ParsedRoles): boolean {
  const same = (x: string[], y: string[]) => x.length === y.length && x.every((v, i) => v === y[i]);
  return a.all === b.all && a.anyOf === b.anyOf && same(a.ids, b.ids) && same(a.attrs, b.attrs);
}
