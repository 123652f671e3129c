// Reference side of the type-stripping differential test: compiles each program with the
// TypeScript compiler's `transpileModule` and runs it the way the code runtime runs a program
// (the body of a strict async function with `console` in scope), in a fresh context.
//
// Usage: node reference.mjs <path of the typescript package>   (stdin: JSON [{name, source}])
// Prints JSON [{name, logs, value, error, diagnostics}].

import { createRequire } from 'node:module';
import fs from 'node:fs';
import vm from 'node:vm';
import { formatWithOptions } from 'node:util';

const ts = createRequire(import.meta.url)(process.argv[2]);
const INSPECT = { depth: 4, maxArrayLength: 100, maxStringLength: 10000 };
const programs = JSON.parse(fs.readFileSync(0, 'utf8'));
const results = [];
for (const { name, source } of programs) {
  const wrapped = '(async function (console) {' + source + '\n})';
  const out = ts.transpileModule(wrapped, {
    reportDiagnostics: true,
    compilerOptions: {
      target: ts.ScriptTarget.ES2022,
      module: ts.ModuleKind.ESNext,
      useDefineForClassFields: true,
    },
  });
  const diagnostics = (out.diagnostics ?? []).map((d) =>
    ts.flattenDiagnosticMessageText(d.messageText, '\n'),
  );
  const logs = [];
  const console_ = { log: (...args) => logs.push(formatWithOptions(INSPECT, ...args)) };
  let value = null;
  let error = null;
  try {
    const main = vm.runInNewContext('"use strict"; ' + out.outputText, {}, { filename: 'reference.js' });
    const returned = await main(console_);
    value = returned === undefined ? null : JSON.parse(JSON.stringify(returned));
  } catch (e) {
    error = e !== null && typeof e === 'object' && 'message' in e ? `${e.name}: ${e.message}` : String(e);
  }
  results.push({ name, logs, value, error, diagnostics });
}
process.stdout.write(JSON.stringify(results));
