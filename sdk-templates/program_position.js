// Columns of the shell's head, which shares the program's first line; set when the shell is built.
let headColumns = 0;

// A stack line with the program's own column on its first line.
function ownPosition(line) {
  return line.replace(/program\.ts:1:(\d+)/g, (_, c) => 'program.ts:1:' + Math.max(1, Number(c) - headColumns));
}

// Most causes a failure shows after its own error (`Error.prototype.cause`, ES2022), as CPython
// shows a chain.
const MAX_CAUSES = 64;

// Most members of an `AggregateError` a failure shows, as CPython shows an exception group's.
const MAX_MEMBERS = 15;

// `error` described by `describeOne`, then, for an `AggregateError`, its members: `[1] …`.
function withMembers(error, describeOne) {
  let text = describeOne(error);
  try {
    if (error instanceof AggregateError && Array.isArray(error.errors)) {
      const members = error.errors;
      const count = members.length;
      for (let i = 0; i < count && i < MAX_MEMBERS; i++) {
        text += '\n  [' + (i + 1) + '] ' + describeOne(members[i]).split('\n').join('\n    ');
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
      if (seen.includes(cause)) break;
      if (shown === MAX_CAUSES) {
        text += '\n(further causes not shown)';
        break;
      }
      text += '\nCaused by: ' + withMembers(cause, describeOne);
      seen.push(cause);
      current = cause;
    }
  } catch {
    // A cause that cannot be read (a getter that throws) ends the chain.
  }
  return text;
}
