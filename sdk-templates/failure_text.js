// How a program's failure is told: its own stack frames, its causes and members, as
// well-formed text. Shared by both JavaScript bootstraps, which say
// `/* @include failure_text.js */`; it reads their `maxOutputBytes`.

// Columns of the shell's head, which shares the program's first line; set when the shell is built.
let headColumns = 0;

// The built-ins a failure is rendered with, taken before the program runs: it may replace them
// (or the methods they look up, such as `RegExp.prototype.exec`), and its failure must still be
// reported as it happened. Strings are cut with `indexOf` and `slice`, never with a pattern.
const rendering = {
  apply: Reflect.apply,
  indexOf: String.prototype.indexOf,
  lastIndexOf: String.prototype.lastIndexOf,
  slice: String.prototype.slice,
  charCodeAt: String.prototype.charCodeAt,
  includes: Array.prototype.includes,
  isArray: Array.isArray,
  hasInstance: Function.prototype[Symbol.hasInstance],
  Error,
  AggregateError: typeof AggregateError === 'function' ? AggregateError : null,
  String,
  Number,
  max: Math.max,
  toWellFormed: String.prototype.toWellFormed,
};

// What a failure says when the program broke even what is taken above.
const UNREPORTABLE = 'the program broke a built-in the runtime needs to report its outcome';

// `text` with each lone surrogate replaced by U+FFFD: the host reads well-formed text only.
function wellFormedText(text) {
  if (typeof rendering.toWellFormed === 'function') {
    return rendering.apply(rendering.toWellFormed, text, []);
  }
  let out = '';
  let start = 0;
  for (let i = 0; i < text.length; i++) {
    const c = rendering.apply(rendering.charCodeAt, text, [i]);
    if (c >= 0xd800 && c <= 0xdbff) {
      const d = i + 1 < text.length ? rendering.apply(rendering.charCodeAt, text, [i + 1]) : 0;
      if (d >= 0xdc00 && d <= 0xdfff) {
        i++;
        continue;
      }
    } else if (c < 0xdc00 || c > 0xdfff) {
      continue;
    }
    out += rendering.apply(rendering.slice, text, [start, i]) + '\uFFFD';
    start = i + 1;
  }
  return start === 0 ? text : out + rendering.apply(rendering.slice, text, [start]);
}

function isInstance(value, constructor) {
  return constructor !== null && rendering.apply(rendering.hasInstance, constructor, [value]);
}

// `text` with every `from` replaced by `to`.
function replaceAll(text, from, to) {
  let out = '';
  let start = 0;
  for (;;) {
    const at = rendering.apply(rendering.indexOf, text, [from, start]);
    if (at < 0) return out + rendering.apply(rendering.slice, text, [start]);
    out += rendering.apply(rendering.slice, text, [start, at]) + to;
    start = at + from.length;
  }
}

// Whether `text` is digits only (and not empty).
function digits(text) {
  if (text.length === 0) return false;
  for (let i = 0; i < text.length; i++) {
    const c = rendering.apply(rendering.charCodeAt, text, [i]);
    if (c < 0x30 || c > 0x39) return false;
  }
  return true;
}

// Where a stack line's frame location starts and ends, or `null` for a line that is no frame
// (`    at …`). The location is the frame's last part, `(where)` or bare, so a function the
// program named `program.ts` cannot pass for one of its own frames.
function frameLocation(line) {
  let i = 0;
  while (i < line.length && (line[i] === ' ' || line[i] === '\t')) i++;
  if (i === 0 || rendering.apply(rendering.slice, line, [i, i + 3]) !== 'at ') return null;
  if (line[line.length - 1] === ')') {
    return [rendering.apply(rendering.lastIndexOf, line, ['(']) + 1, line.length - 1];
  }
  return [rendering.apply(rendering.lastIndexOf, line, [' ']) + 1, line.length];
}

// `line` as the failure shows it: a frame of the program's with its first-line column taken back
// from the shell's, the line itself if it is no frame, `null` for another's frame.
function ownLine(line) {
  const span = frameLocation(line);
  if (span === null) return line;
  const location = rendering.apply(rendering.slice, line, span);
  if (rendering.apply(rendering.slice, location, [0, 11]) !== 'program.ts:') return null;
  const rest = rendering.apply(rendering.slice, location, [11]);
  const colon = rendering.apply(rendering.indexOf, rest, [':']);
  const row = rendering.apply(rendering.slice, rest, [0, colon]);
  const column = rendering.apply(rendering.slice, rest, [colon + 1]);
  if (colon <= 0 || !digits(row) || !digits(column)) return null;
  if (row !== '1') return line;
  const own = rendering.max(1, rendering.Number(column) - headColumns);
  return rendering.apply(rendering.slice, line, [0, span[0]]) + 'program.ts:1:' + own +
    rendering.apply(rendering.slice, line, [span[1]]);
}

// `stack` with the frames that are not the program's left out, the program's first-line columns
// taken back from the shell's, and (unless `keepEmpty`) empty lines dropped.
function ownStack(stack, keepEmpty) {
  let out = '';
  let first = true;
  let start = 0;
  for (;;) {
    const end = rendering.apply(rendering.indexOf, stack, ['\n', start]);
    const line = ownLine(rendering.apply(rendering.slice, stack, [start, end < 0 ? stack.length : end]));
    if (line !== null && (keepEmpty || line !== '')) {
      out += (first ? '' : '\n') + line;
      first = false;
    }
    if (end < 0) return out;
    start = end + 1;
  }
}

// Most causes a failure shows after its own error (`Error.prototype.cause`, ES2022), as CPython
// shows a chain, and most members of an `AggregateError`, as CPython shows an exception group's.
const MAX_CAUSES = 64;
const MAX_MEMBERS = 15;

// `error` described by `describeOne`, then, for an `AggregateError`, its members: `[1] …`.
function withMembers(error, describeOne) {
  let text = describeOne(error);
  try {
    if (isInstance(error, rendering.AggregateError) && rendering.isArray(error.errors)) {
      const members = error.errors;
      const count = members.length;
      for (let i = 0; i < count && i < MAX_MEMBERS; i++) {
        // What the host could not keep anyway is not built.
        if (text.length > maxOutputBytes) break;
        text += '\n  [' + (i + 1) + '] ' + replaceAll(describeOne(members[i]), '\n', '\n    ');
      }
      if (count > MAX_MEMBERS) text += '\n  (' + (count - MAX_MEMBERS) + ' more errors not shown)';
    }
  } catch {
    // Members that cannot be read are left out.
  }
  return text;
}

// `thrown` described by `describeOne` (with its members), then each cause it names:
// `Caused by: …`.
function withCauses(thrown, describeOne) {
  let text = withMembers(thrown, describeOne);
  try {
    const seen = [thrown];
    let current = thrown;
    // Bounded by its own count: the program may have replaced what `seen` is checked with.
    for (let shown = 0; ; shown++) {
      if (current === null || typeof current !== 'object' || !('cause' in current)) break;
      const cause = current.cause;
      if (rendering.apply(rendering.includes, seen, [cause])) break;
      if (shown === MAX_CAUSES || text.length > maxOutputBytes) {
        text += '\n(further causes not shown)';
        break;
      }
      text += '\nCaused by: ' + withMembers(cause, describeOne);
      seen[seen.length] = cause;
      current = cause;
    }
  } catch {
    // A cause that cannot be read (a getter that throws) ends the chain.
  }
  return text;
}
