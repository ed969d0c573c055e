// Symbols: what a filter may name, its type, and how to read it from a row.

export type ScalarType = 'string' | 'number' | 'bool' | 'datetime' | 'any'; // 'any' for map entries such as tags.env

export interface QuerySymbol {
  type: ScalarType;
  /** Set symbols must be used via anyOf/allOf/count/isEmpty (else an error, as OpenZiti). */
  set: boolean;
  /** scalar → value | null | undefined; set → unknown[] | null | undefined. Datetimes: ISO-8601 string, Date or epoch ms. */
  get(row: any): unknown;
  /** Equality / `in` / anyOf(...) = v on it can be answered by RowSource.lookup(name, value). */
  indexed?: boolean;
  /**
   * What `get` answers for a row that leaves the field out (its default), which the index does not hold under that
   * value: equality with it is answered by a scan, not by the index.
   */
  absentAs?: unknown;
  /** Default: true for scalars of a concrete type, false for sets and for 'any' (OpenZiti cannot sort map entries). */
  sortable?: boolean;
  /** Set symbols that are related entities: enables `from <name> where <query>` sub-queries and dotted traversal (a.b.c). */
  relation?: { symbols: SymbolTable; rows(row: any): Iterable<any> };
}

export interface SymbolTable {
  /** Handles dotted names, e.g. 'tags.env'. Only public symbols should be returned. */
  lookup(name: string): QuerySymbol | undefined;
  publicNames(): string[];
}

/** Longest dotted path followed through relations (a.b.c.d...). */
export const MAX_PATH_SEGMENTS = 16;

export function isSortable(symbol: QuerySymbol): boolean {
  if (symbol.set) return false;
  if (symbol.sortable !== undefined) return symbol.sortable;
  return symbol.type !== 'any';
}

/** A symbol reached through one relation hop: `head.rest` evaluated on each related row of `head`. */
function composeSymbol(head: QuerySymbol, rest: QuerySymbol): QuerySymbol {
  const relation = head.relation!;
  const set = head.set || rest.set;
  const composed: QuerySymbol = {
    type: rest.type,
    set,
    indexed: false,
    sortable: !set && rest.sortable !== false && rest.type !== 'any',
    get(row: any): unknown {
      if (!set) {
        for (const related of relation.rows(row)) return rest.get(related);
        return null;
      }
      const out: unknown[] = [];
      for (const related of relation.rows(row)) {
        const value = rest.get(related);
        if (rest.set) {
          if (Array.isArray(value)) for (const element of value) out.push(element);
        } else if (value !== null && value !== undefined) {
          out.push(value);
        }
      }
      return out;
    },
  };
  if (rest.relation !== undefined) {
    const inner = rest.relation;
    composed.relation = {
      symbols: inner.symbols,
      *rows(row: any): Iterable<any> {
        for (const related of relation.rows(row)) yield* inner.rows(related);
      },
    };
  }
  return composed;
}

/**
 * Resolves a (possibly dotted) name: first as the table knows it, then by following relations, e.g.
 * `links.router.name` = symbol `router.name` of the rows related through `links`.
 */
export function resolveSymbol(table: SymbolTable, name: string, depth = 0): QuerySymbol | undefined {
  const direct = table.lookup(name);
  if (direct !== undefined) return direct;
  if (depth >= MAX_PATH_SEGMENTS) return undefined;
  let dot = name.indexOf('.');
  // bounded by the number of dots in name
  while (dot > 0) {
    const head = table.lookup(name.slice(0, dot));
    if (head?.relation !== undefined) {
      const rest = resolveSymbol(head.relation.symbols, name.slice(dot + 1), depth + 1);
      if (rest !== undefined) return composeSymbol(head, rest);
    }
    dot = name.indexOf('.', dot + 1);
  }
  return undefined;
}

export interface SymbolTableSpec {
  symbols: Record<string, QuerySymbol>;
  /** Map fields (e.g. tags): `tags.<key>` is a symbol of type 'any'. */
  maps?: Record<string, (row: any) => Record<string, unknown> | null | undefined>;
}

/** A SymbolTable from plain definitions; `maps` entries answer `<map>.<key>` lookups. */
export function createSymbolTable(spec: SymbolTableSpec): SymbolTable {
  const symbols = new Map(Object.entries(spec.symbols));
  const maps = new Map(Object.entries(spec.maps ?? {}));
  const names = [...symbols.keys(), ...maps.keys()];
  return {
    lookup(name: string): QuerySymbol | undefined {
      const symbol = symbols.get(name);
      if (symbol !== undefined) return symbol;
      const dot = name.indexOf('.');
      if (dot <= 0) return undefined;
      const map = maps.get(name.slice(0, dot));
      if (map === undefined) return undefined;
      const key = name.slice(dot + 1);
      return {
        type: 'any',
        set: false,
        get(row: any): unknown {
          const entries = map(row);
          if (entries === null || entries === undefined || !Object.hasOwn(entries, key)) return null;
          return entries[key];
        },
      };
    },
    publicNames(): string[] {
      return [...names];
    },
  };
}
