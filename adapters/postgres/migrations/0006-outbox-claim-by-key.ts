/**
 * Migration 6: a claim whose cost does not grow with the backlog behind a few ordering keys.
 *
 * The claim of migration 3 walks pending rows in `seq` order until it has `p_limit` heads. With
 * fewer keys than `p_limit` it never has them, so every claim walked the whole backlog, probing
 * each row for an older row of its key; and for each head it read every later row of the key
 * (a heap fetch each) to learn that none was leased. With 50 keys and 20,000 rows waiting, a relay
 * moved 150–200 msg/s. This version replaces the function (same signature, same answers) and adds
 * one partial index:
 *
 * - **Few keys** (at most `p_limit` keys of the claimed systems have rows): the keys are listed
 *   by a skip scan of the key index (one descent per key), each key's head is its first row (its
 *   first row not dead when dead rows do not hold their key), and rows without a key come from
 *   the new index `twophase_outbox_keyless`, in `seq` order. The cost grows with the number of keys,
 *   not with the rows behind them.
 * - **More keys than `p_limit`**: the walk in `seq` order of migration 3, which then has heads to
 *   find (`p_limit` of them can exist).
 * - **A later row of the key under a live lease** is looked for only up to the key's first row
 *   that was never claimed (`fencing_token IS NULL`): no lease lies beyond it. A claim leases the
 *   head and a prefix of the key's publishable rows after it, and a row never claimed is pending,
 *   not leased and (in this version, whatever its `available_at`) publishable; so a claim that
 *   leased a row after it would have leased it too, and a claim whose head came after it would
 *   have had an older live row in its key. The scan covers the rows claimed at least once (the
 *   rows of claims in flight, given back, or in backoff), not the backlog.
 * - **Followers** are read per key only up to the `p_limit`-th row of a first, smaller read (a
 *   bound, found by reading `p_limit / heads` rows per key and doubling while short), not
 *   `p_limit` rows of every key.
 *
 * The heads are locked (`FOR UPDATE SKIP LOCKED`, at most `p_limit` of each kind) by one
 * statement, their followers chosen and leased by the next; a concurrent claim skips a locked
 * head, so it never takes that key meanwhile. `twophase_outbox_keyless` holds pending rows without
 * an ordering key only: a staged row with a key, a claim, an extend, a retry or a release does not
 * touch it (their updates stay HOT); a row going dead or requeued does.
 *
 * Nothing else changes: a relay of an earlier version runs the same call on a migrated table.
 */
import type { MigrationContext } from './context';

export const VERSION = 6;
export const NAME = 'outbox claim by key: cost bounded by the keys, not by the backlog behind them';

export function sql(c: MigrationContext): string {
  const s = c.schema;
  const t = `${s}.twophase_outbox`;
  // Publishable: pending, retry time reached, not leased (or the lease ran out).
  const publishable = (a: string) => `${a}.state = 'pending' AND ${a}.available_at <= now_ts AND (${a}.lease_owner IS NULL OR ${a}.lease_expires_at <= now_ts)`;
  // A follower: as publishable, and a row never claimed counts as available (see above).
  const follows = (a: string) => `${a}.state = 'pending' AND (${a}.available_at <= now_ts OR ${a}.fencing_token IS NULL) AND (${a}.lease_owner IS NULL OR ${a}.lease_expires_at <= now_ts)`;
  // The head conditions of a keyed row o: no older row of its key (dead rows count under
  // p_hold_dead); no later row of it under a live lease, looked for up to its first row never claimed.
  const keyedHead = (o: string) => `NOT EXISTS (
               SELECT 1 FROM ${t} e
                WHERE e.system = ${o}.system AND e.ordering_key = ${o}.ordering_key AND e.seq < ${o}.seq
                  AND (p_hold_dead OR e.state <> 'dead'))
             AND NOT COALESCE((
               SELECT e.fencing_token IS NOT NULL FROM ${t} e
                WHERE e.system = ${o}.system AND e.ordering_key = ${o}.ordering_key AND e.seq > ${o}.seq
                  AND (e.fencing_token IS NULL OR (e.lease_owner IS NOT NULL AND e.lease_expires_at > now_ts))
                ORDER BY e.seq LIMIT 1), false)`;
  return `
-- Pending rows without an ordering key, in seq order per system: the claim's source of keyless heads.
CREATE INDEX twophase_outbox_keyless ON ${t} (system, seq) WHERE ordering_key IS NULL AND state = 'pending';

-- twophase_outbox_claim: as in migration 3 (same parameters, same rows leased), at a cost bounded
-- by the number of keys with rows rather than by the rows behind them (see migration 6's header).
CREATE OR REPLACE FUNCTION ${s}.twophase_outbox_claim(
  p_owner text, p_limit integer, p_lease_ms bigint, p_systems text[], p_hold_dead boolean
) RETURNS TABLE (seq bigint, id uuid, system text, destination jsonb, headers jsonb, properties jsonb, body bytea, ordering_key text, attempts integer, created_at timestamptz, fencing_token bigint)
LANGUAGE plpgsql VOLATILE AS $fn$
DECLARE
  now_ts timestamptz := clock_timestamp();
  fence bigint := nextval('${s}.twophase_outbox_fence_seq');
  key_cap integer := p_limit;
  keys_n integer;
  candidates bigint[];
  heads bigint[];
  keyless bigint[];
  keyed integer;
  per_key integer;
  found_n integer;
  short_keys integer;
  bound bigint;
BEGIN
  -- The keys of the claimed systems, one index descent each, up to key_cap + 1 of them; with each,
  -- its head candidate: its first row (its first row not dead unless dead rows hold the key).
  -- (Per system, with an equality on it: a descent then starts at the next key, where a list of
  -- systems would start at the system's first entry and read every entry before the key.)
  WITH RECURSIVE k(system, ordering_key) AS (
    SELECT n.system, n.ordering_key FROM unnest(p_systems) AS sy(name) CROSS JOIN LATERAL (
      SELECT o.system, o.ordering_key FROM ${t} o
       WHERE o.system = sy.name AND o.ordering_key IS NOT NULL
       ORDER BY o.ordering_key LIMIT 1) n
    UNION ALL
    SELECT n.system, n.ordering_key FROM k CROSS JOIN LATERAL (
      SELECT o.system, o.ordering_key FROM ${t} o
       WHERE o.system = k.system AND o.ordering_key > k.ordering_key
       ORDER BY o.ordering_key LIMIT 1) n
  )
  SELECT count(*), array_agg(h.seq) FILTER (WHERE h.seq IS NOT NULL) INTO keys_n, candidates
    FROM (SELECT * FROM k LIMIT key_cap + 1) ks
    LEFT JOIN LATERAL (
      SELECT o.seq FROM ${t} o
       WHERE o.system = ks.system AND o.ordering_key = ks.ordering_key AND (p_hold_dead OR o.state <> 'dead')
       ORDER BY o.seq LIMIT 1) h ON true;

  IF keys_n > key_cap THEN
    -- Many keys: walk the pending rows in seq order; heads come often.
    SELECT array_agg(w.seq) INTO heads FROM (
      SELECT o.seq FROM ${t} o
       WHERE ${publishable('o')} AND o.system = ANY (p_systems)
         AND (o.ordering_key IS NULL OR (${keyedHead('o')}))
       ORDER BY o.seq
       LIMIT p_limit
       FOR UPDATE OF o SKIP LOCKED) w;
  ELSE
    -- Few keys: their heads, and the rows without a key, each kind in seq order.
    SELECT array_agg(w.seq) INTO heads FROM (
      SELECT o.seq FROM ${t} o
       WHERE o.seq = ANY (candidates) AND ${publishable('o')} AND o.system = ANY (p_systems)
         AND ${keyedHead('o')}
       ORDER BY o.seq
       LIMIT p_limit
       FOR UPDATE OF o SKIP LOCKED) w;
    SELECT array_agg(w.seq) INTO keyless FROM unnest(p_systems) AS sy(name) CROSS JOIN LATERAL (
      SELECT o.seq FROM ${t} o
       WHERE o.system = sy.name AND o.ordering_key IS NULL AND ${publishable('o')}
       ORDER BY o.seq
       LIMIT p_limit
       FOR UPDATE OF o SKIP LOCKED) w;
    SELECT array_agg(x ORDER BY x) INTO heads FROM (
      SELECT x FROM unnest(coalesce(heads, '{}') || coalesce(keyless, '{}')) AS x ORDER BY x LIMIT p_limit) u;
  END IF;
  IF heads IS NULL THEN
    RETURN;
  END IF;

  -- The p_limit-th row of heads and followers bounds the followers to read: read p_limit / (keyed
  -- heads) followers per key, doubling while fewer than p_limit rows came and a key had more.
  SELECT count(*) INTO keyed FROM ${t} o WHERE o.seq = ANY (heads) AND o.ordering_key IS NOT NULL;
  IF keyed > 0 THEN
    per_key := greatest(1, ceil(p_limit::numeric / keyed)::integer);
    LOOP
      SELECT count(*), (array_agg(u.seq ORDER BY u.seq))[p_limit], count(*) FILTER (WHERE u.at_cap) INTO found_n, bound, short_keys FROM (
        SELECT x AS seq, false AS at_cap FROM unnest(heads) AS x
        UNION ALL
        SELECT f.seq, f.n = per_key FROM ${t} h CROSS JOIN LATERAL (
          SELECT e.seq, row_number() OVER (ORDER BY e.seq) AS n FROM (
            SELECT e.seq FROM ${t} e
             WHERE e.system = h.system AND e.ordering_key = h.ordering_key AND e.seq > h.seq AND ${follows('e')}
             ORDER BY e.seq LIMIT per_key) e) f
         WHERE h.seq = ANY (heads) AND h.ordering_key IS NOT NULL
      ) u;
      EXIT WHEN found_n >= p_limit OR short_keys = 0 OR per_key >= p_limit;
      per_key := least(p_limit, per_key * 2);
    END LOOP;
    IF found_n < p_limit THEN
      bound := NULL;
    END IF;
  END IF;

  RETURN QUERY
  WITH h AS (
    SELECT o.seq, o.system, o.ordering_key FROM ${t} o WHERE o.seq = ANY (heads)
  ), followers AS (
    SELECT f.seq FROM h
    CROSS JOIN LATERAL (
      SELECT e.seq FROM ${t} e
       WHERE e.system = h.system AND e.ordering_key = h.ordering_key AND e.seq > h.seq
         AND e.seq <= coalesce(bound, 9223372036854775807) AND ${follows('e')}
       ORDER BY e.seq
       LIMIT p_limit
    ) f
    WHERE h.ordering_key IS NOT NULL
  ), chosen AS (
    SELECT c.seq FROM (SELECT h.seq FROM h UNION ALL SELECT followers.seq FROM followers) c
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
