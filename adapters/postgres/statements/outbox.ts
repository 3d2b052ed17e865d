/**
 * The outbox relay's statements (the claim itself is the `twophase_outbox_claim` function of
 * migration 3, replaced by migration 6). Every statement that changes a leased row matches the
 * claim's fencing token, so a relay whose lease was taken over changes nothing.
 */

/** $1 owner, $2 limit, $3 lease ms, $4 systems, $5 hold dead. */
export function claim(schema: string): string {
  return `SELECT * FROM ${schema}.twophase_outbox_claim($1, $2, $3, $4::text[], $5)`;
}

/**
 * $1 sequences, $2 fencing token, $3 owner, $4 lease ms → the sequences still held. A lease that
 * ran out is not revived: another relay may have claimed the head of the same key meanwhile.
 */
export function extend(schema: string): string {
  return `UPDATE ${schema}.twophase_outbox SET lease_expires_at = clock_timestamp() + $4::bigint * interval '1 millisecond'
           WHERE seq = ANY ($1::bigint[]) AND fencing_token = $2 AND lease_owner = $3 AND lease_expires_at > clock_timestamp() RETURNING seq`;
}

/** $1 sequences, $2 fencing token: deletes published rows. A row given back keeps the token until claimed again, so it is removed too. */
export function complete(schema: string): string {
  return `DELETE FROM ${schema}.twophase_outbox WHERE seq = ANY ($1::bigint[]) AND fencing_token = $2`;
}

/**
 * $1 sequences, $2 retry delays ms (NULL = dead), $3 reasons, $4 errors, $5 fencing token, $6 owner:
 * counts the attempt, sets the retry time or the dead state, ends the lease.
 */
export function fail(schema: string): string {
  return `UPDATE ${schema}.twophase_outbox o SET
            attempts = o.attempts + 1,
            state = CASE WHEN f.delay IS NULL THEN 'dead' ELSE 'pending' END,
            dead_reason = CASE WHEN f.delay IS NULL THEN f.reason ELSE NULL END,
            last_error = left(f.error, 2000),
            available_at = clock_timestamp() + COALESCE(f.delay, 0) * interval '1 millisecond',
            lease_owner = NULL, lease_expires_at = NULL
          FROM unnest($1::bigint[], $2::bigint[], $3::text[], $4::text[]) AS f(seq, delay, reason, error)
          WHERE o.seq = f.seq AND o.fencing_token = $5 AND o.lease_owner = $6`;
}

/** $1 sequences, $2 fencing token, $3 owner: gives rows back unpublished. */
export function release(schema: string): string {
  return `UPDATE ${schema}.twophase_outbox SET lease_owner = NULL, lease_expires_at = NULL
           WHERE seq = ANY ($1::bigint[]) AND fencing_token = $2 AND lease_owner = $3`;
}

/** Counts for health: pending, oldest pending age (ms), leased, dead by reason. */
export function stats(schema: string): string {
  // One pass over the table; the dead rows' reasons are gathered in it and counted afterwards.
  return `SELECT pending, oldest_ms, leased,
            (SELECT COALESCE(jsonb_object_agg(reason, n), '{}'::jsonb) FROM (SELECT reason, count(*) AS n FROM unnest(dead_reasons) reason GROUP BY reason) d) AS dead
       FROM (SELECT count(*) FILTER (WHERE state = 'pending')::bigint AS pending,
                    COALESCE(floor(extract(epoch FROM clock_timestamp() - min(created_at) FILTER (WHERE state = 'pending')) * 1000), 0)::bigint AS oldest_ms,
                    count(*) FILTER (WHERE state = 'pending' AND lease_owner IS NOT NULL AND lease_expires_at > clock_timestamp())::bigint AS leased,
                    array_agg(dead_reason) FILTER (WHERE state = 'dead') AS dead_reasons
               FROM ${schema}.twophase_outbox) a`;
}
