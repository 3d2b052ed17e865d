/**
 * Checks a service URL before the CLI connects with it, so a typo is named as such (a usage
 * error, exit code 2) instead of surfacing as a client's DNS error about part of it.
 */

/** The URL forms each command accepts, by service. */
const FORMS = {
  postgres: { schemes: ['postgres', 'postgresql'], name: 'PostgreSQL', example: 'postgres://user[:password]@host[:port]/database' },
  redis: { schemes: ['redis', 'rediss'], name: 'Redis', example: 'redis://[user:password@]host[:port][/db]' },
  rabbitmq: { schemes: ['amqp', 'amqps'], name: 'AMQP', example: 'amqp://user:password@host[:port][/vhost]' },
} as const;

/**
 * The error text for a `url` that is not a URL of `service`'s schemes, or undefined when it is.
 * Only the form is checked; whether the server answers is the command's to find out.
 */
export function badServiceUrl(url: string, service: keyof typeof FORMS): string | undefined {
  const form = FORMS[service];
  let scheme: string | undefined;
  try {
    scheme = new URL(url).protocol.replace(/:$/, '');
  } catch {
    scheme = undefined;
  }
  if (scheme !== undefined && (form.schemes as readonly string[]).includes(scheme)) return undefined;
  return `${JSON.stringify(url)} is not ${/^[AEIOU]/.test(form.name) ? 'an' : 'a'} ${form.name} URL (expected ${form.example})`;
}
