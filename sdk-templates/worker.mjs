// Bootstrap of the dsh-tools TypeScript code runtime: runs one program in this Node.js process.
//
// Protocol (newline-delimited JSON): frames to the host on fd 3, frames from the host on fd 4.
// The host sends one `run` frame ({program, namespaces, maxOutputBytes, maxDepth}); this side
// sends `call`, `log` and one `done`, and receives a `reply` per call. The program is already
// type-stripped; it runs as the body of an async function whose parameters are the binding
// globals, the error classes and `console`. The host trusts nothing sent from here: it enforces
// every budget itself and kills this process tree when the run settles.

import fs from 'node:fs';
import net from 'node:net';
import { dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { formatWithOptions } from 'node:util';

const TO_HOST = 3;
const FROM_HOST = 4;
const INSPECT = { depth: 4, maxArrayLength: 100, maxStringLength: 10000 };
const LONE_SURROGATE = /\p{Cs}/u;

let maxOutputBytes = 64 * 1024 * 1024;
let maxFrameBytes = 1024 * 1024;
let maxDepth = 4096;
let finished = false;

// Taken before the program runs, which may replace them (`fs` is the module object it imports).
const writeSync = fs.writeSync;
const bufferFrom = Buffer.from.bind(Buffer);
const stringify = JSON.stringify;

function send(line) {
  const bytes = bufferFrom(line + '\n', 'utf8');
  let offset = 0;
  while (offset < bytes.length) {
    offset += writeSync(TO_HOST, bytes, offset, bytes.length - offset);
  }
}

// Cuts text whose JSON form is far over the output cap, keeping enough for the host to see
// that it is over and to keep the longest prefix that fits.
function capText(text) {
  if (text.length * 6 + 2 <= maxOutputBytes) return text;
  let bytes = 2;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === 0x22 || c === 0x5c || c === 8 || c === 9 || c === 10 || c === 12 || c === 13) {
      bytes += 2;
    } else if (c < 0x20) {
      bytes += 6;
    } else if (c < 0x80) {
      bytes += 1;
    } else if (c < 0x800) {
      bytes += 2;
    } else if (c >= 0xdc00 && c <= 0xdfff) {
      bytes += 1; // second half of a pair: the pair is 4 bytes in all
    } else {
      bytes += 3;
    }
    if (bytes > maxOutputBytes + 2) {
      const cut = c >= 0xdc00 && c <= 0xdfff ? i - 1 : i;
      return text.slice(0, Math.max(cut, 0));
    }
  }
  return text;
}

function log(text) {
  if (finished) return;
  send('{"type":"log","text":' + JSON.stringify(wellFormedText(capText(String(text)))) + '}');
}

/* @include lossless_json.js */

/* @include failure_text.js */

// This file, which Node.js names as the importer of a program's `import()`, and its directory,
// the run's temporary one: the program knows neither.
const SELF_FILE = fileURLToPath(import.meta.url);
const SELF_DIR = dirname(SELF_FILE) + '/';

function asProgram(text) {
  return replaceAll(replaceAll(text, SELF_FILE, 'program.ts'), SELF_DIR, './');
}

function describe(thrown) {
  return asProgram(describeRaw(thrown));
}

function describeRaw(thrown) {
  try {
    if (isInstance(thrown, rendering.Error) && typeof thrown.stack === 'string') {
      // Keep the message and the program's own frames; the bootstrap's are noise.
      return ownStack(thrown.stack, true);
    }
    if (thrown !== null && typeof thrown === 'object' && typeof thrown.message === 'string') {
      return thrown.message;
    }
    return rendering.String(thrown);
  } catch {
    return 'program threw an unrenderable value';
  }
}

function finish(frame) {
  if (finished) return;
  finished = true;
  send(frame);
  holdInput();
}

function fail(kind, message) {
  let text;
  try {
    text = stringify(wellFormedText(capText(message)));
    if (typeof text !== 'string') text = stringify(UNREPORTABLE);
  } catch {
    text = stringify(UNREPORTABLE);
  }
  finish('{"type":"done","error":{"kind":"' + kind + '","message":' + text + '}}');
}

function complete(value) {
  if (value === undefined) return finish('{"type":"done"}');
  let text;
  try {
    text = encode(value);
  } catch (e) {
    return fail(
      'invalid-output',
      e instanceof Unfit && e.message === 'deep'
        ? `program completion nests deeper than ${maxDepth} levels`
        : 'program completion must be lossless JSON',
    );
  }
  finish('{"type":"done","value":' + text + '}');
}

const console_ = Object.freeze({
  log: (...args) => log(formatWithOptions(INSPECT, ...args)),
  info: (...args) => log(formatWithOptions(INSPECT, ...args)),
  warn: (...args) => log(formatWithOptions(INSPECT, ...args)),
  error: (...args) => log(formatWithOptions(INSPECT, ...args)),
  debug: (...args) => log(formatWithOptions(INSPECT, ...args)),
});

for (const stream of [process.stdout, process.stderr]) {
  stream.write = function write(chunk, encoding, callback) {
    const done = typeof encoding === 'function' ? encoding : callback;
    const text = typeof chunk === 'string' ? chunk : Buffer.from(chunk).toString('utf8');
    log(text.endsWith('\n') ? text.slice(0, -1) : text);
    if (typeof done === 'function') process.nextTick(done);
    return true;
  };
}

process.on('uncaughtException', (e) => fail('exception', withCauses(e, describe)));
process.on('unhandledRejection', (e) => fail('exception', withCauses(e, describe)));

const pending = new Map();
let nextId = 0;

/* @include binding_error.js */

function namespace(spec, cls) {
  const raise = (name, message, code) => (cls ? new cls(name, message, code) : new Error(message));
  const functions = Object.create(null);
  for (const name of spec.names) {
    const call = (args) => {
      let text;
      try {
        text = encode(args);
      } catch {
        return Promise.reject(raise(name, 'binding arguments must be lossless JSON'));
      }
      const id = ++nextId;
      const frame =
        '{"type":"call","id":' + id + ',"global":' + JSON.stringify(spec.global) +
        ',"name":' + JSON.stringify(name) + ',"args":' + text + '}';
      if (Buffer.byteLength(frame, 'utf8') > maxFrameBytes) {
        return Promise.reject(raise(name, `binding arguments exceed ${maxFrameBytes} bytes`));
      }
      return new Promise((resolve, reject) => {
        pending.set(id, { resolve, reject, name, raise });
        holdInput();
        send(frame);
      });
    };
    Object.defineProperty(functions, name, { value: call, enumerable: true });
  }
  return Object.freeze(functions);
}

function onReply(frame) {
  const waiter = pending.get(frame.id);
  if (!waiter) return;
  pending.delete(frame.id);
  holdInput();
  if (frame.ok) waiter.resolve(frame.value);
  else waiter.reject(waiter.raise(waiter.name, String(frame.message), frame.code));
}

function start(frame) {
  maxOutputBytes = frame.maxOutputBytes;
  maxFrameBytes = frame.maxFrameBytes;
  maxDepth = frame.maxDepth;
  const names = [];
  const values = [];
  const classes = [];
  for (const spec of frame.namespaces) {
    const cls = spec.errorClass ? errorClass(spec.errorClass.name, spec.errorClass.member) : null;
    names.push(spec.global);
    values.push(namespace(spec, cls));
    if (cls) classes.push([spec.errorClass.name, cls]);
  }
  for (const [name, cls] of classes) {
    names.push(name);
    values.push(cls);
  }
  names.push('console');
  values.push(console_);
  // The shell keeps the program on its own lines, and `describe` takes the head's width off
  // first-line columns, so stack positions are the program's own.
  const head = '"use strict"; (async function (' + names.join(', ') + ') {';
  headColumns = head.length;
  const source = head + frame.program + '\n})\n//# sourceURL=program.ts';
  let main;
  try {
    main = (0, eval)(source);
  } catch (e) {
    return fail('exception', withCauses(e, describe));
  }
  main(...values).then(complete, (e) => fail('exception', withCauses(e, describe)));
  holdInput();
}

// Once the program runs, the pipe from the host keeps this process alive only while a call
// waits for its reply (or after the run is over, until the host ends it). A program waiting on
// a promise that nothing can settle then lets the event loop run dry and the process exit once
// every `beforeExit` listener has had its turn, as an unsettled top-level `await` does in
// Node.js (exit code 13): it fails then instead of at the wall-clock ceiling.
function holdInput() {
  if (finished || pending.size > 0) input.ref();
  else input.unref();
}

// An exit the program asked for is no stuck wait (the host reports the exit).
let exitCalled = false;
const exit = process.exit;
process.exit = function (...args) {
  exitCalled = true;
  return exit.apply(this, args);
};

// `_exiting`: the process really exits (the program may emit 'exit' itself).
process.on('exit', () => {
  if (process._exiting === true && started && !finished && !exitCalled && pending.size === 0) {
    fail('exception', 'the program waits for a promise that nothing can settle: no tool call, timer or I/O is pending');
  }
});

const input = new net.Socket({ fd: FROM_HOST, readable: true, writable: false });
input.setEncoding('utf8');
let buffered = '';
let started = false;
input.on('data', (chunk) => {
  buffered += chunk;
  let newline;
  while ((newline = buffered.indexOf('\n')) >= 0) {
    const frame = JSON.parse(buffered.slice(0, newline));
    buffered = buffered.slice(newline + 1);
    if (!started && frame.type === 'run') {
      started = true;
      start(frame);
    } else if (frame.type === 'reply') {
      onReply(frame);
    }
  }
});
