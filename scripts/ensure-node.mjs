// The project's postinstall: every npm script (start, test, bench, the binaries they call) runs on
// Node 24 or later, whatever Node runs npm itself. npm puts node_modules/.bin first on a script's
// PATH, so a `node` there wins over the machine's; `#!/usr/bin/env node` binaries (vitest, tsc,
// eslint, depcruise) and vitest's forks (process.execPath) follow it.
//
// - Node >= 24 runs npm: nothing to fetch; a link left by an earlier install on an older Node is
//   removed. (The Node that runs npm is npm_node_execpath: this script itself may already run on
//   the linked one, which is first on its PATH.)
// - Older Node: node-<platform>-<arch>@NODE_VERSION, the official build published on the npm
//   registry, is installed once into .tools/ (kept across `npm ci`) and linked as node_modules/.bin/node.
// - Native addons compiled during the install were built by npm's Node, against whatever headers
//   npm_config_nodedir names; any whose ABI differs from the Node that will run them is rebuilt
//   against that Node's own headers.
//
// Plain JavaScript that Node 18 can run: it runs before Node 24 is there.
import { spawnSync } from 'node:child_process';
import { existsSync, lstatSync, mkdirSync, readdirSync, readFileSync, realpathSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const NODE_VERSION = '24.21.0'; // the release CI and the Dockerfile's base image run
const MIN_MAJOR = 24;

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const binDir = path.join(root, 'node_modules', '.bin');
const link = path.join(binDir, 'node');
const toolsDir = path.join(root, '.tools', `node-v${NODE_VERSION}`);

const npmNode = process.env.npm_node_execpath || process.execPath;

const say = (line) => console.log(`ensure-node: ${line}`);
const fail = (line) => {
  console.error(`ensure-node: ${line}`);
  process.exit(1);
};

const major = (version) => Number(version.replace(/^v/, '').split('.')[0]);

function run(file, args, options = {}) {
  const result = spawnSync(file, args, { encoding: 'utf8', ...options });
  return { ok: result.status === 0, stdout: (result.stdout ?? '').trim(), stderr: (result.stderr ?? '').trim(), error: result.error };
}

/** `{ version, modules }` of a node binary, or undefined when it does not run. */
function probe(nodeBinary) {
  if (!existsSync(nodeBinary)) return undefined;
  const result = run(nodeBinary, ['-p', 'JSON.stringify({ version: process.version, modules: process.versions.modules })']);
  return result.ok ? JSON.parse(result.stdout) : undefined;
}

/** Runs npm with the Node that runs this script (npm_execpath is npm's own CLI when npm runs us). */
function npm(args, options) {
  const cli = process.env.npm_execpath;
  return cli ? run(npmNode, [cli, ...args], options) : run('npm', args, { ...options, shell: process.platform === 'win32' });
}

function removeOwnLink() {
  let stat;
  try {
    stat = lstatSync(link);
  } catch {
    return;
  }
  if (stat.isSymbolicLink() && realpathSync(link).startsWith(path.join(root, '.tools') + path.sep)) {
    rmSync(link);
    say(`removed ${path.relative(root, link)}: the machine's Node runs the scripts now`);
  }
}

function fetchNode(npmVersion) {
  const platforms = { linux: 'linux', darwin: 'darwin' };
  const platform = platforms[process.platform];
  if (!platform || !['x64', 'arm64'].includes(process.arch)) {
    fail(
      `Node ${npmVersion} is older than ${MIN_MAJOR} and no Node ${NODE_VERSION} package exists here for ${process.platform}-${process.arch}: install Node ${MIN_MAJOR} or later and run npm install again`,
    );
  }
  const pkg = `node-${platform}-${process.arch}`;
  const binary = path.join(toolsDir, 'node_modules', pkg, 'bin', 'node');
  if (probe(binary)?.version !== `v${NODE_VERSION}`) {
    say(
      `Node ${npmVersion} runs npm; installing Node ${NODE_VERSION} (${pkg} from the npm registry) into ${path.relative(root, toolsDir)}`,
    );
    mkdirSync(toolsDir, { recursive: true });
    writeFileSync(path.join(toolsDir, 'package.json'), '{ "private": true }\n');
    const installed = npm(
      [
        'install',
        '--prefix',
        toolsDir,
        '--no-save',
        '--no-package-lock',
        '--no-audit',
        '--no-fund',
        '--ignore-scripts',
        '--loglevel=error',
        `${pkg}@${NODE_VERSION}`,
      ],
      { cwd: toolsDir, stdio: ['ignore', 'inherit', 'inherit'] },
    );
    if (!installed.ok || probe(binary)?.version !== `v${NODE_VERSION}`) {
      fail(
        `could not install ${pkg}@${NODE_VERSION}${installed.error ? ` (${installed.error.message})` : ''}: install Node ${MIN_MAJOR} or later and run npm install again`,
      );
    }
  }
  mkdirSync(binDir, { recursive: true });
  rmSync(link, { force: true });
  symlinkSync(path.relative(binDir, binary), link);
  say(`npm scripts run on Node ${NODE_VERSION} (${path.relative(root, link)} -> ${path.relative(root, binary)})`);
  return binary;
}

/** Packages under node_modules that node-gyp compiled during the install, with the ABI they were built for. */
function compiledAddons() {
  const found = [];
  const visit = (dir, depth) => {
    let entries;
    try {
      entries = readdirSync(dir, { withFileTypes: true });
    } catch {
      return;
    }
    for (const entry of entries) {
      if (!entry.isDirectory() || entry.name === '.bin') continue;
      const pkgDir = path.join(dir, entry.name);
      if (entry.name.startsWith('@')) {
        visit(pkgDir, depth);
        continue;
      }
      const gypi = path.join(pkgDir, 'build', 'config.gypi');
      if (existsSync(gypi)) {
        const abi = /"node_module_version":\s*(\d+)/.exec(readFileSync(gypi, 'utf8'))?.[1];
        const name = JSON.parse(readFileSync(path.join(pkgDir, 'package.json'), 'utf8')).name;
        found.push({ name, abi });
      }
      if (depth < 4) visit(path.join(pkgDir, 'node_modules'), depth + 1);
    }
  };
  visit(path.join(root, 'node_modules'), 0);
  return found;
}

function rebuildAddonsFor(nodeBinary) {
  const target = probe(nodeBinary);
  const stale = compiledAddons().filter((addon) => addon.abi !== target?.modules);
  if (stale.length === 0) return;
  // The headers of an official build sit beside its bin/: <prefix>/include/node.
  const prefix = path.dirname(path.dirname(realpathSync(nodeBinary)));
  if (!existsSync(path.join(prefix, 'include', 'node', 'node.h'))) {
    fail(
      `native addons ${stale.map((a) => a.name).join(', ')} were built for another Node, and ${prefix} has no include/node headers to rebuild them against`,
    );
  }
  const names = [...new Set(stale.map((addon) => addon.name))];
  say(`rebuilding ${names.join(', ')} against Node ${target?.version} (${prefix})`);
  const env = { ...process.env, npm_config_nodedir: prefix, PATH: `${path.dirname(nodeBinary)}${path.delimiter}${process.env.PATH ?? ''}` };
  const rebuilt = npm(['rebuild', ...names], { cwd: root, env, stdio: ['ignore', 'inherit', 'inherit'] });
  if (!rebuilt.ok) fail(`npm rebuild ${names.join(' ')} failed`);
}

const npmNodeVersion = probe(npmNode)?.version ?? process.version;
if (major(npmNodeVersion) >= MIN_MAJOR) {
  removeOwnLink();
  rebuildAddonsFor(npmNode);
} else {
  rebuildAddonsFor(fetchNode(npmNodeVersion));
}
