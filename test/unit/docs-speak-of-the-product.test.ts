/**
 * User docs speak of the product: no references to this project's own issue tracker in README.md
 * or docs/ (a third party's issue, such as a kafkajs one, is a source and stays).
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

const ROOT = join(__dirname, '..', '..');
const files = ['README.md', ...readdirSync(join(ROOT, 'docs')).filter((f) => f.endsWith('.md')).map((f) => join('docs', f))];

test.each(files)('%s names no issue of this project', (file) => {
  const text = readFileSync(join(ROOT, file), 'utf8');
  const hits = text.split('\n').filter((line) => /\bissue #\d+|\bthe issue's\b|\bthe issue (quotes|asks|says)\b/i.test(line) && !/\b(kafkajs|amqplib|ioredis|rabbitmq-server|node-postgres|pg) issue\b/i.test(line));
  expect(hits).toEqual([]);
});
