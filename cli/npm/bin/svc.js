#!/usr/bin/env node
// Runs the prebuilt `svc` binary this package carries for this platform, with
// the same arguments, standard streams and exit status. Nothing is downloaded.
'use strict';

const { spawnSync } = require('node:child_process');
const { existsSync } = require('node:fs');
const path = require('node:path');

const platform = `${process.platform}-${process.arch}`;
const binary = path.join(__dirname, '..', 'native', platform, process.platform === 'win32' ? 'svc.exe' : 'svc');

if (!existsSync(binary)) {
  process.stderr.write(`svc-partner: this package carries no svc binary for ${platform}; install the package built for it, or run \`cargo install --path cli\`.\n`);
  process.exit(1);
}

const result = spawnSync(binary, process.argv.slice(2), { stdio: 'inherit' });
if (result.error) {
  process.stderr.write(`svc-partner: cannot run ${binary}: ${result.error.message}\n`);
  process.exit(1);
}
if (result.signal) {
  // Die of the same signal, so a shell sees what happened to svc.
  process.kill(process.pid, result.signal);
}
process.exit(result.status ?? 1);
