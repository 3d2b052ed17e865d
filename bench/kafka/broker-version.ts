/**
 * The version of the Kafka broker a benchmark ran against, for its JSON report. The Kafka
 * protocol carries no broker version string, so it is read from the broker process on this
 * machine: the `kafka.Kafka` JVM whose server.properties listens on the bench's port, its version
 * taken from the Kafka jar on its class path (scripts/kafka/start.sh runs it from the Maven
 * repository, e.g. `kafka_2.13-4.4.0.jar`). Falls back to `KAFKA_VERSION` (what
 * scripts/kafka/common.sh starts) when no broker process on this machine matches.
 */
import { readdirSync, readFileSync } from 'node:fs';

/** The Kafka version named by a broker's command line (its class path), if any. */
export function versionFromCommandLine(commandLine: string): string | undefined {
  const match = /kafka_2\.\d+-(\d+\.\d+\.\d+[\w.-]*?)\.jar/.exec(commandLine) ?? /kafka-server-(\d+\.\d+\.\d+[\w.-]*?)\.jar/.exec(commandLine);
  return match?.[1];
}

/** The ports a server.properties text listens on (`listeners=PLAINTEXT://host:port,...`). */
export function listenerPorts(properties: string): number[] {
  const line = /^\s*listeners\s*=\s*(.+)$/m.exec(properties)?.[1] ?? '';
  return [...line.matchAll(/:(\d+)\s*(?:,|$)/g)].map((m) => Number(m[1]));
}

/** The broker processes on this machine: command line and the path of their server.properties. */
function brokerProcesses(): { commandLine: string; properties: string | undefined }[] {
  const found: { commandLine: string; properties: string | undefined }[] = [];
  let pids: string[];
  try {
    pids = readdirSync('/proc').filter((name) => /^\d+$/.test(name));
  } catch {
    return found; // no procfs (not Linux)
  }
  for (const pid of pids) {
    let args: string[];
    try {
      args = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').filter(Boolean);
    } catch {
      continue; // the process ended meanwhile
    }
    const main = args.indexOf('kafka.Kafka');
    if (main < 0) continue;
    found.push({ commandLine: args.join(' '), properties: args[main + 1] });
  }
  return found;
}

/**
 * The version of the broker listening on `port` (or of the only broker process, when its
 * listeners cannot be read), e.g. `4.4.0`; else `KAFKA_VERSION`; undefined when neither is known.
 */
export function kafkaBrokerVersion(port: number): string | undefined {
  const brokers = brokerProcesses().map((b) => {
    let ports: number[] = [];
    try {
      if (b.properties) ports = listenerPorts(readFileSync(b.properties, 'utf8'));
    } catch {
      // unreadable properties: matched by elimination only
    }
    return { version: versionFromCommandLine(b.commandLine), ports };
  });
  const onPort = brokers.find((b) => b.ports.includes(port));
  if (onPort?.version) return onPort.version;
  // A single broker whose listeners could not be read is taken as the one; a broker on other ports is not.
  if (brokers.length === 1 && brokers[0]!.ports.length === 0 && brokers[0]!.version) return brokers[0]!.version;
  return process.env.KAFKA_VERSION;
}
