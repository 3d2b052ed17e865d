/**
 * @platformatic/kafka, classic group protocol, on the real broker: a consumer disconnected while
 * its rejoin is in flight (a heartbeat answered REBALANCE_IN_PROGRESS because another member is
 * joining, as in a rolling deploy) sends no heartbeat after `disconnect()` resolved. Without the
 * adapter's wait for the join (adapters/kafka/platformatic-joins.ts), the closed client went on
 * heartbeating every `heartbeatInterval` and kept the process alive.
 */
import { tracingChannel } from 'node:diagnostics_channel';
import type { GroupConsumer, KafkaClient } from '../../../adapters/kafka';
import { waitFor } from '../../support/wait';
import { clientRows, describeEachClient } from './support/clients';
import { FAST_GROUP, kafkaSuite, unique } from './support/kafka-helpers';

interface ClientContext {
  readonly client?: unknown;
  readonly operation?: string;
}

/** Calls `onStart` for each start of the client's traced operations on `channel` (`plt:kafka:…`); returns the unsubscribe. */
function onOperationStart(channel: string, onStart: (context: ClientContext) => void): () => void {
  const traced = tracingChannel<ClientContext>(channel);
  const handlers = { start: onStart, end: () => undefined, asyncStart: () => undefined, asyncEnd: () => undefined, error: () => undefined };
  traced.subscribe(handlers);
  return () => traced.unsubscribe(handlers);
}

async function joined(client: KafkaClient, groupId: string, topic: string): Promise<GroupConsumer> {
  const member = client.consumer({ groupId, ...FAST_GROUP });
  let joins = 0;
  member.onGroupJoin(() => void joins++);
  await member.connect();
  await member.subscribe({ topics: [topic], fromBeginning: true });
  await member.run(async () => undefined);
  await waitFor(() => joins > 0, { what: `${groupId}: a member joined`, timeoutMs: 20_000 });
  return member;
}

describeEachClient(['kafka'], '@platformatic/kafka close during a rejoin', clientRows('platformatic-classic'), (row) => {
  const { topics } = kafkaSuite(`twophase-plt-close`);
  const client = row.make('twophase-plt-close');

  test('no heartbeat after disconnect() resolved, in 6 closes each made as the rejoin starts', async () => {
    const topic = await topics.create('plt-close', 4);
    const heartbeatsAfterClose: number[] = [];
    for (let round = 0; round < 6; round++) {
      const groupId = unique(`plt-close-${round}`);
      const first = await joined(client, groupId, topic);
      const underlying = (first as unknown as { consumer: object }).consumer;
      let closed = false;
      let beats = 0;
      let closing: Promise<void> | undefined;
      const offBeats = onOperationStart('plt:kafka:consumer:heartbeat', (context) => {
        if (closed && context.client === underlying) beats++;
      });
      // The second member's join makes the first one's next heartbeat fail with
      // REBALANCE_IN_PROGRESS; the first disconnects as its rejoin starts.
      const offJoins = onOperationStart('plt:kafka:consumer:group', (context) => {
        if (context.client === underlying && context.operation === 'joinGroup' && !closing) {
          closing = new Promise<void>((resolve) => setImmediate(resolve)).then(() => first.disconnect());
        }
      });
      const second = joined(client, groupId, topic);
      await waitFor(() => closing !== undefined, { what: `round ${round}: the first member's rejoin started`, timeoutMs: 20_000 });
      await closing;
      closed = true;
      offJoins();
      // The first member's heartbeat interval is 500 ms: a client still heartbeating shows within 2 s.
      await new Promise((resolve) => setTimeout(resolve, 2000));
      offBeats();
      heartbeatsAfterClose.push(beats);
      await (await second).disconnect();
    }
    expect(heartbeatsAfterClose).toEqual([0, 0, 0, 0, 0, 0]);
  });
});
