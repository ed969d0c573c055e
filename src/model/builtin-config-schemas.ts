/**
 * The JSON schemas of OpenZiti's built-in config types (the contract tunnelers and SDKs read configs by), so that
 * a config Keel accepts is one an OpenZiti controller accepts and the other way round. Shared pieces are built
 * once; `$ref`s point into each schema's own `definitions`.
 */

type Json = Record<string, unknown>;

const UINT16_MAX = 65_535;
const INT32_MAX = 2_147_483_647;

const ref = (name: string): Json => ({ $ref: `#/definitions/${name}` });
/** A non-empty array of unique items of definition `item`. */
const setOf = (item: string): Json => ({ allOf: [ref('inhabitedSet'), { items: ref(item) }] });
const closedObject = (properties: Json, required: string[] = []): Json => ({
  type: 'object',
  additionalProperties: false,
  ...(required.length > 0 ? { required } : {}),
  properties,
});
const portNumber: Json = { type: 'integer', minimum: 0, maximum: UINT16_MAX };

/** Health checks a hosting tunneler may run (ziti-tunneler-server.v1, host.v1/v2). */
const healthCheckDefinitions: Json = {
  duration: { type: 'string', pattern: '[0-9]+(h|m|s|ms)' },
  method: { type: 'string', enum: ['GET', 'POST', 'PUT', 'PATCH'] },
  action: closedObject(
    {
      trigger: { type: 'string', enum: ['fail', 'pass', 'change'] },
      consecutiveEvents: { type: 'integer', minimum: 0, maximum: UINT16_MAX },
      duration: ref('duration'),
      action: { type: 'string', pattern: '(mark (un)?healthy|increase cost [0-9]+|decrease cost [0-9]+|send event)' },
    },
    ['trigger', 'action'],
  ),
  actionList: { type: 'array', items: ref('action'), minItems: 1, maxItems: 20 },
  portCheck: closedObject(
    { interval: ref('duration'), timeout: ref('duration'), address: { type: 'string' }, actions: ref('actionList') },
    ['interval', 'timeout', 'address'],
  ),
  httpCheck: closedObject(
    {
      url: { type: 'string' },
      method: ref('method'),
      body: { type: 'string' },
      interval: ref('duration'),
      timeout: ref('duration'),
      actions: ref('actionList'),
      expectStatus: { type: 'integer', minimum: 100, maximum: 599 },
      expectInBody: { type: 'string' },
    },
    ['interval', 'timeout', 'url'],
  ),
  portCheckList: { type: 'array', items: ref('portCheck') },
  httpCheckList: { type: 'array', items: ref('httpCheck') },
};
const healthCheckProperties: Json = { portChecks: ref('portCheckList'), httpChecks: ref('httpCheckList') };

/** Addresses, ports and protocols of intercepting and hosting tunnelers. */
const nonEmptyHostname: Json = { type: 'string', format: 'idn-hostname', not: { pattern: '^$' } };
const addressTranslation = (format: 'ipv4' | 'ipv6', maxPrefix: number): Json =>
  closedObject({
    from: { type: 'string', format },
    to: { type: 'string', format },
    prefixLength: { type: 'integer', minimum: 0, maximum: maxPrefix },
  });
const tunnelDefinitions: Json = {
  dialAddress: nonEmptyHostname,
  // ips, cidrs and wildcards pass as hostnames here; clients tell them apart when they parse them
  listenAddress: nonEmptyHostname,
  inhabitedSet: { type: 'array', minItems: 1, uniqueItems: true },
  portNumber,
  portRange: closedObject({ low: ref('portNumber'), high: ref('portNumber') }, ['low', 'high']),
  protocolName: { type: 'string', enum: ['tcp', 'udp'] },
  timeoutSeconds: { type: 'integer', minimum: 0, maximum: INT32_MAX },
  proxyType: { type: 'string', enum: ['http'] },
  proxyConfiguration: {
    type: 'object',
    required: ['type', 'address'],
    properties: { type: ref('proxyType'), address: { type: 'string' } },
  },
  ipv4AddressTranslation: addressTranslation('ipv4', 32),
  ipv6AddressTranslation: addressTranslation('ipv6', 128),
  addressTranslation: { oneOf: [ref('ipv4AddressTranslation'), ref('ipv6AddressTranslation')] },
};

/** `forwardX: true` needs `allowedXs`; otherwise `x` itself is required. */
const forwardOr = (forward: string, allowed: string, fixed: string): Json => ({
  if: { properties: { [forward]: { const: true } }, required: [forward] },
  // biome-ignore lint/suspicious/noThenProperty: JSON Schema's if/then/else keyword, data not a promise
  then: { required: [allowed] },
  else: { required: [fixed] },
});
const forwardFlag: Json = { type: 'boolean', enum: [true] };

/** One hosting terminator (host.v1, and each entry of host.v2's `terminators`), without `$id`/`definitions`. */
const hostTerminator: Json = {
  ...closedObject({
    ...healthCheckProperties,
    protocol: ref('protocolName'),
    forwardProtocol: forwardFlag,
    allowedProtocols: setOf('protocolName'),
    address: ref('dialAddress'),
    forwardAddress: forwardFlag,
    allowedAddresses: setOf('listenAddress'),
    forwardAddressTranslations: setOf('addressTranslation'),
    port: ref('portNumber'),
    forwardPort: forwardFlag,
    allowedPortRanges: setOf('portRange'),
    allowedSourceAddresses: setOf('listenAddress'),
    listenOptions: closedObject({
      connectTimeoutSeconds: { ...ref('timeoutSeconds'), deprecated: true },
      connectTimeout: ref('duration'),
      maxConnections: { type: 'integer', minimum: 1 },
      identity: { type: 'string' },
      bindUsingEdgeIdentity: { type: 'boolean' },
      bindUsingEdgeIdentityWildcard: { type: 'boolean' },
      cost: { type: 'integer', minimum: 0, maximum: UINT16_MAX },
      precedence: { type: 'string', enum: ['default', 'required', 'failed'] },
    }),
    proxy: ref('proxyConfiguration'),
  }),
  allOf: [
    forwardOr('forwardProtocol', 'allowedProtocols', 'protocol'),
    forwardOr('forwardAddress', 'allowedAddresses', 'address'),
    forwardOr('forwardPort', 'allowedPortRanges', 'port'),
  ],
};
const hostDefinitions: Json = { ...healthCheckDefinitions, ...tunnelDefinitions };

/** Schemas by built-in config type name; types not listed (router.link.v1) accept any object. */
export const BUILTIN_CONFIG_SCHEMAS: Record<string, Json> = {
  'ziti-tunneler-client.v1': {
    $id: 'http://edge.openziti.org/schemas/ziti-tunneler-client.v1.config.json',
    ...closedObject({ hostname: { type: 'string' }, port: portNumber }, ['hostname', 'port']),
  },
  'ziti-tunneler-server.v1': {
    $id: 'http://edge.openziti.org/schemas/ziti-tunneler-server.v1.config.json',
    definitions: healthCheckDefinitions,
    ...closedObject(
      {
        protocol: { type: ['string', 'null'], enum: ['tcp', 'udp'] },
        hostname: { type: 'string' },
        port: portNumber,
        ...healthCheckProperties,
      },
      ['hostname', 'port'],
    ),
  },
  'intercept.v1': {
    $id: 'http://edge.openziti.org/schemas/intercept.v1.config.json',
    definitions: tunnelDefinitions,
    ...closedObject(
      {
        protocols: setOf('protocolName'),
        addresses: setOf('listenAddress'),
        portRanges: setOf('portRange'),
        dialOptions: closedObject({ identity: { type: 'string' }, connectTimeoutSeconds: ref('timeoutSeconds') }),
        sourceIp: { type: 'string' },
        allowedSourceAddresses: setOf('listenAddress'),
      },
      ['protocols', 'addresses', 'portRanges'],
    ),
  },
  'host.v1': {
    $id: 'http://ziti-edge.netfoundry.io/schemas/host.v1.schema.json',
    definitions: hostDefinitions,
    ...hostTerminator,
  },
  'host.v2': {
    $id: 'http://ziti-edge.netfoundry.io/schemas/host.v2.schema.json',
    definitions: {
      ...hostDefinitions,
      terminator: hostTerminator,
      terminatorList: { type: 'array', minItems: 1, items: ref('terminator') },
    },
    ...closedObject({ terminators: ref('terminatorList') }, ['terminators']),
  },
  'interfaces.v1': {
    $id: 'https://netfoundry.io/schemas/interfaces.v1.config.json',
    definitions: healthCheckDefinitions,
    ...closedObject({ interfaces: { type: 'array', items: { type: 'string' } } }, ['interfaces']),
  },
  'proxy.v1': {
    $id: 'https://netfoundry.io/schemas/proxy.v1.config.json',
    definitions: { protocol: { type: 'string', enum: ['tcp', 'udp'] } },
    ...closedObject(
      {
        port: { type: 'number', minimum: 1, maximum: UINT16_MAX },
        protocols: { type: 'array', minItems: 1, items: ref('protocol') },
        binding: { type: 'string' },
      },
      ['port', 'protocols'],
    ),
  },
};
