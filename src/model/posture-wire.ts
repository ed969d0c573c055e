/** The wire shapes of posture responses and posture data (client.yml / management.yml definitions of the same names). */
import { s } from '../schema/s.js';
import { meta } from './common.js';
import { dialBind } from './policy.js';

/** Posture responses one bulk request may carry (OpenZiti sets none; Keel bounds every list). */
export const MAX_BULK_RESPONSES = 100;
/** Entries one response's lists (MAC addresses, signer fingerprints) may hold. */
export const MAX_RESPONSE_LIST = 100;

const short = s.str({ maxLength: 1024 });
const shortList = s.arr(short, { maxItems: MAX_RESPONSE_LIST });
export const postureResponseCreate = s.named(
  'postureResponseCreate',
  s.obj(
    {
      id: short,
      typeId: short,
      build: short,
      type: short,
      version: short,
      domain: short,
      macAddresses: shortList,
      hash: short,
      isRunning: s.bool(),
      path: short,
      signerFingerprints: shortList,
      unlocked: s.bool(),
      woken: s.bool(),
    },
    ['id', 'typeId'],
  ),
);

export const postureResponseEnvelope = s.named(
  'postureResponseEnvelope',
  s.obj(
    {
      data: s.named(
        'postureResponse',
        s.obj(
          {
            services: s.arr(
              s.named(
                'postureResponseService',
                s.obj(
                  {
                    id: s.str(),
                    name: s.str(),
                    postureQueryType: s.str(),
                    timeout: s.int(),
                    timeoutRemaining: s.int(),
                  },
                  ['id', 'name', 'postureQueryType', 'timeout', 'timeoutRemaining'],
                ),
              ),
            ),
          },
          ['services'],
        ),
      ),
      meta,
    },
    ['meta', 'data'],
  ),
);

const dataBase = { postureCheckId: s.str(), timedOut: s.bool(), lastUpdatedAt: s.datetime() };
const dataBaseRequired = ['postureCheckId', 'timedOut', 'lastUpdatedAt'] as const;
export const postureData = s.named(
  'postureData',
  s.obj(
    {
      os: s.named(
        'postureDataOs',
        s.obj({ ...dataBase, type: s.str(), version: s.str(), build: s.str() }, [
          ...dataBaseRequired,
          'type',
          'version',
          'build',
        ]),
      ),
      domain: s.named('postureDataDomain', s.obj({ ...dataBase, domain: s.str() }, [...dataBaseRequired, 'domain'])),
      mac: s.named(
        'postureDataMac',
        s.obj({ ...dataBase, addresses: s.arr(s.str()) }, [...dataBaseRequired, 'addresses']),
      ),
      processes: s.arr(
        s.named(
          'postureDataProcess',
          s.obj(
            { ...dataBase, binaryHash: s.str(), isRunning: s.bool(), signerFingerprints: s.arr(s.str()) },
            dataBaseRequired,
          ),
        ),
      ),
      apiSessionPostureData: s.map(
        s.named(
          'apiSessionPostureData',
          s.obj(
            {
              mfa: s.named(
                'postureDataMfa',
                s.obj(
                  {
                    apiSessionId: s.str(),
                    passedAt: s.datetime(),
                    passedMfa: s.bool(),
                    passedOnUnlock: s.bool(),
                    passedOnWake: s.bool(),
                  },
                  ['apiSessionId', 'passedMfa', 'passedOnWake', 'passedOnUnlock', 'passedAt'],
                ),
              ),
              endpointState: s.named(
                'postureDataEndpointState',
                s.obj({ unlockedAt: s.datetime(), wokenAt: s.datetime() }, ['wokenAt', 'unlockedAt']),
              ),
            },
            ['mfa'],
          ),
        ),
      ),
    },
    ['mac', 'domain', 'os', 'processes', 'apiSessionPostureData'],
  ),
);

export const failedServiceRequest = s.named(
  'failedServiceRequest',
  s.obj({
    apiSessionId: s.str(),
    policyFailures: s.arr(
      s.named(
        'policyFailure',
        s.obj({
          checks: s.arr(
            s.named(
              'postureCheckFailure',
              s.obj({ postureCheckId: s.str(), postureCheckName: s.str(), postureCheckType: s.str() }, [
                'postureCheckId',
                'postureCheckName',
                'postureCheckType',
              ]),
            ),
          ),
          policyId: s.str(),
          policyName: s.str(),
        }),
      ),
    ),
    serviceId: s.str(),
    serviceName: s.str(),
    sessionType: dialBind,
    when: s.datetime(),
  }),
);
