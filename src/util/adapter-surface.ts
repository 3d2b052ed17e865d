/**
 * The one operational surface every bundled source adapter exposes (`twophase/memory`,
 * `twophase/rabbitmq`, `twophase/kafka`), so code that watches a consumer's broker side reads
 * each the same way:
 *
 * - `settings`: the options in force, defaults applied (a resolved copy, never the caller's object);
 * - `stats`: a snapshot of the counters since construction (a fresh copy on every read);
 * - `on(listener)`: one listener of every adapter event, each event a `{ type, … }` object;
 *   returns a function that removes the listener. A listener that throws is logged and ignored.
 */
import type { Logger } from './logger';

/** What an adapter offers for operations and tests. */
export interface AdapterSurface<TSettings, TStats, TEvent extends { readonly type: string }> {
  /** The options in force, defaults applied. */
  readonly settings: TSettings;
  /** A snapshot of the counters since construction. */
  readonly stats: Readonly<TStats>;
  /** Adds a listener of every adapter event; returns a function removing it (safe to call twice). */
  on(listener: (event: TEvent) => void): () => void;
}

/** The listeners of one adapter, each call guarded: a throwing listener is logged and ignored. */
export class AdapterEvents<TEvent extends { readonly type: string }> {
  private readonly listeners = new Set<(event: TEvent) => void>();

  /** @param label names the adapter in the log line of a throwing listener (e.g. `twophase/kafka`) */
  constructor(
    private readonly label: string,
    private readonly logger: Logger,
  ) {}

  /** True when at least one listener is registered (to skip building an event nobody reads). */
  get active(): boolean {
    return this.listeners.size > 0;
  }

  /** Adds `listener`; returns a function removing it. */
  on(listener: (event: TEvent) => void): () => void {
    this.listeners.add(listener);
    return () => void this.listeners.delete(listener);
  }

  /** Calls every listener with `event`, in the order they were added. */
  emit(event: TEvent): void {
    for (const listener of this.listeners) {
      try {
        listener(event);
      } catch (error) {
        this.logger.warn({ err: error, event: event.type }, `${this.label}: event listener threw; ignored`);
      }
    }
  }
}
