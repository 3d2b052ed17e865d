/**
 * The instruments twophase records, created once per observer from one meter.
 */
import type { Counter, Histogram, Meter } from '@opentelemetry/api';
import {
  MESSAGING_DURATION_BUCKETS_S,
  METRIC_MESSAGING_PROCESS_DURATION,
  METRIC_TWOPHASE_CLAIM_DURATION,
  METRIC_TWOPHASE_CLAIMS,
  METRIC_TWOPHASE_LEASE_EXTENSIONS,
  METRIC_TWOPHASE_OUTCOMES,
} from './semconv';

/** The instruments. Attribute sets are documented in docs/otel.md. */
export class TwophaseInstruments {
  /** `twophase.claims`: claims by `twophase.claim.state` (acquired, done, busy, failed). */
  readonly claims: Counter;
  /** `twophase.claim.duration`, seconds: the claim step, local retries included. */
  readonly claimDuration: Histogram;
  /** `twophase.outcomes`: each outcome event of the core, by `twophase.outcome`. */
  readonly outcomes: Counter;
  /** `twophase.lease.extensions`: successful keep-alive extends. */
  readonly leaseExtensions: Counter;
  /** `messaging.process.duration`, seconds: a delivery's whole pipeline, settle included. */
  readonly processDuration: Histogram;

  constructor(meter: Meter) {
    this.claims = meter.createCounter(METRIC_TWOPHASE_CLAIMS, { description: 'Claims made, by resulting claim state.', unit: '{claim}' });
    this.claimDuration = meter.createHistogram(METRIC_TWOPHASE_CLAIM_DURATION, {
      description: 'Duration of the claim step (store round trips and local retries).',
      unit: 's',
      advice: { explicitBucketBoundaries: MESSAGING_DURATION_BUCKETS_S },
    });
    this.outcomes = meter.createCounter(METRIC_TWOPHASE_OUTCOMES, { description: 'Outcome events of the consumer pipeline, by outcome.', unit: '{outcome}' });
    this.leaseExtensions = meter.createCounter(METRIC_TWOPHASE_LEASE_EXTENSIONS, { description: 'Lease extensions made by the keep-alive.', unit: '{extension}' });
    this.processDuration = meter.createHistogram(METRIC_MESSAGING_PROCESS_DURATION, {
      description: 'Duration of processing operation.',
      unit: 's',
      advice: { explicitBucketBoundaries: MESSAGING_DURATION_BUCKETS_S },
    });
  }
}

