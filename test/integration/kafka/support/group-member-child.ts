/**
 * A consumer group member in a process of its own, on one client row of support/clients.ts: it
 * joins `groupId` on `topic` through the client port, prints `joined` on its first join, and
 * then holds every batch it is given without committing, until the parent kills it. A crash the
 * client port reports is printed as one JSON line: `{"crash":{"name","code","groupId","message","restart"}}`.
 *
 *   node -r ts-node/register/transpile-only group-member-child.ts '<json config>'
 */
import { clients, type ClientRow } from './clients';

interface MemberConfig {
  readonly client: ClientRow['name'];
  readonly clientId: string;
  readonly groupId: string;
  readonly topic: string;
  /** Session timeout, ms. */
  readonly sessionTimeout: number;
}

async function main(): Promise<void> {
  const config = JSON.parse(process.argv[2] ?? '{}') as MemberConfig;
  const row = clients.find((r) => r.name === config.client);
  if (!row) throw new Error(`unknown client row "${config.client}"`);
  const consumer = row.make(config.clientId).consumer({ groupId: config.groupId, sessionTimeout: config.sessionTimeout, rebalanceTimeout: config.sessionTimeout, heartbeatInterval: 1000 });
  let said = false;
  consumer.onGroupJoin(() => {
    if (said) return;
    said = true;
    process.stdout.write('joined\n');
  });
  consumer.onCrash((error, restart) => {
    const { code, groupId } = error as Error & { code?: string; groupId?: string };
    process.stdout.write(`${JSON.stringify({ crash: { name: error.name, code, groupId, message: error.message, restart } })}\n`);
  });
  await consumer.connect();
  await consumer.subscribe({ topics: [config.topic], fromBeginning: true });
  await consumer.run(() => new Promise(() => undefined));
}

main().catch((error: unknown) => {
  process.stderr.write(`group-member-child failed: ${String(error)}\n`);
  process.exit(1);
});
