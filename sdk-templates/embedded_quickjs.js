// Bootstrap of the dsh-tools embedded TypeScript runtime: runs one program in a fresh QuickJS
// context inside the host process.
//
// This file is one function expression. The host calls it with its own `host` object, which is
// never reachable from the program: `host.log(text)`; `host.call(binding, args)` (binding: the
// binding's number, counted over the namespaces' names in order), which returns the promise of
// the call's value (the host settles it), `null` when the host leaves the arguments to be
// encoded here, or the message to reject with; `host.callJson(binding, argsJson)`, the same for
// arguments encoded here; `host.done(valueJson)` / `host.done()` and `host.fail(kind, message)`
// (kind 0: exception, 1: invalid output). It returns `{ prepare, failure }`:
// `prepare(namespacesJson, maxOutputBytes, maxDepth)` builds the globals and returns
// `{ params, start, reject }`; the host compiles the program as
// `async function (<params>) { <program> }`, then calls `start(main)` (or
// `reject(syntaxError)`); `failure(binding, message, code)` makes the error a failed call
// rejects with. The host trusts nothing sent from here: it enforces every budget itself.
(function (host) {
  'use strict';
  const LONE_SURROGATE = /\p{Cs}/u;
  const IDENTIFIER = /^[A-Za-z_$][A-Za-z0-9_$]*$/;
  const INSPECT_DEPTH = 4;
  const hostLog = host.log;
  const hostCall = host.call;
  const hostCallJson = host.callJson;
  const hostDone = host.done;
  const hostFail = host.fail;
  // Taken before the program runs: it may replace them, and the outcome must still be reported.
  const apply = Reflect.apply;
  const promiseThen = Promise.prototype.then;
  let maxOutputBytes = 64 * 1024 * 1024;
  let maxDepth = 4096;
  let finished = false;

  // Cuts text whose JSON form is far over the output cap, keeping enough for the host to see
  // that it is over and to keep the longest prefix that fits.
  function capText(text) {
    if (text.length * 6 + 2 <= maxOutputBytes) return text;
    return text.slice(0, maxOutputBytes + 2);
  }

  function utf8Length(text) {
    let bytes = 0;
    for (let i = 0; i < text.length; i++) {
      const c = text.charCodeAt(i);
      if (c < 0x80) bytes += 1;
      else if (c < 0x800) bytes += 2;
      else if (c >= 0xd800 && c <= 0xdbff) {
        bytes += 4;
        i++;
      } else bytes += 3;
    }
    return bytes;
  }

  function log(text) {
    if (!finished) hostLog(wellFormedText(capText(String(text))));
  }

  function quote(s) {
    return "'" + s.replace(/\\/g, '\\\\').replace(/'/g, "\\'").replace(/\n/g, '\\n') + "'";
  }

  // A small rendering in the manner of Node.js `util.inspect`: nested strings quoted, objects
  // and arrays on one line, depth-limited, cycles marked.
  function inspect(value, depth, seen) {
    switch (typeof value) {
      case 'string':
        return depth === 0 ? value : quote(value);
      case 'number':
        return Object.is(value, -0) ? '-0' : String(value);
      case 'bigint':
        return String(value) + 'n';
      case 'undefined':
        return 'undefined';
      case 'boolean':
        return String(value);
      case 'symbol':
        return value.toString();
      case 'function':
        return value.name ? '[Function: ' + value.name + ']' : '[Function (anonymous)]';
      default:
        break;
    }
    if (value === null) return 'null';
    if (seen.includes(value)) return '[Circular]';
    if (value instanceof Error) {
      return typeof value.stack === 'string' && value.stack
        ? value.name + ': ' + value.message + '\n' + value.stack.replace(/\n$/, '')
        : value.name + ': ' + value.message;
    }
    const isArray = Array.isArray(value);
    if (depth > INSPECT_DEPTH) return isArray ? '[Array]' : '[Object]';
    seen.push(value);
    const parts = [];
    if (isArray) {
      const shown = Math.min(value.length, 100);
      for (let i = 0; i < shown; i++) parts.push(inspect(value[i], depth + 1, seen));
      if (value.length > shown) parts.push('... ' + (value.length - shown) + ' more items');
    } else if (value instanceof Map) {
      for (const [k, v] of value) {
        parts.push(inspect(k, depth + 1, seen) + ' => ' + inspect(v, depth + 1, seen));
      }
    } else if (value instanceof Set) {
      for (const v of value) parts.push(inspect(v, depth + 1, seen));
    } else {
      for (const key of Object.keys(value)) {
        const shown = IDENTIFIER.test(key) ? key : quote(key);
        parts.push(shown + ': ' + inspect(value[key], depth + 1, seen));
      }
    }
    seen.pop();
    let prefix = '';
    if (value instanceof Map) prefix = 'Map(' + value.size + ') ';
    else if (value instanceof Set) prefix = 'Set(' + value.size + ') ';
    const [open, close] = isArray ? ['[', ']'] : ['{', '}'];
    return parts.length === 0 ? prefix + open + close : prefix + open + ' ' + parts.join(', ') + ' ' + close;
  }

  function format(args) {
    return args.map((a) => inspect(a, 0, [])).join(' ');
  }

  /* @include lossless_json.js */

  /* @include failure_text.js */

  function describe(thrown) {
    try {
      if (isInstance(thrown, rendering.Error)) {
        const head = rendering.String(thrown.name) + ': ' + rendering.String(thrown.message);
        // Keep the program's own frames; the bootstrap's are noise.
        const stack = typeof thrown.stack === 'string' ? ownStack(thrown.stack, false) : '';
        return stack ? head + '\n' + stack : head;
      }
      if (thrown !== null && typeof thrown === 'object' && typeof thrown.message === 'string') {
        return thrown.message;
      }
      return rendering.String(thrown);
    } catch {
      return 'program threw an unrenderable value';
    }
  }

  function fail(kind, message) {
    if (finished) return;
    finished = true;
    let text;
    try {
      text = wellFormedText(capText(rendering.String(message)));
    } catch {
      // The program broke a built-in the message needs.
      text = UNREPORTABLE;
    }
    hostFail(kind, typeof text === 'string' ? text : UNREPORTABLE);
  }

  function complete(value) {
    if (finished) return;
    if (value === undefined) {
      finished = true;
      hostDone();
      return;
    }
    let text;
    try {
      text = encode(value);
    } catch (e) {
      let deep = false;
      try {
        deep = e instanceof Unfit && e.message === 'deep';
      } catch {
        // A hostile value (a proxy whose traps throw) was thrown: not one of ours.
      }
      fail(
        1,
        deep
          ? 'program completion nests deeper than ' + maxDepth + ' levels'
          : 'program completion must be lossless JSON',
      );
      return;
    }
    finished = true;
    hostDone(text);
  }

  const consoleObject = Object.freeze({
    log: (...args) => log(format(args)),
    info: (...args) => log(format(args)),
    warn: (...args) => log(format(args)),
    error: (...args) => log(format(args)),
    debug: (...args) => log(format(args)),
  });

  /* @include binding_error.js */

  // The error each binding rejects with, by binding number.
  const raisers = [];

  function namespace(spec, cls) {
    const raise = (name, message, code) => (cls ? new cls(name, message, code) : new Error(message));
    const functions = Object.create(null);
    for (const name of spec.names) {
      const binding = raisers.length;
      raisers.push((message, code) => raise(name, message, code));
      const call = (args) => {
        // The host reads plain data itself; what it cannot read without running program code
        // (getters, proxies) or judges only as text comes back here to be encoded.
        let answer = hostCall(binding, args);
        if (answer === null) {
          let text;
          try {
            text = encode(args);
          } catch {
            return Promise.reject(raise(name, 'binding arguments must be lossless JSON'));
          }
          // A UTF-16 unit takes at most 3 UTF-8 bytes: most arguments need no count at all.
          if (text.length * 3 > maxOutputBytes && utf8Length(text) > maxOutputBytes) {
            return Promise.reject(raise(name, 'binding arguments exceed ' + maxOutputBytes + ' bytes'));
          }
          answer = hostCallJson(binding, text);
        }
        return typeof answer === 'string' ? Promise.reject(raise(name, answer)) : answer;
      };
      Object.defineProperty(functions, name, { value: call, enumerable: true });
    }
    return Object.freeze(functions);
  }

  function failure(binding, message, code) {
    return raisers[binding](message, code);
  }

  function prepare(namespacesJson, outputCap, depthCap) {
    maxOutputBytes = outputCap;
    maxDepth = depthCap;
    const names = [];
    const values = [];
    const classes = [];
    for (const spec of JSON.parse(namespacesJson)) {
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
    values.push(consoleObject);
    const start = (main) => {
      try {
        apply(promiseThen, main(...values), [complete, (e) => fail(0, withCauses(e, describe))]);
      } catch (e) {
        fail(0, withCauses(e, describe));
      }
    };
    const head = '(async function (' + names.join(', ') + ') {';
    headColumns = head.length;
    return { head, start, reject: (e) => fail(0, withCauses(e, describe)) };
  }

  return { prepare, failure };
})
