// Baseline for benches/code_runtime.rs: what the same work costs with Node.js worker_threads,
// the substrate of the DSH worker-thread code runtime.
//
// Usage: node worker_threads.mjs [starts] [round-trips]
// Prints one JSON line: {"worker_start_ms": <median>, "port_round_trip_us": <mean>,
// "pipe_round_trip_us": <mean>}.

import { Worker } from 'node:worker_threads';

const starts = Number(process.argv[2] ?? 20);
const rounds = Number(process.argv[3] ?? 1000);

// A Worker running a trivial program (an async function returning 2), from construction to
// its result message.
const PROGRAM = `
const { parentPort } = require('node:worker_threads');
(async function () { return 1 + 1; })().then((value) => parentPort.postMessage({ value }));
`;

function startOnce() {
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    const worker = new Worker(PROGRAM, { eval: true, env: {}, execArgv: [] });
    worker.once('error', reject);
    worker.once('message', () => {
      const elapsed = performance.now() - t0;
      worker.terminate().then(() => resolve(elapsed), reject);
    });
  });
}

const times = [];
for (let i = 0; i < starts; i++) times.push(await startOnce());
times.sort((a, b) => a - b);

// Sequential calls from the worker to the host and back, as a binding call travels.
const ECHO = `
const { parentPort } = require('node:worker_threads');
const rounds = ${rounds};
let pending;
parentPort.on('message', (m) => { if (m.reply) pending(m.value); });
(async () => {
  const t0 = performance.now();
  for (let i = 0; i < rounds; i++) {
    await new Promise((resolve) => { pending = resolve; parentPort.postMessage({ call: i, args: { i } }); });
  }
  parentPort.postMessage({ done: performance.now() - t0 });
})();
`;
const worker = new Worker(ECHO, { eval: true, env: {}, execArgv: [] });
const totalMs = await new Promise((resolve, reject) => {
  worker.once('error', reject);
  worker.on('message', (m) => {
    if (m.done !== undefined) resolve(m.done);
    else worker.postMessage({ reply: true, value: m.args });
  });
});
await worker.terminate();

// The floor of any design that runs each program in its own process: the same sequential calls
// as JSON lines over a pipe pair between two Node.js processes, with nothing else in the way.
const PIPE_CHILD = `
const rounds = ${rounds};
const rl = require('node:readline').createInterface({ input: process.stdin });
let pending;
rl.on('line', (line) => pending(JSON.parse(line)));
(async () => {
  const t0 = performance.now();
  for (let i = 0; i < rounds; i++) {
    await new Promise((resolve) => { pending = resolve; process.stdout.write(JSON.stringify({ call: i, args: { i } }) + '\\n'); });
  }
  process.stderr.write(JSON.stringify({ done: performance.now() - t0 }));
  process.exit(0);
})();
`;
const { spawn } = await import('node:child_process');
const { createInterface } = await import('node:readline');
const child = spawn(process.execPath, ['-e', PIPE_CHILD], { stdio: ['pipe', 'pipe', 'pipe'] });
createInterface({ input: child.stdout }).on('line', (line) => {
  const message = JSON.parse(line);
  child.stdin.write(JSON.stringify({ reply: true, value: message.args }) + '\n');
});
let report = '';
child.stderr.on('data', (chunk) => { report += chunk; });
const pipeMs = await new Promise((resolve, reject) => {
  child.once('error', reject);
  child.once('exit', () => resolve(JSON.parse(report).done));
});

console.log(JSON.stringify({
  worker_start_ms: times[Math.floor(times.length / 2)],
  port_round_trip_us: (totalMs / rounds) * 1000,
  pipe_round_trip_us: (pipeMs / rounds) * 1000,
}));
