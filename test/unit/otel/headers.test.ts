/**
 * Trace context through message headers: the getter (AMQP and Kafka value types, S25(b)),
 * injection for publishers, extraction, and batch links.
 */
import { context, propagation, ROOT_CONTEXT, SpanKind, trace } from '@opentelemetry/api';
import { extractContext, headerGetter, injectTraceHeaders, linksFromHeaders } from '../../../adapters/otel';
import { installOtel, type OtelHarness } from './otel-harness';

const TRACEPARENT = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01';

let otel: OtelHarness;
beforeAll(() => {
  otel = installOtel();
});
afterAll(async () => {
  await otel.shutdown();
});

describe('headerGetter (S25(b))', () => {
  it.each([
    ['a string', 'abc', 'abc'],
    ['a Buffer (Kafka)', Buffer.from('abc'), 'abc'],
    ['a UTF-8 Buffer', Buffer.from('tenant=äöü'), 'tenant=äöü'],
    ['a Uint8Array', new Uint8Array(Buffer.from('abc')), 'abc'],
    ['a number (AMQP)', 42, '42'],
    ['a Buffer[] (Kafka repeated header)', [Buffer.from('a'), Buffer.from('b')], ['a', 'b']],
    ['a (Buffer | string)[]', [Buffer.from('a'), 'b'], ['a', 'b']],
    ['an array with unreadable values', [{}, Buffer.from('a'), null], ['a']],
    ['an array of nothing readable', [{}], undefined],
    ['null', null, undefined],
    ['an AMQP table', { nested: 1 }, undefined],
  ])('reads %s', (_label, value, expected) => {
    expect(headerGetter.get({ traceparent: value }, 'traceparent')).toEqual(expected);
  });

  it('finds a header whatever its case, exact name first', () => {
    expect(headerGetter.get({ Traceparent: 'x' }, 'traceparent')).toBe('x');
    expect(headerGetter.get({ TRACEPARENT: 'upper', traceparent: 'exact' }, 'traceparent')).toBe('exact');
    expect(headerGetter.get({}, 'traceparent')).toBeUndefined();
    expect(headerGetter.keys({ a: 1, b: 2 })).toEqual(['a', 'b']);
  });

  it('extracts the producer span context from Buffer and Buffer[] values alike', () => {
    for (const value of [TRACEPARENT, Buffer.from(TRACEPARENT), [Buffer.from(TRACEPARENT)]]) {
      const spanContext = trace.getSpanContext(extractContext({ traceparent: value }));
      expect(spanContext).toMatchObject({ traceId: '0af7651916cd43dd8448eb211c80319c', spanId: 'b7ad6b7169203331', isRemote: true });
    }
  });

  it('joins repeated baggage headers as the W3C baggage propagator asks', () => {
    const ctx = extractContext({ baggage: [Buffer.from('a=1'), Buffer.from('b=2')] });
    const entries = propagation.getBaggage(ctx)?.getAllEntries().map(([k, v]) => [k, v.value]);
    expect(entries).toEqual([
      ['a', '1'],
      ['b', '2'],
    ]);
  });

  it('a malformed or missing traceparent extracts no span, without throwing', () => {
    for (const headers of [undefined, {}, { traceparent: 'garbage' }, { traceparent: Buffer.from([0xff, 0xfe]) }, { traceparent: ['00-bad'] }]) {
      expect(trace.getSpanContext(extractContext(headers))).toBeUndefined();
    }
    expect(extractContext(undefined)).toBe(ROOT_CONTEXT);
  });
});

describe('injectTraceHeaders', () => {
  it('returns a copy with traceparent and baggage of the active context; the input is untouched', () => {
    const input = Object.freeze({ 'idempotency-key': 'k1' });
    const ctx = propagation.setBaggage(context.active(), propagation.createBaggage({ tenant: { value: 'acme' } }));
    const { out, spanId } = context.with(ctx, () =>
      trace.getTracer('test').startActiveSpan('send q', { kind: SpanKind.PRODUCER }, (span) => {
        span.end();
        return { out: injectTraceHeaders(input), spanId: span.spanContext().spanId };
      }),
    );
    expect(input).toEqual({ 'idempotency-key': 'k1' });
    expect(out).toMatchObject({ 'idempotency-key': 'k1', baggage: 'tenant=acme' });
    expect(out.traceparent).toMatch(new RegExp(`^00-[0-9a-f]{32}-${spanId}-01$`));
    expect(trace.getSpanContext(extractContext(out))?.spanId).toBe(spanId);
  });

  it('without a span it writes no traceparent and keeps the one a republished copy carries', () => {
    expect(injectTraceHeaders()).toEqual({});
    expect(injectTraceHeaders({ traceparent: TRACEPARENT })).toEqual({ traceparent: TRACEPARENT });
  });

  it('injects a given context with a given propagator', () => {
    const span = trace.getTracer('test').startSpan('explicit');
    span.end();
    const seen: unknown[] = [];
    const propagator = {
      inject: (ctx: typeof ROOT_CONTEXT, carrier: Record<string, unknown>) => {
        seen.push(trace.getSpanContext(ctx)?.spanId);
        carrier['x-custom'] = 'yes';
      },
      extract: (ctx: typeof ROOT_CONTEXT) => ctx,
      fields: () => ['x-custom'],
    };
    expect(injectTraceHeaders({ a: 1 }, { context: trace.setSpan(ROOT_CONTEXT, span), propagator })).toEqual({ a: 1, 'x-custom': 'yes' });
    expect(seen).toEqual([span.spanContext().spanId]);
  });

  it('a throwing propagator leaves the headers as they were, without throwing', () => {
    const propagator = { inject: () => { throw new Error('boom'); }, extract: (ctx: typeof ROOT_CONTEXT) => ctx, fields: () => [] };
    expect(injectTraceHeaders({ a: 1 }, { propagator })).toEqual({ a: 1 });
  });
});

describe('linksFromHeaders (batches)', () => {
  it('links each distinct valid producer span context once, in order, skipping messages without one', () => {
    const other = '00-11111111111111111111111111111111-2222222222222222-01';
    const links = linksFromHeaders([
      { traceparent: Buffer.from(TRACEPARENT) },
      undefined,
      { traceparent: 'malformed' },
      { traceparent: [Buffer.from(other)] },
      { traceparent: TRACEPARENT },
      {},
    ]);
    expect(links.map((l) => [l.context.traceId, l.context.spanId])).toEqual([
      ['0af7651916cd43dd8448eb211c80319c', 'b7ad6b7169203331'],
      ['11111111111111111111111111111111', '2222222222222222'],
    ]);
  });

  it('gives span links a batch span can start with', () => {
    const links = linksFromHeaders([{ traceparent: TRACEPARENT }]);
    const span = trace.getTracer('test').startSpan('process batch', { kind: SpanKind.CONSUMER, links });
    span.end();
    const exported = otel.exporter.getFinishedSpans().find((s) => s.name === 'process batch');
    expect(exported?.links.map((l) => l.context.spanId)).toEqual(['b7ad6b7169203331']);
  });
});
