import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { probe, SERVICES, type ServiceName, STATUS_FILE } from './services';

/** Probes every service once; under CI a missing one fails the whole run. */
export default async function globalSetup(): Promise<void> {
  const status: Partial<Record<ServiceName, boolean>> = {};
  for (const [name, s] of Object.entries(SERVICES) as [ServiceName, (typeof SERVICES)[ServiceName]][]) {
    status[name] = await probe(s.host, s.port);
  }
  mkdirSync(dirname(STATUS_FILE), { recursive: true });
  writeFileSync(STATUS_FILE, JSON.stringify(status));
  const missing = (Object.keys(status) as ServiceName[]).filter((n) => !status[n]);
  if (process.env.CI && missing.length > 0) {
    throw new Error(
      `CI is set and required services are missing: ${missing.map((n) => `${n} (${SERVICES[n].hint})`).join(', ')}`,
    );
  }
}
