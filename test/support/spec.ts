/**
 * Loads OpenZiti's published specs from ../shared/openziti-spec (never copied into the project) and validates
 * response bodies against their schemas. Swagger 2.0 extensions are translated for ajv: `x-nullable` admits null,
 * `#/definitions/...` references resolve inside the same document.
 */
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import AjvModule from 'ajv';
import addFormatsModule from 'ajv-formats';
import YAML from 'yaml';

const Ajv = (AjvModule as any).default ?? AjvModule;
const addFormats = (addFormatsModule as any).default ?? addFormatsModule;

export const SPEC_DIR = join(dirname(fileURLToPath(import.meta.url)), '..', '..', '..', 'shared', 'openziti-spec');
export const SPEC_AVAILABLE = existsSync(join(SPEC_DIR, 'management.yml'));
/** On CI (`CI` set, as every CI service does) the schema checks are mandatory: a missing spec fails the run. */
export const SPEC_REQUIRED = (process.env.CI ?? '') !== '' && process.env.CI !== 'false' && process.env.CI !== '0';
if (!SPEC_AVAILABLE) {
  if (SPEC_REQUIRED) {
    throw new Error(
      `OpenZiti's published spec is missing (${join(SPEC_DIR, 'management.yml')}): with CI set, the conformance ` +
        'checks against its schemas may not be skipped',
    );
  }
  process.stderr.write(
    `\n*** ../shared/openziti-spec is absent: the conformance checks against OpenZiti's schemas are SKIPPED ***\n\n`,
  );
}

const floatTag = { tag: 'tag:yaml.org,2002:float', resolve: (s: string) => Number(s) };

export type SpecName = 'client' | 'management';
const cache = new Map<SpecName, any>();

export function loadSpec(name: SpecName): any {
  let spec = cache.get(name);
  if (!spec) {
    spec = YAML.parse(readFileSync(join(SPEC_DIR, `${name}.yml`), 'utf8'), { customTags: [floatTag] });
    cache.set(name, spec);
  }
  return spec;
}

/**
 * Swagger 2.0 schema → JSON Schema draft-07 (x-nullable → also null; drops keywords ajv would reject). Three
 * translations follow what go-openapi (OpenZiti's validator and models) does, and nothing more:
 * - `link.href` is `format: uri`, yet OpenZiti itself sends relative hrefs (`./identities/x`): there, and only
 *   there, `uri` becomes `uri-reference`. Every other `uri` stays strict, as go-openapi's `uri` check is.
 * - a bare `type: object` as a map's value type is `interface{}` in go-swagger (e.g. tag values): any JSON value.
 *   Elsewhere `type: object` still demands an object (e.g. `empty.data`).
 * - `items: null` (only `controllerSettingsList`) is `[]interface{}` in go-swagger: an array of any values.
 */
function translate(node: any, at: 'linkHref' | 'mapValue' | 'other' = 'other'): any {
  if (Array.isArray(node)) return node.map((n) => translate(n));
  if (node === null || typeof node !== 'object') return node;
  const out: any = {};
  for (const [k, v] of Object.entries(node)) {
    if (k === 'example' || k === 'examples' || k.startsWith('x-') || k === 'discriminator') continue;
    // `items: null` (controllerSettingsList) is go-swagger's `[]interface{}`: an array of any values
    if (k === 'items' && v === null) out.items = {};
    else if (k === 'format' && v === 'uri' && at === 'linkHref') out.format = 'uri-reference';
    else if (k === 'additionalProperties') out[k] = translate(v, 'mapValue');
    else out[k] = translate(v);
  }
  if (
    at === 'mapValue' &&
    out.type === 'object' &&
    Object.keys(out).every((k) => k === 'type' || k === 'description')
  ) {
    return {};
  }
  if (node['x-nullable'] === true) {
    if (typeof out.type === 'string') out.type = [out.type, 'null'];
    else if (out.$ref || out.allOf) return { anyOf: [{ type: 'null' }, out] };
    if (out.enum) out.enum = [...out.enum, null];
  }
  return out;
}

/**
 * `<definition>.<property>`s the spec declares required and not nullable in a detail while its create and update
 * schemas let the entity have none (x-nullable there): no value satisfies both, and OpenZiti sends null then (its
 * model's nil `*string`, which go-swagger writes as null). Validated as string or null, each with its reason.
 */
export const NULL_WHEN_UNSET: Readonly<Record<string, string>> = {
  'clientExternalJwtSignerDetail.externalAuthUrl':
    'optional on create (externalJwtSignerCreate, x-nullable); MapExternalJwtSignerToRestModelForClient copies the *string',
  'externalJwtSignerDetail.externalAuthUrl':
    'optional on create (externalJwtSignerCreate, x-nullable); MapExternalJwtSignerToRestModelForManagement copies the *string',
};

/** The (translated) schema of a definition's property, looked up in its own properties and its allOf parts. */
function propertyOf(def: any, property: string): any {
  if (def?.properties?.[property]) return def.properties[property];
  for (const part of def?.allOf ?? []) if (part?.properties?.[property]) return part.properties[property];
  return undefined;
}

function translateDefinitions(definitions: Record<string, any>): Record<string, any> {
  const out: Record<string, any> = {};
  for (const [name, def] of Object.entries(definitions)) out[name] = translate(def);
  const href = definitions.link?.properties?.href;
  if (href) out.link.properties.href = translate(href, 'linkHref');
  for (const key of Object.keys(NULL_WHEN_UNSET)) {
    const [definition, property] = key.split('.') as [string, string];
    const schema = propertyOf(out[definition], property);
    if (schema && typeof schema.type === 'string') schema.type = [schema.type, 'null'];
  }
  return out;
}

/**
 * RFC 3339 `date-time` as go-openapi's strfmt reads it: a `T` between date and time (ajv-formats also takes a
 * space) and a zone.
 */
const DATE_TIME = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)$/i;
export function isDateTime(value: string): boolean {
  return DATE_TIME.test(value) && !Number.isNaN(Date.parse(value));
}

const validators = new Map<string, (v: unknown) => string | null>();

/** A validator for `#/definitions/<definition>` of a spec: returns null when valid, else the ajv errors as text. */
export function schemaValidator(spec: SpecName, definition: string): (v: unknown) => string | null {
  const key = `${spec}#${definition}`;
  let fn = validators.get(key);
  if (fn) return fn;
  const doc = loadSpec(spec);
  const ajv = new Ajv({ strict: false, allErrors: true, validateFormats: true, validateSchema: false });
  addFormats(ajv);
  ajv.addFormat('date-time', isDateTime);
  const root = { $id: `${spec}.json`, definitions: translateDefinitions(doc.definitions) };
  ajv.addSchema(root);
  const validate = ajv.getSchema(`${spec}.json#/definitions/${definition}`);
  if (!validate) throw new Error(`no definition ${definition} in ${spec}.yml`);
  fn = (v: unknown) => (validate(v) ? null : ajv.errorsText(validate.errors, { separator: '\n' }));
  validators.set(key, fn);
  return fn;
}

/** The response schema (definition name) the spec declares for an operation and status. */
export function responseDefinition(spec: SpecName, method: string, path: string, status: number): string | null {
  const doc = loadSpec(spec);
  const op = doc.paths?.[path]?.[method.toLowerCase()];
  if (!op) throw new Error(`${spec}.yml has no ${method} ${path}`);
  const ref: string | undefined = op.responses?.[status]?.schema?.$ref;
  return ref ? ref.replace('#/definitions/', '') : null;
}

/** The statuses the spec declares for an operation. */
export function responseStatuses(spec: SpecName, method: string, path: string): number[] {
  const op = loadSpec(spec).paths?.[path]?.[method.toLowerCase()];
  if (!op) throw new Error(`${spec}.yml has no ${method} ${path}`);
  return Object.keys(op.responses ?? {}).map(Number);
}

/** Every operation of a spec: [method, path, operationId]. */
export function specOperations(spec: SpecName): { method: string; path: string; operationId?: string }[] {
  const doc = loadSpec(spec);
  const out: { method: string; path: string; operationId?: string }[] = [];
  for (const [path, item] of Object.entries<any>(doc.paths)) {
    for (const method of ['get', 'post', 'put', 'patch', 'delete']) {
      if (item[method]) out.push({ method: method.toUpperCase(), path, operationId: item[method].operationId });
    }
  }
  return out;
}
