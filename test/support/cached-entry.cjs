'use strict';
// Runs the tests' CommonJS bundle of the CLI (test/support/prebuilt-cli.ts) as node runs a main script, with V8's
// code cache: `node [flags] cached-entry.cjs BUNDLE ARGS…` is `node [flags] BUNDLE ARGS…`, less the compiling. The
// first `serve` to get a second past "serving on" saves the code V8 compiled for the bundle (its start and first
// passes) beside it, once per bundle, node version and flags; later serve and CLI processes start from it. The
// `facilitator` command keeps a cache of its own, saved the same way by the first to print "facilitator on": it runs
// with node's default flags, which no serve of npm test shares, and compiles other code than serve. Node 20
// keeps no such cache by itself. A cache V8 refuses (another V8, other flags) is only slower: V8 compiles as usual.
// With CACHED_ENTRY_REPORT=1, stderr says whether the cache was used.
const { createHash } = require('node:crypto');
const { readFileSync, renameSync, writeFileSync } = require('node:fs');
const Module = require('node:module');
const { dirname, resolve } = require('node:path');
const vm = require('node:vm');

const bundle = resolve(process.argv[2]);
process.argv.splice(1, 1);
const flags = createHash('sha256')
  .update(`${process.version}\0${process.execArgv.join('\0')}`)
  .digest('hex');
const command = process.argv[2];
const facilitator = command === 'facilitator';
const cacheFile = `${bundle}.${flags.slice(0, 16)}${facilitator ? '.facilitator' : ''}.v8-cache`;

let cachedData;
try {
  cachedData = readFileSync(cacheFile);
} catch {
  cachedData = undefined;
}
const script = new vm.Script(Module.wrap(readFileSync(bundle, 'utf8')), {
  filename: bundle,
  cachedData,
  importModuleDynamically: vm.constants.USE_MAIN_CONTEXT_DEFAULT_LOADER,
});
const used = cachedData && !script.cachedDataRejected;
if (process.env.CACHED_ENTRY_REPORT === '1') process.stderr.write(`code cache: ${used ? 'used' : 'not used'}\n`);
if ((command === 'serve' || facilitator) && !used) saveWhenServing(facilitator ? 'facilitator on ' : 'serving on ');

function saveWhenServing(line) {
  const write = process.stdout.write;
  process.stdout.write = function (chunk, ...rest) {
    if (String(chunk).includes(line)) {
      process.stdout.write = write;
      setTimeout(save, 1000).unref();
    }
    return write.call(this, chunk, ...rest);
  };
}

function save() {
  const partial = `${cacheFile}.${process.pid}`;
  try {
    writeFileSync(partial, script.createCachedData());
    renameSync(partial, cacheFile);
  } catch {
    // not saved (a full or read-only disk): later processes compile, as without a cache
  }
}

const main = new Module(bundle, null);
main.filename = bundle;
main.paths = Module._nodeModulePaths(dirname(bundle));
script.runInThisContext()(main.exports, Module.createRequire(bundle), main, bundle, dirname(bundle));
