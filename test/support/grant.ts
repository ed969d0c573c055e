/**
 * The last step of the end-to-end enrollment and login tests: a service granted to the new identity by a Dial
 * policy, and the client API's service list, read over the new session, shows exactly that service.
 */
import { expect } from 'vitest';

/** One request on a fixed transport (plain `call`, or `tlsCall` bound to its CA): status and JSON body. */
export type Send = (
  method: string,
  url: string,
  opts: { token?: string; body?: unknown },
) => Promise<{ status: number; body: any }>;

let seq = 0;

/**
 * Creates a service and a Dial service policy granting it to `identityRole` (`@<id>` or `#<attribute>`), as the
 * admin behind `adminToken` on the management API at `mgmt`; returns the service's id.
 */
export async function grantDial(send: Send, mgmt: string, adminToken: string, identityRole: string): Promise<string> {
  const name = `granted-${++seq}-${Date.now()}`;
  const svc = await send('POST', `${mgmt}/services`, {
    token: adminToken,
    body: { name, encryptionRequired: true },
  });
  expect(svc.status, JSON.stringify(svc.body)).toBe(201);
  const id = svc.body.data.id as string;
  const policy = await send('POST', `${mgmt}/service-policies`, {
    token: adminToken,
    body: {
      name: `${name}-dial`,
      type: 'Dial',
      semantic: 'AnyOf',
      identityRoles: [identityRole],
      serviceRoles: [`@${id}`],
    },
  });
  expect(policy.status, JSON.stringify(policy.body)).toBe(201);
  return id;
}

/** `GET /services` on the client API at `client`, over `session`, lists exactly `serviceId`, dialable only. */
export async function expectOnlyService(send: Send, client: string, session: string, serviceId: string): Promise<void> {
  const list = await send('GET', `${client}/services`, { token: session });
  expect(list.status, JSON.stringify(list.body)).toBe(200);
  const rows = list.body.data as { id: string; permissions: string[] }[];
  expect(rows.map((r) => [r.id, r.permissions])).toEqual([[serviceId, ['Dial']]]);
}
