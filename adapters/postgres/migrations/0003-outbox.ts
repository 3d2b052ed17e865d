/**
 * Migration 3: the transactional outbox.
 *
 * Rows of `twophase_outbox` (one per staged message; deleted once the broker confirmed it):
 * - `seq`: staging order (identity). Stagers of one ordering key serialize on a transaction-level
 *   advisory lock taken before their rows get a `seq`, so within a key `seq` order is commit order;
 * - `id`: the outbox id (UUID), sent as the broker message id and the `idempotency-key` header;
 * - `system` (`rabbitmq` | `kafka`), `destination` (`{exchange, routingKey}` | `{topic, key, partition?}`),
 *   `headers` (string values), `properties` (AMQP properties), `body` (the bytes as staged);
 * - `ordering_key`: NULL = no order with other messages;
 * - `state`: `pending` or `dead` (`dead_reason`, `last_error` say why); `attempts`: failed publishes;
 *   `available_at`: not claimed before (retry backoff);
 * - `lease_owner`, `fencing_token`, `lease_expires_at`: the relay claim holding the row (owner NULL
 *   once given back; the token stays until the next claim).
 *
 * Functions: `twophase_outbox_stage` (staging; refuses to run outside a transaction block) and
 * `twophase_outbox_claim` (a relay's claim). Notifications go to channel `twophase_outbox`, payload
 * the schema name.
 */
import type { MigrationContext } from './context';

export const VERSION = 3;
export const NAME = 'transactional outbox';

/** The LISTEN/NOTIFY channel of staging commits; the payload is the schema name. */
export const OUTBOX_CHANNEL = 'twophase_outbox';

export function sql(c: MigrationContext): string {
  const s = c.schema;
  const t = `${s}.twophase_outbox`;
  return `
CREATE SEQUENCE ${s}.twophase_outbox_fence_seq AS bigint MINVALUE 1 START 1;

CREATE TABLE ${t} (
  seq              bigint GENERATED ALWAYS AS IDENTITY,
  id               uuid        NOT NULL,
  system           text        NOT NULL,
  destination      jsonb       NOT NULL,
  headers          jsonb       NOT NULL DEFAULT '{}'::jsonb,
  properties       jsonb       NOT NULL DEFAULT '{}'::jsonb,
  body             bytea       NOT NULL,
  ordering_key     text        NULL,
  state            text        NOT NULL DEFAULT 'pending',
  attempts         integer     NOT NULL DEFAULT 0,
  available_at     timestamptz NOT NULL DEFAULT clock_timestamp(),
  lease_owner      text        NULL,
  fencing_token    bigint      NULL,
  lease_expires_at timestamptz NULL,
  dead_reason      text        NULL,
  last_error       text        NULL,
  created_at       timestamptz NOT NULL DEFAULT clock_timestamp(),
  CONSTRAINT twophase_outbox_pkey PRIMARY KEY (seq),
  CONSTRAINT twophase_outbox_id_unique UNIQUE (id),
  CONSTRAINT twophase_outbox_system CHECK (system IN ('rabbitmq', 'kafka')),
  CONSTRAINT twophase_outbox_destination_object CHECK (jsonb_typeof(destination) = 'object'),
  CONSTRAINT twophase_outbox_headers_object CHECK (jsonb_typeof(headers) = 'object'),
  CONSTRAINT twophase_outbox_properties_object CHECK (jsonb_typeof(properties) = 'object'),
  CONSTRAINT twophase_outbox_ordering_key_len CHECK (ordering_key IS NULL OR octet_length(ordering_key) BETWEEN 1 AND 512),
  CONSTRAINT twophase_outbox_state CHECK (state IN ('pending', 'dead')),
  CONSTRAINT twophase_outbox_dead_reason CHECK ((state = 'dead') = (dead_reason IS NOT NULL)),
  CONSTRAINT twophase_outbox_attempts CHECK (attempts >= 0),
  CONSTRAINT twophase_outbox_lease CHECK (lease_owner IS NULL OR (fencing_token IS NOT NULL AND lease_expires_at IS NOT NULL))
);
-- Heads of a key: "is there an older row of this key?" is one index probe.
CREATE INDEX twophase_outbox_key_seq ON ${t} (system, ordering_key, seq) WHERE ordering_key IS NOT NULL;
CREATE INDEX twophase_outbox_fence ON ${t} (fencing_token) WHERE fencing_token IS NOT NULL;
-- Rows are inserted and deleted at the same rate: vacuum the table often (see docs/outbox.md).
ALTER TABLE ${t} SET (autovacuum_vacuum_scale_factor = 0.01, autovacuum_vacuum_threshold = 1000, autovacuum_vacuum_insert_scale_factor = 0.01);

-- twophase_outbox_stage: inserts staged messages in array order, in the caller's transaction.
-- p_xact_started: the transaction_timestamp() the caller read in an earlier statement on the same
-- session (NULL: the caller knows it is inside a transaction, e.g. the inbox's). When it differs,
-- the two statements ran in different transactions: the session is in auto-commit, or its
-- transaction ended, and a row staged now would be committed alone, without the effect (25P01).
-- Takes a transaction-level advisory lock per (system, ordering key) first, in sorted order, so
-- two transactions staging one key get their seq in commit order. Notifies waiting relays at
-- COMMIT when p_notify. Returns the number of rows.
CREATE FUNCTION ${s}.twophase_outbox_stage(
  p_ids uuid[], p_systems text[], p_destinations jsonb[], p_headers jsonb[], p_properties jsonb[], p_bodies bytea[], p_ordering_keys text[], p_notify boolean, p_xact_started timestamptz
) RETURNS integer LANGUAGE plpgsql VOLATILE AS $fn$
DECLARE
  k record;
  n integer;
BEGIN
  IF p_xact_started IS NOT NULL AND p_xact_started <> transaction_timestamp() THEN
    RAISE EXCEPTION 'twophase outbox: staging needs an open transaction (BEGIN first, on the same connection); outside one the message would be published without its effect'
      USING ERRCODE = '25P01';
  END IF;
  FOR k IN SELECT DISTINCT u.s, u.ok FROM unnest(p_systems, p_ordering_keys) AS u(s, ok) WHERE u.ok IS NOT NULL ORDER BY 1, 2 LOOP
    PERFORM pg_advisory_xact_lock(hashtextextended('twophase.outbox:' || k.s || ':' || k.ok, 0));
  END LOOP;
  INSERT INTO ${t} (id, system, destination, headers, properties, body, ordering_key)
  SELECT u.id, u.sy, u.de, u.he, u.pr, u.bo, u.ok
    FROM unnest(p_ids, p_systems, p_destinations, p_headers, p_properties, p_bodies, p_ordering_keys) WITH ORDINALITY AS u(id, sy, de, he, pr, bo, ok, n)
   ORDER BY u.n;
  GET DIAGNOSTICS n = ROW_COUNT;
  IF p_notify THEN
    PERFORM pg_notify('${OUTBOX_CHANNEL}', ${literal(c.schemaName ?? '')});
  END IF;
  RETURN n;
END
$fn$;

-- twophase_outbox_claim: leases up to p_limit publishable rows of p_systems to p_owner under one
-- new fencing token, for p_lease_ms, and returns them in seq order. Publishable: pending, its retry
-- time reached, not leased (or the lease ran out). Per (system, ordering key) only the head — no
-- older row of the key left (dead rows count under p_hold_dead), no later row of it under a live
-- lease — is taken with SKIP LOCKED, and
-- with it the key's following publishable rows: a key is never split between two relays. No global
-- lock: two relays claim disjoint keys at once.
CREATE FUNCTION ${s}.twophase_outbox_claim(
  p_owner text, p_limit integer, p_lease_ms bigint, p_systems text[], p_hold_dead boolean
) RETURNS TABLE (seq bigint, id uuid, system text, destination jsonb, headers jsonb, properties jsonb, body bytea, ordering_key text, attempts integer, created_at timestamptz, fencing_token bigint)
LANGUAGE plpgsql VOLATILE AS $fn$
DECLARE
  now_ts timestamptz := clock_timestamp();
  fence bigint := nextval('${s}.twophase_outbox_fence_seq');
BEGIN
  RETURN QUERY
  WITH heads AS (
    SELECT o.seq, o.system, o.ordering_key FROM ${t} o
     WHERE o.state = 'pending' AND o.system = ANY (p_systems) AND o.available_at <= now_ts
       AND (o.lease_owner IS NULL OR o.lease_expires_at <= now_ts)
       AND (o.ordering_key IS NULL OR (
             NOT EXISTS (
               SELECT 1 FROM ${t} e
                WHERE e.system = o.system AND e.ordering_key = o.ordering_key AND e.seq < o.seq
                  AND (p_hold_dead OR e.state <> 'dead'))
             -- nor is a later row of the key still leased (a claim that failed its head and has
             -- not given the rest back yet): a key is held by one lease at a time.
             AND NOT EXISTS (
               SELECT 1 FROM ${t} e
                WHERE e.system = o.system AND e.ordering_key = o.ordering_key AND e.seq > o.seq
                  AND e.lease_owner IS NOT NULL AND e.lease_expires_at > now_ts)))
     ORDER BY o.seq
     LIMIT p_limit
     FOR UPDATE OF o SKIP LOCKED
  ), followers AS (
    SELECT f.seq FROM heads h
    CROSS JOIN LATERAL (
      SELECT e.seq FROM ${t} e
       WHERE e.system = h.system AND e.ordering_key = h.ordering_key AND e.seq > h.seq
         AND e.state = 'pending' AND e.available_at <= now_ts
         AND (e.lease_owner IS NULL OR e.lease_expires_at <= now_ts)
       ORDER BY e.seq
       LIMIT p_limit
    ) f
    WHERE h.ordering_key IS NOT NULL
  ), chosen AS (
    SELECT c.seq FROM (SELECT heads.seq FROM heads UNION ALL SELECT followers.seq FROM followers) c
     ORDER BY c.seq
     LIMIT p_limit
  ), leased AS (
    UPDATE ${t} o SET lease_owner = p_owner, fencing_token = fence, lease_expires_at = now_ts + p_lease_ms * interval '1 millisecond'
      FROM chosen WHERE o.seq = chosen.seq
    RETURNING o.seq, o.id, o.system, o.destination, o.headers, o.properties, o.body, o.ordering_key, o.attempts, o.created_at, o.fencing_token
  )
  SELECT * FROM leased ORDER BY 1;
END
$fn$;
`;
}

function literal(value: string): string {
  return `'${value.replace(/'/g, "''")}'`;
}
