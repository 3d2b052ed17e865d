// Copies non-TypeScript runtime assets (Lua scripts) next to the compiled adapters in dist/.
import { cpSync, existsSync, readdirSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';

const root = new URL('..', import.meta.url).pathname;
let copied = 0;
function walk(dir) {
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) walk(path);
    else if (name.endsWith('.lua')) {
      cpSync(path, join(root, 'dist', relative(root, path)));
      copied++;
    }
  }
}
if (existsSync(join(root, 'adapters'))) walk(join(root, 'adapters'));
console.log(`copy-assets: ${copied} Lua script(s) copied to dist/`);
