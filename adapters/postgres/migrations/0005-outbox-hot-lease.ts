/**
 * Migration 5: cheaper outbox leases.
 *
 * A relay's claim updates each row it leases (`lease_owner`, `fencing_token`,
 * `lease_expires_at`). With an index on `fencing_token` every such update was a non-HOT update:
 * a new 1 KiB-plus row version on another page, a new entry in each of the table's four indexes,
 * and the whole row in the WAL. No statement reads that index (each finds its rows by `seq`, then
 * checks the token), so it is dropped; and the table keeps room on each page (`fillfactor = 50`)
 * for the leased version of its rows, so the claim's update, and a retry's or a release's, stays
 * on the page (HOT: no index entries, a short WAL record). Rows are deleted soon after; the room is
 * reused once vacuum or page pruning reclaims them. Existing pages keep their layout until they are
 * rewritten; new rows use the new fill factor.
 *
 * Nothing else changes: a relay of an earlier version runs the same statements on a migrated table.
 */
import type { MigrationContext } from './context';

export const VERSION = 5;
export const NAME = 'outbox leases as HOT updates (no fencing-token index, fillfactor 50)';

export function sql(c: MigrationContext): string {
  const t = `${c.schema}.twophase_outbox`;
  return `
DROP INDEX IF EXISTS ${c.schema}.twophase_outbox_fence;
ALTER TABLE ${t} SET (fillfactor = 50);
`;
}
