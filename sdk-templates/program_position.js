// Columns of the shell's head, which shares the program's first line; set when the shell is built.
let headColumns = 0;

// A stack line with the program's own column on its first line.
function ownPosition(line) {
  return line.replace(/program\.ts:1:(\d+)/g, (_, c) => 'program.ts:1:' + Math.max(1, Number(c) - headColumns));
}
