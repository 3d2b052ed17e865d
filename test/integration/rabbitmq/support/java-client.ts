/**
 * The official RabbitMQ Java client (`com.rabbitmq:amqp-client` from Maven Central) as a foreign
 * publisher and reader: `java/pom.xml` is resolved with Maven into ~/.m2, `java/HeaderProbe.java`
 * is compiled with javac into `.tmp/java-probe`, and each call runs it as a child process.
 * Without a JDK or Maven the suites that use it skip with the reason; under `CI` they fail
 * (`.ci/run` makes sure both are there and resolves the client first).
 */
import { execFile, spawnSync } from 'node:child_process';
import { mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);
const JAVA_DIR = join(__dirname, '..', 'java');
const OUT_DIR = join(__dirname, '..', '..', '..', '..', '.tmp', 'java-probe');

/** One header as the Java client reads it: its Java type and value (hex for bytes and long strings). */
export interface JavaValue {
  readonly t: string;
  readonly v?: string | JavaValue[] | Record<string, JavaValue>;
}

/** Why the Java client cannot be used here, or undefined when java, javac and mvn are all present. */
export function javaToolsMissing(): string | undefined {
  const missing = [
    ['java', '-version'],
    ['javac', '-version'],
    ['mvn', '-v'],
  ].filter(([tool, flag]) => spawnSync(tool!, [flag!], { stdio: 'ignore' }).status !== 0);
  return missing.length === 0 ? undefined : `${missing.map(([tool]) => tool).join(', ')} not found (JDK 17+ and Maven are needed for the Java client)`;
}

/** `describe` when the JDK and Maven are present; otherwise skipped with the reason, or failing under CI. */
export function describeWithJava(name: string, fn: () => void): void {
  const missing = javaToolsMissing();
  if (missing === undefined) {
    describe(name, fn);
    return;
  }
  if (process.env.CI) {
    describe(name, () => {
      test('the Java client is available', () => {
        throw new Error(`${missing}; CI requires it`);
      });
    });
    return;
  }
  console.warn(`SKIPPED "${name}": ${missing}`);
  describe.skip(`${name} [skipped: ${missing}]`, fn);
}

/** The compiled probe. */
export class JavaProbe {
  private constructor(private readonly classPath: string) {}

  /**
   * Resolves the Java client with Maven (from ~/.m2 once downloaded) and compiles the probe.
   * @throws Error with Maven's or javac's output when either fails
   */
  static async build(): Promise<JavaProbe> {
    mkdirSync(join(OUT_DIR, 'classes'), { recursive: true });
    const classPathFile = join(OUT_DIR, 'classpath.txt');
    await run('mvn', ['-q', '-B', '-f', join(JAVA_DIR, 'pom.xml'), 'dependency:build-classpath', `-Dmdep.outputFile=${classPathFile}`], { timeout: 300_000 });
    const dependencies = readFileSync(classPathFile, 'utf8').trim();
    await run('javac', ['-d', join(OUT_DIR, 'classes'), '-cp', dependencies, join(JAVA_DIR, 'HeaderProbe.java')], { timeout: 120_000 });
    return new JavaProbe(`${join(OUT_DIR, 'classes')}:${dependencies}`);
  }

  /** Publishes one message with every header type the Java client writes (see HeaderProbe.sampleHeaders) to `queue`. */
  async publish(url: string, queue: string, messageId: string): Promise<void> {
    await this.java(['publish', url, queue, messageId]);
  }

  /** The headers of the next message in `queue`, which stays in the queue (rejected with requeue). */
  async peek(url: string, queue: string, timeoutMs = 10_000): Promise<Record<string, JavaValue>> {
    return JSON.parse(await this.java(['peek', url, queue, String(timeoutMs)])) as Record<string, JavaValue>;
  }

  /** The headers of the next message in `queue`, which is acked. */
  async take(url: string, queue: string, timeoutMs = 10_000): Promise<Record<string, JavaValue>> {
    return JSON.parse(await this.java(['take', url, queue, String(timeoutMs)])) as Record<string, JavaValue>;
  }

  /** The next message in `queue` (acked): its message id, body bytes (hex) and headers. */
  async message(url: string, queue: string, timeoutMs = 10_000): Promise<{ messageId: string | null; bodyHex: string; headers: Record<string, JavaValue> }> {
    return JSON.parse(await this.java(['message', url, queue, String(timeoutMs)])) as { messageId: string | null; bodyHex: string; headers: Record<string, JavaValue> };
  }

  private async java(args: string[]): Promise<string> {
    const { stdout } = await run('java', ['-cp', this.classPath, 'HeaderProbe', ...args], { timeout: 60_000 });
    return stdout.trim();
  }
}
